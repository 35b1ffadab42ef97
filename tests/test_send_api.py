"""panto-send against today's APIs (SPEC 5.1): defaults, --models, reasoning
levels, prompt caching, negotiation with servers that refuse new fields,
stop reasons and usage, cut-off streams, Ctrl-C, one-line errors, the
context-full refusal and keys that are not secrets. The real console script
against the scripted server on 127.0.0.1."""
import os
import shutil
import subprocess

import orjson
import pytest

import sse_server as S
from builders import HEADER, assistant, jsonl, lines, reply_of, user
from conftest import AKEY, KEY, assert_clean_error, env_for, interrupt_when, secret_free, send

from pantolib.providers import anthropic_messages as an
from pantolib.providers import openai_chat as oa

BASE = jsonl(HEADER, user("earlier"))
AN_BASE = jsonl(HEADER, user("earlier", provider="anthropic", model="claude-sonnet-5-5"))


def body(srv, i=-1):
    return srv.requests[i].body


def entries_after(out, base):
    assert out.startswith(base)
    return lines(out[len(base):])


def stderr_lines(p):
    return p.stderr.decode().rstrip("\n").split("\n")


# --- defaults and --models -------------------------------------------------------

def test_defaults_are_current_models():
    assert an.DEFAULT_MODEL == "claude-sonnet-5-5"
    assert oa.DEFAULT_MODEL == "gpt-6.2-sol"


def test_default_model_is_named_in_the_man_page():
    page = open(os.path.join(os.path.dirname(__file__), "..", "man", "panto-send.1"), encoding="utf-8").read()
    for model in (an.DEFAULT_MODEL, oa.DEFAULT_MODEL):
        assert model.replace("-", "\\-") in page or model in page


def test_models_lists_what_an_openai_server_offers(srv):
    srv.push(S.models_reply(["gpt-5.6-terra", "local-llama"]))
    p = send(srv, "--models")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"gpt-5.6-terra\nlocal-llama\n"
    req = srv.requests[-1]
    assert req.method == "GET" and req.path == "/v1/models"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    secret_free(p)


def test_models_of_anthropic_follows_its_pages(srv):
    srv.push(S.models_reply(["claude-sonnet-5-5", "claude-opus-5-5"], style="anthropic", has_more=True),
             S.models_reply(["claude-haiku-5-5"], style="anthropic"))
    p = send(srv, "-p", "anthropic", "--models")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [b"claude-sonnet-5-5", b"claude-opus-5-5", b"claude-haiku-5-5"]
    first, second = srv.requests[-2:]
    assert first.path == "/v1/models" and second.path == "/v1/models?after_id=claude-opus-5-5"
    assert first.headers["x-api-key"] == AKEY and first.headers["anthropic-version"] == an.DEFAULT_VERSION


def test_models_takes_no_prompt(srv):
    p = send(srv, "--models", "hello")
    assert_clean_error(p, status=2, name="panto-send")
    assert not srv.requests


def test_models_error_is_one_line(srv):
    srv.push(S.error_reply(401, "bad key\n\n   try   again", "authentication_error"))
    p = send(srv, "--models")
    assert_clean_error(p, name="panto-send")
    assert stderr_lines(p) == ["panto-send: openai: HTTP 401: bad key try again (check OPENAI_API_KEY)"]
    assert p.stdout == b""


# --- reasoning -------------------------------------------------------------------

@pytest.mark.parametrize("args, env", [
    (["--reasoning", "bogus"], {}),
    (["--reasoning", "5000"], {}),                          # a budget is for Anthropic only
    ([], {"OPENAI_REASONING": "extreme"}),
    ([], {"PANTO_REASONING": "2048"}),
    (["-p", "anthropic", "--reasoning", "loud"], {}),
    (["-p", "anthropic", "--reasoning", "100"], {}),         # below Anthropic's smallest budget
    (["--cache", "2h"], {}),
    ([], {"PANTO_CACHE": "forever"}),
])
def test_a_value_the_api_cannot_take_is_a_usage_error(srv, args, env):
    p = send(srv, *args, "now", input=BASE, **env)
    assert_clean_error(p, status=2, name="panto-send")
    assert not srv.requests  # nothing was sent


