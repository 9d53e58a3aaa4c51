"""Which tiers a session collects, and the tasks deselected because they lack the tier asked for.

`--amb-tier` picks the tiers (default lite); when it is not given and `-m` names a tier or the
`rexmle` or `mlebench` marker, every tier is collected and the markers pick (`-m pro`, `-m rexmle`). A task
with none of the tiers asked for (a ReX-MLE challenge has only pro) is collected at its own tiers,
then deselected, and the session ends with one line saying how many and how to run them.
"""
from __future__ import annotations

import re

from .settings import RunSettings
from ..tasks import TIERS


def tiers_collected(config, settings: RunSettings) -> tuple[str, ...]:
    """--amb-tier's tiers; every tier when --amb-tier is not set and `-m` names a tier or the
    rexmle / mlebench marker (`-m pro`, `-m rexmle`, `-m mlebench`: the markers then pick the tiers)."""
    explicit = config.getoption("amb_tier") is not None or "amb_tier" in config.inicfg
    named = set(re.findall(r"[A-Za-z_]\w*", config.option.markexpr or "")) & {*TIERS, "rexmle", "mlebench"}
    if not explicit and named:
        return TIERS
    return settings.tiers_wanted(TIERS)


def deselect_missing_tiers(config, items: list) -> dict[str, dict]:
    """Drop the items whose task lacks the tier asked for; {task id: {tiers, rexmle}} of those tasks."""
    lacking = [item for item in items if getattr(item, "tier_missing", False)]
    if not lacking:
        return {}
    items[:] = [item for item in items if not getattr(item, "tier_missing", False)]
    config.hook.pytest_deselected(items=lacking)
    return {item.task.spec.id: {"tiers": item.task.spec.tiers.available(), "rexmle": item.task.spec.rexmle is not None,
                                "mlebench": getattr(item.task.spec, "mlebench", None) is not None}
            for item in lacking}


def no_tier_line(no_tier: dict[str, dict], wanted: tuple[str, ...]) -> str:
    """One line: how many tasks were deselected for lacking the tier asked for, and how to run them."""
    groups: dict[tuple[int, str, tuple[str, ...]], int] = {}
    for info in no_tier.values():
        kind = ((0, "ReX-MLE challenge") if info["rexmle"] else (1, "MLE-bench competition") if info.get("mlebench")
                else (2, "task"))
        key = (*kind, tuple(info["tiers"]))
        groups[key] = groups.get(key, 0) + 1
    kinds = "; ".join(f"{n} {name}{'s' if n != 1 else ''}: {'/'.join(tiers)} only"
                      for (_, name, tiers), n in sorted(groups.items()))
    tiers = sorted({t for *_, ts in groups for t in ts}, key=TIERS.index)
    n = len(no_tier)
    return (f"automedbench: {n} task{'s' if n != 1 else ''} deselected: no {' or '.join(wanted)} tier ({kinds}); "
            f"run {'them' if n != 1 else 'it'} with {', '.join(f'--amb-tier={t}' for t in tiers)}, --amb-tier=all "
            f"or {' / '.join(f'-m {t}' for t in tiers)}")
