"""Helpers shared by the dataset preparers: layout checks, seeded case selection, progress."""
from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

Progress = Callable[[int, int, str], None]


class LayoutError(Exception):
    """The source folder does not look like the official release; says what was expected and found."""


def describe_folder(folder: Path, limit: int = 8) -> str:
    if not folder.exists():
        return f"{folder} does not exist"
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    shown = ", ".join(entries[:limit]) + (f", ... ({len(entries)} entries)" if len(entries) > limit else "")
    return f"{folder} holds: {shown or 'nothing'}"


def require(source: Path, pattern: str, what: str, minimum: int = 1) -> list[Path]:
    """Files under `source` matching the glob `pattern`, or a LayoutError naming both sides."""
    source = Path(source)
    found = sorted(source.glob(pattern))
    if len(found) < minimum:
        raise LayoutError(f"expected {what} at {source}/{pattern} (at least {minimum}), found {len(found)}; "
                          + describe_folder(source))
    return found


def require_file(source: Path, relative: str, what: str) -> Path:
    path = Path(source) / relative
    if not path.is_file():
        raise LayoutError(f"expected {what} at {path}; " + describe_folder(path.parent))
    return path


def select(ids: Sequence[str], count: int | None, seed: int) -> list[str]:
    """`count` ids chosen with a seeded shuffle of the sorted ids (all of them when count is None)."""
    ordered = sorted(ids)
    if count is None or count >= len(ordered):
        return ordered
    chosen = random.Random(seed).sample(ordered, count)
    return sorted(chosen)


def select_balanced(labels: dict[str, str], per_class: int, seed: int) -> list[str]:
    """`per_class` ids of every class (seeded), for balanced classification subsets."""
    by_class: dict[str, list[str]] = {}
    for item, label in labels.items():
        by_class.setdefault(label, []).append(item)
    chosen: list[str] = []
    for label in sorted(by_class):
        items = by_class[label]
        if len(items) < per_class:
            raise LayoutError(f"class {label!r} has {len(items)} items, {per_class} are needed")
        chosen += select(items, per_class, seed)
    return sorted(chosen)


def select_stratified(labels: dict[str, str], count: int, seed: int) -> list[str]:
    """`count` ids spread as evenly as possible over the classes (the first classes, sorted, take
    the remainder), each class sampled with the seed."""
    by_class: dict[str, list[str]] = {}
    for item, label in labels.items():
        by_class.setdefault(label, []).append(item)
    names = sorted(by_class)
    base, extra = divmod(count, len(names))
    chosen: list[str] = []
    for i, label in enumerate(names):
        want = base + (1 if i < extra else 0)
        if len(by_class[label]) < want:
            raise LayoutError(f"class {label!r} has {len(by_class[label])} items, {want} are needed")
        chosen += select(by_class[label], want, seed)
    return sorted(chosen)


def stderr_progress(done: int, total: int, what: str) -> None:
    sys.stderr.write(f"\r  [{done}/{total}] {what[:60]:<60}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def each(items: Iterable, total: int, progress: Progress | None, label=str):
    for i, item in enumerate(items, 1):
        yield item
        if progress:
            progress(i, total, label(item))


def copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
