#!/usr/bin/env bash
# The project's test command: set up, then run the plugin's own tests on both cores.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test || exit 1
# The red team's unprivileged leg first (the harness started by an ordinary user; needs root to drop
# to it), so the main session's summary is the last line.
leg=0
if [ "$(id -u)" = 0 ]; then
    bash scripts/redteam_unprivileged.sh
    leg=$?
fi
# The layout's import contracts (pyproject.toml [tool.importlinter], docs/layout.md): a broken one fails
# the run, after the tests (tests/test_layout.py also fails on any import cycle).
python3 -c "from importlinter.cli import lint_imports_command; lint_imports_command()" --no-cache
contracts=$?
# --dist loadgroup: tests marked xdist_group run on one worker (the executor tests share one Ray cluster)
python3 -m pytest tests -n 2 --dist loadgroup -p no:cacheprovider "$@"
rc=$?
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
