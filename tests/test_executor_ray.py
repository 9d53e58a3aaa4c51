"""The Ray executor against a real in-process cluster (head + 2 nodes with fake GPUs), shared by every
test here through one xdist group (scripts/test.sh runs xdist with --dist loadgroup): placement and GPU
pinning, runs spread over nodes with the same scores as local, infeasible runs refused at start, Ctrl-C,
node loss then resume, re-attaching after the controller died, archive return (in the first test); then,
with the controller in this process (no pytest start-up per session): slot counts through a lost
pre-warmed slot and node loss (the retry on purpose), a controller gone while it pre-warmed, and the
data registry (placement by node affinity, another version refused, wrong and stale entries).

The test cluster declares a killed node dead in ~3 s (FAST_NODE_DEATH), not Ray's ~15 s."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor's tests need the `ray` extra (scripts/setup.sh --test)")

from executor_cluster import (HOLD_LIMITS, SOLVE, WRITE_GPUS, RayTestCluster, controller, ray_args,  # noqa: E402
                              results, run, run_specs, slots_left, start, wait_for, write_suite)

pytestmark = [pytest.mark.xdist_group("ray-cluster"), pytest.mark.slow]


def hold_step(tag: int) -> dict:
    """A cell that starts `sleep 86399.<tag>` (found on the host by that name), writes a token to the
    workspace's token.txt and waits while the workspace's `hold` file exists (the test deletes it)."""
    return {"execute_code": {"language": "python", "code": (
        "import os, subprocess, time, uuid\n"
        "ws = os.environ['AMB_WORKSPACE']\n"
        "open(os.path.join(ws, 'hold'), 'w').close()\n"
        f"child = subprocess.Popen(['sleep', '86399.{tag}'])\n"
        "open(os.path.join(ws, 'token.txt'), 'w').write(uuid.uuid4().hex)\n"
        "while os.path.exists(os.path.join(ws, 'hold')):\n    time.sleep(0.2)\n"
        "child.kill()\n")}}


def held(root: Path) -> dict[str, str]:
    """run id -> the token of its held cell, for runs still in a staging box."""
    out = {}
    for f in (root / "runs" / ".staging").glob("*/*/workspace/token.txt"):
        if f.read_text().strip() and (f.parent / "hold").exists():
            out[f.parts[-3]] = f.read_text().strip()
    return out


def new_token(root: Path, rid: str, seen: set[str]) -> str | None:
    """A held cell of `rid` whose token is not in `seen`: the box of a lost attempt may still lie in
    the staging folder beside the retry's (both with a token and a hold file), in either name order."""
    tokens = set()
    for f in (root / "runs" / ".staging").glob(f"*/{rid}/workspace/token.txt"):
        try:
            token = f.read_text().strip()
        except OSError:  # its box removed meanwhile
            continue
        if token and (f.parent / "hold").exists():
            tokens.add(token)
    fresh = sorted(tokens - seen)
    return fresh[0] if fresh else None


def release(root: Path) -> None:
    for f in (root / "runs" / ".staging").glob("*/*/workspace/hold"):
        f.unlink()


def sleepers(tag: int) -> list[int]:
    """Host pids of the held cells' `sleep 86399.<tag>` processes."""
    want = f"sleep\0{86399}.{tag}\0".encode()
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == want and alive(int(proc.name)):
                out.append(int(proc.name))
        except OSError:
            pass
    return out


@pytest.fixture(scope="module")
def cluster():
    c = RayTestCluster()
    yield c
    c.shutdown()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


BIG = {"execute_code": {"language": "bash", "code": 'head -c 3000000 /dev/urandom > "$AMB_WORKSPACE/ckpt.bin"'}}