@pytest.mark.parametrize("level, fields", [
    ("high", {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "high"}}),
    ("minimal", {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "low"}}),
    ("max", {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}}),
    ("none", {"thinking": {"type": "disabled"}}),
    ("3000", {"thinking": {"type": "enabled", "budget_tokens": 3000}}),
    ("off", {}),
])
def test_anthropic_reasoning_levels(srv, level, fields):
    srv.push(S.anthropic_text("ok"))
    p = send(srv, "-p", "anthropic", "--reasoning", level, "now", input=AN_BASE)
    assert p.returncode == 0, p.stderr
    sent = body(srv)
    assert {k: sent[k] for k in ("thinking", "output_config") if k in sent} == fields


def test_reasoning_from_the_environment(srv):
    srv.push(S.openai_text("ok"), S.anthropic_text("ok"))
    assert send(srv, "now", input=BASE, PANTO_REASONING="minimal").returncode == 0
    assert body(srv)["reasoning_effort"] == "minimal"
    p = send(srv, "-p", "anthropic", "now", input=AN_BASE, PANTO_REASONING="4096")
    assert p.returncode == 0, p.stderr
    assert body(srv)["thinking"] == {"type": "enabled", "budget_tokens": 4096}


def test_openai_flag_wins_over_the_environment(srv):
    srv.push(S.openai_text("ok"), S.openai_text("ok"))
    assert send(srv, "--reasoning", "none", "now", input=BASE, OPENAI_REASONING="high").returncode == 0
    assert body(srv)["reasoning_effort"] == "none"
    assert send(srv, "now", input=BASE, OPENAI_REASONING="xhigh", PANTO_REASONING="low").returncode == 0
    assert body(srv)["reasoning_effort"] == "xhigh"


def test_thinking_is_left_out_of_a_tool_loop_begun_on_another_model(srv):
    use = {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"command":"ls"}'}
    result = {"type": "toolResult", "toolUseId": "call_1", "content": "a.txt"}
    stream = jsonl(HEADER, user("list"), assistant([{"type": "thinking", "thinking": "t", "signature": "S"}, use],
                                                    stop="toolUse"),
                   {"type": "message", "id": "u0000002", "parentId": "a0000001",
                    "timestamp": "2026-04-25T14:00:02.000Z",
                    "message": {"role": "user", "content": [result]}})
    srv.push(S.anthropic_text("done"))
    p = send(srv, "-p", "anthropic", "--reasoning", "high", input=stream)
    assert p.returncode == 0, p.stderr
    sent = body(srv)
    assert "thinking" not in sent and "output_config" not in sent
    assert b"thinking left out" in p.stderr
    # and the OpenAI model's thinking block is not sent to Anthropic either
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]


def test_own_thinking_is_sent_back_in_a_tool_loop(srv):
    use = {"type": "toolUse", "id": "toolu_1", "name": "bash", "input": '{"command":"ls"}'}
    think = {"type": "thinking", "thinking": "look first", "signature": "SIG"}
    stream = jsonl(HEADER, user("list", provider="anthropic", model="claude-sonnet-5-5"),
                   assistant([think, use], provider="anthropic", model="claude-sonnet-5-5", stop="toolUse"),
                   {"type": "message", "id": "u0000002", "parentId": "a0000001",
                    "timestamp": "2026-04-25T14:00:02.000Z", "provider": "anthropic", "model": "claude-sonnet-5-5",
                    "message": {"role": "user", "content": [
                        {"type": "toolResult", "toolUseId": "toolu_1", "content": "a.txt"}]}})
    srv.push(S.anthropic_text("done"))
    p = send(srv, "--reasoning", "medium", input=stream)
    assert p.returncode == 0, p.stderr
    sent = body(srv)
    assert sent["thinking"]["type"] == "adaptive" and b"thinking left out" not in p.stderr
    assert sent["messages"][1]["content"][0] == {"type": "thinking", "thinking": "look first", "signature": "SIG"}


