"""Pytest fixtures for agent developers, registered by the plugin (no conftest needed).

``mock_llm``: a running `MockLLMServer` with an empty script, and OPENAI_BASE_URL /
OPENAI_API_KEY / ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY pointing at it for the test's duration
(so the SDKs, and pytest runs started inside the test, talk to it). Script it with
``mock_llm.add(entry, ...)``; see docs/agents.md for the entry format.
"""
from __future__ import annotations

import pytest

from .mock_llm import MockLLMServer


@pytest.fixture
def mock_llm(monkeypatch):
    with MockLLMServer() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server
