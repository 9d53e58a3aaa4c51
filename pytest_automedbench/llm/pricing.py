"""LLM prices kept as data, and the cost of a run's token usage.

The built-in table is ``prices.yaml`` next to this module (USD per million tokens: ``input``,
``output``, ``cache_read``, ``cache_write``). Users override or extend it with a file of the same
shape (``--amb-prices=FILE``, YAML or JSON)::

    models:
      claude-sonnet-4-6: {output: 16.0}          # merged field by field over the built-in entry
      my-local-llama: {input: 0, output: 0}      # a new model: input and output are required

(a flat mapping ``{model_id: {...}}`` without the ``models:`` key is accepted too). For a model
that is new (not in the built-in table) and gives no ``cache_read`` / ``cache_write`` price, those
tokens are charged at its ``input`` price.

`cost_usd` returns None for a model it has no price for -- the caller warns; a cost is never
guessed. Token counts follow `base.Usage`: ``input`` is *uncached* input tokens, so::

    cost = (input * p.input + output * p.output + cache_read * p.cache_read
            + cache_write * p.cache_write) / 1e6
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "BUILTIN_PRICES_FILE", "Price", "PriceFileError", "load_prices", "price_for", "cost_usd",
]

BUILTIN_PRICES_FILE = Path(__file__).with_name("prices.yaml")

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
_REQUIRED_NEW = ("input", "output")
_TOP_LEVEL_META = ("as_of", "currency")
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


class PriceFileError(ValueError):
    """A price file is unreadable or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Any) -> float:
        """USD for a `base.Usage` (or a mapping with the same keys)."""
        u = _usage_counts(usage)
        return (
            u["input"] * self.input
            + u["output"] * self.output
            + u["cache_read"] * self.cache_read
            + u["cache_write"] * self.cache_write
        ) / 1_000_000

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _usage_counts(usage: Any) -> dict[str, int]:
    if isinstance(usage, Mapping):
        return {k: int(usage.get(k, 0) or 0) for k in PRICE_FIELDS}
    return {k: int(getattr(usage, k, 0) or 0) for k in PRICE_FIELDS}


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceFileError(f"{path}: cannot read price file: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        import yaml

        return yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError
        kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
        raise PriceFileError(f"{path}: not valid {kind}: {exc}") from exc


def _number(path: Path, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PriceFileError(
            f"{path}: {where}: expected a non-negative number (USD per million tokens), got {value!r}"
        )
    return float(value)


def _parse(path: Path, data: Any, base: Mapping[str, Price]) -> dict[str, Price]:
    """Validate a price file's content and merge it over ``base``."""
    if not isinstance(data, Mapping):
        raise PriceFileError(
            f"{path}: expected a mapping with a 'models' key (model id -> prices), got "
            f"{'an empty file' if data is None else type(data).__name__}"
        )
    if "models" in data:
        unknown = sorted(set(data) - {"models", *_TOP_LEVEL_META})
        if unknown:
            raise PriceFileError(f"{path}: unknown top-level field(s) {', '.join(map(str, unknown))} "
                                 f"(allowed: models, {', '.join(_TOP_LEVEL_META)})")
        models = data["models"]
        prefix = "models."
        if not isinstance(models, Mapping):
            raise PriceFileError(f"{path}: models: expected a mapping of model id -> prices, "
                                 f"got {type(models).__name__}")
    else:
        models = {k: v for k, v in data.items() if k not in _TOP_LEVEL_META}
        prefix = ""
    currency = data.get("currency", "USD")
    if currency != "USD":
        raise PriceFileError(f"{path}: currency: only USD is supported, got {currency!r}")
    merged = dict(base)
    for model_id, entry in models.items():
        where = f"{prefix}{model_id}"
        if not isinstance(model_id, str) or not model_id:
            raise PriceFileError(f"{path}: {where}: model id must be a non-empty string")
        if not isinstance(entry, Mapping):
            raise PriceFileError(f"{path}: {where}: expected a mapping with fields "
                                 f"{', '.join(PRICE_FIELDS)}, got {entry!r}")
        unknown = sorted(set(map(str, entry)) - set(PRICE_FIELDS))
        if unknown:
            raise PriceFileError(f"{path}: {where}: unknown field(s) {', '.join(unknown)} "
                                 f"(allowed: {', '.join(PRICE_FIELDS)})")
        values = {k: _number(path, f"{where}.{k}", v) for k, v in entry.items()}
        old = merged.get(model_id)
        if old is not None:
            merged[model_id] = Price(**{**old.as_dict(), **values})
            continue
        for k in _REQUIRED_NEW:
            if k not in values:
                raise PriceFileError(f"{path}: {where}.{k}: required for a model not in the built-in table")
        values.setdefault("cache_read", values["input"])
        values.setdefault("cache_write", values["input"])
        merged[model_id] = Price(**values)
    return merged


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[tuple[str, Price], ...]:
    return tuple(_parse(BUILTIN_PRICES_FILE, _read(BUILTIN_PRICES_FILE), {}).items())


def load_prices(extra_file: str | Path | None = None) -> dict[str, Price]:
    """The built-in table, with ``extra_file`` (YAML or JSON) merged over it when given.

    Raises `PriceFileError` naming the file and the field for a bad file.
    """
    prices = dict(_builtin())
    if extra_file is not None:
        path = Path(extra_file)
        prices = _parse(path, _read(path), prices)
    return prices


def price_for(model_id: str | None, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model_id``: exact id first, then the id without a trailing date stamp."""
    if not model_id:
        return None
    table = prices if prices is not None else dict(_builtin())
    if model_id in table:
        return table[model_id]
    undated = _DATE_SUFFIX.sub("", model_id)
    if undated != model_id and undated in table:
        return table[undated]
    return None


def cost_usd(model_id: str | None, usage: Any, prices: Mapping[str, Price] | None = None) -> float | None:
    """USD cost of ``usage`` (a `base.Usage` or mapping) on ``model_id``; None when unpriced."""
    price = price_for(model_id, prices)
    if price is None:
        return None
    return price.cost(usage)
