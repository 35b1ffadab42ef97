"""panto-send end to end: the real console script against the scripted SSE
server on 127.0.0.1 (tests/sse_server.py). What it writes, what it sends."""
import os
import pty
import shutil
import re
import subprocess

import orjson
import pytest

import sse_server as S
from builders import HEADER, assistant, jsonl, lines, user
from conftest import AKEY, KEY, assert_clean_error, env_for, run, secret_free, send

HEX8 = re.compile(r"^[0-9a-f]{8}$")
OA_USAGE = {"prompt_tokens": 150, "completion_tokens": 42, "prompt_tokens_details": {"cached_tokens": 120},
            "completion_tokens_details": {"reasoning_tokens": 18}}


# --- a new session -----------------------------------------------------------------

def test_new_session_from_empty_input(srv):
    srv.push(S.openai_text("Hello there!", usage=OA_USAGE))
    p = send(srv, "hi")
    assert p.returncode == 0, p.stderr
    head, system, u, a = lines(p.stdout)
    assert head["type"] == "session" and head["version"] == 1 and head["cwd"] == os.getcwd()
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-7", head["id"])
    assert system["message"]["role"] == "system" and system["parentId"] is None
    assert "coding agent" in system["message"]["content"][0]["text"]
    assert "provider" not in system and "provider" not in a
    assert u["parentId"] == system["id"] and a["parentId"] == u["id"]
    assert all(HEX8.match(e["id"]) for e in (system, u, a))
    assert list(u) == ["type", "id", "parentId", "timestamp", "provider", "model", "api", "message"]
    assert (u["provider"], u["model"], u["api"]) == ("openai", "gpt-6.2-sol", "openai_chat")  # the defaults
    assert u["message"] == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert list(a["message"]) == ["role", "content", "provider", "model", "api", "stopReason", "usage"]
    assert a["message"]["api"] == "openai_chat"
    assert a["message"]["content"] == [{"type": "text", "text": "Hello there!"}]
    assert a["message"]["usage"] == {"input": 30, "output": 42, "cacheRead": 120, "reasoning": 18}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", a["timestamp"])
    assert p.stderr == b""  # not a terminal, no --live: nothing shown
    secret_free(p)


def test_request_openai_shape_and_headers(srv):
    srv.push(S.openai_text("ok"))
    assert send(srv, "--system", "Be terse.", "hi").returncode == 0
    (r,) = srv.requests
    assert r.path == "/v1/chat/completions"
    assert r.headers["authorization"] == f"Bearer {KEY}"
    assert r.body["stream"] is True and r.body["stream_options"] == {"include_usage": True}
    assert r.body["messages"] == [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]
    assert "tools" not in r.body


def test_request_anthropic_shape_and_headers(srv):
    srv.push(S.anthropic_text("ok"))
    p = send(srv, "--system", "Be terse.", "hi", PANTO_API_STYLE="anthropic_messages",
             ANTHROPIC_API_VERSION="2023-06-01", ANTHROPIC_MAX_TOKENS="1234")
    assert p.returncode == 0, p.stderr
    (r,) = srv.requests
    assert r.path == "/v1/messages"
    assert r.headers["x-api-key"] == AKEY and r.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in r.headers
    assert r.body["system"] == "Be terse." and r.body["max_tokens"] == 1234 and r.body["stream"] is True
    assert r.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert lines(p.stdout)[2]["provider"] == "anthropic"


def test_headerless_bare_entries_become_a_new_session(srv):
    srv.push(S.openai_text("fine"))
    bare = b'{"type":"message","message":{"role":"user","content":[{"type":"text","text":"from jq"}]}}\n'
    p = send(srv, input=bare)
    assert p.returncode == 0, p.stderr
    head, system, u, a = lines(p.stdout)
    assert head["type"] == "session" and system["message"]["role"] == "system"
    assert u["parentId"] == system["id"] and HEX8.match(u["id"]) and "timestamp" in u
    assert u["message"]["content"][0]["text"] == "from jq"
    # a user entry is stamped with where it was sent, keys in the format's order
    assert (u["provider"], u["model"]) == ("openai", srv.requests[0].body["model"])
    assert list(u) == ["type", "id", "parentId", "timestamp", "provider", "model", "api", "message"]
    assert a["parentId"] == u["id"]
    assert srv.requests[0].body["messages"][-1] == {"role": "user", "content": "from jq"}


def test_headerless_entries_get_a_header_and_pass_through(srv):
    srv.push(S.openai_text("two"))
    body = jsonl(user("one"), assistant([{"type": "text", "text": "1"}]))
    p = send(srv, "again", input=body)
    assert p.returncode == 0, p.stderr
    first, rest = p.stdout.split(b"\n", 1)
    assert orjson.loads(first)["type"] == "session"
    assert rest.startswith(body)
    assert [e["message"]["role"] for e in lines(rest)] == ["user", "assistant", "user", "assistant"]


