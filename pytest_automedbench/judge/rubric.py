"""The stage rubric (rubric.yaml) as data every judge and report reads.

Track wording comes from the task (`{track}`, `{track_output}`, `{metric}`), so there is one
rubric for every track. `rubric_text` is what the LLM judge sees and what its cache key hashes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

RUBRIC_FILE = Path(__file__).with_name("rubric.yaml")
JUDGED_STAGES = ("S1", "S2", "S3")


@dataclass(frozen=True)
class Rubric:
    raw: dict[str, Any]

    def items(self, stage: str) -> list[str]:
        return [i["id"] for i in self.raw["stages"][stage].get("items", [])]

    def lite_met(self, stage: str) -> list[str]:
        return [i["id"] for i in self.raw["stages"][stage].get("items", []) if i.get("lite_met")]

    def levels(self, stage: str = "S3") -> dict[str, float]:
        return {lv["id"]: float(lv["score"]) for lv in self.raw["stages"][stage]["levels"]}

    def text(self, track: str, tier: str, metric: str = "") -> str:
        """The rubric in words, with the track's wording filled in."""
        words = {"track": track, "metric": metric,
                 "track_output": self.raw.get("track_outputs", {}).get(track, "the outputs")}
        lines = [f"Rubric v{self.raw['version']} (track {track}, tier {tier})"]
        for sid, stage in self.raw["stages"].items():
            lines.append(f"{sid} {stage['name']} ({stage['rule']}):")
            for item in stage.get("items", []):
                forgiven = " [lite tier: counted as met]" if item.get("lite_met") and tier == "lite" else ""
                lines.append(f"  - {item['id']}: {item['text'].format(**words)}{forgiven}")
            for lv in stage.get("levels", []):
                lines.append(f"  - level {lv['score']} {lv['id']}: {lv['text']}")
            if stage.get("text"):
                lines.append(f"  {stage['text']}")
        lines.append(self.raw["never_reached"])
        return "\n".join(lines)


@lru_cache(maxsize=1)
def load_rubric(path: str | None = None) -> Rubric:
    return Rubric(yaml.safe_load(Path(path or RUBRIC_FILE).read_text(encoding="utf-8")))
