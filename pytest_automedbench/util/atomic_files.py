"""Writing a file so that readers see the old content or the new, never half of it."""
from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path` (concurrent
    writers: whole files, the last one wins). The temporary file is removed if writing fails."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class OutsideRoot(ValueError):
    """A name would put a path outside the folder it belongs in."""


def inside(root: Path | str, *names: str) -> Path:
    """`root/names...`, each name one plain path segment (not empty, '.', '..', absolute or holding a
    separator), so the path stays under `root` whatever the names say. Checked on the names, not by
    resolving: a user's symlinked data or runs folder is theirs to have."""
    for name in names:
        name = str(name)
        if name in ("", ".", "..") or "/" in name or (os.altsep and os.altsep in name) or os.sep in name \
                or "\0" in name:
            raise OutsideRoot(f"{name!r} is not a single folder name (refused: it could leave {root})")
    return Path(root).joinpath(*map(str, names))


def user_cache_dir(env_var: str, name: str) -> Path:
    """`$env_var` if set, else `$XDG_CACHE_HOME/pytest-automedbench/<name>` (~/.cache by default)."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-automedbench" / name
