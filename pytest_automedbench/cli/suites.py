"""`automedbench suites [SUITE ...] [--path | --copy DEST]`: the task suites this installation ships.

Without an option it lists every task: its id (the one name `pytest -k`, `automedbench prepare`,
`brief` and `rank` all use), track, tiers and title, with ReX-MLE's own name beside a challenge's.
`--path` prints the folder (run it in place: pytest "$(automedbench suites --path demo)").
`--copy DEST` copies the suites into DEST, to edit or extend them, with a pytest.ini there
(unless DEST has one) whose testpaths are the copied suites: in DEST, `pytest --amb-model=...` then
runs them, like the repository's own root.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..tasks.suites import did_you_mean, display_name, suite_names, suites_root, task_files
from ..tasks import load_task_file

PYTEST_INI = """\
# Written by `automedbench suites --copy`: run the suites below with `pytest --amb-model=...`.
[pytest]
testpaths = {testpaths}
# JUnit properties (every score) need xunit1; pytest's default xunit2 drops them.
junit_family = xunit1
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("suites", help="list, locate or copy the task suites shipped with this installation",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suites", nargs="*", metavar="SUITE", help=f"{_shipped()} (default: all)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--path", action="store_true", help="print the folder of the suites (or of SUITE)")
    what.add_argument("--copy", type=Path, metavar="DEST", help="copy the suites into DEST (a pytest.ini too)")
    p.set_defaults(func=run)


def _shipped() -> str:
    """The suites this installation ships, as `run` finds them (the help never goes stale)."""
    try:
        return ", ".join(suite_names(suites_root())) or "none found"
    except OSError as e:  # no suites folder: the help still shows, `run` says what is wrong
        return f"none found ({e.strerror or e})"


def run(args) -> int:
    root = suites_root()
    known = suite_names(root)
    for name in args.suites:
        if name not in known:
            print(f"automedbench suites: no suite {name!r}{did_you_mean(name, known)} (known: {', '.join(known)})",
                  file=sys.stderr)
            return 2
    chosen = args.suites or known
    if args.path:
        print(root / chosen[0] if args.suites else root)
        return 0
    if args.copy:
        return copy_suites(root, chosen, args.copy)
    for name in chosen:
        tasks = task_files(root / name)
        print(f"{name} ({len(tasks)} tasks) {root / name}")
        width = max((len(t) for t in tasks), default=0)
        for task_id, path in tasks.items():
            task = load_task_file(path)
            tiers = ",".join(task.spec.tiers.available())
            print(f"  {task_id:<{width}}  {task.spec.track:<14} {tiers:<19} {display_name(task)}")
    return 0


def copy_suites(root: Path, names: list[str], dest: Path) -> int:
    dest = dest.expanduser()
    clashes = [n for n in names if (dest / n).exists()]
    if clashes:
        print(f"automedbench suites: {', '.join(str(dest / n) for n in clashes)} already exist(s); "
              "remove or choose another DEST", file=sys.stderr)
        return 2
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(root / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        print(f"{name}: copied to {dest / name}")
    ini = dest / "pytest.ini"
    if not ini.exists() and not (dest / "pyproject.toml").exists() and not (dest / "tox.ini").exists():
        ini.write_text(PYTEST_INI.format(testpaths=" ".join(names)), encoding="utf-8")
        print(f"wrote {ini}: in {dest}, `pytest --amb-model=...` runs {', '.join(names)}")
    return 0