def test_runs_spread_over_nodes_pinned_to_gpus_returned_as_archives_and_score_as_local(cluster, tmp_path):
    """Archive return (no shared runs dir) here; the other tests use the shared runs dir."""
    write_suite(tmp_path, {"tiny-a": [WRITE_GPUS, BIG, SOLVE]}, resources={"gpus": 1})
    p = run(tmp_path, *ray_args(cluster), "--amb-repeats=4", "--amb-ray-results=archive", "--amb-archive-mb=1")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    got = results(tmp_path)
    assert len(got) == 4
    for rid in got:
        run_dir = tmp_path / "runs" / rid
        assert not (run_dir / "workspace" / "ckpt.bin").exists()  # past the cap: left on the node, with a note
        assert "workspace/ckpt.bin" in (run_dir / "ARCHIVE-NOTE.txt").read_text()
        assert len(list((run_dir / "workspace" / "outputs").iterdir())) == 3
    nodes = {r["provenance"]["node"]["node_id"] for r in got.values()}
    assert len(nodes) == 2  # four 1-GPU runs on two 2-GPU nodes: both nodes, both GPUs of each
    seen = {(r["provenance"]["node"]["node_id"], (tmp_path / "runs" / rid / "workspace" / "gpus.txt").read_text().strip())
            for rid, r in got.items()}
    assert seen == {(n, g) for n in nodes for g in ("0", "1")}  # Ray's ids reached the sandbox's cells
    for rid, r in got.items():  # what the node says it handed out is what the cell saw
        assert r["provenance"]["node"]["gpus"] == [(tmp_path / "runs" / rid / "workspace" / "gpus.txt").read_text().strip()]
    local = tmp_path / "local"  # the same scripted run on the local executor scores the same
    write_suite(local, {"tiny-a": [WRITE_GPUS, BIG, SOLVE]}, resources={"gpus": 1})
    p = run(local, "--amb-repeats=4", "-k", "r1")
    assert p.returncode == 0, p.stdout[-3000:]
    (mine,) = results(local).values()
    for rid, r in got.items():
        for key in ("overall", "task_score", "agentic", "stages", "medal", "failure_mode", "error_codes"):
            assert r[key] == mine[key], (rid, key)
    assert not amb_actors_left(cluster)


def test_a_run_under_conditions_is_settled_under_its_own_id(cluster, tmp_path):
    """Archive return: the controller settles the node's folder by the spec's run id, which must be the
    one the node made (with the conditions), not the default one."""
    from run_key_checks import CONDITIONS, check_conditions_run, conditions_suite

    conditions_suite(tmp_path)
    p = run(tmp_path, *ray_args(cluster), "--amb-ray-results=archive", *CONDITIONS)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    check_conditions_run(tmp_path, p.stdout)
    assert not amb_actors_left(cluster)


def amb_actors_left(cluster) -> list[str]:
    """Slots of any amb namespace still alive (the data registry stays by design)."""
    return slots_left(cluster.address)


def test_runs_no_node_can_take_are_refused_at_start(cluster, tmp_path):
    write_suite(tmp_path, {"too-many-gpus": [SOLVE]}, resources={"gpus": 4})
    write_suite(tmp_path, {"wrong-kind": [SOLVE]}, resources={"gpus": 1, "gpu_kind": "b200"})
    write_suite(tmp_path, {"too-much-memory": [SOLVE]}, resources={"memory_gb": 5000})
    write_suite(tmp_path, {"online": [SOLVE]}, network=True)
    write_suite(tmp_path, {"fits": [SOLVE]}, resources={"gpus": 1, "gpu_kind": "h100"})
    started = time.monotonic()
    p = run(tmp_path, *ray_args(cluster))
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]  # a usage error, nothing submitted
    err = p.stderr
    assert "4 run(s) cannot be placed" in err
    assert "too-many-gpus" in err and "has 2 GPU" in err
    assert "wrong-kind" in err and "accelerator_type:B200" in err
    assert "too-much-memory" in err and "GB memory" in err
    assert "online" in err and "network: true" in err
    assert "segmentation/fits" not in err
    assert time.monotonic() - started < 120
    assert not results(tmp_path) and not amb_actors_left(cluster)


