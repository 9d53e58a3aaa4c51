#!/usr/bin/env bash
# The project's test command: set up, then run the plugin's own tests on both cores.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test || exit 1
# --dist loadgroup: tests marked xdist_group run on one worker (the executor tests share one Ray cluster)
python3 -m pytest tests -n 2 --dist loadgroup -p no:cacheprovider "$@"
rc=$?
if [ $rc = 5 ]; then
    echo "test.sh: pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit $rc
