"""The wire layer on its own: SSE framing, the two stream accumulators, request
mapping in both directions, error messages and redaction. Pure functions fed
with documented wire data; the end-to-end runs are in test_send*.py."""
import json

import orjson
import pytest

from pantolib import providers
from pantolib.errors import ProviderError
from pantolib.providers import anthropic_messages as an
from pantolib.providers import openai_chat as oa
from pantolib.providers.sse import Event, Parser


def parse(*chunks):
    p = Parser()
    out = []
    for c in chunks:
        out += p.feed(c)
    p.close()
    return [(e.event, e.data) for e in out]


# --- SSE framing (WHATWG) ------------------------------------------------------

STREAM = b"event: a\ndata: one\n\n: keep-alive\ndata:two\ndata:  three\n\ndata: \xe2\x80\xa8\xc3\xa9\n\n"
EXPECTED = [("a", b"one"), ("message", b"two\n three"), ("message", b"\xe2\x80\xa8\xc3\xa9")]


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_sse_line_ends_lf_cr_crlf(eol):
    assert parse(STREAM.replace(b"\n", eol)) == EXPECTED


def test_sse_crlf_split_at_every_point_and_byte_by_byte():
    s = STREAM.replace(b"\n", b"\r\n")
    for i in range(len(s) + 1):
        assert parse(s[:i], s[i:]) == EXPECTED, i
    assert parse(*[s[i:i + 1] for i in range(len(s))]) == EXPECTED


def test_sse_lone_cr_then_lf_in_next_read_is_one_line_end():
    # "data: x\r" + "\n\r\n": CR LF (one end) then CR LF (the blank line)
    assert parse(b"data: x\r", b"\n\r\n") == [("message", b"x")]
    # a CR that ends a read, then a blank line made of a lone CR
    assert parse(b"data: x\r", b"\r") == [("message", b"x")]


def test_sse_comments_space_and_joined_data():
    assert parse(b":comment\ndata:a\ndata: b\ndata\n\n") == [("message", b"a\nb\n")]


def test_sse_unicode_line_separators_survive():
    text = "x\u2028y\u2029z\u0085w"
    raw = b"data: " + json.dumps({"t": text}, ensure_ascii=False).encode() + b"\n\n"
    (ev,) = parse(raw)
    assert orjson.loads(ev[1])["t"] == text


def test_sse_multibyte_utf8_cut_across_reads():
    raw = ("data: " + json.dumps({"t": "héllo 🌍 世界"}, ensure_ascii=False) + "\n\n").encode()
    pieces = [raw[i:i + 1] for i in range(len(raw))]
    (ev,) = parse(*pieces)
    assert orjson.loads(ev[1])["t"] == "héllo 🌍 世界"


def test_sse_unfinished_event_is_discarded_and_blank_lines_without_data_dispatch_nothing():
    assert parse(b"event: x\n\ndata: a\n\ndata: tail\n") == [("message", b"a")]


def test_sse_bom_is_dropped_even_split():
    assert parse(b"\xef\xbb", b"\xbfdata: a\n\n") == [("message", b"a")]


def test_sse_field_without_colon_and_unknown_fields():
    assert parse(b"id: 7\nretry: 10\nfoo: bar\ndata: z\n\n") == [("message", b"z")]


# --- OpenAI stream -------------------------------------------------------------

def run_oa(chunks):
    acc = oa.Accumulator()
    for c in chunks:
        acc.feed(Event("message", c if isinstance(c, bytes) else orjson.dumps(c)))
        if acc.done:
            break
    return acc.result()


def ch(delta=None, finish=None, **kw):
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **kw}


USAGE = {"prompt_tokens": 150, "completion_tokens": 42, "prompt_tokens_details": {"cached_tokens": 120},
         "completion_tokens_details": {"reasoning_tokens": 18}}


