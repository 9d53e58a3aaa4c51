"""The retry policy shared by the LLM backends (anthropic, openai).

One policy, ours, so every retry is bounded and counted (the SDK clients are built with
``max_retries=0``):

- transient faults -- HTTP 408, 409, 429, any 5xx (incl. Anthropic's 529 "overloaded"),
  connection errors / resets and timeouts -- are retried with exponential backoff and full jitter
  (``uniform(0, min(max_delay, base_delay * 2**retry))``), honouring a ``Retry-After`` header
  (seconds, ``retry-after-ms``, or an HTTP date) up to ``max_retry_after``; a server asking for a
  longer wait than that (e.g. a daily quota) fails at once instead of blocking the test;
- everything else the API refuses (400, 401, 402, 403, 404, 413, 422, ..., and OpenAI's
  ``insufficient_quota`` 429) raises `LLMAPIError` (an `AgentError`) at once with the API's own
  message -- these are never retried;
- a reply the client cannot understand -- a body that is not JSON, or JSON of the wrong shape
  (`MalformedReply`, raised by the agents while reading it) -- is transient (kind ``malformed``):
  proxies and overloaded servers send HTML error pages and truncated bodies with status 200;
- after ``max_attempts`` attempts the last transient fault raises `LLMAPIError`;
- with ``time_left`` (seconds left in the run), no attempt starts and no backoff sleeps past the
  end of the run: the call raises `LLMAPIError` of kind ``time_limit`` instead.

`LLMAPIError.kind` says what broke (``auth``, ``permission``, ``bad_request``, ``not_found``,
``context_length``, ``quota``, ``rate_limit``, ``server``, ``connection``, ``timeout``,
``malformed``, ``time_limit``, ``client``) so the caller can, for example, treat ``context_length`` as the agent's own fault.
HTTP 413 (the request is too large) is ``context_length`` too: the conversation the agent grew, the agent's.
`upstream_signature` says which kinds are the upstream's side failing (infrastructure: no connection,
a timeout, a 5xx, a 429 after the retries, the harness's key or account refused) and names the
failure so a session can count identical outages (``kind status url``).

The sleep function and the random source are injectable so tests take no time::

    policy = RetryPolicy(sleep=lambda s: None)
"""
from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from ..agents.base import AgentError

__all__ = ["RetryPolicy", "CallStats", "Fault", "LLMAPIError", "MalformedReply", "classify", "parse_retry_after",
           "upstream_signature"]

log = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 409, 429})  # plus every status >= 500

_STATUS_KIND = {
    400: "bad_request", 401: "auth", 402: "quota", 403: "permission", 404: "not_found",
    408: "timeout", 409: "server", 413: "context_length", 422: "bad_request", 429: "rate_limit",
}

_CONTEXT_MARKERS = (
    "context_length_exceeded", "context length", "context window", "prompt is too long",
    "maximum context", "too many tokens", "input is too long",
)