def test_input_echoed_byte_for_byte_with_unknown_entries(srv):
    srv.push(S.openai_text("ok"))
    odd = (orjson.dumps(HEADER) + b"\n"
           + b'{"id":"u0000001", "type":"message","parentId":null,"timestamp":"2026-04-25T14:00:00.000Z",'
             b'"message":{"content":[{"type":"text","text":"caf\\u00e9 \xe2\x80\xa8"}],"role":"user"}}\n'
           + b'{"type":"label","id":"l0000001","parentId":"u0000001","timestamp":"2026-04-25T14:00:00.500Z","x":[1]}\n'
           + jsonl(assistant([{"type": "text", "text": "yo"}], parent="l0000001")))
    p = send(srv, "more", input=odd)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(odd)
    new = lines(p.stdout[len(odd):])
    assert new[0]["parentId"] == "a0000001" and len(new) == 2
    assert {e["id"] for e in new}.isdisjoint({"u0000001", "l0000001", "a0000001"})
    msgs = srv.requests[0].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]  # the label entry is skipped
    assert msgs[0]["content"] == "café \u2028"


def test_bare_entry_after_a_session_is_completed_on_the_leaf(srv):
    srv.push(S.openai_text("ok"))
    bare = b'{"type":"message","message":{"role":"user","content":[{"type":"text","text":"typed"}]}}\n'
    base = jsonl(HEADER, user("one"), assistant([{"type": "text", "text": "1"}]))
    p = send(srv, input=base + bare)
    assert p.returncode == 0, p.stderr
    out = lines(p.stdout)
    assert p.stdout.startswith(base) and len(out) == 5
    assert out[3]["parentId"] == "a0000001" and out[4]["parentId"] == out[3]["id"]
    assert not any(e.get("message", {}).get("role") == "system" for e in out)


# --- configuration -----------------------------------------------------------------

def test_active_model_of_the_stream_beats_the_environment(srv):
    srv.push(S.anthropic_text("ok"))
    body = jsonl(HEADER, user("one", provider="anthropic", model="claude-from-session"),
                 assistant([{"type": "text", "text": "1"}], provider="anthropic", model="claude-from-session"))
    p = send(srv, "two", input=body, PANTO_API_STYLE="openai_chat", OPENAI_MODEL="gpt-env")
    assert p.returncode == 0, p.stderr
    assert srv.requests[0].path == "/v1/messages" and srv.requests[0].body["model"] == "claude-from-session"
    new_user, reply = lines(p.stdout)[-2:]
    assert (new_user["provider"], new_user["model"]) == ("anthropic", "claude-from-session")
    assert (reply["message"]["provider"], reply["message"]["model"]) == ("anthropic", "claude-from-session")


def test_flags_beat_the_stream(srv):
    srv.push(S.openai_text("ok"))
    body = jsonl(HEADER, user("one", provider="anthropic", model="claude-x"))
    p = send(srv, "-p", "openai", "-m", "gpt-flag", "--base-url", srv.url + "/v1", "two", input=body,
             OPENAI_BASE_URL="http://127.0.0.1:9/nowhere")
    assert p.returncode == 0, p.stderr
    assert srv.requests[0].body["model"] == "gpt-flag"
    assert lines(p.stdout)[-2]["model"] == "gpt-flag"


def test_environment_for_a_new_session(srv):
    srv.push(S.anthropic_text("ok"))
    p = send(srv, "hi", PANTO_API_STYLE="anthropic_messages", ANTHROPIC_MODEL="claude-env")
    assert p.returncode == 0, p.stderr
    assert srv.requests[0].body["model"] == "claude-env"


def test_prompt_from_file_max_tokens_reasoning(srv, tmp_path):
    srv.push(S.openai_text("ok"))
    f = tmp_path / "prompt.txt"
    f.write_text("line one\nline \u2028two\n", encoding="utf-8")
    p = send(srv, "-f", str(f), "--max-tokens", "99", "--reasoning", "low")
    assert p.returncode == 0, p.stderr
    body = srv.requests[0].body
    assert body["messages"][-1]["content"] == "line one\nline \u2028two\n"
    assert body["max_tokens"] == 99 and body["reasoning_effort"] == "low"


def test_openai_reasoning_from_environment(srv):
    srv.push(S.openai_text("ok"))
    assert send(srv, "hi", OPENAI_REASONING="medium").returncode == 0
    assert srv.requests[0].body["reasoning_effort"] == "medium"


def test_tools_flag_sends_the_builtin_schemas(srv):
    srv.push(S.openai_text("ok"), S.anthropic_text("ok"))
    assert send(srv, "--tools", "hi").returncode == 0
    assert send(srv, "--tools", "-p", "anthropic", "hi").returncode == 0
    oa_tools, an_tools = srv.requests[0].body["tools"], srv.requests[1].body["tools"]
    assert {t["function"]["name"] for t in oa_tools} >= {"bash", "read", "write", "edit"}
    assert all(t["type"] == "function" and "parameters" in t["function"] for t in oa_tools)
    assert {t["name"] for t in an_tools} >= {"bash", "read", "write", "edit"}
    assert all("input_schema" in t for t in an_tools)


