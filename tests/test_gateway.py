"""The LLM gateway against the mock LLM: pass-through, translation, streaming, metering, limits, keys."""
from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap

import pytest

from pytest_automedbench.gateway import Gateway, RunLimits, parse_agent_models
from pytest_automedbench.gateway.providers import ANTHROPIC, OPENAI, Provider, ProviderError, check_routes
from pytest_automedbench.testing.mock_llm import MockLLMServer, answer_by_request

CANARY_A = "sk-ant-CANARY-4f1d2e3c4b5a69788796a5b4c3d2e1f0"
CANARY_O = "sk-proj-CANARY-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("gateway", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(self.path)


@pytest.fixture
def mock():
    with MockLLMServer(responder=answer_by_request) as server:
        yield server


@pytest.fixture
def gateway(mock):
    providers = {ANTHROPIC: Provider(ANTHROPIC, mock.anthropic_base_url, CANARY_A),
                 OPENAI: Provider(OPENAI, mock.openai_base_url, CANARY_O)}
    with Gateway(providers) as gw:
        yield gw


def call(gw, token, path, body=None, headers=None, method="POST"):
    conn = UnixConnection(str(gw.socket_path))
    hdrs = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=hdrs)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


def open_run(gw, chat="claude-sonnet-4-6", **limits):
    return gw.open_run("run-1", parse_agent_models(None, chat), RunLimits(**limits))


def test_socket_is_open_to_the_cell_user_alone(gateway):
    from pytest_automedbench.sandbox.celluser import cell_user

    folder, sock = os.stat(gateway.folder), os.stat(gateway.socket_path)
    if cell_user().separate:  # root's harness: the cell user's group may enter and connect, nobody else
        assert (stat.S_IMODE(folder.st_mode), folder.st_gid) == (0o710, cell_user().gid)
        assert (stat.S_IMODE(sock.st_mode), sock.st_gid) == (0o660, cell_user().gid)
    else:
        assert stat.S_IMODE(folder.st_mode) == 0o700 and stat.S_IMODE(sock.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(gateway.forwarder_path).st_mode) == 0o644


def test_anthropic_passthrough_meters_exactly_and_maps_the_model(gateway, mock):
    run = open_run(gateway)
    mock.add({"text": "hello", "usage": {"input": 120, "output": 7, "cache_read": 30, "cache_write": 5}})
    resp, data = call(gateway, run.token, "/v1/messages", {"model": "claude-3-5-haiku-latest", "max_tokens": 50,
                                                          "messages": [{"role": "user", "content": "hi"}]},
                      {"anthropic-version": "2023-06-01"})
    assert resp.status == 200, data
    assert json.loads(data)["content"][0]["text"] == "hello"
    sent = mock.requests[-1]
    assert sent["json"]["model"] == "claude-sonnet-4-6"  # the small role defaults to the chat model
    assert sent["headers"]["x-api-key"] == CANARY_A and "authorization" not in sent["headers"]
    (event,) = run.calls
    assert (event.input, event.output, event.cache_read, event.cache_write) == (120, 7, 30, 5)
    assert event.model_asked == "claude-3-5-haiku-latest" and event.role == "small" and not event.estimated
    assert event.cost_usd is not None and event.cost_usd > 0


