"""The stage rubric (rubric.yaml) as data every judge and report reads.

Track wording comes from the task (`{track}`, `{track_output}`, `{metric}`). The shared stages hold for
every track; `tracks:` overlays them where a track's anchor scores differently (items added, removed or
changed, S3 levels, the dependencies between items). `rubric_for(track)` is the rubric a run of that track
is judged by; `rubric_text` (Rubric.text) is what the LLM judge sees and what its cache key hashes.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

RUBRIC_FILE = Path(__file__).with_name("rubric.yaml")
JUDGED_STAGES = ("S1", "S2", "S3")
OVERLAY_KEYS = frozenset({"anchor", "change", "add", "remove", "replace", "levels", "anchor_ids"})
TIERS = ("lite", "standard", "pro")
HARNESS = "harness"  # an item's `by:` when only the harness decides it


class RubricError(ValueError):
    """rubric.yaml's track overlay names what does not exist (the message names the track and field)."""


@dataclass(frozen=True)
class Rubric:
    raw: dict[str, Any]
    track: str = ""

    def _items(self, stage: str) -> list[dict[str, Any]]:
        return self.raw["stages"][stage].get("items", [])

    def items(self, stage: str) -> list[str]:
        return [i["id"] for i in self._items(stage)]

    def judged_items(self, stage: str) -> list[str]:
        """The items a judge (heuristic or model) decides; the rest are the harness's own (`by: harness`)."""
        return [i["id"] for i in self._items(stage) if i.get("by") != HARNESS]

    def harness_items(self, stage: str) -> list[str]:
        return [i["id"] for i in self._items(stage) if i.get("by") == HARNESS]

    def item(self, stage: str, item_id: str) -> dict[str, Any] | None:
        return next((i for i in self._items(stage) if i["id"] == item_id), None)

    def lite_met(self, stage: str) -> list[str]:
        return [i["id"] for i in self._items(stage) if i.get("lite_met")]

    def requires(self, stage: str) -> dict[str, str]:
        """item -> the item it depends on: unmet, it forces this one unmet (the anchors' dependencies)."""
        return {i["id"]: i["requires"] for i in self._items(stage) if i.get("requires")}

    def caps(self, stage: str) -> dict[str, float]:
        """item -> the most the stage scores while that item is unmet."""
        return {i["id"]: float(i["cap"]) for i in self._items(stage) if i.get("cap") is not None}

    def levels(self, stage: str = "S3") -> dict[str, float]:
        """The ladder's levels ({} where the track replaced the stage by items)."""
        return {lv["id"]: float(lv["score"]) for lv in self.raw["stages"][stage].get("levels", [])}

    def rule(self, stage: str) -> str:
        return self.raw["stages"][stage]["rule"]

    def replaced(self, stage: str) -> bool:
        """The track asks its own questions in this stage (rubric.yaml `replace:`), not the shared items."""
        return stage in ((self.raw.get("tracks") or {}).get(self.track) or {}).get("replace", {})

    def not_applicable(self, stage: str, item_id: str, tier: str) -> str | None:
        """Why the item does not apply whatever the run did (outside its `tiers:`, or `na:`); None: it may."""
        item = self.item(stage, item_id) or {}
        if item.get("na"):
            return f"not applicable: {item['na']}"
        if item.get("tiers") and tier not in item["tiers"]:
            return f"not applicable at the {tier} tier (asked at {', '.join(item['tiers'])})"
        return None

    def threshold(self, name: str) -> float:
        """A measured quantity's threshold (rubric.yaml `thresholds:`)."""
        return float(self.raw["thresholds"][name])

    def anchor(self) -> str | None:
        return (self.raw.get("tracks", {}).get(self.track) or {}).get("anchor")

    def text(self, track: str, tier: str, metric: str = "") -> str:
        """The rubric in words, with the track's wording filled in."""
        words = {"track": track, "metric": metric,
                 "track_output": self.raw.get("track_outputs", {}).get(track, "the outputs")}
        ids = (self.raw.get("tracks", {}).get(self.track) or {}).get("anchor_ids") or {}
        lines = [f"Rubric v{self.raw['version']} (track {track}, tier {tier})"]
        if self.anchor():
            lines.append(f"As the track's anchor scores it: {self.anchor()}")
        for sid, stage in self.raw["stages"].items():
            lines.append(f"{sid} {stage['name']} ({stage['rule']}):")
            for item in stage.get("items", []):
                notes = [f"anchor: {ids[item['id']]}"] if item["id"] in ids else []
                if item.get("lite_met") and tier == "lite":
                    notes.append("lite tier: counted as met")
                if item.get("requires"):
                    notes.append(f"unmet when {item['requires']} is unmet")
                if item.get("by") == HARNESS:
                    notes.append("decided by the harness, not by the judge")
                if item.get("cap") is not None:
                    notes.append(f"unmet: {sid} at most {item['cap']}")
                na = self.not_applicable(sid, item["id"], tier)
                if na:
                    notes.append(f"{na}; decided by the harness")
                elif item.get("na_when"):
                    notes.append(f"not applicable (decided by the harness) when {item['na_when']}")
                shown = f" [{'; '.join(notes)}]" if notes else ""
                lines.append(f"  - {item['id']}: {item['text'].format(**words)}{shown}")
            for lv in stage.get("levels", []):
                lines.append(f"  - level {lv['score']} {lv['id']}: {lv['text']}")
            if stage.get("text"):
                lines.append(f"  {stage['text']}")
        lines.append(self.raw["never_reached"])
        return "\n".join(lines)


