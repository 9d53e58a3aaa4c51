"""The anthropic / openai agent backends, the retry policy and pricing.

The agents run their REAL SDK code paths against MockLLMServer on 127.0.0.1; sleeping is
injected so retries cost no time.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import anthropic
import pytest

from pytest_automedbench.llm import pricing
from pytest_automedbench.llm.anthropic_client import (
    CLAUDE_DEFAULT_MODEL,
    CONTINUE_PROMPT,
    AnthropicAgent,
    to_anthropic_messages,
)
from pytest_automedbench.agents.base import TOOLS, AgentError, ToolCall
from pytest_automedbench.record.trace import Usage
from pytest_automedbench.llm.openai_client import (
    GPT_DEFAULT_MODEL,
    PLACEHOLDER_API_KEY,
    OpenAIAgent,
    parse_arguments,
)
from pytest_automedbench.llm.pricing import PriceFileError, cost_usd, load_prices
from pytest_automedbench.llm.retry import LLMAPIError, RetryPolicy, classify, parse_retry_after
from pytest_automedbench.testing import MockLLMServer

CODE_ARGS = {"language": "python", "code": "print('hello')"}
CALL = {"name": "execute_code", "arguments": CODE_ARGS}

CONVERSATION = [
    {"role": "system", "content": "You are a careful medical-AI research agent."},
    {"role": "user", "content": "Segment the liver in /data/public."},
]

LONG_CONVERSATION = CONVERSATION + [
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "t1", "name": "execute_code", "arguments": {"language": "bash", "code": "ls /data/public"}},
        {"id": "t2", "name": "execute_code", "arguments": {"language": "bash", "code": "nproc"}},
    ]},
    {"role": "tool", "tool_call_id": "t1", "name": "execute_code", "content": "ct_001.nii.gz"},
    {"role": "tool", "tool_call_id": "t2", "name": "execute_code", "content": "2"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "t3", "name": "execute_code", "arguments": {"language": "python", "code": "import monai"}},
    ]},
    {"role": "tool", "tool_call_id": "t3", "name": "execute_code", "content": ""},
]


class Sleeps(list):
    """An injectable sleep that records instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def policy(sleeps) -> RetryPolicy:
    return RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=8, sleep=sleeps, rng=random.Random(0))


@pytest.fixture
def server():
    with MockLLMServer() as srv:
        yield srv


def claude(server: MockLLMServer, policy: RetryPolicy, **kw) -> AnthropicAgent:
    client = anthropic.Anthropic(api_key="test-key", base_url=server.anthropic_base_url, max_retries=0, timeout=5)
    return AnthropicAgent("claude-sonnet-4-6", client=client, retry=policy, **kw)


def gpt(server: MockLLMServer, policy: RetryPolicy, **kw) -> OpenAIAgent:
    return OpenAIAgent("gpt-4.1", base_url=server.openai_base_url, api_key="test-key", retry=policy, timeout=5, **kw)


def n_breakpoints(body: dict) -> int:
    return json.dumps(body).count('"cache_control"')


# ------------------------------------------------------------------------------------------
# Anthropic