# --- prompt caching --------------------------------------------------------------

def test_anthropic_caching_modes(srv):
    srv.push(S.anthropic_text("a"), S.anthropic_text("b"), S.anthropic_text("c"))
    assert send(srv, "-p", "anthropic", "--tools", "now", input=AN_BASE).returncode == 0
    five = body(srv)
    assert five["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in five["tools"][-1]
    p = send(srv, "-p", "anthropic", "--tools", "--cache", "1h", "--system", "be brief", "now")
    assert p.returncode == 0, p.stderr
    hour = body(srv)
    assert hour["cache_control"] == {"type": "ephemeral"}
    assert hour["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert all("cache_control" not in t for t in hour["tools"][:-1])
    assert hour["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert send(srv, "-p", "anthropic", "--tools", "now", input=AN_BASE, PANTO_CACHE="off").returncode == 0
    off = body(srv)
    assert "cache_control" not in off and all("cache_control" not in t for t in off["tools"])
    assert isinstance(off["system"] if "system" in off else "", str)


def test_openai_prompt_cache_key_is_the_session_id(srv):
    srv.push(S.openai_text("a"), S.openai_text("b"))
    assert send(srv, "now", input=BASE).returncode == 0
    assert body(srv)["prompt_cache_key"] == HEADER["id"]
    assert send(srv, "--cache", "off", "now", input=BASE).returncode == 0
    assert "prompt_cache_key" not in body(srv)


# --- negotiation ------------------------------------------------------------------

def test_openai_server_that_refuses_each_new_field_once(srv):
    srv.push(S.error_reply(400, "Unrecognized request argument supplied: stream_options"),
             S.error_reply(422, "reasoning_effort: extra fields not permitted"),
             S.error_reply(400, "Unknown parameter: 'prompt_cache_key'."),
             S.openai_text("fine"))
    p = send(srv, "--reasoning", "low", "now", input=BASE)
    assert p.returncode == 0, p.stderr
    assert reply_of(p)["content"] == [{"type": "text", "text": "fine"}]
    assert "usage" not in reply_of(p)
    assert len(srv.requests) == 4
    last = body(srv)
    assert not {"stream_options", "reasoning_effort", "prompt_cache_key"} & last.keys()
    notes = stderr_lines(p)
    assert len(notes) == 3 and all(n.startswith("panto-send: the server refused") for n in notes)


def test_anthropic_server_that_refuses_each_new_field_once(srv):
    srv.push(S.error_reply(400, "output_config: Extra inputs are not permitted", style="anthropic"),
             S.error_reply(400, "thinking.type: Input should be 'enabled'", style="anthropic"),
             S.error_reply(400, "cache_control: Extra inputs are not permitted", style="anthropic"),
             S.anthropic_text("fine"))
    p = send(srv, "-p", "anthropic", "--reasoning", "medium", "now", input=AN_BASE)
    assert p.returncode == 0, p.stderr
    sent = [r.body for r in srv.requests]
    assert sent[0]["thinking"]["type"] == "adaptive"
    assert sent[1]["thinking"] == {"type": "enabled", "budget_tokens": 8192} and "output_config" not in sent[1]
    assert "thinking" not in sent[2] and "cache_control" in sent[2]
    assert "thinking" not in sent[3] and "cache_control" not in sent[3]
    assert len(stderr_lines(p)) == 3 and b"8192" in p.stderr


def test_a_field_refused_twice_fails_with_the_servers_message(srv):
    srv.push(S.error_reply(400, "Unknown parameter: 'prompt_cache_key'."),
             S.error_reply(400, "Unknown parameter: 'prompt_cache_key'."))
    p = send(srv, "now", input=BASE)
    assert_clean_error(p, name="panto-send")
    assert len(srv.requests) == 2 and b"Unknown parameter: 'prompt_cache_key'" in p.stderr


def test_another_4xx_fails_at_once_with_the_servers_message(srv):
    srv.push(S.error_reply(400, "Invalid 'messages[1].content': too short"))
    p = send(srv, "now", input=BASE)
    assert_clean_error(p, name="panto-send")
    assert len(srv.requests) == 1 and stderr_lines(p) == [
        "panto-send: openai: HTTP 400: Invalid 'messages[1].content': too short"]


# --- usage and stop reasons -----------------------------------------------------------

def test_openai_cache_writes_are_counted_apart(srv):
    usage = {"prompt_tokens": 1000, "completion_tokens": 10,
             "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300}}
    srv.push(S.openai_text("ok", usage=usage))
    p = send(srv, "now", input=BASE)
    assert reply_of(p)["usage"] == {"input": 100, "output": 10, "cacheRead": 600, "cacheWrite": 300}
    srv.push(S.openai_text("ok", usage={"prompt_tokens": 5, "completion_tokens": 1,
                                        "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 3}}))
    assert reply_of(send(srv, "now", input=BASE))["usage"]["input"] == 0  # never below 0


@pytest.mark.parametrize("wire, stop", [("model_context_window_exceeded", "contextFull"),
                                        ("pause_turn", "stop"), ("refusal", "error"),
                                        ("max_tokens", "length")])
def test_anthropic_stop_reasons(srv, wire, stop):
    srv.push(S.anthropic_text("partial", stop=wire))
    p = send(srv, "-p", "anthropic", "now", input=AN_BASE)
    assert p.returncode == 0, p.stderr
    assert reply_of(p)["stopReason"] == stop


def test_a_cut_off_openai_stream_fails_the_turn(srv):
    chunks = [S.oa_chunk({"role": "assistant", "content": ""}), S.oa_chunk({"content": "half a rep"}),
              S.oa_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                          "function": {"name": "bash", "arguments": '{"comm'}}]})]
    srv.push(S.openai_stream(chunks, done=False))
    p = send(srv, "now", input=BASE)
    assert_clean_error(p, name="panto-send")
    assert [e["message"]["role"] for e in entries_after(p.stdout, BASE)] == ["user"]
    assert b"ended before the end of the reply" in p.stderr


def test_a_stream_cut_after_its_finish_reason_is_kept(srv):
    chunks = [S.oa_chunk({"content": "whole"}), S.oa_chunk({}, finish="stop")]
    srv.push(S.openai_stream(chunks, done=False))
    p = send(srv, "now", input=BASE)
    assert p.returncode == 0, p.stderr
    assert reply_of(p)["content"] == [{"type": "text", "text": "whole"}]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_tool_arguments_are_kept_but_never_sent(srv, provider):
    model = "claude-sonnet-5-5" if provider == "anthropic" else "gpt-4o"
    bad = '{"command": "ls'
    stream = jsonl(HEADER, user("list", provider=provider, model=model),
                   assistant([{"type": "toolUse", "id": "call_1", "name": "bash", "input": bad}],
                             provider=provider, model=model, stop="toolUse"),
                   {"type": "message", "id": "u0000002", "parentId": "a0000001",
                    "timestamp": "2026-04-25T14:00:02.000Z", "provider": provider, "model": model,
                    "message": {"role": "user", "content": [
                        {"type": "toolResult", "toolUseId": "call_1", "content": "not valid JSON",
                         "isError": True}]}})
    srv.push(S.anthropic_text("ok") if provider == "anthropic" else S.openai_text("ok"))
    p = send(srv, input=stream)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(stream)  # the session keeps the arguments as they came
    msg = body(srv)["messages"][1]
    if provider == "anthropic":
        assert msg["content"][0]["input"] == {}
    else:
        assert msg["tool_calls"][0]["function"]["arguments"] == "{}"


def test_tool_uses_are_not_printed_by_panto_send(srv):
    srv.push(S.openai_tools([("call_1", "bash", '{"command":"ls -la"}')]))
    p = send(srv, "--live", "--tools", "now", input=BASE)
    assert p.returncode == 0, p.stderr
    assert b"ls -la" not in p.stderr and b"bash" not in p.stderr


# --- Ctrl-C --------------------------------------------------------------------------

def test_ctrl_c_keeps_the_partial_openai_reply(srv):
    chunks = [S.oa_chunk({"role": "assistant", "content": ""}), S.oa_chunk({"content": "The first half"}),
              S.oa_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                          "function": {"name": "bash", "arguments": '{"co'}}]})]
    srv.push(S.openai_stream(chunks, done=False, stall_after=3, stall=30))
    p = interrupt_when(srv, ["now"], BASE, b"The first half")
    assert p.returncode == 130, p.stderr
    assert "Traceback" not in p.stderr.decode()
    assert p.stderr.rstrip().split(b"\n")[-1].startswith(b"panto-send: interrupted")
    user_entry, reply = entries_after(p.stdout, BASE)
    assert user_entry["message"]["content"][-1]["text"] == "now"
    msg = reply["message"]
    assert msg["stopReason"] == "aborted" and reply["parentId"] == user_entry["id"]
    assert msg["content"] == [{"type": "text", "text": "The first half"}]  # the unfinished call is dropped
    assert "usage" not in msg
    secret_free(p)