@pytest.mark.parametrize("path,body,endpoint", [
    ("/v1/messages", {"model": "claude-sonnet-4-6", "max_tokens": 50, "stream": True,
                      "messages": [{"role": "user", "content": "hi"}]}, "messages"),
    ("/v1/chat/completions", {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
     "chat.completions"),
    ("/v1/responses", {"model": "gpt-4o", "stream": True, "input": "hi"}, "responses"),
])
def test_streaming_passthrough_meters_the_mocks_usage(gateway, mock, path, body, endpoint):
    chat = "claude-sonnet-4-6" if path == "/v1/messages" else "gpt-4o"
    run = open_run(gateway, chat)
    mock.add({"text": "a streamed answer that spans chunks", "usage": {"input": 321, "output": 17, "cache_read": 4}})
    resp, data = call(gateway, run.token, path, body)
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    assert b"a streamed answer" in data.replace(b'", "', b"") or b"streamed" in data
    if endpoint == "chat.completions":  # usage was added for metering, and not shown to an agent that did not ask
        assert mock.requests[-1]["json"]["stream_options"] == {"include_usage": True}
        assert b'"usage"' not in data and data.rstrip().endswith(b"data: [DONE]")
    served = mock.usage_log[-1]
    (event,) = run.calls
    assert {k: getattr(event, k) for k in ("input", "output", "cache_read", "cache_write")} == \
        {k: served[k] for k in ("input", "output", "cache_read", "cache_write")}
    assert event.stream and event.first_token_s is not None and event.endpoint == endpoint


def test_chat_agent_on_anthropic_provider_is_translated_with_tools(gateway, mock):
    run = open_run(gateway, "claude-sonnet-4-6")
    mock.add({"tool_calls": [{"name": "execute_code", "arguments": {"code": "print(1)"}}],
              "usage": {"input": 50, "output": 9, "cache_read": 10}})
    tools = [{"type": "function", "function": {"name": "execute_code", "description": "run",
                                               "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]
    resp, data = call(gateway, run.token, "/v1/chat/completions", {
        "model": "gpt-4o", "tools": tools, "tool_choice": "required",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "execute_code", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "ok"}]})
    assert resp.status == 200, data
    reply = json.loads(data)
    call0 = reply["choices"][0]["message"]["tool_calls"][0]
    assert call0["function"]["name"] == "execute_code" and json.loads(call0["function"]["arguments"]) == {"code": "print(1)"}
    assert reply["choices"][0]["finish_reason"] == "tool_calls"
    assert reply["usage"] == {"prompt_tokens": 60, "completion_tokens": 9, "total_tokens": 69,
                              "prompt_tokens_details": {"cached_tokens": 10}}
    sent = mock.requests[-1]["json"]
    assert sent["system"] == "be brief" and sent["tool_choice"] == {"type": "any"}
    assert sent["messages"][1]["content"][0]["type"] == "tool_use"
    assert sent["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    (event,) = run.calls
    assert event.translated and (event.input, event.output, event.cache_read) == (50, 9, 10)


def test_json_schema_output_through_translation(gateway, mock):
    run = open_run(gateway, "claude-sonnet-4-6")
    schema = {"type": "object", "properties": {"is_bug": {"type": "boolean"}, "summary": {"type": "string"}}}
    resp, data = call(gateway, run.token, "/v1/chat/completions", {
        "model": "x", "messages": [{"role": "user", "content": "review"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "review", "schema": schema}}})
    assert resp.status == 200, data
    message = json.loads(data)["choices"][0]["message"]
    assert json.loads(message["content"]) == {"is_bug": False, "summary": "mock"} and "tool_calls" not in message


def test_messages_agent_on_openai_provider_streams_translated(gateway, mock):
    run = open_run(gateway, "openai:gpt-4o")
    mock.add({"text": "translated", "usage": {"input": 40, "output": 3, "cache_read": 8}})
    resp, data = call(gateway, run.token, "/v1/messages", {
        "model": "claude-sonnet-4-6", "max_tokens": 10, "stream": True, "system": "sys",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                     {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"},
                                                       {"type": "text", "text": "ok"}]},
                     {"role": "user", "content": "again"}]})
    assert resp.status == 200
    assert b"event: message_start" in data and b"translated" in data and b"event: message_stop" in data
    sent = mock.requests[-1]["json"]
    assert sent["model"] == "gpt-4o" and sent["messages"][0] == {"role": "system", "content": "sys"}
    (event,) = run.calls
    assert event.dropped_reasoning == 1 and (event.input, event.output, event.cache_read) == (40, 3, 8)


def test_embeddings_models_and_count_tokens(gateway, mock):
    run = gateway.open_run("r", parse_agent_models("embedding=openai:text-embedding-3-small", "gpt-4o"))
    resp, data = call(gateway, run.token, "/v1/embeddings", {"model": "amb-embedding", "input": ["a b c", "d"]})
    assert resp.status == 200 and len(json.loads(data)["data"]) == 2
    assert mock.requests[-1]["json"]["model"] == "text-embedding-3-small"
    assert run.calls[-1].input == mock.usage_log[-1]["input"] and run.calls[-1].role == "embedding"
    resp, data = call(gateway, run.token, "/v1/models", method="GET")
    assert {"amb-chat", "gpt-4o", "text-embedding-3-small"} <= {m["id"] for m in json.loads(data)["data"]}
    resp, data = call(gateway, run.token, "/v1/messages/count_tokens", {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "x" * 400}]})
    assert resp.status == 200 and json.loads(data)["input_tokens"] >= 100
    assert run.calls[-1].estimated and not run.calls[-1].counted
    assert run.totals()["calls"] == 1


