#!/usr/bin/env bash
# The red team's unprivileged leg: the harness started by an ordinary user (not root), so the local
# sandbox isolates with bubblewrap's user namespace (--unshare-user --disable-userns), the seccomp
# filter and no capabilities; with the sandbox's low points (tests/test_sandbox_edges.py: pid 1 not
# traceable, no AF_VSOCK, no host path in /proc/1/cmdline) and the tracer's class test (tests/test_tracer.py: a
# cell reaching its tracer's state gains nothing). Run as root on a CI machine (it drops to
# USER_ID, default nobody):
#   bash scripts/redteam_unprivileged.sh            a subset: every privilege case and a few classics
#   AMB_RT_CASES='*' bash scripts/redteam_unprivileged.sh     every case
#
# The harness's Python lives under /root here (pyenv), which an ordinary user cannot reach. Rather
# than building a second environment (gigabytes of torch and MONAI, a network), the leg runs in a
# private mount namespace where /root is an empty 0755 tmpfs holding only the Python installation
# bound back at its own path: the unprivileged harness sees that Python and nothing else of /root.
# Where the Python is already outside /root (a venv under /opt, a system Python) this changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "redteam_unprivileged: run as root (it drops to an ordinary user itself)" >&2; exit 2; }
USER_ID=${USER_ID:-65534}
PY=$(python3 -c 'import sys; print(sys.executable)')
PY_ROOT=$(python3 -c 'import sys; print(sys.base_prefix)')
work=$(mktemp -d /tmp/amb-unpriv.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/keep" "$work/checkout"
# A copy of the checkout that user can read (CI's clone may sit under /root, hidden below)
tar -C "$PWD" --exclude=./.git --exclude=./reports -cf - . | tar -C "$work/checkout" -xf -
chmod -R a+rX "$work/checkout"
chown -R "$USER_ID:$USER_ID" "$work/home"
chmod 755 "$work"
export AMB_RT_CASES=${AMB_RT_CASES:-"priv_*,write_public,other_run,symlink_output,proc_scan,dotdot_public,fork_bomb"}
started=$(date +%s)
unshare -m /bin/sh -s "$PY" "$PY_ROOT" "$work" "$USER_ID" "$work/checkout" <<'INNER'
set -eu
PY=$1; PY_ROOT=$2; work=$3; uid=$4; checkout=$5
mount --make-rprivate /
case "$PY_ROOT" in
  /root/*)
    mount --bind "$PY_ROOT" "$work/keep"
    mount -t tmpfs -o mode=755,size=1m amb-root /root
    mkdir -p "$PY_ROOT"
    mount --bind "$work/keep" "$PY_ROOT";;
esac
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups \
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/home" LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
      PYTHONPATH="$checkout" AMB_RT_CASES="$AMB_RT_CASES" \
  "$PY" -m pytest -p no:cacheprovider "$checkout/tests/test_redteam.py" "$checkout/tests/test_sandbox_edges.py" \
      "$checkout/tests/test_tracer.py" -k "local or sandbox_edges or reaches_the_tracer" -q \
      --basetemp="$work/home/pytest"
INNER
echo "redteam_unprivileged: done in $(( $(date +%s) - started )) s as uid $USER_ID"
