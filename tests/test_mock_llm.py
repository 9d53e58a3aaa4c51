"""MockLLMServer: both wire formats, faults, recording, script files and the CLI.

Everything runs against 127.0.0.1; the real openai / anthropic SDKs are the clients.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import openai
import pytest

from pytest_automedbench.testing import MockLLMServer, ScriptError, load_script

TOOL_CALL = {"name": "execute_code", "arguments": {"language": "python", "code": "print(1)"}}


def post(url: str, body: dict) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "X-Test": "yes"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def oa_client(server: MockLLMServer) -> openai.OpenAI:
    return openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0, timeout=5)


def an_client(server: MockLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=server.anthropic_base_url, max_retries=0, timeout=5)


def test_openai_wire_format_tool_call_and_usage():
    script = [{"text": "Looking.", "tool_calls": [TOOL_CALL],
               "usage": {"input": 100, "output": 20, "cache_read": 50, "cache_write": 7}}]
    with MockLLMServer(script) as server:
        resp = oa_client(server).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Looking."
    call = choice.message.tool_calls[0]
    assert call.function.name == "execute_code"
    assert json.loads(call.function.arguments) == TOOL_CALL["arguments"]
    assert resp.usage.prompt_tokens == 157  # input + cache_read + cache_write
    assert resp.usage.completion_tokens == 20
    assert resp.usage.prompt_tokens_details.cached_tokens == 50
    assert resp.model == "gpt-test"


def test_anthropic_wire_format_tool_use_and_usage():
    script = [{"text": "Looking.", "tool_calls": [TOOL_CALL],
               "usage": {"input": 100, "output": 20, "cache_read": 50, "cache_write": 7}}]
    with MockLLMServer(script) as server:
        msg = an_client(server).messages.create(
            model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        assert server.requests[0]["path"] == "/v1/messages"
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[1].name == "execute_code" and msg.content[1].input == TOOL_CALL["arguments"]
    assert msg.usage.input_tokens == 100
    assert msg.usage.output_tokens == 20
    assert msg.usage.cache_read_input_tokens == 50
    assert msg.usage.cache_creation_input_tokens == 7


def test_stop_reason_max_tokens_maps_to_each_vendor():
    entry = {"text": "cut", "stop_reason": "max_tokens"}
    with MockLLMServer([entry, entry]) as server:
        assert oa_client(server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]).choices[0].finish_reason == "length"
        assert an_client(server).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]).stop_reason == "max_tokens"


def test_entries_consumed_in_order_across_apis_then_default_text():
    with MockLLMServer([{"text": "one"}, {"text": "two"}]) as server:
        assert oa_client(server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]).choices[0].message.content == "one"
        msg = an_client(server).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert msg.content[0].text == "two"
        assert server.remaining == 0
        last = oa_client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert last.choices[0].message.content == "Done."
        assert not last.choices[0].message.tool_calls
        assert last.choices[0].finish_reason == "stop"
        assert last.usage.prompt_tokens > 0  # estimated, never silently zero


def test_default_reply_and_responder():
    seen = []

    def responder(body, api):
        seen.append(api)
        return {"text": f"dyn:{body['model']}"} if body["model"] == "dynamic" else None

    with MockLLMServer([], default={"text": "fallback"}, responder=responder) as server:
        c = oa_client(server)
        assert c.chat.completions.create(
            model="dynamic", messages=[{"role": "user", "content": "x"}]).choices[0].message.content == "dyn:dynamic"
        assert c.chat.completions.create(
            model="other", messages=[{"role": "user", "content": "x"}]).choices[0].message.content == "fallback"
    assert seen == ["openai", "openai"]


@pytest.mark.parametrize("api,path", [("openai", "/v1/chat/completions"), ("anthropic", "/v1/messages")])
def test_fault_bodies_have_vendor_shape_and_retry_after(api, path):
    with MockLLMServer([{"status": 429, "retry_after": 3, "message": "slow down"}]) as server:
        status, headers, body = post(server.url + path, {"model": "m"})
    assert status == 429
    assert headers["Retry-After"] == "3"
    if api == "openai":
        assert body["error"]["message"] == "slow down"
        assert body["error"]["type"] == "rate_limit_error"
        assert "code" in body["error"] and "param" in body["error"]
    else:
        assert body["type"] == "error"
        assert body["error"] == {"type": "rate_limit_error", "message": "slow down"}


def test_sdk_errors_carry_the_api_message():
    with MockLLMServer([{"status": 401, "message": "invalid x-api-key"},
                        {"status": 400, "message": "bad field", "code": "invalid_value"}]) as server:
        with pytest.raises(anthropic.AuthenticationError) as err:
            an_client(server).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert err.value.api_message == "invalid x-api-key"
        with pytest.raises(openai.BadRequestError) as err2:
            oa_client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert err2.value.code == "invalid_value"
        assert "bad field" in str(err2.value)


def test_disconnect_entry_is_a_connection_error():
    with MockLLMServer([{"disconnect": True}, {"text": "back"}]) as server:
        with pytest.raises(openai.APIConnectionError):
            oa_client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert oa_client(server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]).choices[0].message.content == "back"


def test_requests_are_recorded_with_path_headers_and_json():
    with MockLLMServer([{"text": "a"}]) as server:
        status, _, _ = post(server.openai_base_url + "/chat/completions", {"model": "m", "messages": []})
        status404, _, _ = post(server.url + "/v1/nothing", {})
        reqs = server.requests
    assert status == 200 and status404 == 404
    assert reqs[0]["api"] == "openai"
    assert reqs[0]["path"] == "/v1/chat/completions"
    assert reqs[0]["headers"]["x-test"] == "yes"
    assert reqs[0]["json"] == {"model": "m", "messages": []}
    assert reqs[0]["entry"] == {"text": "a"}
    assert reqs[1]["path"] == "/v1/nothing" and reqs[1]["api"] is None


def test_concurrent_requests_each_get_one_entry():
    n = 16
    with MockLLMServer([{"text": str(i)} for i in range(n)]) as server:
        got: list[str] = []
        lock = threading.Lock()

        def hit():
            _, _, body = post(server.openai_base_url + "/chat/completions", {"model": "m"})
            with lock:
                got.append(body["choices"][0]["message"]["content"])

        threads = [threading.Thread(target=hit) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(got, key=int) == [str(i) for i in range(n)]
        assert len(server.requests) == n and server.remaining == 0


def test_invalid_json_arguments_string_is_sent_verbatim():
    with MockLLMServer([{"tool_calls": [{"name": "execute_code", "arguments": '{"code": '}]}]) as server:
        resp = oa_client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert resp.choices[0].message.tool_calls[0].function.arguments == '{"code": '


def test_addresses_and_lifecycle():
    server = MockLLMServer()
    with pytest.raises(RuntimeError):
        server.url
    server.start()
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.port > 0
        assert server.openai_base_url == server.url + "/v1"
        assert server.anthropic_base_url == server.url  # the SDK appends /v1/messages
        assert server.env()["ANTHROPIC_BASE_URL"] == server.url
    finally:
        server.stop()
    server.stop()  # idempotent


@pytest.mark.parametrize("entry,needle", [
    ({"text": 3}, "entry 0: text"),
    ({"status": 200}, "entry 0: status"),
    ({"txt": "typo"}, "unknown field(s) txt"),
    ({"tool_calls": [{"arguments": {}}]}, "tool_calls[0]: name"),
    ({"usage": {"input": -1}}, "usage.input"),
    ({"stop_reason": "later"}, "stop_reason"),
])
def test_bad_entries_are_rejected_with_the_field(entry, needle):
    with pytest.raises(ScriptError) as err:
        MockLLMServer([entry])
    assert needle in str(err.value)


def test_load_script_yaml_and_json(tmp_path: Path):
    y = tmp_path / "s.yaml"
    y.write_text("script:\n  - text: hello\n  - status: 503\n    retry_after: 1\ndefault:\n  text: bye\n")
    entries, default = load_script(y)
    assert entries == [{"text": "hello"}, {"status": 503, "retry_after": 1}]
    assert default == {"text": "bye"}
    j = tmp_path / "s.json"
    j.write_text(json.dumps([{"tool_calls": [TOOL_CALL]}]))
    assert load_script(j) == ([{"tool_calls": [TOOL_CALL]}], None)
    with MockLLMServer.from_file(y) as server:
        texts = [post(server.openai_base_url + "/chat/completions", {"model": "m"})[2] for _ in range(3)]
    assert texts[0]["choices"][0]["message"]["content"] == "hello"
    assert texts[1]["error"]["type"] == "server_error"
    assert texts[2]["choices"][0]["message"]["content"] == "bye"


def test_load_script_errors_name_the_file_and_entry(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- text: ok\n- status: 429\n  retry_after: soon\n")
    with pytest.raises(ScriptError, match=r"bad\.yaml: entry 1: retry_after"):
        load_script(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(ScriptError, match=r"broken\.json: not valid JSON"):
        load_script(broken)


def test_cli_serves_a_script_file(tmp_path: Path):
    script = tmp_path / "script.yaml"
    script.write_text("- text: from the cli\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_automedbench.testing.mock_llm", "--script", str(script), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        line = proc.stdout.readline()
        assert line.startswith("MockLLMServer listening on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[3]
        _, _, body = post(url + "/v1/messages", {"model": "m"})
        assert body["content"][0]["text"] == "from the cli"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        proc.stdout.close()
        proc.stderr.close()


def test_cli_rejects_a_bad_script(tmp_path: Path):
    script = tmp_path / "script.yaml"
    script.write_text("- nonsense: 1\n")
    res = subprocess.run(
        [sys.executable, "-m", "pytest_automedbench.testing.mock_llm", "--script", str(script)],
        capture_output=True, text=True, timeout=30, cwd=Path(__file__).resolve().parents[1])
    assert res.returncode == 2
    assert "script.yaml: entry 0: unknown field(s) nonsense" in res.stderr


def test_mock_llm_fixture_points_both_sdks_at_the_server(mock_llm):
    """The plugin registers `mock_llm`: a running server, with the SDKs' variables pointing at it."""
    mock_llm.add({"text": "from openai"}, {"text": "from anthropic"})
    reply = openai.OpenAI(max_retries=0, timeout=5).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}])
    assert reply.choices[0].message.content == "from openai"
    msg = anthropic.Anthropic(max_retries=0, timeout=5).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert msg.content[0].text == "from anthropic"
    assert [r["api"] for r in mock_llm.requests] == ["openai", "anthropic"]