def overlay(raw: dict[str, Any], track: str) -> dict[str, Any]:
    """The shared stages with `tracks[track]` applied (a track without an overlay: the shared rubric)."""
    spec = (raw.get("tracks") or {}).get(track)
    if not spec:
        return raw
    where = f"rubric.yaml: tracks.{track}"
    unknown = set(spec) - OVERLAY_KEYS
    if unknown:
        raise RubricError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    out = copy.deepcopy(raw)
    stages = out["stages"]
    by_id = {i["id"]: i for st in stages.values() for i in st.get("items", [])}
    for item_id in spec.get("remove") or []:
        if item_id not in by_id:
            raise RubricError(f"{where}.remove: no item {item_id!r}")
        for st in stages.values():
            if "items" in st:
                st["items"] = [i for i in st["items"] if i["id"] != item_id]
    for stage, items in (spec.get("replace") or {}).items():
        if stage not in JUDGED_STAGES:
            raise RubricError(f"{where}.replace.{stage}: not a judged stage ({', '.join(JUDGED_STAGES)})")
        for n, item in enumerate(items or []):
            if not isinstance(item, dict) or not item.get("id") or not item.get("text"):
                raise RubricError(f"{where}.replace.{stage}[{n}]: an item needs an id and a text")
            bad = set(item.get("tiers") or ()) - set(TIERS)
            if bad:
                raise RubricError(f"{where}.replace.{stage}[{n}].tiers: unknown tier(s) {', '.join(sorted(bad))}")
        stages[stage] = {"name": stages[stage]["name"], "rule": "mean", "items": copy.deepcopy(items or [])}
    for stage, items in (spec.get("add") or {}).items():
        if stage not in JUDGED_STAGES:
            raise RubricError(f"{where}.add.{stage}: not a judged stage ({', '.join(JUDGED_STAGES)})")
        stages[stage].setdefault("items", []).extend(copy.deepcopy(items))
    by_id = {i["id"]: (sid, i) for sid, st in stages.items() for i in st.get("items", [])}
    for item_id, fields in (spec.get("change") or {}).items():
        if item_id not in by_id:
            raise RubricError(f"{where}.change: no item {item_id!r}")
        sid, item = by_id[item_id]
        for key, value in (fields or {}).items():
            if value is None:
                item.pop(key, None)
            else:
                item[key] = value
        needed = item.get("requires")
        if needed and needed not in {i["id"] for i in stages[sid]["items"]}:
            raise RubricError(f"{where}.change.{item_id}.requires: {needed!r} is not an item of {sid}")
    for stage, scores in (spec.get("levels") or {}).items():
        levels = {lv["id"]: lv for lv in stages.get(stage, {}).get("levels", [])}
        for level_id, score in scores.items():
            if level_id not in levels:
                raise RubricError(f"{where}.levels.{stage}: no level {level_id!r}")
            levels[level_id]["score"] = float(score)
    return out


@lru_cache(maxsize=1)
def load_rubric(path: str | None = None) -> Rubric:
    """The shared rubric (no track's overlay)."""
    return Rubric(yaml.safe_load(Path(path or RUBRIC_FILE).read_text(encoding="utf-8")))


@lru_cache(maxsize=32)
def rubric_for(track: str | None, path: str | None = None) -> Rubric:
    """The rubric a run of `track` is judged by: the shared stages with the track's overlay applied."""
    shared = load_rubric(path)
    return Rubric(overlay(shared.raw, track), track) if track else shared