def test_no_embedding_role_is_a_provider_shaped_error(gateway):
    run = open_run(gateway, "gpt-4o")
    resp, data = call(gateway, run.token, "/v1/embeddings", {"model": "text-embedding-3-small", "input": "a"})
    assert resp.status == 400 and "embedding" in json.loads(data)["error"]["message"]


def test_unknown_and_revoked_tokens_are_refused(gateway, mock):
    resp, data = call(gateway, "sk-guess", "/v1/messages", {"model": "m", "messages": []})
    assert resp.status == 401 and json.loads(data)["type"] == "error"
    run = open_run(gateway)
    gateway.close_run(run)
    resp, _ = call(gateway, run.token, "/v1/chat/completions", {"model": "m", "messages": []})
    assert resp.status == 401 and not mock.requests


@pytest.mark.parametrize("limits,reason", [({"max_calls": 2}, "max_turns"), ({"max_tokens": 150}, "max_tokens"),
                                           ({"max_cost_usd": 0.0001}, "max_cost")])
def test_limits_refuse_with_a_provider_error_and_end_the_run(gateway, mock, limits, reason):
    run = open_run(gateway, **limits)
    body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    statuses = []
    for _ in range(4):
        mock.add({"text": "x", "usage": {"input": 100, "output": 10}})
        resp, data = call(gateway, run.token, "/v1/messages", body)
        statuses.append(resp.status)
        if resp.status != 200:
            error = json.loads(data)
            assert error["type"] == "error" and reason in error["error"]["message"]
            break
    assert statuses[-1] == 400 and run.ended.is_set() and run.limit_hit == reason
    assert len(mock.usage_log) == len(statuses) - 1  # the refused call never reached the provider
    assert run.totals()["calls"] == len(statuses) - 1


