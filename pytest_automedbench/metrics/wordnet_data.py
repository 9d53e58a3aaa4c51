"""WordNet for NLTK's METEOR, built offline from Debian's wordnet-base + wordnet-sense-index.

NLTK normally downloads WordNet; here its files come from /usr/share/wordnet (override with
AMB_WORDNET_DIR). On first use they are copied (NLTK's reader does not follow every symlinked
layout) into `<cache>/nltk_data/corpora/wordnet` with the `lexnames` file Debian does not ship,
and the folder is put first on nltk.data.path. The cache is AMB_NLTK_DATA, else
$XDG_CACHE_HOME/pytest-automedbench/nltk_data.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from filelock import FileLock

from ..files import user_cache_dir

DEBIAN_WORDNET = Path("/usr/share/wordnet")
NEEDED = [f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")] + \
         [f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")]
OPTIONAL = ["index.sense", "cntlist.rev", "cntlist", "sentidx.vrb", "sents.vrb", "frames.vrb"]

# The 45 lexicographer files of WordNet 3.0 (number, name, syntactic category), see lexnames(5WN).
LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
            "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
            "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
            "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
            "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
            "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
            "adj.ppl").split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


class WordNetMissing(Exception):
    pass


def source_dir() -> Path:
    return Path(os.environ.get("AMB_WORDNET_DIR") or DEBIAN_WORDNET)


def cache_dir() -> Path:
    return user_cache_dir("AMB_NLTK_DATA", "nltk_data")


def missing_files(src: Path | None = None) -> list[str]:
    src = src or source_dir()
    return [name for name in NEEDED if not (src / name).is_file()]


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def build(target: Path, src: Path | None = None) -> Path:
    """Make `target/corpora/wordnet` from the Debian files (idempotent, atomic). Returns `target`."""
    src = src or source_dir()
    final = target / "corpora" / "wordnet"
    if (final / "lexnames").is_file():
        return target
    missing = missing_files(src)
    if missing:
        raise WordNetMissing(f"WordNet files missing in {src}: {', '.join(missing)} (install the Debian packages "
                             "wordnet-base and wordnet-sense-index, e.g. `bash scripts/setup.sh`, or set "
                             "AMB_WORDNET_DIR to a folder holding them)")
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock"):
        if (final / "lexnames").is_file():
            return target
        scratch = final.with_name(f"wordnet.tmp{os.getpid()}")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        for name in NEEDED + [n for n in OPTIONAL if (src / n).is_file()]:
            shutil.copyfile(src / name, scratch / name)  # copies, never symlinks
        (scratch / "lexnames").write_text(lexnames_text())
        os.replace(scratch, final)
    return target


def nltk_has_wordnet() -> bool:
    """A WordNet the user installed for NLTK themselves (nltk.download) also does."""
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
        return True
    except LookupError:
        return False


def _built() -> bool:
    return (cache_dir() / "corpora" / "wordnet" / "lexnames").is_file()


def available() -> bool:
    return not missing_files() or _built() or nltk_has_wordnet()


def ensure_nltk_wordnet() -> Path | None:
    """Put a WordNet NLTK can read first on nltk.data.path; returns the NLTK_DATA folder used."""
    import nltk

    if missing_files() and not _built() and nltk_has_wordnet():
        return None  # the user's own NLTK WordNet
    target = build(cache_dir())
    if str(target) not in nltk.data.path:
        nltk.data.path.insert(0, str(target))
    return target