@pytest.mark.parametrize("args", [["--retries", "-1", "x"], ["--timeout", "0", "x"], ["--max-tokens", "lots", "x"],
                                  ["-p", "gemini", "x"], ["-f", "a.txt", "x"], ["--bogus"], [""]])
def test_bad_options_are_usage_errors(srv, args):
    p = send(srv, *args)
    assert_clean_error(p, status=2, name="panto-send")
    assert p.stdout == b"" and srv.requests == []


def test_help_and_version():
    p = run(["panto-send", "--help"])
    assert p.returncode == 0 and b"--provider" in p.stdout and b"--retries" in p.stdout
    p = run(["panto-send", "--version"])
    assert p.returncode == 0 and p.stdout.strip()


# --- tool uses --------------------------------------------------------------------------

TOOL_TURN = [{"type": "text", "text": "Let me look."},
             {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"command":"ls"}'}]


def test_unanswered_tool_uses_get_not_run_results(srv):
    srv.push(S.openai_text("ok"))
    body = jsonl(HEADER, user("look"), assistant(TOOL_TURN, stop="toolUse"))
    p = send(srv, "never mind", input=body)
    assert p.returncode == 0, p.stderr
    u = lines(p.stdout)[-2]
    res, txt = u["message"]["content"]
    assert res["type"] == "toolResult" and res["toolUseId"] == "call_1" and res["isError"] is True
    assert "not run" in res["content"]
    assert txt == {"type": "text", "text": "never mind"}
    msgs = srv.requests[0].body["messages"]
    assert msgs[-3]["tool_calls"][0]["id"] == "call_1"
    assert msgs[-2]["role"] == "tool" and msgs[-2]["tool_call_id"] == "call_1"
    assert msgs[-1] == {"role": "user", "content": "never mind"}


def test_stream_ending_in_tool_results_is_sent_without_a_new_entry(srv):
    srv.push(S.openai_text("the files"))
    results = {"type": "message", "id": "r0000001", "parentId": "a0000001", "timestamp": "2026-04-25T14:00:02.000Z",
               "provider": "openai", "model": "gpt-4o", "message": {"role": "user", "content": [
                   {"type": "toolResult", "toolUseId": "call_1", "content": "a.txt\nb.txt"}]}}
    body = jsonl(HEADER, user("look"), assistant(TOOL_TURN, stop="toolUse"), results)
    p = send(srv, input=body)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(body)
    (reply,) = lines(p.stdout[len(body):])
    assert reply["parentId"] == "r0000001" and reply["message"]["role"] == "assistant"
    assert srv.requests[0].body["messages"][-1] == {"role": "tool", "tool_call_id": "call_1",
                                                    "content": "a.txt\nb.txt"}


def test_nothing_to_send_fails_but_passes_the_input(srv):
    body = jsonl(HEADER, user("one"), assistant([{"type": "text", "text": "1"}]))
    p = send(srv, input=body)
    assert_clean_error(p, name="panto-send")
    assert b"PROMPT" in p.stderr and p.stdout == body and srv.requests == []


def test_missing_key_for_the_real_api_names_the_variable(srv):
    p = run(["panto-send", "hi"], env=dict(os.environ, PANTO_API_STYLE="anthropic_messages"))
    assert_clean_error(p, name="panto-send")
    assert b"ANTHROPIC_API_KEY" in p.stderr
    out = lines(p.stdout)  # the prompt is still kept
    assert out[-1]["message"]["content"][0]["text"] == "hi" and len(out) == 3


# --- live display --------------------------------------------------------------------------

def test_live_flag_shows_the_reply_quiet_hides_it(srv):
    srv.push(S.openai_text("Hello live"), S.openai_text("Hello quiet"))
    p = send(srv, "--live", "hi")
    assert p.returncode == 0 and p.stderr == b"Hello live\n"
    p = send(srv, "--quiet", "hi")
    assert p.returncode == 0 and p.stderr == b""


def test_terminal_gets_text_and_dimmed_thinking(srv):
    srv.push(S.openai_stream([S.oa_chunk({"reasoning_content": "pondering"}), S.oa_chunk({"content": "Answer"}),
                              S.oa_chunk({}, finish="stop")]))
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([shutil.which("panto-send"), "hi"], input=b"",
                              stdout=subprocess.PIPE, stderr=slave, env=env_for(srv), timeout=30)
        os.close(slave)
        slave = None
        shown = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    assert b"\x1b[2mpondering\x1b[0m" in shown and b"Answer" in shown
    assert shown.index(b"pondering") < shown.index(b"Answer")