def test_nodes_that_cannot_call_the_models_are_refused_at_start(cluster, tmp_path):
    """The controller has the judge's key and its endpoint answers; the nodes' environment (the
    cluster's, started without the key) lacks it: placement asks each node, and the session stops at
    start naming each node and the variable, before any run is submitted."""
    import socket

    from executor_cluster import RAY_ENV, session_cmd
    from inner_session import inner_env

    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        pytest.skip("the test cluster's nodes have this session's Anthropic key")
    write_suite(tmp_path, {"keyed": [SOLVE]})
    with socket.socket() as listener:  # answers a connection (the start check sends no request)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        env = inner_env(tmp_path, **RAY_ENV, ANTHROPIC_API_KEY="sk-controller-only",
                        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{listener.getsockname()[1]}")
        p = subprocess.run(session_cmd(tmp_path, *ray_args(cluster), "--amb-judge=claude"), cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=240)
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]  # a usage error, nothing submitted
    err = p.stderr
    assert "1 run(s) cannot be placed" in err and "keyed" in err, err[-2000:]
    assert err.count("cannot call the session's models from there: --amb-judge=claude: no API key") == 2, err[-2000:]
    assert not results(tmp_path) and not amb_actors_left(cluster)


def test_ctrl_c_cancels_runs_and_their_sandboxes_are_gone(cluster, tmp_path):
    tag = 101
    write_suite(tmp_path, {"held": [hold_step(tag)]}, **HOLD_LIMITS)
    # the grace only bounds a run slow to save itself (a loaded machine); each takes about a second
    proc = start(tmp_path, *ray_args(cluster), "--amb-repeats=2", "--amb-cancel-grace=90")
    try:
        tokens = wait_for(lambda: (lambda h: h if len(h) == 2 else None)(held(tmp_path)), 400, "two held cells")
        assert len(sleepers(tag)) == 2
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, out[-3000:]  # pytest's "interrupted"
    wait_for(lambda: not sleepers(tag), 120, "the sandboxes' processes to be gone")
    for rid in tokens:  # each saved itself as interrupted (errored, never a score)
        assert (tmp_path / "runs" / rid / "result.json").exists(), out[-5000:]
        r = json.loads((tmp_path / "runs" / rid / "result.json").read_text())
        assert r["errored"] and r["failure_mode"] == "interrupted"
    assert not list((tmp_path / "runs").glob(".staging/*/*"))
    assert not amb_actors_left(cluster)


def test_node_loss_is_an_infra_error_then_resume_reruns(cluster, tmp_path):
    tag = 202
    a = cluster.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:A100": 1})
    b = cluster.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:A100": 1})
    extra = []
    write_suite(tmp_path, {"lossy": [hold_step(tag), SOLVE]}, resources={"gpus": 1, "gpu_kind": "a100"}, **HOLD_LIMITS)
    rid = "lossy__lite__reference__r1"
    try:
        # no retries: the run lost with its node is an errored run (infra_error), the test an ERROR
        proc = start(tmp_path, *ray_args(cluster), "--amb-infra-retries=0")
        first = wait_for(lambda: held(tmp_path).get(rid), 400, "the held cell")
        (sleeper,) = sleepers(tag)
        victim = next(n for n in (a, b) if _node_of_pid(n, sleeper))
        cluster.remove_node(victim)
        out, _ = proc.communicate(timeout=400)
        assert proc.returncode == 1, out[-3000:]
        assert "lost its Ray worker or node" in out
        r = json.loads((tmp_path / "runs" / rid / "result.json").read_text())
        assert r["errored"] and r["failure_mode"] == "infra_error"
        wait_for(lambda: not sleepers(tag), 120, "the lost node's run to be gone")
        # --amb-resume reruns only the errored run (a retry after a loss: test_slot_counts_... below)
        proc = start(tmp_path, *ray_args(cluster), "--amb-resume")  # on the node that is left
        wait_for(lambda: new_token(tmp_path, rid, {first}), 400, "the rerun's held cell")
        release(tmp_path)
        out, _ = proc.communicate(timeout=400)
        assert proc.returncode == 0, out[-3000:]
        r = json.loads((tmp_path / "runs" / rid / "result.json").read_text())
        assert not r.get("errored") and r["task_score"] == 1.0
    finally:
        if "proc" in locals() and proc.poll() is None:
            proc.kill()
        for n in (a, b, *extra):
            if n in cluster.nodes:
                cluster.remove_node(n)


