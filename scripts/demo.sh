#!/usr/bin/env bash
# The main job: set up, then benchmark the built-in reference agent on the offline demo suite.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
# Every demo task at its lite tier, and the demo's ReX-MLE challenge (it has only the pro setting),
# unless the arguments choose tiers or markers themselves.
select=(-m "lite or rexmle")
for arg in "$@"; do
    case "$arg" in -m|-m?*|--amb-tier|--amb-tier=*) select=() ;; esac
done
python3 -m pytest task_suites/demo -p no:cacheprovider "${select[@]}" "$@"
rc=$?
[ $rc = 5 ] && { echo "demo.sh: no demo tasks were collected" >&2; exit 1; }
exit $rc
