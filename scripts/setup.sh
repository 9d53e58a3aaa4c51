#!/usr/bin/env bash
# Install everything pytest-automedbench needs on a Debian-like machine, idempotently.
#   bash scripts/setup.sh          the plugin, its Python stack and the system tools runs use
#   bash scripts/setup.sh --test   also what the project's own tests need (test extra, browser, Docker)
# PYTHON selects the interpreter (default: python3). Set AMB_SKIP_APT=1 to skip system packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
want_tests=0
[ "${1:-}" = "--test" ] && want_tests=1

# System packages: bubblewrap (the local sandbox), a Java runtime (METEOR 1.5); for tests also Chromium
# (the HTML report test), Docker's engine and debootstrap (the docker sandbox tests).
apt_pkgs="bubblewrap libseccomp2 default-jre-headless"
[ $want_tests = 1 ] && apt_pkgs="$apt_pkgs chromium docker.io debootstrap"
# Tests only: npm for the Claude Code CLI (bridged-agent tests), unless a Node.js with npm is there already.
[ $want_tests = 1 ] && ! command -v npm >/dev/null && apt_pkgs="$apt_pkgs nodejs npm"
if [ "${AMB_SKIP_APT:-0}" != 1 ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    missing=""
    for p in $apt_pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    if [ -n "$missing" ]; then
        echo "setup: installing system packages:$missing"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
elif [ "${AMB_SKIP_APT:-0}" != 1 ]; then
    echo "setup: not root or no apt-get: install these yourself if missing: $apt_pkgs" >&2
fi

# The unprivileged user the local sandbox runs agent code as when the harness is root (sandbox/celluser.py).
if [ "$(id -u)" = 0 ] && ! getent passwd amb-cell >/dev/null && command -v useradd >/dev/null; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin amb-cell
    echo "setup: made the system user amb-cell (agent code runs as it)"
fi

# torch first: a pinned CPU build where one is provided, so no multi-GB CUDA build is pulled in.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
    "$PYTHON" -m pip install -q "torch==2.13.0"
fi
extra=""
[ $want_tests = 1 ] && extra="[test,ray,slurm]"  # the executor tests run a Ray cluster and Slurm shims
"$PYTHON" -m pip install -q -e ".$extra"
# Tests only: the Open-i report archive inside the torchxrayvision wheel is what the leak red team
# tries to read answers from (the demo itself no longer uses it). Data only, no import, so it is
# installed without its dependencies (which would pull torchvision).
if [ $want_tests = 1 ]; then
    "$PYTHON" -m pip install -q --no-deps "torchxrayvision>=1.2"
fi
# Tests only: the bridged agents CI runs for real (Claude Code and Codex from npm, AIDE from PyPI), built once in
# the agents folder ($AMB_AGENTS_DIR or /var/tmp/automedbench-agents); one already there is kept.
if [ $want_tests = 1 ]; then
    for agent in claude-code aide codex; do
        "$PYTHON" -m pytest_automedbench.cli agents install "$agent" \
            || echo "setup: $agent could not be installed; its tests will skip" >&2
    done
fi
echo "setup: done ($("$PYTHON" -c 'import pytest_automedbench as p; print("pytest-automedbench", p.__version__)'))"
