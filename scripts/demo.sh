#!/usr/bin/env bash
# The main job: set up, then benchmark the built-in reference agent on the offline demo suite.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
python3 -m pytest task_suites/demo -p no:cacheprovider "$@"
rc=$?
[ $rc = 5 ] && { echo "demo.sh: no demo tasks were collected" >&2; exit 1; }
exit $rc