def _node_of_pid(node, pid: int) -> bool:
    """Whether `pid` descends from `node`'s raylet."""
    raylet = node.all_processes["raylet"][0].process.pid
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            return False
        if pid == raylet:
            return True
    return False


def test_a_resumed_controller_reattaches_to_runs_in_flight(cluster, tmp_path):
    tag = 303
    write_suite(tmp_path, {"long": [hold_step(tag), SOLVE]}, **HOLD_LIMITS)
    rid = "long__lite__reference__r1"
    proc = start(tmp_path, *ray_args(cluster))
    try:
        token = wait_for(lambda: held(tmp_path).get(rid), 400, "the held cell")
    finally:
        proc.kill()  # the controller dies without a word (SIGKILL)
        proc.communicate(timeout=300)
    time.sleep(3)  # a run fate-shared with its driver would be gone by now
    assert sleepers(tag), "the detached run died with its controller"
    proc = start(tmp_path, *ray_args(cluster), "--amb-resume")
    try:
        # the new session's start (its lease, recovery, the janitor) leaves the live run alone
        wait_for(lambda: f'"pid": {proc.pid}' in (tmp_path / "runs" / ".amb-lease.json").read_text()
                 if (tmp_path / "runs" / ".amb-lease.json").exists() else False, 60, "the new session's lease")
        time.sleep(3)
        assert sleepers(tag) and held(tmp_path).get(rid) == token
        release(tmp_path)
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert (tmp_path / "runs" / rid / "workspace" / "token.txt").read_text().strip() == token  # not rerun
    assert not amb_actors_left(cluster)


# -- the controller in this process (RayExecutor without pytest's start-up): slots, registry ----------