def test_anthropic_tool_call_parsed_into_toolcall(server, policy):
    server.add({"text": "Running code.", "tool_calls": [CALL], "usage": {"input": 50, "output": 10}})
    reply = claude(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.text == "Running code."
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert isinstance(call, ToolCall) and call.name == "execute_code" and call.arguments == CODE_ARGS
    assert call.id.startswith("toolu_")
    assert reply.stop_reason == "tool_use"
    assert reply.usage == Usage(input=50, output=10)
    assert (reply.api_calls, reply.retries) == (1, 0)


def test_anthropic_request_shape_and_cache_breakpoints(server, policy):
    server.add({"text": "ok"})
    claude(server, policy).respond(LONG_CONVERSATION, TOOLS)
    body = server.requests[0]["json"]
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 4096
    assert "temperature" not in body  # anthropic 2.x has no temperature parameter
    # system separated, with a breakpoint
    assert body["system"][-1]["text"] == CONVERSATION[0]["content"]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    # tools as input_schema, breakpoint on the last one
    assert [t["name"] for t in body["tools"]] == ["execute_code", "submit_results"]
    assert body["tools"][0]["input_schema"] == TOOLS[0]["parameters"]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    # assistant tool_calls -> tool_use blocks
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert msgs[1]["content"][1]["input"] == {"language": "bash", "code": "ls /data/public"}
    # consecutive tool results merged into one user message
    assert [(b["type"], b["tool_use_id"]) for b in msgs[2]["content"]] == [("tool_result", "t1"), ("tool_result", "t2")]
    # breakpoint on the last block of the conversation and of the previous user turn
    assert msgs[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert msgs[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert n_breakpoints(body) == 4


def test_anthropic_breakpoints_never_exceed_four_and_move_with_the_conversation(server, policy):
    server.add({"text": "a"}, {"text": "b"})
    agent = claude(server, policy)
    agent.respond(CONVERSATION, TOOLS)
    agent.respond(LONG_CONVERSATION, TOOLS)
    first, second = (r["json"] for r in server.requests)
    assert n_breakpoints(first) == 3  # tools, system, the only user turn
    assert n_breakpoints(second) == 4
    # the first request's last block is the second's first user block: its prefix is cached
    assert first["messages"][0]["content"][-1]["text"] == second["messages"][0]["content"][-1]["text"]


def test_anthropic_explicit_temperature_is_sent(server, policy):
    server.add({"text": "ok"})
    claude(server, policy, temperature=0.0).respond(CONVERSATION, TOOLS)
    assert server.requests[0]["json"]["temperature"] == 0


def test_anthropic_later_system_message_becomes_user_text():
    system, msgs = to_anthropic_messages(CONVERSATION + [{"role": "system", "content": "3 turns left"}])
    assert system == CONVERSATION[0]["content"]
    assert msgs == [{"role": "user", "content": [
        {"type": "text", "text": CONVERSATION[1]["content"]}, {"type": "text", "text": "3 turns left"}]}]


def test_anthropic_usage_summed_over_max_tokens_continuation(server, policy):
    server.add(
        {"text": "The plan: first ", "stop_reason": "max_tokens",
         "usage": {"input": 100, "output": 4096, "cache_read": 0, "cache_write": 900}},
        {"text": "load the CT, then run the model.", "tool_calls": [CALL],
         "usage": {"input": 10, "output": 30, "cache_read": 900, "cache_write": 50}},
    )
    reply = claude(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.text == "The plan: first load the CT, then run the model."
    assert [c.arguments for c in reply.tool_calls] == [CODE_ARGS]
    assert reply.usage == Usage(input=110, output=4126, cache_read=900, cache_write=950)
    assert reply.api_calls == 2 and reply.retries == 0
    assert reply.stop_reason == "tool_use"
    cont = server.requests[1]["json"]["messages"]
    assert cont[-2] == {"role": "assistant", "content": [{"type": "text", "text": "The plan: first "}]}
    assert cont[-1]["role"] == "user" and cont[-1]["content"][-1]["text"] == CONTINUE_PROMPT


def test_anthropic_continuation_is_bounded(server, policy):
    truncated = {"text": "more ", "stop_reason": "max_tokens", "usage": {"input": 1, "output": 1}}
    server.add(*[truncated] * 10)
    reply = claude(server, policy, max_continuations=2).respond(CONVERSATION, TOOLS)
    assert reply.api_calls == 3 and len(server.requests) == 3
    assert reply.text == "more more more "
    assert reply.stop_reason == "max_tokens" and reply.tool_calls == []
    assert reply.usage == Usage(input=3, output=3)


def test_anthropic_truncated_tool_call_is_not_returned(server, policy):
    server.add(
        {"tool_calls": [{"name": "execute_code", "arguments": {"language": "python"}}], "stop_reason": "max_tokens"},
        {"tool_calls": [CALL]},
    )
    reply = claude(server, policy).respond(CONVERSATION, TOOLS)
    assert [c.arguments for c in reply.tool_calls] == [CODE_ARGS] and reply.api_calls == 2


def test_anthropic_429_retry_after_then_success(server, policy, sleeps):
    server.add({"status": 429, "retry_after": 2, "message": "rate limited"}, {"text": "ok", "usage": {"input": 5, "output": 1}})
    reply = claude(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.text == "ok"
    assert reply.retries == 1 and reply.api_calls == 2
    assert sleeps == [2.0]  # Retry-After honoured
    assert reply.usage == Usage(input=5, output=1)
    # the SDK did not retry on its own: exactly our two requests
    assert len(server.requests) == 2


def test_anthropic_500_beyond_the_bound_raises_agent_error(server, policy, sleeps):
    server.add(*[{"status": 500, "message": "internal boom"}] * 6)
    with pytest.raises(AgentError) as err:
        claude(server, policy).respond(CONVERSATION, TOOLS)
    exc = err.value
    assert isinstance(exc, LLMAPIError) and exc.transient and exc.kind == "server"
    assert exc.attempts == 4 and exc.retries == 3 and exc.status_code == 500
    assert "internal boom" in str(exc) and "4 attempt" in str(exc)
    assert len(server.requests) == 4 and len(sleeps) == 3
    # exponential backoff with full jitter: each delay within [0, min(max, base * 2**i)]
    assert all(0 <= s <= min(8, 0.5 * 2 ** i) for i, s in enumerate(sleeps))


def test_anthropic_401_is_not_retried(server, policy, sleeps):
    server.add({"status": 401, "message": "invalid x-api-key"}, {"text": "never"})
    with pytest.raises(AgentError) as err:
        claude(server, policy).respond(CONVERSATION, TOOLS)
    assert "invalid x-api-key" in str(err.value)
    assert err.value.kind == "auth" and err.value.status_code == 401 and not err.value.transient
    assert err.value.retries == 0 and len(server.requests) == 1 and sleeps == []


def test_anthropic_connection_reset_is_retried(server, policy):
    server.add({"disconnect": True}, {"text": "ok"})
    reply = claude(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.text == "ok" and reply.retries == 1 and reply.api_calls == 2


def test_anthropic_error_keeps_usage_spent_before_it(server, policy):
    server.add({"text": "a", "stop_reason": "max_tokens", "usage": {"input": 7, "output": 9}},
               {"status": 400, "message": "prompt is too long: 210000 tokens > 200000 maximum"})
    with pytest.raises(LLMAPIError) as err:
        claude(server, policy).respond(CONVERSATION, TOOLS)
    assert err.value.kind == "context_length"
    assert err.value.usage == Usage(input=7, output=9) and err.value.api_calls == 2


def test_anthropic_env_vars_and_default_model(server, policy, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    server.add({"text": "hi"})
    agent = AnthropicAgent("claude", retry=policy)
    assert agent.model_id == CLAUDE_DEFAULT_MODEL
    assert AnthropicAgent("claude:claude-opus-4-6").model_id == "claude-opus-4-6"
    assert agent.respond(CONVERSATION, TOOLS).text == "hi"
    req = server.requests[0]
    assert req["path"] == "/v1/messages" and req["json"]["model"] == CLAUDE_DEFAULT_MODEL
    assert "env-key" in (req["headers"].get("authorization", "") + req["headers"].get("x-api-key", ""))
    assert agent.client.max_retries == 0


def test_anthropic_missing_credentials_is_an_agent_error(server, policy, monkeypatch, tmp_path):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_IDENTITY_TOKEN",
                "ANTHROPIC_IDENTITY_TOKEN_FILE", "ANTHROPIC_FEDERATION_RULE_ID", "ANTHROPIC_ORGANIZATION_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("ANTHROPIC_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    with pytest.raises(AgentError, match="ANTHROPIC_API_KEY") as err:
        AnthropicAgent("claude", retry=policy).respond(CONVERSATION, TOOLS)
    assert err.value.kind == "auth" and server.requests == []


def test_timeout_is_retried(server, policy):
    server.add({"text": "slow", "delay": 0.6}, {"text": "fast"})
    client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0, timeout=0.2)
    reply = AnthropicAgent("claude-sonnet-4-6", client=client, retry=policy).respond(CONVERSATION, TOOLS)
    assert reply.text == "fast" and reply.retries == 1 and reply.api_calls == 2


# ------------------------------------------------------------------------------------------
# OpenAI


def test_openai_tool_call_and_usage(server, policy):
    server.add({"text": "", "tool_calls": [CALL], "usage": {"input": 300, "output": 40, "cache_read": 700}})
    reply = gpt(server, policy).respond(LONG_CONVERSATION, TOOLS)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("execute_code", CODE_ARGS)]
    assert reply.stop_reason == "tool_use"
    # prompt_tokens (1000) includes the cached 700: uncached input is 300
    assert reply.usage == Usage(input=300, output=40, cache_read=700)
    body = server.requests[0]["json"]
    assert body["model"] == "gpt-4.1" and body["temperature"] == 0
    assert body["max_tokens"] == 4096 and "max_completion_tokens" not in body  # not api.openai.com
    assert body["tools"][0] == {"type": "function", "function": {
        "name": "execute_code", "description": TOOLS[0]["description"], "parameters": TOOLS[0]["parameters"]}}
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert json.loads(msgs[2]["tool_calls"][0]["function"]["arguments"]) == {"language": "bash", "code": "ls /data/public"}
    assert msgs[5]["content"] is None and msgs[3]["tool_call_id"] == "t1"


def test_openai_base_url_override_via_env(server, policy, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.add({"text": "local model here"})
    agent = OpenAIAgent("openai:qwen2.5-coder", retry=policy)
    assert agent.respond(CONVERSATION, TOOLS).text == "local model here"
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["json"]["model"] == "qwen2.5-coder"
    assert req["headers"]["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"  # local servers need no key
    assert agent.client.max_retries == 0


def test_openai_key_from_env_and_default_model(server, policy, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.add({"text": "hi"})
    agent = OpenAIAgent("gpt", retry=policy)
    assert agent.model_id == GPT_DEFAULT_MODEL
    agent.respond(CONVERSATION, TOOLS)
    req = server.requests[0]
    assert req["headers"]["authorization"] == "Bearer sk-env"
    assert "temperature" not in req["json"]  # reasoning models refuse temperature 0


def test_openai_missing_key_for_openai_itself_is_an_agent_error(policy, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(AgentError, match="OPENAI_API_KEY"):
        OpenAIAgent("gpt-4.1", retry=policy).respond(CONVERSATION, TOOLS)


def test_openai_invalid_json_arguments_are_returned_not_raised(server, policy, sleeps):
    server.add({"tool_calls": [{"name": "execute_code", "arguments": '{"language": "python", "code": "print(1)'},
                               {"name": "submit_results", "arguments": ""}]})
    reply = gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.tool_calls[0].arguments == {"__invalid_json__": '{"language": "python", "code": "print(1)'}
    assert reply.tool_calls[1].arguments == {}
    assert reply.api_calls == 1 and reply.retries == 0 and sleeps == []


def test_parse_arguments_edge_cases():
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("[1, 2]") == {"__invalid_json__": "[1, 2]"}
    assert parse_arguments(None) == {} and parse_arguments("  ") == {}
    assert parse_arguments({"a": 1}) == {"a": 1}


def test_openai_length_continuation(server, policy):
    server.add(
        {"text": "Step one, ", "stop_reason": "length", "usage": {"input": 10, "output": 100}},
        {"text": "step two.", "usage": {"input": 12, "output": 3, "cache_read": 8}},
    )
    reply = gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.text == "Step one, step two."
    assert reply.usage == Usage(input=22, output=103, cache_read=8)
    assert reply.api_calls == 2 and reply.stop_reason == "end_turn"
    msgs = server.requests[1]["json"]["messages"]
    assert msgs[-2] == {"role": "assistant", "content": "Step one, "}
    assert msgs[-1] == {"role": "user", "content": CONTINUE_PROMPT}


def test_openai_truncated_invalid_json_call_is_continued(server, policy):
    server.add({"tool_calls": [{"name": "execute_code", "arguments": '{"language": "py'}], "stop_reason": "length"},
               {"tool_calls": [CALL]})
    reply = gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert [c.arguments for c in reply.tool_calls] == [CODE_ARGS] and reply.api_calls == 2


def test_openai_429_then_success_and_503_bound(server, policy, sleeps):
    server.add({"status": 429, "retry_after": 1, "message": "Rate limit reached"}, {"text": "ok"})
    reply = gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert reply.retries == 1 and reply.api_calls == 2 and sleeps == [1.0]
    server.add(*[{"status": 503, "message": "overloaded"}] * 4)
    with pytest.raises(AgentError, match="overloaded"):
        gpt(server, policy).respond(CONVERSATION, TOOLS)


def test_openai_401_not_retried_and_quota_429_not_retried(server, policy, sleeps):
    server.add({"status": 401, "message": "Incorrect API key provided: sk-bad"})
    with pytest.raises(AgentError, match="Incorrect API key provided") as err:
        gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert err.value.kind == "auth" and len(server.requests) == 1
    server.add({"status": 429, "code": "insufficient_quota", "message": "You exceeded your current quota"})
    with pytest.raises(AgentError, match="exceeded your current quota") as err:
        gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert err.value.kind == "quota" and len(server.requests) == 2 and sleeps == []


def test_openai_token_param_for_openai_host():
    agent = OpenAIAgent("gpt-4.1", base_url="https://api.openai.com/v1", api_key="sk-x")
    body = agent._request(CONVERSATION, TOOLS)
    assert body["max_completion_tokens"] == 4096 and "max_tokens" not in body


# ------------------------------------------------------------------------------------------
# retry policy (unit)


def test_retry_after_beyond_the_allowed_wait_fails_fast(server, sleeps):
    server.add({"status": 429, "retry_after": 86400, "message": "daily limit"})
    policy = RetryPolicy(sleep=sleeps, max_retry_after=60)
    with pytest.raises(LLMAPIError, match="retry after 86400 s"):
        gpt(server, policy).respond(CONVERSATION, TOOLS)
    assert sleeps == []


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert 0 <= parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None


def test_non_api_exceptions_propagate_unchanged(sleeps):
    def boom():
        raise KeyError("bug")

    assert classify(KeyError("x")) is None
    with pytest.raises(KeyError):
        RetryPolicy(sleep=sleeps).call(boom)
    assert sleeps == []


def test_backoff_caps_at_max_delay():
    policy = RetryPolicy(base_delay=1, max_delay=5, rng=random.Random(1))
    assert all(0 <= policy.delay(i) <= min(5, 2 ** i) for i in range(20))


# ------------------------------------------------------------------------------------------
# pricing


def test_known_model_cost_is_tokens_times_price():
    prices = load_prices()
    p = prices["claude-sonnet-4-5"]
    usage = Usage(input=1_000_000, output=2_000_000, cache_read=4_000_000, cache_write=500_000)
    expected = (1_000_000 * p.input + 2_000_000 * p.output + 4_000_000 * p.cache_read
                + 500_000 * p.cache_write) / 1_000_000
    assert cost_usd("claude-sonnet-4-5", usage) == expected
    assert expected == pytest.approx(3 + 2 * 15 + 4 * 0.30 + 0.5 * 3.75)  # the table's list prices
    assert cost_usd("claude-sonnet-4-5", Usage(input=1_000_000)) == p.input
    assert cost_usd("claude-sonnet-4-5", usage.as_dict()) == cost_usd("claude-sonnet-4-5", usage)
    # a dated id falls back to its undated entry; every default model is priced
    assert cost_usd("claude-sonnet-4-5-20250929", usage) == cost_usd("claude-sonnet-4-5", usage)
    assert cost_usd(CLAUDE_DEFAULT_MODEL, usage) is not None
    assert cost_usd(GPT_DEFAULT_MODEL, usage) is not None


def test_unknown_model_cost_is_none():
    assert cost_usd("my-mystery-model", Usage(input=10, output=10)) is None
    assert cost_usd(None, Usage()) is None


def test_user_price_file_overrides_and_extends(tmp_path: Path):
    f = tmp_path / "prices.yaml"
    f.write_text("models:\n  claude-sonnet-4-5: {output: 20}\n  local-llama: {input: 0.5, output: 1}\n")
    prices = load_prices(f)
    builtin = load_prices()
    assert prices["claude-sonnet-4-5"].output == 20
    assert prices["claude-sonnet-4-5"].input == builtin["claude-sonnet-4-5"].input  # merged field by field
    assert prices["local-llama"].cache_read == 0.5  # defaults to the input price
    assert cost_usd("local-llama", Usage(input=2_000_000, output=1_000_000), prices) == 2.0
    assert builtin["claude-sonnet-4-5"].output == 15  # the built-in table is not mutated
    j = tmp_path / "prices.json"
    j.write_text(json.dumps({"gpt-4.1": {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1}}))
    assert load_prices(j)["gpt-4.1"].output == 2


@pytest.mark.parametrize("content,needle", [
    ("models:\n  gpt-4.1: {input: cheap}\n", "models.gpt-4.1.input: expected a non-negative number"),
    ("models:\n  gpt-4.1: {input: -1}\n", "models.gpt-4.1.input"),
    ("models:\n  gpt-4.1: {cached_input: 1}\n", "models.gpt-4.1: unknown field(s) cached_input"),
    ("models:\n  new-model: {input: 1}\n", "models.new-model.output: required"),
    ("models: [1, 2]\n", "models: expected a mapping"),
    ("", "got an empty file"),
    ("models: {a: {input: 1, output: 1}}\ncurrency: EUR\n", "currency: only USD"),
    ("models: {a: [", "not valid YAML"),
])
def test_bad_price_file_error_names_file_and_field(tmp_path: Path, content, needle):
    f = tmp_path / "my-prices.yaml"
    f.write_text(content)
    with pytest.raises(PriceFileError) as err:
        load_prices(f)
    assert str(f) in str(err.value) and needle in str(err.value)


def test_missing_price_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(PriceFileError, match="cannot read price file"):
        load_prices(tmp_path / "nope.yaml")


def test_builtin_table_is_complete():
    prices = load_prices()
    assert pricing.BUILTIN_PRICES_FILE.exists()
    for model, p in prices.items():
        assert p.input > 0 and p.output >= p.input, model
        assert p.cache_read <= p.input, model
