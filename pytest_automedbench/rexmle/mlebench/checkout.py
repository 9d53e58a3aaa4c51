"""What comes from the user's MLE-bench checkout (`$AMB_MLEBENCH_DIR`, a clone of openai/mle-bench with
its git-lfs files pulled): Kaggle's leaderboards and descriptions (Kaggle's content, not shipped
here) and MLE-bench's checksums of the prepared files."""
from __future__ import annotations

import os
from pathlib import Path

ENV = "AMB_MLEBENCH_DIR"
LFS_POINTER = b"version https://git-lfs"


def checkout_dir() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value).expanduser() if value else None


def competition_dir(competition: str, root: Path | None = None) -> Path | None:
    root = root or checkout_dir()
    return root / "mlebench" / "competitions" / competition if root else None


def read_file(competition: str, name: str, root: Path | None = None) -> tuple[bytes | None, str | None]:
    """(bytes, None) or (None, why not): the file of the competition in the checkout."""
    folder = competition_dir(competition, root)
    if folder is None:
        return None, f"no MLE-bench checkout (set ${ENV} to a clone of openai/mle-bench)"
    path = folder / name
    try:
        data = path.read_bytes()
    except OSError:
        return None, f"{path} not found"
    if data.startswith(LFS_POINTER):
        return None, f"{path} is a git-lfs pointer: run `git lfs pull` in the checkout"
    return data, None


def leaderboard_scores(competition: str, root: Path | None = None) -> tuple[list[float] | None, str | None]:
    """The Kaggle leaderboard's `score` column in its order, or (None, why not)."""
    import io

    import pandas as pd

    data, problem = read_file(competition, "leaderboard.csv", root)
    if data is None:
        return None, problem
    try:
        board = pd.read_csv(io.BytesIO(data))
        return [float(s) for s in board["score"]], None
    except (ValueError, KeyError) as e:
        return None, f"{competition}/leaderboard.csv: no usable score column ({e})"


def checksums(competition: str, root: Path | None = None) -> tuple[dict | None, str | None]:
    """MLE-bench's checksums.yaml of the competition ({public: {file: md5}, private: {...}})."""
    import yaml

    data, problem = read_file(competition, "checksums.yaml", root)
    if data is None:
        return None, problem
    return yaml.safe_load(data), None


__all__ = ["ENV", "checkout_dir", "checksums", "competition_dir", "leaderboard_scores", "read_file"]
