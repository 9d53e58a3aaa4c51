"""Test helpers users also need: the loopback mock LLM server.

Exports are loaded lazily so ``python -m pytest_automedbench.testing.mock_llm`` does not import the
module twice.
"""
from __future__ import annotations

from typing import Any

__all__ = ["MockLLMServer", "ScriptError", "load_script"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import mock_llm

        return getattr(mock_llm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