def test_ctrl_c_keeps_anthropic_thinking_and_text_not_a_starting_count(srv):
    events = [S.an_start({"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 30}),
              S.an_block(0, {"type": "thinking", "thinking": ""}),
              S.an_delta(0, {"type": "thinking_delta", "thinking": "pondering"}),
              S.an_delta(0, {"type": "signature_delta", "signature": "SIG"}), S.an_stop(0),
              S.an_block(1, {"type": "text", "text": ""}),
              S.an_delta(1, {"type": "text_delta", "text": "Here goes."}), S.an_stop(1),
              S.an_block(2, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}),
              S.an_delta(2, {"type": "input_json_delta", "partial_json": '{"command": "l'})]
    srv.push(S.anthropic_stream(events, stall_after=len(events), stall=30))
    # (a text ending in "s" would be held back: it could be the start of the key "sk-...")
    p = interrupt_when(srv, ["-p", "anthropic", "now"], AN_BASE, b"Here goes.")
    assert p.returncode == 130, p.stderr
    msg = entries_after(p.stdout, AN_BASE)[-1]["message"]
    assert msg["stopReason"] == "aborted"
    assert msg["content"] == [{"type": "thinking", "thinking": "pondering", "signature": "SIG"},
                              {"type": "text", "text": "Here goes."}]
    # message_start's output_tokens counts nothing of what streamed after it: no message_delta
    # counted the reply, so its usage is unknown, not 1 (SPEC 5.1 "never a made-up zero")
    assert "usage" not in msg


# --- errors on one line, the context-full refusal ------------------------------------------

def test_a_multi_line_error_is_one_line_and_cut(srv):
    message = "first line\n\n\tsecond    line\r\n" + "x" * 1000
    srv.push(S.error_reply(400, message, "invalid_request_error", style="anthropic"))
    p = send(srv, "-p", "anthropic", "now", input=AN_BASE)
    assert_clean_error(p, name="panto-send")
    (line,) = stderr_lines(p)
    assert "first line second line xxx" in line and len(line) < 400


def test_an_error_event_is_one_line(srv):
    srv.push(S.anthropic_stream([S.an_start(), ("error", {"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded\nplease\n\nretry"}})]))
    p = send(srv, "-p", "anthropic", "now", input=AN_BASE)
    assert_clean_error(p, name="panto-send")
    assert stderr_lines(p) == ["panto-send: anthropic: error in the stream: Overloaded please retry"]


