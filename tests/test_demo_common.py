"""The demo builders' shared random transforms (pytest_automedbench/data/demo_common.py)."""
from __future__ import annotations

import numpy as np

from pytest_automedbench.data.demo_common import warp_coordinates


def turn_degrees(coords: np.ndarray) -> float:
    """The in-plane rotation of 2D sampling coordinates made without warp, zoom or shift."""
    step = coords[:, 10, 11] - coords[:, 10, 10]  # where one pixel to the right samples from
    return float(np.degrees(np.arctan2(step[0], step[1])))


def turns(n: int, **kw) -> list[float]:
    return [turn_degrees(warp_coordinates((21, 21), np.random.default_rng(seed), amplitude=0.0, **kw))
            for seed in range(n)]


def test_min_rot_deg_keeps_every_turn_away_from_zero():
    angles = turns(200, max_rot_deg=20, min_rot_deg=8)
    assert all(8 - 1e-9 <= abs(a) <= 20 + 1e-9 for a in angles), sorted(angles)[:5]
    assert min(angles) < -15 and max(angles) > 15  # both ways, up to the maximum


def test_without_min_rot_deg_turns_come_near_zero():
    """Without it a turn is drawn within the maximum either way, small ones included (the other builders)."""
    angles = turns(200, max_rot_deg=20)
    assert any(abs(a) < 2 for a in angles) and all(abs(a) <= 20 + 1e-9 for a in angles)
