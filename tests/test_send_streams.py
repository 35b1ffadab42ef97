"""panto-send over real sockets with untidy wire streams: every scripted case of
both APIs ends in the right blocks, stop reason and usage in the session."""
import json

import orjson
import pytest

import sse_server as S
from builders import lines, reply_of
from conftest import assert_clean_error, roles, send


def an(srv, *args, **kw):
    return send(srv, "-p", "anthropic", *args, **kw)


# --- OpenAI -------------------------------------------------------------------------

def test_openai_text_with_unicode_cut_across_reads(srv):
    text = "héllo 🌍 — line\u2028sep\u2029para\u0085nel 世界"
    rep = S.openai_text(text, pieces=[text[:3], text[3:9], text[9:]])
    rep.update(split=3, delay=0.001)  # 3-byte writes: every multi-byte character is cut somewhere
    srv.push(rep)
    msg = reply_of(send(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": text}]


def test_openai_crlf_framing_comments_and_split_lines(srv):
    chunks = [": hello\r\n\r\n"]
    for part in ("a", "b", "c"):
        chunks.append("data:" + json.dumps(S.oa_chunk({"content": part})) + "\r\n\r\n")
    chunks.append("data: [DONE]\r\n\r\n")
    srv.push(S.reply(chunks, split=1, delay=0.0005))
    assert reply_of(send(srv, "hi"))["content"] == [{"type": "text", "text": "abc"}]


def test_openai_cached_and_reasoning_tokens(srv):
    usage = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
             "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0}}
    srv.push(S.openai_text("done", usage=usage))
    assert reply_of(send(srv, "hi"))["usage"] == {"input": 86, "output": 300, "cacheRead": 1920, "reasoning": 256}


def test_openai_no_usage_chunk_means_no_usage(srv):
    srv.push(S.openai_text("done"))
    msg = reply_of(send(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "done"}] and msg["stopReason"] == "stop"
    assert "usage" not in msg       # unknown, never a made-up zero


def test_openai_no_done_is_finalized_with_what_arrived(srv):
    srv.push(S.openai_text("partial", usage={"prompt_tokens": 3, "completion_tokens": 2}, done=False))
    msg = reply_of(send(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "partial"}] and msg["usage"] == {"input": 3, "output": 2}
    assert msg["stopReason"] == "stop"


def test_openai_parallel_fragmented_tool_calls(srv):
    c = S.oa_chunk
    srv.push(S.openai_stream([
        c({"role": "assistant", "content": None}),
        c({"tool_calls": [{"index": 0, "id": "call_", "type": "function", "function": {"name": "ba", "arguments": ""}}]}),
        c({"tool_calls": [{"index": 0, "id": "A", "function": {"name": "sh", "arguments": "{\"command\""}},
                          {"index": 1, "id": "call_B", "type": "function", "function": {"name": "read", "arguments": "{\"pa"}}]}),
        c({"tool_calls": [{"index": 1, "function": {"arguments": "th\": \"x.py\"}"}},
                          {"index": 0, "function": {"arguments": ": \"ls -l\"}"}}]}),
        c({}, finish="tool_calls"), c(usage={"prompt_tokens": 10, "completion_tokens": 5}, choices=False)]))
    msg = reply_of(send(srv, "--tools", "hi"))
    assert msg["stopReason"] == "toolUse"
    assert msg["content"] == [
        {"type": "toolUse", "id": "call_A", "name": "bash", "input": '{"command": "ls -l"}'},
        {"type": "toolUse", "id": "call_B", "name": "read", "input": '{"path": "x.py"}'}]


def test_openai_azure_first_chunk_and_usage_on_a_choice_chunk(srv):
    srv.push(S.openai_stream([
        {"choices": [], "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]},
        S.oa_chunk({"content": ""}), S.oa_chunk({"content": "ok"}),
        S.oa_chunk({}, finish="stop", usage={"prompt_tokens": 7, "completion_tokens": 1})]))
    msg = reply_of(send(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "ok"}] and msg["usage"] == {"input": 7, "output": 1}


def test_openai_reasoning_content_becomes_thinking(srv):
    srv.push(S.openai_stream([S.oa_chunk({"reasoning_content": "hmm", "reasoning": "hmm"}),
                              S.oa_chunk({"content": "yes"}), S.oa_chunk({}, finish="length")]))
    msg = reply_of(send(srv, "hi"))
    assert msg["content"] == [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "yes"}]
    assert msg["stopReason"] == "length"


def test_openai_stream_options_refused_is_retried_without(srv):
    srv.push(S.error_reply(400, "Unrecognized request argument supplied: stream_options"), S.openai_text("ok"))
    msg = reply_of(send(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "ok"}] and "usage" not in msg
    first, second = srv.requests
    assert "stream_options" in first.body and "stream_options" not in second.body


def test_openai_error_object_in_a_200_stream_fails(srv):
    srv.push(S.openai_stream([S.oa_chunk({"content": "par"}),
                              {"error": {"message": "The server had an error processing your request."}}]))
    p = send(srv, "hi")
    assert_clean_error(p, name="panto-send")
    assert b"The server had an error" in p.stderr
    assert roles(p) == ["system", "user"]


@pytest.mark.parametrize("body", [["data: {\"choices\": [\n\n"], ["data: [1,2]\n\n"],
                                  ["<html>oops</html>"], []])
def test_openai_malformed_or_empty_streams_fail(srv, body):
    srv.push(S.reply(body))
    p = send(srv, "hi")
    assert_clean_error(p, name="panto-send")
    assert len(p.stderr.strip().split(b"\n")) == 1
    assert roles(p) == ["system", "user"]


# --- Anthropic ------------------------------------------------------------------------

def test_anthropic_text_usage_merged(srv):
    srv.push(S.anthropic_text("Hi!", {"input_tokens": 100, "output_tokens": 1}, {"output_tokens": 42}))
    msg = reply_of(an(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "Hi!"}] and msg["stopReason"] == "stop"
    assert msg["usage"] == {"input": 100, "output": 42}


def test_anthropic_cache_write_and_read_with_1h_part(srv):
    start = {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 3000,
             "cache_creation_input_tokens": 500,
             "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300}}
    srv.push(S.anthropic_text("ok", start, {"output_tokens": 9}))
    assert reply_of(an(srv, "hi"))["usage"] == {"input": 12, "output": 9, "cacheRead": 3000, "cacheWrite": 500,
                                               "cacheWrite1h": 300}


def test_anthropic_repeated_input_counts_in_message_delta(srv):
    start = {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 10}
    end = {"input_tokens": 50, "output_tokens": 77, "cache_read_input_tokens": 10}
    srv.push(S.anthropic_text("ok", start, end))
    assert reply_of(an(srv, "hi"))["usage"] == {"input": 50, "output": 77, "cacheRead": 10}


def test_anthropic_no_usage_means_no_usage(srv):
    srv.push(S.anthropic_text("ok"))
    assert "usage" not in reply_of(an(srv, "hi"))


def test_anthropic_thinking_signature_tool_use_split_mid_token(srv):
    srv.push(S.anthropic_tool("toolu_01", "bash", '{"command": "ls -la /tmp"}', text="Checking.",
                              thinking="I should list.", signature="EqQBCkgIARABGAIiQL",
                              start_usage={"input_tokens": 20}, end_usage={"output_tokens": 60}))
    msg = reply_of(an(srv, "--tools", "hi"))
    assert msg["stopReason"] == "toolUse"
    assert msg["content"] == [
        {"type": "thinking", "thinking": "I should list.", "signature": "EqQBCkgIARABGAIiQL"},
        {"type": "text", "text": "Checking."},
        {"type": "toolUse", "id": "toolu_01", "name": "bash", "input": '{"command": "ls -la /tmp"}'}]


def test_anthropic_ping_unknown_events_and_an_empty_text_block(srv):
    ev = [S.an_start({"input_tokens": 5}), ("ping", {"type": "ping"}),
          S.an_block(0, {"type": "text", "text": ""}), S.an_stop(0),
          ("future_event", {"type": "future_event", "x": 1}),
          S.an_block(1, {"type": "text", "text": ""}), S.an_delta(1, {"type": "text_delta", "text": "real"}),
          ("ping", {"type": "ping"}), S.an_stop(1)] + S.an_end("end_turn", {"output_tokens": 2})
    srv.push(S.anthropic_stream(ev))
    assert reply_of(an(srv, "hi"))["content"] == [{"type": "text", "text": "real"}]


def test_anthropic_redacted_thinking_and_tool_without_arguments(srv):
    ev = [S.an_start(), S.an_block(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}), S.an_stop(0),
          S.an_block(1, {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {}}), S.an_stop(1)]
    srv.push(S.anthropic_stream(ev + S.an_end("tool_use")))
    assert reply_of(an(srv, "--tools", "hi"))["content"] == [
        {"type": "redactedThinking", "data": "EmwKAhgBEgy3va"},
        {"type": "toolUse", "id": "toolu_9", "name": "bash", "input": "{}"}]


def test_anthropic_max_tokens_is_length(srv):
    srv.push(S.anthropic_text("cut", stop="max_tokens"))
    assert reply_of(an(srv, "hi"))["stopReason"] == "length"


def test_anthropic_error_event_after_content_started(srv):
    ev = [S.an_start({"input_tokens": 5}), S.an_block(0, {"type": "text", "text": ""}),
          S.an_delta(0, {"type": "text_delta", "text": "half"}),
          ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})]
    srv.push(S.anthropic_stream(ev))
    p = an(srv, "hi")
    assert_clean_error(p, name="panto-send")
    assert b"Overloaded" in p.stderr
    assert roles(p) == ["system", "user"]


def test_anthropic_stream_cut_before_the_end_fails(srv):
    ev = [S.an_start(), S.an_block(0, {"type": "text", "text": ""}), S.an_delta(0, {"type": "text_delta", "text": "x"})]
    srv.push(S.anthropic_stream(ev))
    p = an(srv, "hi")
    assert_clean_error(p, name="panto-send")
    assert b"ended before" in p.stderr


def test_anthropic_thinking_is_sent_back_with_its_signature(srv):
    srv.push(S.anthropic_tool("toolu_1", "bash", '{"command":"ls"}', thinking="plan", signature="SIG1"),
             S.anthropic_text("done"))
    p1 = an(srv, "--tools", "look")
    assert p1.returncode == 0, p1.stderr
    results = {"type": "message", "message": {"role": "user", "content": [
        {"type": "toolResult", "toolUseId": "toolu_1", "content": "a.txt"}]}}
    p2 = an(srv, "--tools", input=p1.stdout + orjson.dumps(results) + b"\n")
    assert p2.returncode == 0, p2.stderr
    sent = srv.requests[1].body["messages"]
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": "plan", "signature": "SIG1"}
    assert sent[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]