@pytest.mark.parametrize("provider, message", [
    ("anthropic", "prompt is too long: 215000 tokens > 200000 maximum"),
    ("openai", "This model's maximum context length is 128000 tokens. However, your messages resulted in "
               "130000 tokens. Please reduce the length of the messages."),
])
def test_context_full_refusal_exits_3(srv, provider, message):
    srv.push(S.error_reply(400, message, "invalid_request_error", style=provider))
    p = send(srv, "-p", provider, "-m", "some-model", "now", input=BASE)
    assert_clean_error(p, status=3, name="panto-send")
    assert stderr_lines(p) == ["panto-send: the prompt is too long for the context window of some-model "
                               "(compact the session: panto-send --compact)"]
    assert [e["message"]["role"] for e in entries_after(p.stdout, BASE)] == ["user"]


def test_an_anthropic_index_that_is_not_a_number_is_a_clear_error(srv):
    srv.push(S.anthropic_stream([S.an_start(), ("content_block_start", {
        "type": "content_block_start", "index": {"i": 0}, "content_block": {"type": "text", "text": ""}})]))
    p = send(srv, "-p", "anthropic", "now", input=AN_BASE)
    assert_clean_error(p, name="panto-send")
    assert b"malformed stream" in p.stderr and b"index" in p.stderr