def test_streams_and_the_other_endpoints_read_by_the_real_sdks():
    """SSE of both wire formats and responses, embeddings, count_tokens and models, as the SDKs parse them."""
    import anthropic
    import openai

    from pytest_automedbench.testing.mock_llm import answer_by_request

    with MockLLMServer([
        {"text": "streamed text", "usage": {"input": 11, "output": 3, "cache_read": 2}},
        {"tool_calls": [{"name": "run", "arguments": {"code": "print(1)"}}], "usage": {"input": 5, "output": 7}},
        {"text": "a response", "usage": {"input": 9, "output": 4, "cache_read": 1}},
    ], responder=answer_by_request) as server:
        a = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="k", max_retries=0)
        with a.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            final = s.get_final_message()
        assert final.content[0].text == "streamed text"
        assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.cache_read_input_tokens) == (11, 3, 2)
        o = openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0)
        chunks = list(o.chat.completions.create(model="m", stream=True, stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "x"}]))
        args = "".join(c.choices[0].delta.tool_calls[0].function.arguments or "" for c in chunks
                       if c.choices and c.choices[0].delta.tool_calls)
        assert json.loads(args) == {"code": "print(1)"} and chunks[-1].usage.completion_tokens == 7
        with o.responses.stream(model="m", input="hi") as rs:
            done = rs.get_final_response()
        assert done.output_text == "a response" and done.usage.input_tokens == 10
        emb = o.embeddings.create(model="e", input=["a", "b"])
        assert len(emb.data) == 2 and emb.usage.prompt_tokens == 2
        assert a.messages.count_tokens(model="m", messages=[{"role": "user", "content": "x" * 40}]).input_tokens > 0
        assert {m.id for m in o.models.list()} == {"mock-model", "mock-embedding"}
        forced = o.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tool_choice="required",
                                           tools=[{"type": "function", "function": {"name": "review", "parameters": {
                                               "type": "object", "properties": {"ok": {"type": "boolean"}}}}}])
        assert json.loads(forced.choices[0].message.tool_calls[0].function.arguments) == {"ok": False}
        assert [u["endpoint"] for u in server.usage_log] == ["messages", "chat.completions", "responses", "embeddings",
                                                            "chat.completions"]
