"""Run accounting settings: the price table, the cost of a run, the retry policy of LLM backends.

The plugin builds these once per session (`--amb-prices`, `--amb-retry-delay`, `--amb-max-cost`)
and hands them to the runner and the agent registry; the agent loop sums tokens, API calls and
retries over turns and asks `cost_fn` for the cost so far after every turn.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..agents.base import AgentError
from ..agents.registry import LLM_KINDS  # --amb-model kinds whose model id is known before the run (priced at start)
from ..record.trace import Usage
from .pricing import Price, load_prices, price_for
from .pricing import cost_usd as _cost_usd
from .retry import RetryPolicy

CostFn = Callable[[str | None, Usage], float | None]


def make_cost_fn(prices: Mapping[str, Price]) -> CostFn:
    """USD of a run's usage so far; None when the model has no price (never a guess).

    An agent without a model that spent no tokens (reference, null, script:) costs 0; an agent
    that reports tokens but no model id has an unknown cost.
    """

    def cost_fn(model_id: str | None, usage: Usage) -> float | None:
        if model_id is None:
            return 0.0 if usage.total() == 0 else None
        cost = _cost_usd(model_id, usage, prices)
        return None if cost is None else round(cost, 10)

    return cost_fn


class UnpricedModelError(AgentError):
    """--amb-max-cost was given for a model without a price (its cost cannot be capped)."""


def unpriced_message(model_id: str | None, prices: Mapping[str, Price], max_cost: float | None = None) -> str | None:
    """The warning for a model with no price, or None when it has one (or no model at all).

    Raises `UnpricedModelError` instead when a cost cap (``max_cost``) is set.
    """
    if model_id is None or price_for(model_id, prices) is not None:
        return None
    if max_cost is not None:
        raise UnpricedModelError(f"--amb-max-cost: model {model_id!r} has no price, so its cost cannot be "
                                 "capped; give one with --amb-prices=FILE")
    from ..tasks.suites import did_you_mean

    return (f"automedbench: no price for model {model_id!r}{did_you_mean(model_id, prices)}: cost_usd will be "
            f"null (unknown); add it with --amb-prices=FILE (see docs/agents.md)")


def llm_options(retry_base_delay: float | None) -> dict[str, Any]:
    """Constructor options for the built-in LLM agents (claude, gpt, openai:)."""
    if retry_base_delay is None:
        return {}
    return {"retry": RetryPolicy(base_delay=retry_base_delay)}


__all__ = ["LLM_KINDS", "CostFn", "UnpricedModelError", "llm_options", "load_prices", "make_cost_fn", "unpriced_message"]