class LLMAPIError(AgentError):
    """An LLM API call failed for good (refused, or transient faults beyond the retry bound).

    Attributes: ``kind`` (see module doc), ``status_code`` (None for connection faults),
    ``api_message`` (the API's own words), ``transient`` (True when retries ran out),
    ``attempts`` / ``retries`` of the failed call, ``api_calls`` (every request of the failed
    `respond`, continuations included) and ``usage`` -- a `base.Usage` of the tokens already spent
    by earlier calls of the same `respond` (set by the agents, else None).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status_code: int | None = None,
        api_message: str | None = None,
        transient: bool = False,
        attempts: int = 0,
        retries: int = 0,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code
        self.api_message = api_message
        self.transient = transient
        self.attempts = attempts
        self.retries = retries
        self.api_calls = attempts  # the agents set it to all requests of the failed `respond`
        self.usage = None  # set by the agents: a base.Usage of the tokens spent before the failure
        self.url: str | None = None  # the API's base URL (set by the agents)


#: LLMAPIError kinds that are the upstream's side failing -> the gateway's names (gateway/runs.UPSTREAM_KINDS).
_UPSTREAM = {"connection": "connect", "timeout": "timeout", "server": "http_5xx", "malformed": "http_5xx",
             "rate_limit": "http_429", "auth": "auth", "permission": "auth", "quota": "auth"}


def upstream_signature(exc: BaseException) -> str | None:
    """``kind status url`` of a failure on the upstream's side (an infrastructure error), else None.

    A bridged agent's `UpstreamError` carries its own ``signature``; an `LLMAPIError` of an upstream
    kind gets one here; anything else (a refused request, a time limit, a bug) is None."""
    own = getattr(exc, "signature", None)
    if isinstance(own, str):
        return own
    if not isinstance(exc, LLMAPIError) or exc.kind not in _UPSTREAM:
        return None
    return " ".join(str(p) for p in (_UPSTREAM[exc.kind], exc.status_code, exc.url) if p)


class MalformedReply(Exception):
    """An API reply arrived but cannot be read (not JSON, or not the shape the vendor documents)."""


@dataclass
class Fault:
    """What `classify` makes of an exception."""

    transient: bool
    kind: str
    message: str
    status_code: int | None = None
    error_type: str | None = None
    retry_after: float | None = None

    def describe(self) -> str:
        head = f"HTTP {self.status_code}" if self.status_code is not None else self.kind
        if self.error_type:
            head += f" {self.error_type}"
        return f"{head}: {self.message}"


@dataclass
class CallStats:
    """Counters one `respond` accumulates over its API calls (continuations included)."""

    api_calls: int = 0  # requests sent, retries included
    retries: int = 0  # transient faults retried


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date), or None."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    parsed = email.utils.parsedate_tz(str(value))
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed) - time.time()))


def _api_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"]:
            return err["message"]
        if isinstance(err, str) and err:
            return err
    elif isinstance(body, str) and body.strip():
        return body.strip()[:2000]
    for attr in ("api_message", "message"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value:
            return value
    return str(exc) or type(exc).__name__


def _error_fields(exc: BaseException) -> tuple[str | None, str | None]:
    """(error type, error code) from either vendor's error body."""
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        return None, None
    err = body.get("error", body)
    if not isinstance(err, dict):
        return None, None
    etype = err.get("type") if isinstance(err.get("type"), str) else None
    code = err.get("code") if isinstance(err.get("code"), str) else None
    return etype, code


