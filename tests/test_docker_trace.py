"""Docker cells are traced like local ones (sandbox/docker.py): python through the sealed tracer, bash
through its xtrace, both over a FIFO the harness makes per cell in the read-only guard folder; the
key travels on the exec's stdin, so a record written without it is rejected."""
from __future__ import annotations

import pytest

from sandbox_helpers import config, folders  # noqa: F401 (fixtures)
from pytest_automedbench.sandbox.docker import DockerSandbox
from pytest_automedbench.sandbox.guard import PolicyGuard

HONEST = "import os\nx = [i * 2 for i in range(3)]\nif x:\n    print('sum', sum(x))\nelse:\n    print('empty')\n"
# the FIFOs' folder, named without the guard's path in the text (the static check blocks that)
FORGE = ("import os\nd = os.path.join('/opt', 'amb' + '-guard', 'trace')\nfor n in os.listdir(d):\n"
         "    try:\n        fd = os.open(os.path.join(d, n), os.O_WRONLY | os.O_NONBLOCK)\n    except OSError:\n"
         "        continue\n"
         "    os.write(fd, b'AMBT 1 ' + b'0' * 64 + b' {\"l\": [1, 2, 3, 40], \"end\": true}\\n')\n"
         "    os.close(fd)\n    print('forged')\n")


@pytest.fixture
def docker_cells(folders, docker_host):
    def run(cells):
        sb = DockerSandbox(config(folders, extra={"docker_image": docker_host["image"], "docker_host_python": True}))
        with PolicyGuard(sb, inference_only=False) as guarded:
            return [guarded.exec(code, language) for code, language in cells]
    return run


def test_docker_cells_produce_executed_facts_and_reject_forgeries(docker_cells):
    honest, bash, forged, stdin = docker_cells([
        (HONEST, "python"),
        ("echo a\nif false; then\n  echo b\nfi\nid -u\n", "bash"),
        (FORGE, "python"),
        ("import sys\nprint(repr(sys.stdin.read()))\n", "python"),
    ])
    assert honest.exit_code == 0 and honest.stdout == "sum 6\n", honest.stderr
    assert honest.executed["status"] == "complete" and honest.executed["lines"] == [1, 2, 3, 4], honest.executed
    assert bash.exit_code == 0 and bash.stdout.startswith("a\n") and "AMB" not in bash.stdout + bash.stderr
    assert bash.executed["status"] == "complete" and bash.executed["lines"] == [1, 2, 5], bash.executed
    assert bash.stdout.split()[1] != "0"  # the cell user, never root
    assert forged.stdout == "forged\n", forged.stderr
    assert forged.executed["status"] == "tampered", forged.executed
    assert stdin.stdout == "''\n" and stdin.executed["status"] == "complete"  # the key is not left on stdin
