#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for the Slurm executor's real tests and benchmarks
# (docs/scale-out.md "Tested for real"): munged, slurmctld and two slurmd (nodes n1, n2, each with
# 2 CPUs and 2 fake h100 GPUs) on localhost, everything (config, sockets, spool, logs, pid files)
# under STATE_DIR, nothing in /etc or /run. Needs the Debian packages slurm-wlm and munge, and root.
#
#   scripts/slurm_local_cluster.sh start  STATE_DIR   # prints `export SLURM_CONF=...` on success
#   scripts/slurm_local_cluster.sh status STATE_DIR
#   scripts/slurm_local_cluster.sh stop   STATE_DIR   # ends only the daemons it started (pid files)
#
# Ports: SLURM_LOCAL_PORT (default 26817) for slurmctld, the two next ones for the slurmds.
# No slurmdbd: accounting is off, so `sacct` answers "accounting storage is disabled"; the executor
# then reads job states from the controller (scontrol), which remembers an ended job MinJobAge
# (SLURM_LOCAL_MIN_JOB_AGE, default 300) seconds.
set -euo pipefail

cmd=${1:-}
state=${2:-}
if [ -z "$cmd" ] || [ -z "$state" ]; then
    echo "usage: $0 start|stop|status STATE_DIR" >&2
    exit 2
fi
mkdir -p "$state"
state=$(cd "$state" && pwd)
conf="$state/slurm.conf"
port=${SLURM_LOCAL_PORT:-26817}
nodes=(n1 n2)

need() {
    for tool in munged slurmctld slurmd scontrol sinfo sbatch; do
        command -v "$tool" >/dev/null || { echo "$0: $tool not found (apt-get install slurm-wlm munge)" >&2; exit 3; }
    done
    [ "$(id -u)" = 0 ] || { echo "$0: slurmd must run as root" >&2; exit 3; }
}

pid_alive() {  # pid file -> 0 when its process runs
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

write_config() {
    mkdir -p "$state"/{munge,ctld,log,dev} "$state"/spool/{n1,n2}
    chmod 700 "$state/munge"
    if [ ! -f "$state/munge/munge.key" ]; then
        head -c 1024 /dev/urandom > "$state/munge/munge.key"
        chmod 400 "$state/munge/munge.key"
    fi
    # fake GPUs: Slurm wants device files (character devices); these are /dev/null under other names,
    # and Slurm numbers a node's GPUs by them (CUDA_VISIBLE_DEVICES 0 and 1)
    for i in 0 1; do [ -c "$state/dev/nvidia$i" ] || mknod -m 666 "$state/dev/nvidia$i" c 1 3; done
    cat > "$conf" <<EOF
ClusterName=amblocal
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/log/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MinJobAge=${SLURM_LOCAL_MIN_JOB_AGE:-300}
KillWait=30
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=20
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=2 RealMemory=4000 Gres=gpu:h100:2 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 2)) CPUs=2 RealMemory=4000 Gres=gpu:h100:2 State=UNKNOWN
PartitionName=gpu Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
    cat > "$state/gres.conf" <<EOF
AutoDetect=off
NodeName=n[1-2] Name=gpu Type=h100 File=$state/dev/nvidia[0-1]
EOF
    : > "$state/cgroup.conf"
}

start() {
    need
    write_config
    export SLURM_CONF="$conf"
    if ! pid_alive "$state/munged.pid"; then
        munged --force --key-file="$state/munge/munge.key" --socket="$state/munge/munge.socket" \
            --pid-file="$state/munged.pid" --log-file="$state/log/munged.log" --seed-file="$state/munge/seed"
    fi
    if ! pid_alive "$state/slurmctld.pid"; then
        slurmctld -f "$conf"
    fi
    for n in "${nodes[@]}"; do
        pid_alive "$state/slurmd.$n.pid" || slurmd -f "$conf" -N "$n"
    done
    # ready when both nodes are idle (or mixed/allocated: a restart while jobs run)
    for _ in $(seq 1 120); do
        states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
        ready=0
        for n in "${nodes[@]}"; do
            echo "$states" | grep -Eq "^$n (idle|mix|alloc)\$" && ready=$((ready + 1))
        done
        if [ "$ready" = "${#nodes[@]}" ]; then
            echo "export SLURM_CONF=$conf"
            return 0
        fi
        sleep 0.5
    done
    echo "$0: the nodes did not come up; sinfo says:" >&2
    sinfo -N >&2 || true
    tail -n 20 "$state/log/slurmctld.log" "$state/log/"slurmd.*.log >&2 || true
    exit 1
}

stop() {
    # this cluster's jobs first (slurmstepd and a job's processes outlive slurmd), then the daemons,
    # by their own pid files only (never by name: other Slurm daemons may run on this machine)
    if pid_alive "$state/slurmctld.pid"; then
        export SLURM_CONF="$conf"
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for _ in $(seq 1 90); do
                [ -z "$(squeue -h -t running,completing -o %i 2>/dev/null || true)" ] && break
                sleep 0.5
            done
        fi
    fi
    local files=("$state"/slurmd.*.pid "$state/slurmctld.pid" "$state/munged.pid")
    for f in "${files[@]}"; do
        pid_alive "$f" && kill "$(cat "$f")" 2>/dev/null || true
    done
    for f in "${files[@]}"; do
        for _ in $(seq 1 60); do
            pid_alive "$f" || break
            sleep 0.25
        done
        pid_alive "$f" && kill -9 "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
}

status() {
    local code=0
    for f in "$state/munged.pid" "$state/slurmctld.pid" "$state/slurmd.n1.pid" "$state/slurmd.n2.pid"; do
        if pid_alive "$f"; then echo "$(basename "$f" .pid): running ($(cat "$f"))"; else echo "$(basename "$f" .pid): stopped"; code=1; fi
    done
    [ "$code" = 0 ] && SLURM_CONF="$conf" sinfo -N
    return $code
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status STATE_DIR" >&2; exit 2 ;;
esac
