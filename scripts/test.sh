#!/usr/bin/env bash
# The project's test command: set up, then run the plugin's own tests on the machine's cores.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test || exit 1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# Beside the main session (each is mostly one process, so they use time the session leaves idle while it
# starts up): the red team's unprivileged leg (the harness started by an ordinary user; needs root to drop
# to it) and the layout's import contracts (pyproject.toml [tool.importlinter], docs/layout.md; a broken one
# fails the run; tests/test_layout.py also fails on any import cycle).
leg_pid=""
if [ "$(id -u)" = 0 ]; then
    bash scripts/redteam_unprivileged.sh > "$logs/leg.txt" 2>&1 &
    leg_pid=$!
fi
python3 -c "from importlinter.cli import lint_imports_command; lint_imports_command()" --no-cache \
    > "$logs/lint.txt" 2>&1 &
lint_pid=$!
# --dist loadgroup: tests marked xdist_group run on one worker (the executor tests share one Ray cluster).
# One worker per core (AMB_TEST_WORKERS overrides): a third worker on two cores was slower (pytest 49 min
# 47 s against 42 min) and put the Ray Ctrl-C test's held cells past their timeout.
workers=${AMB_TEST_WORKERS:-$(nproc)}
python3 -m pytest tests -n "$workers" --dist loadgroup -p no:cacheprovider "$@" 2>&1 | tee "$logs/pytest.txt"
rc=${PIPESTATUS[0]}
wait "$lint_pid"
contracts=$?
leg=0
if [ -n "$leg_pid" ]; then
    wait "$leg_pid"
    leg=$?
fi
echo
echo "== lint-imports (exit $contracts) =="
if [ $contracts = 0 ]; then grep -E "KEPT|BROKEN|Contracts:" "$logs/lint.txt"; else cat "$logs/lint.txt"; fi
if [ -n "$leg_pid" ]; then
    echo "== the red team's unprivileged leg (exit $leg) =="
    if [ $leg = 0 ]; then tail -n 3 "$logs/leg.txt"; else cat "$logs/leg.txt"; fi
fi
echo "== the main session =="
tail -n 1 "$logs/pytest.txt"
if [ $rc = 5 ]; then
    echo "test.sh: pytest collected no tests: that is a failure here" >&2
    exit 1
fi
if [ $contracts != 0 ]; then
    echo "test.sh: lint-imports: an import contract is broken (exit $contracts; pyproject.toml, docs/layout.md)" >&2
    [ $rc = 0 ] && rc=1
fi
if [ $leg != 0 ]; then
    echo "test.sh: the unprivileged red-team leg failed (exit $leg)" >&2
    [ $rc = 0 ] && rc=1
fi
exit $rc