@pytest.mark.parametrize("status", [400, 401])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_that_echo_the_key_are_scrubbed(gateway, mock, status, stream):
    run = open_run(gateway, "gpt-4o")
    mock.add({"status": status, "message": f"Incorrect API key provided: {CANARY_O}. Also {CANARY_A}"})
    resp, data = call(gateway, run.token, "/v1/chat/completions",
                      {"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == status
    assert b"CANARY" not in data and b"[redacted]" in data
    assert "CANARY" not in str(dict(resp.getheaders()))
    event = run.calls[-1]
    assert event.status == status and "CANARY" not in json.dumps(event.as_event())


def test_translated_upstream_error_is_scrubbed_and_in_the_agents_format(gateway, mock):
    run = open_run(gateway, "gpt-4o")
    mock.add({"status": 401, "message": f"bad key {CANARY_O}"})
    resp, data = call(gateway, run.token, "/v1/messages", {"model": "claude", "max_tokens": 5,
                                                           "messages": [{"role": "user", "content": "hi"}]})
    body = json.loads(data)
    assert resp.status == 401 and body["type"] == "error" and "CANARY" not in data.decode()


def test_role_without_provider_is_a_usage_error():
    routes = parse_agent_models("small=openai:gpt-4o-mini", "claude-sonnet-4-6")
    with pytest.raises(ProviderError, match="role small .*OPENAI_API_KEY"):
        check_routes(routes, {ANTHROPIC: Provider(ANTHROPIC, "http://x", "k")})
    with pytest.raises(ProviderError, match="expected ROLE=MODEL"):
        parse_agent_models("chatty=x", "m")


def _sdk_script(tmp_path, body: str):
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(body))
    return script


def run_in_cell(gateway, run, script, *forwarder_args: str) -> subprocess.CompletedProcess:
    """`script` as a cell runs an agent: under the forwarder, with the run's token and no provider variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["AMB_GATEWAY_TOKEN"] = run.token
    return subprocess.run([sys.executable, str(gateway.forwarder_path), "--socket", str(gateway.socket_path),
                           *forwarder_args, "--", sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_real_sdks_through_the_forwarder(gateway, mock, tmp_path):
    """The cell's path: forwarder on 127.0.0.1 -> unix socket; both SDKs, streaming and not."""
    run = open_run(gateway, "claude-sonnet-4-6")
    script = _sdk_script(tmp_path, """
        import anthropic, openai, os
        a = anthropic.Anthropic(max_retries=0)
        print("A", a.messages.create(model="claude-sonnet-4-6", max_tokens=20,
              messages=[{"role": "user", "content": "hi"}]).content[0].text)
        with a.messages.stream(model="claude-haiku-4-5", max_tokens=20,
                               messages=[{"role": "user", "content": "hi"}]) as s:
            print("S", s.get_final_message().usage.output_tokens)
        o = openai.OpenAI(max_retries=0)
        chunks = o.chat.completions.create(model="gpt-4o", stream=True, messages=[{"role": "user", "content": "x"}])
        print("O", "".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
        assert "CANARY" not in repr(dict(os.environ))
    """)
    out = run_in_cell(gateway, run, script)
    assert out.returncode == 0, out.stderr
    assert "A Done." in out.stdout and "O Done." in out.stdout
    assert [c.status for c in run.calls] == [200, 200, 200]
    assert [(c.input, c.output) for c in run.calls] == [(u["input"], u["output"]) for u in mock.usage_log]


def test_forwarder_ends_the_agent_when_the_limit_is_hit(gateway, mock, tmp_path):
    run = open_run(gateway, max_calls=1)
    script = _sdk_script(tmp_path, """
        import anthropic, time
        a = anthropic.Anthropic(max_retries=0)
        for i in range(3):
            try:
                a.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
                print("call", i, "ok", flush=True)
            except anthropic.BadRequestError as e:
                print("refused:", e.message, flush=True)
        time.sleep(300)  # a stubborn agent: the forwarder must end it
    """)
    out = run_in_cell(gateway, run, script, "--grace", "2")
    assert out.returncode == 128 + 15, (out.stdout, out.stderr)
    assert "call 0 ok" in out.stdout and "call 1 ok" not in out.stdout
    assert "ended the run (max_turns)" in out.stderr
    assert run.limit_hit == "max_turns"


def test_the_agent_cannot_choose_the_model_or_the_upstream_path(gateway, mock):
    run = open_run(gateway)
    body = {"model": "claude-opus-4-1", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    resp, _ = call(gateway, run.token, "/anything/../v1/messages", body, {"x-api-key": "sk-ant-mine"})
    assert resp.status == 200
    sent = mock.requests[-1]
    assert sent["json"]["model"] == "claude-sonnet-4-6" and sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == CANARY_A
    resp, data = call(gateway, run.token, "/v1/messages/../../admin", body)
    assert resp.status == 404 and len(mock.requests) == 1


def test_an_oversized_body_is_refused_before_it_is_read(gateway):
    run = open_run(gateway)
    conn = UnixConnection(str(gateway.socket_path))
    conn.putrequest("POST", "/v1/messages")
    conn.putheader("Authorization", f"Bearer {run.token}")
    conn.putheader("Content-Length", str(1 << 40))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "automedbench gateway" in resp.read().decode()
    conn.close()


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/sbin/runuser") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, runuser and /usr/bin/python3 to act as the unprivileged cell user")
def test_an_unprivileged_cell_user_reaches_the_gateway(gateway, mock):
    """The cell runs as another user: the socket (0660) in its folder (0710, both the cell user's
    group) and the forwarder (0644) are usable by the cell user with the system python, and the
    folder cannot be listed."""
    from pytest_automedbench.sandbox.celluser import cell_user

    user = cell_user()
    if not user.separate or not user.how.startswith(("the system user", "AMB_CELL_USER")) or \
            "no passwd" in user.how:
        pytest.skip("needs a cell user with a passwd entry (scripts/setup.sh)")
    run = open_run(gateway)
    client = textwrap.dedent("""
        import json, os, urllib.request
        req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", method="POST",
            data=json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"})
        print(json.loads(urllib.request.urlopen(req, timeout=60).read())["content"][0]["text"])
        try:
            os.listdir(os.path.dirname(os.environ["GW_SOCKET"]))
            print("LISTED")
        except PermissionError:
            print("not listable")
    """)  # given with -c: the test's own folders are root's
    env = {"PATH": "/usr/bin:/bin", "AMB_GATEWAY_TOKEN": run.token, "GW_SOCKET": str(gateway.socket_path)}
    out = subprocess.run(["/usr/sbin/runuser", "-u", user.name, "--", "/usr/bin/python3", str(gateway.forwarder_path),
                          "--socket", str(gateway.socket_path), "--", "/usr/bin/python3", "-c", client],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Done.", "not", "listable"] and run.calls[-1].status == 200


# -- /v1/responses and /v1/embeddings when the provider speaks Messages

RESPONSES_TOOLS = [{"type": "function", "name": "exec_command", "description": "run a command", "strict": False,
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
                   {"type": "custom", "name": "apply_patch", "description": "edit files"},
                   {"type": "web_search"}]


def test_responses_agent_on_anthropic_provider_is_translated_with_tools(gateway, mock):
    run = open_run(gateway, "claude-sonnet-4-6")
    mock.add({"tool_calls": [{"name": "exec_command", "arguments": {"cmd": "ls"}}],
              "usage": {"input": 70, "output": 12, "cache_read": 20, "cache_write": 3}})
    resp, data = call(gateway, run.token, "/v1/responses", {
        "model": "gpt-5-codex", "instructions": "be brief", "tools": RESPONSES_TOOLS, "tool_choice": "required",
        "max_output_tokens": 64, "store": False, "reasoning": {"effort": "high"},
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                  {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
                  {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "pwd"}'},
                  {"type": "function_call_output", "call_id": "call_1", "output": "/workspace"},
                  {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
                  {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done"}]})
    assert resp.status == 200, data
    reply = json.loads(data)
    (item,) = reply["output"]
    assert item["type"] == "function_call" and item["name"] == "exec_command" and json.loads(item["arguments"]) == {"cmd": "ls"}
    assert item["call_id"] and reply["status"] == "completed" and reply["model"] == "gpt-5-codex"
    assert reply["usage"]["input_tokens"] == 93 and reply["usage"]["output_tokens"] == 12
    assert reply["usage"]["input_tokens_details"]["cached_tokens"] == 20
    sent = mock.requests[-1]["json"]
    assert sent["model"] == "claude-sonnet-4-6" and sent["system"] == "be brief" and sent["max_tokens"] == 64
    assert sent["tool_choice"] == {"type": "any"} and [t["name"] for t in sent["tools"]] == ["exec_command", "apply_patch"]
    assert sent["tools"][1]["input_schema"]["properties"] == {"input": {"type": "string"}}  # freeform -> one string
    roles = [(m["role"], [b["type"] for b in m["content"]]) for m in sent["messages"]]
    assert roles == [("user", ["text"]), ("assistant", ["tool_use"]), ("user", ["tool_result"]),
                     ("assistant", ["tool_use"]), ("user", ["tool_result"])]
    assert sent["messages"][1]["content"][0] == {"type": "tool_use", "id": "call_1", "name": "exec_command",
                                                 "input": {"cmd": "pwd"}}
    assert sent["messages"][3]["content"][0]["input"] == {"input": "*** Begin Patch"}
    (event,) = run.calls
    assert event.translated and event.endpoint == "responses" and event.dropped_reasoning == 1
    assert (event.input, event.output, event.cache_read, event.cache_write) == (70, 12, 20, 3) and not event.estimated


def test_custom_tool_calls_come_back_as_custom_items(gateway, mock):
    run = open_run(gateway, "claude-sonnet-4-6")
    mock.add({"tool_calls": [{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\n*** End Patch"}}]})
    resp, data = call(gateway, run.token, "/v1/responses", {"model": "m", "tools": RESPONSES_TOOLS, "input": "edit"})
    (item,) = json.loads(data)["output"]
    assert item == {**item, "type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}


def test_responses_through_the_openai_sdk_streamed_and_json(gateway, mock, tmp_path):
    """The OpenAI SDK parses the translated event sequence (typed events) and the JSON output."""
    run = open_run(gateway, "claude-sonnet-4-6")
    mock.add({"text": "streamed through a translation", "usage": {"input": 11, "output": 5}})
    script = _sdk_script(tmp_path, """
        import json, openai
        o = openai.OpenAI(max_retries=0)
        kinds, text = [], ""
        for ev in o.responses.create(model="gpt-5", input="hi", stream=True):
            kinds.append(ev.type)
            if ev.type == "response.output_text.delta":
                text += ev.delta
            if ev.type == "response.completed":
                print("USAGE", ev.response.usage.input_tokens, ev.response.usage.output_tokens)
        print("TEXT", text)
        print("KINDS", kinds[0], kinds[-1])
        schema = {"type": "object", "properties": {"is_bug": {"type": "boolean"}}, "required": ["is_bug"]}
        r = o.responses.create(model="gpt-5", input="review",
                               text={"format": {"type": "json_schema", "name": "review", "schema": schema}})
        print("JSON", json.loads(r.output_text))
    """)
    out = run_in_cell(gateway, run, script)
    assert out.returncode == 0, out.stderr
    assert "TEXT streamed through a translation" in out.stdout and "USAGE 11 5" in out.stdout
    assert "KINDS response.created response.completed" in out.stdout and "JSON {'is_bug': False}" in out.stdout
    assert mock.requests[-1]["json"]["tool_choice"] == {"type": "tool", "name": "amb_json_output"}
    assert [(c.stream, c.translated, c.input, c.output) for c in run.calls][0] == (True, True, 11, 5)


def test_counts_the_provider_did_not_report_are_estimated_and_marked(gateway, mock):
    run = open_run(gateway, "claude-sonnet-4-6")
    mock.add({"malformed": json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "c",
                                       "content": [{"type": "text", "text": "no usage here"}], "stop_reason": "end_turn"})})
    resp, data = call(gateway, run.token, "/v1/responses", {"model": "gpt-5", "input": "x" * 400})
    assert resp.status == 200, data
    assert json.loads(data)["output"][0]["content"][0]["text"] == "no usage here"
    (event,) = run.calls
    assert event.estimated and event.input >= 100 and event.output >= 1
    assert run.totals()["estimated"] is True


def test_previous_response_id_cannot_be_translated(gateway, mock):
    run = open_run(gateway, "claude-sonnet-4-6")
    resp, data = call(gateway, run.token, "/v1/responses", {"model": "m", "input": "x", "previous_response_id": "resp_1"})
    assert resp.status == 400 and "previous_response_id" in json.loads(data)["error"]["message"]
    assert not mock.requests and run.totals()["calls"] == 0


def test_embeddings_on_an_anthropic_role_is_a_501_naming_the_provider(gateway, mock):
    routes = {**parse_agent_models(None, "claude-sonnet-4-6"),
              "embedding": parse_agent_models("embedding=anthropic:claude-sonnet-4-6", "x")["embedding"]}
    run = gateway.open_run("r", routes)
    resp, data = call(gateway, run.token, "/v1/embeddings", {"model": "text-embedding-3-small", "input": "a"})
    error = json.loads(data)["error"]
    assert resp.status == 501 and "anthropic provider has no embeddings" in error["message"]
    assert "embedding=openai:MODEL" in error["message"] and not mock.requests
    assert run.totals()["calls"] == 0 and run.calls[-1].counted is False
    with pytest.raises(ProviderError, match="role embedding .*no embeddings"):
        check_routes(routes, {ANTHROPIC: Provider(ANTHROPIC, "http://x", "k")})