# --- keys that are not secrets -------------------------------------------------------------

def test_a_short_key_changes_no_text(srv, tmp_path):
    srv.push(S.openai_text("none of them, x marks none"))
    p = send(srv, "--live", "say none, x", input=BASE, OPENAI_API_KEY="none")
    assert p.returncode == 0, p.stderr
    assert b"[redacted]" not in p.stdout + p.stderr
    u, a = entries_after(p.stdout, BASE)
    assert u["message"]["content"][-1]["text"] == "say none, x"
    assert a["message"]["content"] == [{"type": "text", "text": "none of them, x marks none"}]
    assert b"none of them, x marks none" in p.stderr
    # and the session file panto-log writes holds it intact
    f = tmp_path / "s.jsonl"
    log = subprocess.run([shutil.which("panto-log"), "append", str(f)], input=p.stdout, capture_output=True)
    assert log.returncode == 0, log.stderr
    assert f.read_bytes().count(b"none") == p.stdout.count(b"none") >= 3


def test_a_key_in_the_base_url_is_hidden(srv):
    secret = "urlkey-0123456789abcdef"
    srv.push(S.error_reply(400, f"bad request for key {secret}"))
    env = env_for(srv, OPENAI_BASE_URL=f"http://user:{secret}@127.0.0.1:{srv.port}/v1")
    from conftest import run

    p = run(["panto-send", "now"], input=BASE, env=env)
    assert_clean_error(p, name="panto-send")
    assert secret.encode() not in p.stderr + p.stdout and b"[redacted]" in p.stderr


def test_the_server_ignoring_stream_true_is_named(srv):
    """Plain JSON that is not a reply of the API asked for is named as such."""
    srv.push({"status": 200, "body": {"object": "list", "data": []}})
    p = send(srv, "now", input=BASE)
    assert_clean_error(p, name="panto-send")
    assert b"the server ignored stream: true" in p.stderr and len(stderr_lines(p)) == 1


def test_sse_parser_is_linear_in_a_long_line():
    """A 4 MB line in 1 KB reads: joined once (a quadratic parser copies ~8 GB here)."""
    import time

    from pantolib.providers.sse import Parser

    payload = b"data: " + orjson.dumps({"t": "y" * (4 << 20)}) + b"\n\n"
    p, got = Parser(), []
    start = time.process_time()
    for i in range(0, len(payload), 1024):
        got += p.feed(payload[i:i + 1024])
    spent = time.process_time() - start
    assert len(got) == 1 and len(got[0].data) == len(payload) - 8
    assert spent < 2.0, f"{spent:.2f} s of CPU for one 4 MB line"