def test_openai_usage_after_finish_reason_is_read():
    content, stop, usage = run_oa([ch({"role": "assistant"}), ch({"content": "hi"}), ch(finish="stop"),
                                   {"choices": [], "usage": USAGE}, b"[DONE]"])
    assert content == [{"type": "text", "text": "hi"}]
    assert stop == "stop"
    assert usage == {"input": 30, "output": 42, "cacheRead": 120, "reasoning": 18}


def test_openai_no_usage_chunk_is_unknown_not_zero():
    assert run_oa([ch({"content": "hi"}), ch(finish="stop"), b"[DONE]"])[2] is None


def test_openai_zero_usage_is_known():
    u = {"prompt_tokens": 0, "completion_tokens": 0}
    assert run_oa([ch({"content": "x"}), {"choices": [], "usage": u}])[2] == {"input": 0, "output": 0}


def test_openai_usage_on_chunk_with_choices_inside_choice_and_missing_details():
    assert run_oa([ch({"content": "a"}, "stop", usage={"prompt_tokens": 9, "completion_tokens": 2})])[2] == \
        {"input": 9, "output": 2}
    inner = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                          "usage": {"prompt_tokens": 4, "completion_tokens": 1}}]}
    assert run_oa([ch({"content": "a"}), inner])[2] == {"input": 4, "output": 1}


def test_openai_last_usage_wins_and_null_usage_on_chunks_is_skipped():
    chunks = [ch({"content": "a"}, usage=None), {"choices": [], "usage": {"prompt_tokens": 1}},
              ch(finish="stop", usage=None), {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}]
    assert run_oa(chunks)[2] == {"input": 7, "output": 3}


def test_openai_cached_more_than_prompt_clamps_input_at_zero():
    u = {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 25}}
    assert run_oa([ch({"content": "a"}), {"choices": [], "usage": u}])[2] == {"input": 0, "output": 1, "cacheRead": 25}


def test_openai_azure_empty_choices_first_chunk():
    azure = {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]}
    content, stop, usage = run_oa([azure, ch({"content": "ok"}), ch(finish="stop"), b"[DONE]"])
    assert content == [{"type": "text", "text": "ok"}] and usage is None


def test_openai_empty_string_deltas_neither_open_nor_split_blocks():
    assert run_oa([ch({"content": ""}), ch({"content": "a"}), ch({"content": ""}), ch({"content": "b"})])[0] == \
        [{"type": "text", "text": "ab"}]
    assert run_oa([ch({"role": "assistant", "content": ""}), ch({"content": ""}), ch(finish="stop")])[0] == []


def test_openai_reasoning_content_and_reasoning_taken_once():
    chunks = [ch({"reasoning_content": "think", "reasoning": "think"}), ch({"reasoning": " more"}),
              ch({"content": "answer"}), ch(finish="stop")]
    assert run_oa(chunks)[0] == [{"type": "thinking", "thinking": "think more"},
                                 {"type": "text", "text": "answer"}]


def test_openai_parallel_fragmented_tool_calls_several_in_one_delta():
    chunks = [
        ch({"tool_calls": [{"index": 0, "id": "call_", "function": {"name": "ba"}}]}),
        ch({"tool_calls": [{"index": 0, "id": "a1", "function": {"name": "sh", "arguments": '{"comm'}},
                           {"index": 1, "id": "call_b2", "type": "function", "function": {"name": "read"}}]}),
        ch({"tool_calls": [{"index": 1, "function": {"arguments": '{"path": "x"}'}},
                           {"index": 0, "function": {"arguments": 'and": "ls"}'}}]}),
        ch(finish="tool_calls"), b"[DONE]"]
    content, stop, _ = run_oa(chunks)
    assert stop == "toolUse"
    assert content == [
        {"type": "toolUse", "id": "call_a1", "name": "bash", "input": '{"command": "ls"}'},
        {"type": "toolUse", "id": "call_b2", "name": "read", "input": '{"path": "x"}'}]