def _sdk_types() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """(connection error types, timeout error types, SDK base error types) of installed SDKs."""
    conn: list[type] = [ConnectionError]
    timeout: list[type] = [TimeoutError]
    base: list[type] = []
    try:
        import anthropic

        conn.append(anthropic.APIConnectionError)
        timeout.append(anthropic.APITimeoutError)
        base.append(anthropic.AnthropicError)
    except ImportError:  # pragma: no cover - both SDKs are dependencies
        pass
    try:
        import openai

        conn.append(openai.APIConnectionError)
        timeout.append(openai.APITimeoutError)
        base.append(openai.OpenAIError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(conn), tuple(timeout), tuple(base)


def classify(exc: BaseException) -> Fault | None:
    """Classify an SDK / network exception; None when it is not an API fault at all."""
    conn_types, timeout_types, base_types = _sdk_types()
    if isinstance(exc, (MalformedReply, json.JSONDecodeError)):  # the SDKs raise the latter for a non-JSON body
        return Fault(True, "malformed", f"the reply is not a readable API response: {str(exc)[:300]}")
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if isinstance(status, int) and not isinstance(status, bool) and response is not None:
        message = _api_message(exc)
        etype, code = _error_fields(exc)
        retry_after = parse_retry_after(getattr(response, "headers", None))
        lowered = f"{message} {code or ''}".lower()
        if code == "insufficient_quota" or etype == "billing_error":
            return Fault(False, "quota", message, status, etype or code, retry_after)
        if status in TRANSIENT_STATUS or status >= 500:
            kind = _STATUS_KIND.get(status, "server")
            return Fault(True, kind, message, status, etype, retry_after)
        kind = _STATUS_KIND.get(status, "bad_request")
        if kind == "bad_request" and any(m in lowered for m in _CONTEXT_MARKERS):
            kind = "context_length"
        return Fault(False, kind, message, status, etype, retry_after)
    if isinstance(exc, timeout_types):
        return Fault(True, "timeout", _api_message(exc))
    if isinstance(exc, conn_types):
        return Fault(True, "connection", _api_message(exc))
    if base_types and isinstance(exc, base_types):
        # e.g. missing credentials, a reply the SDK cannot parse: not retried.
        return Fault(False, "client", _api_message(exc))
    return None


@dataclass
class RetryPolicy:
    """Bounded exponential backoff with full jitter (see module doc).

    ``max_attempts`` counts the first try: 6 means at most 5 retries.
    """

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 300.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    on_retry: Callable[[Fault, int, float], None] | None = None  # (fault, attempt, delay)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy delays must be >= 0")

    def delay(self, retry_index: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based)."""
        if retry_after is not None:
            return retry_after
        cap = min(self.max_delay, self.base_delay * (2.0 ** min(retry_index, 60)))
        return self.rng.uniform(0.0, cap)

    def call(self, fn: Callable[[], T], *, what: str = "LLM API request", stats: CallStats | None = None,
             time_left: Callable[[], float] | None = None) -> T:
        """Run ``fn`` until it succeeds, retrying transient faults; count into ``stats``.

        Raises `LLMAPIError` for a refused request, when the attempts run out, or (kind
        ``time_limit``) when ``time_left()`` says the run has no time for another attempt or wait;
        exceptions that are not API faults (bugs) propagate unchanged.
        """
        stats = stats if stats is not None else CallStats()
        attempt = 0
        retries = 0
        fault: Fault | None = None
        while True:
            if time_left is not None and time_left() <= 0:
                raise self._out_of_time(what, fault, attempt, retries)
            attempt += 1
            stats.api_calls += 1
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified below
                fault = classify(exc)
                if fault is None:
                    raise
                if not fault.transient:
                    raise self._error(f"{what} refused ({fault.describe()}); not retried", fault,
                                      attempt, retries) from exc
                if attempt >= self.max_attempts:
                    raise self._error(
                        f"{what} failed after {attempt} attempt(s) ({retries} retries); last error: "
                        f"{fault.describe()}", fault, attempt, retries) from exc
                if fault.retry_after is not None and fault.retry_after > self.max_retry_after:
                    raise self._error(
                        f"{what} failed: the API asked to retry after {fault.retry_after:.0f} s, more than "
                        f"the {self.max_retry_after:.0f} s allowed; last error: {fault.describe()}",
                        fault, attempt, retries) from exc
                wait = self.delay(retries, fault.retry_after)
                if time_left is not None and wait >= time_left():
                    raise self._out_of_time(what, fault, attempt, retries) from exc
                retries += 1
                stats.retries += 1
                log.warning("%s: %s; retry %d/%d in %.1f s", what, fault.describe(), retries,
                            self.max_attempts - 1, wait)
                if self.on_retry is not None:
                    self.on_retry(fault, attempt, wait)
                if wait > 0:
                    self.sleep(wait)

    def _out_of_time(self, what: str, fault: Fault | None, attempts: int, retries: int) -> LLMAPIError:
        last = f"; last error: {fault.describe()}" if fault else ""
        return self._error(f"{what}: the run's time limit came first ({attempts} attempt(s), {retries} "
                           f"retries){last}", Fault(True, "time_limit", fault.message if fault else "no time left",
                                                    fault.status_code if fault else None), attempts, retries)

    @staticmethod
    def _error(message: str, fault: Fault, attempts: int, retries: int) -> LLMAPIError:
        return LLMAPIError(
            message,
            kind=fault.kind,
            status_code=fault.status_code,
            api_message=fault.message,
            transient=fault.transient,
            attempts=attempts,
            retries=retries,
        )