def _collect_in_thread(ex, spec):
    import threading

    box = {}

    def body():
        try:
            box["result"] = ex.wait(spec)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            box["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, box


def _count(ex) -> int:
    with ex._lock:
        return len(ex.slots)


def _node_id(node) -> str:
    return node.node_id


def _end_session(cluster, ex, nodes) -> None:
    """The controller ends (its slots with it), the runs-dir lease is released, the test's nodes go."""
    from pytest_automedbench.store import run_folders as runfiles

    try:
        ex.shutdown(interrupted=True)
    finally:
        runfiles.release_all()
        for n in nodes:
            if n in cluster.nodes:
                cluster.remove_node(n)


def test_slot_counts_stay_right_through_a_lost_prewarmed_slot_and_node_loss(cluster, tmp_path, monkeypatch):
    """A pre-warmed idle slot lost with its node charges its run nothing; a run lost with its node is
    retried on purpose on a new slot; `ex.slots` counts one slot throughout and none at the end."""
    from pytest_automedbench.store import run_folders as runfiles

    tag = 404
    suite = write_suite(tmp_path, {"v100": [hold_step(tag), SOLVE]}, resources={"gpus": 1, "gpu_kind": "v100"}, **HOLD_LIMITS)
    monkeypatch.syspath_prepend(str(suite))
    rid = "v100__lite__reference__r1"
    kind = {"accelerator_type:V100": 1}
    nodes = [cluster.add_node(num_cpus=1, num_gpus=1, resources=kind)]
    runfiles.lease(tmp_path / "runs")
    ex = controller(cluster, tmp_path, retries=1)
    try:
        (spec,) = run_specs(ex, suite)
        assert not ex.refusals([spec])
        (slot,) = ex.slots.values()  # pre-warmed on the only V100 node while placement was checked
        assert slot.node_id == _node_id(nodes[0]) and slot.run is None
        nodes.append(cluster.add_node(num_cpus=1, num_gpus=1, resources=kind))
        cluster.remove_node(nodes[0])  # the node holding the idle pre-warmed slot goes
        wait_for(lambda: not any(n["Alive"] for n in ex.ray.nodes() if n["NodeID"] == slot.node_id), 60,
                 "Ray to find the node dead")
        ex.submit([spec])
        thread, box = _collect_in_thread(ex, spec)
        first = wait_for(lambda: held(tmp_path).get(rid), 300, "the held cell on the new node")
        assert _count(ex) == 1 and spec.attempt == 0  # the dead slot was uncounted once, the run charged nothing
        nodes.append(cluster.add_node(num_cpus=1, num_gpus=1, resources=kind))
        cluster.remove_node(nodes[1])  # now the node running it
        wait_for(lambda: new_token(tmp_path, rid, {first}), 300, "the retry's held cell")
        assert _count(ex) == 1 and spec.attempt == 1
        release(tmp_path)
        thread.join(300)
        assert "error" not in box, box.get("error")
        assert box["result"]["provenance"]["node"]["attempt"] == 1 and box["result"]["task_score"] == 1.0
        assert box["result"]["provenance"]["node"]["node_id"] == _node_id(nodes[2])
        with ex._lock:
            ex._dispatch()  # no run left: the idle slot is ended
        assert _count(ex) == 0
    finally:
        _end_session(cluster, ex, nodes)
    assert not amb_actors_left(cluster)


def test_a_controller_gone_while_it_prewarmed_leaves_no_slot_behind(cluster, tmp_path, monkeypatch):
    """The controller dies right after starting its slots (before any run): the next session's janitor
    ends them (they hold no run, so --amb-resume has nothing to re-attach) and its own runs go on."""
    from pytest_automedbench.store import run_folders as runfiles

    suite = write_suite(tmp_path, {"quick": [SOLVE]})
    monkeypatch.syspath_prepend(str(suite))
    runfiles.lease(tmp_path / "runs")
    ex = controller(cluster, tmp_path)
    specs = run_specs(ex, suite, repeats=2)

    class ControllerDied(BaseException):
        pass

    def die(*a, **kw):
        raise ControllerDied

    monkeypatch.setattr(ex, "_probe", die)  # dies as the pre-warmed slots start
    with pytest.raises(ControllerDied):
        ex.refusals(specs)
    made = {f"slot:{ex.session}:{ex.token}:{n}" for n in range(1, ex._slots_made + 1)}
    assert made  # as many as the free CPUs allow, up to the two runs
    ex.ray.shutdown()  # its driver is gone; the detached slots stay
    assert made <= set(slots_left(cluster.address))
    ex2 = controller(cluster, tmp_path, resume=True)
    try:
        specs = run_specs(ex2, suite, repeats=2)
        assert not ex2.refusals(specs)
        wait_for(lambda: not made & set(slots_left_of(ex2)), 60, "the janitor to end them")
        ex2.submit(specs)
        for spec in specs:
            assert ex2.wait(spec)["task_score"] == 1.0
    finally:
        ex2.shutdown(interrupted=False)
        runfiles.release_all()
    assert not amb_actors_left(cluster)


def slots_left_of(ex) -> list[str]:
    """Slots alive, asked through the controller's own connection."""
    from ray.util import list_named_actors

    return [a["name"] for a in list_named_actors(all_namespaces=True) if a["name"].startswith("slot:")]


def test_data_registry_places_by_node_affinity_refuses_other_versions_and_outlives_its_controller(
        cluster, tmp_path, monkeypatch):
    """Nodes register the data they hold after verifying it; placement reads the registry: a node with
    another version is refused (the run pinned to the others), and the registry outlives the controller.
    Attacks: a wrong hash registered for a good node is verified again and replaced; a restarted node's
    old entry is dropped and the new one (a corrupt copy) refused with what failed."""
    import shutil

    from pytest_automedbench.store import run_folders as runfiles
    from pytest_automedbench.executors.ray_registry import NODE_DATA_DIR, REGISTRY_NAME

    suite = write_suite(tmp_path, {"anywhere": [SOLVE]})
    write_suite(tmp_path, {"on-l4": [SOLVE]}, resources={"gpus": 1, "gpu_kind": "l4"})
    monkeypatch.syspath_prepend(str(suite))
    runfiles.lease(tmp_path / "runs")
    ex = controller(cluster, tmp_path)
    extra = []
    try:
        specs = {s.task_id: s for s in run_specs(ex, suite)}
        other = tmp_path / "other-data"  # the same files under another manifest: another version
        shutil.copytree(tmp_path / "data", other)
        for m in other.glob("*/*/manifest.json"):
            m.write_text(json.dumps(json.loads(m.read_text()), indent=3))
        l4 = {"accelerator_type:L4": 1}
        extra.append(cluster.add_node(num_cpus=1, num_gpus=1, resources=l4, env_vars={NODE_DATA_DIR: str(other)}))
        x = _node_id(extra[0])
        refused = ex.refusals(list(specs.values()))
        canonical = specs["on-l4"].data_hash
        assert set(refused) == {specs["on-l4"].run_id}
        why = refused[specs["on-l4"].run_id]
        assert "holds data on-l4/1 version " in why and f"not the canonical {canonical}" in why, why
        pinned = ex.pinned[specs["anywhere"].run_id]  # the other nodes: the same CPUs, the canonical data
        assert x not in pinned and set(pinned) == {_node_id(n) for n in cluster.nodes} - {x}
        ex.submit([specs["anywhere"]])
        result = ex.wait(specs["anywhere"])
        assert result["task_score"] == 1.0 and result["provenance"]["node"]["node_id"] in pinned
    finally:
        ex.shutdown(interrupted=False)
    import ray as ray_mod

    ray_mod.init(address=cluster.address, log_to_driver=False, logging_level="error")
    try:  # the registry outlived its controller, with what each node holds
        reg = ray_mod.get_actor(REGISTRY_NAME, namespace=ex.namespace)
        entries = ray_mod.get(reg.entries.remote())
        assert entries[x]["data"]["on-l4/1"]["hash"] not in (None, canonical)
        good = pinned[0]
        assert entries[good]["data"]["on-l4/1"]["hash"] == canonical
        lie = dict(entries[good]["data"]["on-l4/1"], hash="0" * 16)  # the stats match: only the hash lies
        ray_mod.get(reg.register.remote(good, "liar", {"on-l4/1": lie, "anywhere/1": lie}))
    finally:
        ray_mod.shutdown()
    corrupt = tmp_path / "corrupt-data"
    shutil.copytree(tmp_path / "data", corrupt)
    next(corrupt.glob("on-l4/1/private/**/*.nii.gz")).write_bytes(b"changed")
    cluster.remove_node(extra[0])  # the L4 node restarts: a new node id, another copy of the data
    extra.append(cluster.add_node(num_cpus=1, num_gpus=1, resources=l4, env_vars={NODE_DATA_DIR: str(corrupt)}))
    ex2 = controller(cluster, tmp_path)
    try:
        refused = ex2.refusals(list(specs.values()))
        why = refused[specs["on-l4"].run_id]
        assert "failed its checksum check" in why and "changed" in why, why
        assert specs["anywhere"].run_id not in refused  # the new node's copy of it is whole: every node may take it
        assert specs["anywhere"].run_id not in ex2.pinned
        # nodes register without waiting for the registry: the entries settle shortly after
        entries = wait_for(lambda: (lambda e: e if e[good]["host"] != "liar" else None)(
            ex2.ray.get(ex2.registry.entries.remote())), 60, "the good node's new entry")
        assert x not in entries  # the stale entry of the node that left
        assert entries[good]["data"]["on-l4/1"]["hash"] == canonical  # the lie verified again and replaced
    finally:
        _end_session(cluster, ex2, extra)
    assert not amb_actors_left(cluster)