def test_openai_tool_id_and_name_repeated_whole_are_not_doubled():
    chunks = [ch({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash", "arguments": "{"}}]}),
              ch({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash", "arguments": "}"}}]})]
    assert run_oa(chunks)[0] == [{"type": "toolUse", "id": "c1", "name": "bash", "input": "{}"}]


def test_openai_tool_without_arguments_gets_empty_object():
    chunks = [ch({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "now"}}]}), ch(finish="tool_calls")]
    assert run_oa(chunks)[0][0]["input"] == "{}"


@pytest.mark.parametrize("wire,ours", [("stop", "stop"), ("length", "length"), ("tool_calls", "toolUse"),
                                       ("content_filter", "error")])
def test_openai_stop_reasons(wire, ours):
    assert run_oa([ch({"content": "a"}), ch(finish=wire)])[1] == ours


def test_openai_stream_without_done_is_finalized_after_a_finish_reason():
    acc = oa.Accumulator()
    acc.feed(Event("message", orjson.dumps(ch({"content": "a"}))))
    assert not acc.done and not acc.ended()  # cut off: no finish_reason yet
    acc.feed(Event("message", orjson.dumps(ch({}, finish="stop"))))
    assert not acc.done and acc.ended()
    assert acc.result()[0] == [{"type": "text", "text": "a"}]


def test_openai_done_only_as_the_whole_data_field():
    with pytest.raises(ProviderError, match="malformed"):
        run_oa([ch({"content": "a"}), b"[DONE] "])


def test_openai_error_object_in_a_200_stream():
    with pytest.raises(ProviderError, match="overloaded right now"):
        run_oa([ch({"content": "a"}), {"error": {"message": "overloaded right now", "type": "server_error"}}])


@pytest.mark.parametrize("bad", [b"{not json", b"[1, 2]", b'{"choices": [3]}'])
def test_openai_malformed_events(bad):
    with pytest.raises(ProviderError, match="malformed"):
        run_oa([bad])


def test_openai_live_callbacks():
    seen = []
    acc = oa.Accumulator(on_text=lambda s: seen.append(("t", s)), on_thinking=lambda s: seen.append(("r", s)))
    for c in (ch({"reasoning_content": "hm"}), ch({"content": "yo"}), ch({"content": ""})):
        acc.feed(Event("message", orjson.dumps(c)))
    assert seen == [("r", "hm"), ("t", "yo")]


# --- Anthropic stream ----------------------------------------------------------

def run_an(events):
    acc = an.Accumulator()
    for name, data in events:
        acc.feed(Event(name, data if isinstance(data, bytes) else orjson.dumps({"type": name, **data})))
    return acc.result()


def start(usage=None):
    m = {"id": "m", "role": "assistant", "content": [], "model": "claude"}
    if usage is not None:
        m["usage"] = usage
    return ("message_start", {"message": m})


def block(i, b):
    return ("content_block_start", {"index": i, "content_block": b})


def delta(i, d):
    return ("content_block_delta", {"index": i, "delta": d})


def stop(i):
    return ("content_block_stop", {"index": i})


def end(reason="end_turn", usage=None):
    d = {"delta": {"stop_reason": reason}}
    if usage is not None:
        d["usage"] = usage
    return [("message_delta", d), ("message_stop", {})]


def text_turn(start_usage=None, end_usage=None, reason="end_turn"):
    return [start(start_usage), block(0, {"type": "text", "text": ""}),
            delta(0, {"type": "text_delta", "text": "ok"}), stop(0)] + end(reason, end_usage)


def test_anthropic_usage_merged_from_message_start_and_delta():
    u = run_an(text_turn({"input_tokens": 100, "cache_creation_input_tokens": 50,
                          "cache_read_input_tokens": 200, "output_tokens": 1}, {"output_tokens": 42}))[2]
    assert u == {"input": 100, "output": 42, "cacheRead": 200, "cacheWrite": 50}


def test_anthropic_no_usage_is_unknown():
    assert run_an(text_turn())[2] is None
    assert run_an(text_turn({}, {}))[2] is None


def test_anthropic_repeated_counts_in_delta_are_totals_not_increments():
    u = run_an(text_turn({"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5},
                         {"input_tokens": 10, "output_tokens": 30, "cache_read_input_tokens": 5}))[2]
    assert u == {"input": 10, "output": 30, "cacheRead": 5}


def test_anthropic_null_fields_leave_counts_unchanged_and_1h_cache_writes():
    u = run_an(text_turn({"input_tokens": 10, "cache_creation_input_tokens": 8,
                          "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 6}},
                         {"input_tokens": None, "output_tokens": 3}))[2]
    assert u == {"input": 10, "output": 3, "cacheWrite": 8, "cacheWrite1h": 6}


def test_anthropic_ping_and_unknown_events_ignored():
    events = text_turn()
    events.insert(1, ("ping", {}))
    events.insert(3, ("brand_new_event", {"whatever": 1}))
    assert run_an(events)[0] == [{"type": "text", "text": "ok"}]


def test_anthropic_text_block_without_deltas_is_dropped():
    events = [start(), block(0, {"type": "text", "text": ""}), stop(0),
              block(1, {"type": "text", "text": ""}), delta(1, {"type": "text_delta", "text": "b"}), stop(1)] + end()
    assert run_an(events)[0] == [{"type": "text", "text": "b"}]


def test_anthropic_thinking_signature_and_tool_json_split_mid_token():
    events = [start({"input_tokens": 3}), block(0, {"type": "thinking", "thinking": ""}),
              delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
              delta(0, {"type": "thinking_delta", "thinking": "see."}),
              delta(0, {"type": "signature_delta", "signature": "EqQBsig=="}), stop(0),
              block(1, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}),
              delta(1, {"type": "input_json_delta", "partial_json": '{"comm'}),
              delta(1, {"type": "input_json_delta", "partial_json": 'and": "l'}),
              delta(1, {"type": "input_json_delta", "partial_json": 's"}'}), stop(1)] + end("tool_use")
    content, reason, _ = run_an(events)
    assert content == [{"type": "thinking", "thinking": "Let me see.", "signature": "EqQBsig=="},
                       {"type": "toolUse", "id": "toolu_1", "name": "bash", "input": '{"command": "ls"}'}]
    assert reason == "toolUse"


def test_anthropic_redacted_thinking_arrives_whole():
    events = [start(), block(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy"}), stop(0)] + end()
    assert run_an(events)[0] == [{"type": "redactedThinking", "data": "EmwKAhgBEgy"}]


def test_anthropic_tool_with_no_arguments():
    events = [start(), block(0, {"type": "tool_use", "id": "t", "name": "now", "input": {}}), stop(0)] + end("tool_use")
    assert run_an(events)[0] == [{"type": "toolUse", "id": "t", "name": "now", "input": "{}"}]


@pytest.mark.parametrize("wire,ours", [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
                                       ("tool_use", "toolUse"), ("refusal", "error")])
def test_anthropic_stop_reasons(wire, ours):
    assert run_an(text_turn(reason=wire))[1] == ours


def test_anthropic_error_event_after_content_started():
    events = text_turn()[:3] + [("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})]
    with pytest.raises(ProviderError, match="Overloaded"):
        run_an(events)


def test_anthropic_stream_cut_before_any_stop_is_not_finished():
    acc = an.Accumulator()
    for name, data in text_turn()[:3]:
        acc.feed(Event(name, orjson.dumps({"type": name, **data})))
    assert not acc.ended()


# --- requests ---------------------------------------------------------------------

HISTORY = [
    {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
    {"role": "user", "content": [{"type": "text", "text": "list"}]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
        {"type": "thinking", "thinking": "unsigned"},
        {"type": "redactedThinking", "data": "RED"},
        {"type": "text", "text": "Running."},
        {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"command":"ls"}'},
        {"type": "toolUse", "id": "call.2", "name": "read", "input": ""}]},
    {"role": "user", "content": [
        {"type": "toolResult", "toolUseId": "call_1", "content": "a\nb"},
        {"type": "toolResult", "toolUseId": "call.2", "content": "boom", "isError": True}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
]
TOOLS = [{"name": "bash", "description": "run", "parameters": {"type": "object", "properties": {}}}]


def test_openai_request_mapping():
    opts = providers.Options("gpt-x", "http://h/v1/", api_key="sk-k", tools=TOOLS)
    url, headers, body = oa.build_request(HISTORY, opts)
    assert url == "http://h/v1/chat/completions"
    assert headers["authorization"] == "Bearer sk-k"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [{"type": "function", "function": TOOLS[0] | {}}]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": "Running.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}},
            {"id": "call.2", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a\nb"},
        {"role": "tool", "tool_call_id": "call.2", "content": "boom"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "thanks"}]


def test_openai_request_options():
    _, headers, body = oa.build_request(HISTORY[:2], providers.Options(
        "m", "http://h", max_tokens=100, reasoning="high", include_usage=False))
    assert "authorization" not in headers and "stream_options" not in body
    assert body["max_tokens"] == 100 and body["reasoning_effort"] == "high"
    _, _, body = oa.build_request(HISTORY[:2], providers.Options("m", oa.DEFAULT_BASE_URL, max_tokens=5,
                                                                 reasoning=None))
    assert body["max_completion_tokens"] == 5 and "reasoning_effort" not in body


def test_anthropic_request_mapping():
    opts = providers.Options("claude-x", "http://h", api_key="ak", tools=TOOLS, api_version="2099-01-01")
    history = [dict(m, provider="anthropic", model="claude-x") if m["role"] == "assistant" else m
               for m in HISTORY]  # thinking goes back to the model that wrote it
    url, headers, body = an.build_request(history, opts)
    assert url == "http://h/v1/messages"
    assert headers["x-api-key"] == "ak" and headers["anthropic-version"] == "2099-01-01"
    assert "authorization" not in headers
    assert body["system"] == "be brief" and body["stream"] is True and body["max_tokens"] == an.DEFAULT_MAX_TOKENS
    assert body["cache_control"] == {"type": "ephemeral"}  # caching is on by default
    assert body["tools"] == [{"name": "bash", "description": "run", "input_schema": TOOLS[0]["parameters"]}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "list"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
            {"type": "redacted_thinking", "data": "RED"},
            {"type": "text", "text": "Running."},
            {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": "call_2", "name": "read", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "a\nb"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "boom", "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]}]


def test_anthropic_reasoning_budget_and_default_version():
    _, headers, body = an.build_request(HISTORY[:2], providers.Options("c", "http://h", reasoning=24576))
    assert headers["anthropic-version"] == an.DEFAULT_VERSION
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 24576}
    assert body["max_tokens"] > 24576     # panto's own default makes room for the budget
    _, _, body = an.build_request(HISTORY[:2], providers.Options("c", "http://h", max_tokens=3000, reasoning=2048))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 3000     # a limit the user set is never raised (SPEC 5.1)


def test_anthropic_merges_consecutive_roles_with_results_first():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "toolUse", "id": "t1", "name": "bash", "input": "{}"}]},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": [{"type": "toolResult", "toolUseId": "t1", "content": "r"}]}]
    _, wire = an.wire_messages(msgs)
    assert wire[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "r"}, {"type": "text", "text": "b"}]}
    assert len(wire) == 3


def test_normalize_answers_unanswered_uses_and_drops_orphan_results():
    msgs = [{"role": "user", "content": [{"type": "toolResult", "toolUseId": "ghost", "content": "x"},
                                         {"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "toolUse", "id": "u1", "name": "bash", "input": "{}"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "again"}]},
            {"role": "user", "content": [{"type": "toolResult", "toolUseId": "ghost2", "content": "x"}]}]
    out = providers.normalize(msgs)
    assert out[0]["content"] == [{"type": "text", "text": "hi"}]
    assert out[2]["role"] == "user" and out[2]["content"][0]["toolUseId"] == "u1"
    assert out[2]["content"][0]["isError"] is True
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert msgs[0]["content"][0]["toolUseId"] == "ghost"  # the session itself is untouched


# --- configuration -------------------------------------------------------------

def flags(**kw):
    return {"provider": None, "model": None, "base_url": None, "reasoning": None, "max_tokens": None, **kw}


def test_configure_precedence_flags_then_session_then_environment():
    env = {"PANTO_API_STYLE": "anthropic_messages", "ANTHROPIC_MODEL": "env-claude", "OPENAI_MODEL": "env-gpt",
           "ANTHROPIC_API_KEY": "ak", "ANTHROPIC_MAX_TOKENS": "77", "OPENAI_REASONING": "low"}
    p, o, var = providers.configure(flags(), None, env)
    assert (p, o.model, o.api_key, o.max_tokens, var) == ("anthropic", "env-claude", "ak", 77, "ANTHROPIC_API_KEY")
    p, o, _ = providers.configure(flags(), ("openai", "sess-gpt"), env)
    assert (p, o.model, o.reasoning) == ("openai", "sess-gpt", "low")
    p, o, _ = providers.configure(flags(model="flag-m"), ("openai", "sess-gpt"), env)
    assert (p, o.model) == ("openai", "flag-m")
    # switching provider by flag does not carry the other provider's model over
    p, o, _ = providers.configure(flags(provider="anthropic"), ("openai", "sess-gpt"), env)
    assert (p, o.model) == ("anthropic", "env-claude")
    p, o, _ = providers.configure(flags(), None, {})
    assert (p, o.model, o.base_url) == ("openai", oa.DEFAULT_MODEL, oa.DEFAULT_BASE_URL)


def test_configure_rejects_unknown_style():
    from pantolib.errors import UsageError

    with pytest.raises(UsageError, match="PANTO_API_STYLE"):
        providers.configure(flags(), None, {"PANTO_API_STYLE": "grpc"})


# --- http helpers ----------------------------------------------------------------

def test_error_detail_shapes():
    from pantolib.http import error_detail

    assert error_detail(b'{"error":{"message":"bad key","type":"x"}}') == "bad key"
    assert error_detail(b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}') == "slow down"
    assert error_detail(b'[{"error":{"message":"wrapped"}}]') == "wrapped"
    assert error_detail(b'{"detail":"unprocessable"}') == "unprocessable"
    assert error_detail(b"<html>\n Bad   Gateway </html>") == "<html> Bad Gateway </html>"


def test_retry_after_forms():
    from pantolib.http import retry_after

    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "1500"}) == 1.5
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


# --- today's APIs: levels, negotiation, context full -----------------------------------

def test_configure_reasoning_and_cache():
    _, o, _ = providers.configure(flags(reasoning="OFF"), None, {})
    assert o.reasoning is None and o.cache == "5m"
    _, o, _ = providers.configure(flags(provider="anthropic"), None, {"PANTO_REASONING": "30000",
                                                                      "PANTO_CACHE": "1h"})
    assert o.reasoning == 30000 and o.cache == "1h"
    _, o, _ = providers.configure(flags(cache="off"), None, {"PANTO_CACHE": "1h", "OPENAI_REASONING": "max"})
    assert o.cache == "off" and o.reasoning == "max"


class Refused(Exception):
    def __init__(self, detail, status=400):
        self.detail, self.status = detail, status


def test_openai_negotiation_steps():
    o = providers.Options("m", oa.DEFAULT_BASE_URL, max_tokens=10, reasoning="high", session_id="s")
    assert oa.build_request(HISTORY[:2], o)[2]["max_completion_tokens"] == 10
    assert "max_tokens" in oa.negotiate(Refused("Unsupported parameter: 'max_completion_tokens'"), o)
    body = oa.build_request(HISTORY[:2], o)[2]
    assert body["max_tokens"] == 10 and "max_completion_tokens" not in body
    assert oa.negotiate(Refused("Unsupported parameter: 'max_completion_tokens'"), o) is None  # once
    assert oa.negotiate(Refused("reasoning_effort is not supported", status=404), o) is None   # not a 400/422
    assert oa.negotiate(Refused("messages: too long"), o) is None


def test_anthropic_negotiation_steps():
    o = providers.Options("c", "http://h", reasoning="xhigh", cache="1h", tools=TOOLS)
    assert "24576" in an.negotiate(Refused("output_config.effort: Input should be 'low', 'medium' or 'high'"), o)
    assert an.build_request(HISTORY[:2], o)[2]["thinking"] == {"type": "enabled", "budget_tokens": 24576}
    assert "5-minute" in an.negotiate(Refused("tools.0.cache_control.ttl: Extra inputs are not permitted"), o)
    body = an.build_request(HISTORY[:2], o)[2]
    assert body["system"] == "be brief" and "cache_control" not in body["tools"][0]
    assert body["cache_control"] == {"type": "ephemeral"}
    assert "without prompt caching" in an.negotiate(Refused("cache_control: Extra inputs"), o)
    assert "cache_control" not in an.build_request(HISTORY[:2], o)[2]
    assert an.negotiate(Refused("cache_control: Extra inputs"), o) is None


@pytest.mark.parametrize("detail, full", [
    ("prompt is too long: 215000 tokens > 200000 maximum", True),
    ("This model's maximum context length is 8192 tokens", True),
    ("the request exceeds the available context size, try increasing it", True),
    ("max_tokens: must be at most 64000", False),
])
def test_context_full_is_recognised(detail, full):
    assert providers.context_full(Refused(detail)) is full
    assert providers.context_full(Refused(detail, status=500)) is False


def test_one_line():
    assert providers.one_line("a\n\n b\t\tc ") == "a b c"
    assert len(providers.one_line("x" * 1000)) == providers.MAX_DETAIL


def test_one_refusal_naming_several_fields_is_one_step_for_each():
    o = providers.Options("c", "http://h", reasoning="high", cache="1h", tools=TOOLS)
    note = an.negotiate(Refused("output_config: Extra inputs are not permitted; "
                                "tools.0.cache_control.ttl: Extra inputs are not permitted"), o)
    assert "24576" in note and "5-minute" in note and note.count("the server refused") == 1
    body = an.build_request(HISTORY[:2], o)[2]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 24576} and "output_config" not in body
    assert body["cache_control"] == {"type": "ephemeral"} and "cache_control" not in body["tools"][-1]
    # a proxy whose model takes no reasoning at all: no thinking, at once
    o = providers.Options("c", "http://h", reasoning="low")
    assert "without thinking" in an.negotiate(Refused("UnsupportedParamsError: c doesn't support "
                                                      "`reasoning.effort`"), o)
    assert "thinking" not in an.build_request(HISTORY[:2], o)[2]


def test_a_field_named_but_not_sent_is_not_negotiated():
    # a local server gets max_tokens; a refusal that names max_completion_tokens is about something else
    o = providers.Options("m", "http://127.0.0.1:8080/v1", max_tokens=10, session_id="s")
    assert oa.negotiate(Refused("Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."), o) is None
    # serde lists what it would take: those names are not refused
    assert oa.negotiate(Refused("unknown field `foo`, expected one of `model`, `prompt_cache_key`, "
                                "`stream_options`"), o) is None
    assert o.dropped == set()
