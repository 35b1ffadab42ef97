"""OpenAI's Responses API through the real panto-send, over a real socket:
scripted streams of the documented event shapes give the same message as
the official SDK's own accumulator, requests validate strictly against the
SDK's request type, reasoning goes back byte for byte to its own model only,
tool loops and provider switches work, and every failure fails the turn."""
import subprocess

import orjson
import pytest

import responses_server as R
import sse_server as S
from builders import HEADER, assistant, jsonl, lines, reply_of, user
from conftest import assert_clean_error, env_for, send
from typed_check import check

MODEL = "gpt-test"
ENC = "gAAAAABpZ3+Kx/7Qe9WcM2Zl_enc-Y29udGVudA==" * 3   # base64 with + / = and repeats


def respond(srv, *args, **kw):
    return send(srv, "--api", "openai_responses", "-m", MODEL, *args, **kw)


def valid_request(body):
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    problems = check(body, ResponseCreateParamsStreaming)
    assert problems == [], problems
    assert body["stream"] is True and body["store"] is False


# --- the official SDK's reading of the same bytes -------------------------------------

def sdk_read(srv, rep):
    """Serve `rep` once more and read it with the openai SDK's own stream
    accumulator; returns the final response (or the incomplete one)."""
    import openai

    srv.push(rep)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-sdk-test-key-0000", max_retries=0)
    last = None
    with client.responses.stream(model=MODEL, input="hi") as stream:
        for ev in stream:
            if ev.type in ("response.completed", "response.incomplete"):
                last = ev.response
        if last is not None and last.status == "completed":
            last = stream.get_final_response()
    assert last is not None, "the SDK saw no end of the reply"
    return last


def sdk_message(resp):
    """The SDK's response in panto's terms (SPEC 3, 5.4), written apart from the module."""
    blocks = []
    for o in resp.output:
        if o.type == "reasoning":
            b = {"type": "thinking", "thinking": "\n\n".join(p.text for p in o.summary)}
            if o.encrypted_content:
                b["signature"] = o.encrypted_content
            b["itemId"] = o.id
            blocks.append(b)
        elif o.type == "message":
            text = "".join(c.text if c.type == "output_text" else c.refusal for c in o.content)
            if text:
                blocks.append({"type": "text", "text": text})
        elif o.type == "function_call":
            blocks.append({"type": "toolUse", "id": o.call_id, "name": o.name, "input": o.arguments})
    if resp.status == "incomplete":
        stop = {"max_output_tokens": "length", "content_filter": "error"}[resp.incomplete_details.reason]
    else:
        stop = "toolUse" if any(b["type"] == "toolUse" for b in blocks) else "stop"
    usage = None
    if resp.usage is not None:
        u = resp.usage
        cached = u.input_tokens_details.cached_tokens
        written = getattr(u.input_tokens_details, "cache_write_tokens", None) or 0
        usage = {"input": max(0, u.input_tokens - cached - written), "output": u.output_tokens,
                 "cacheRead": cached, "cacheWrite": written,
                 "reasoning": u.output_tokens_details.reasoning_tokens}
        usage = {k: v for k, v in usage.items() if v or k in ("input", "output")}
    return blocks, stop, usage


# --- fixtures: the documented stream shapes ----------------------------------------------

def f_text():
    s = R.Stream()
    s.message("Hello, wörld 🌍 — line\u2028sep 世界", n=3)
    return s.completed(usage=R.usage(12, 9), split=3)   # 3-byte writes cut characters


def f_reasoning_then_text():
    s = R.Stream()
    s.reasoning(["**Looking** at the question.", "Then answering."], ENC)
    s.message("The answer is 42.")
    return s.completed(usage=R.usage(1200, 300, cached=1024, reasoning=256))


def f_parallel_calls():
    s = R.Stream()
    s.reasoning(["I will list and read."], ENC, rid="rs_par")
    s.interleave(s.function_call_steps("call_A1", "bash", '{"command": "ls -l | wc -l"}', n=4),
                 s.function_call_steps("call_B2", "read", '{"path": "naïve/ファイル.py"}', n=3))
    return s.completed(usage=R.usage(500, 40, cached=256, cache_write=128, reasoning=10))


def f_text_and_call():
    s = R.Stream()
    s.message("Let me look.", mid="msg_a")
    s.function_call("call_x9", "bash", '{"command": "cat notes.txt"}', n=2)
    return s.completed(usage=R.usage(80, 20))


def f_refusal():
    s = R.Stream()
    s.message(("refusal", "I can't help with that."))
    return s.completed(usage=R.usage(30, 8))


def f_two_parts_and_messages():
    s = R.Stream()
    s.message("First part. ", "Second part.", mid="msg_1")
    s.message("Another message.", mid="msg_2")
    return s.completed()   # no usage reported: unknown, not zero


def f_reasoning_without_summary():
    s = R.Stream()
    s.reasoning([], ENC, rid="rs_nosum")
    s.message("Done.")
    return s.completed(usage=R.usage(50, 60, reasoning=55))


def f_incomplete_length():
    s = R.Stream()
    s.reasoning(["Thinking long."], ENC)
    s.message("The beginning of a long", n=5)
    return s.incomplete("max_output_tokens", usage=R.usage(100, 64, reasoning=40))


def f_incomplete_filter():
    s = R.Stream()
    s.message("Something", n=4)
    return s.incomplete("content_filter", usage=R.usage(10, 3))


FIXTURES = [f_text, f_reasoning_then_text, f_parallel_calls, f_text_and_call, f_refusal,
            f_two_parts_and_messages, f_reasoning_without_summary, f_incomplete_length, f_incomplete_filter]


@pytest.mark.parametrize("bare", [False, True], ids=["", "bare"])
@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.__name__[2:] for f in FIXTURES])
def test_same_message_as_the_official_sdk(srv, fixture, bare):
    rep = fixture()
    if bare:
        rep = R.without_final_output(rep)
    srv.push(rep)
    msg = reply_of(respond(srv, "--tools", "hi"))
    valid_request(srv.requests[0].body)
    assert srv.requests[0].path == "/v1/responses"
    blocks, stop, usage = sdk_message(sdk_read(srv, rep))
    assert msg["content"] == blocks
    assert msg["stopReason"] == stop
    assert msg.get("usage") == usage
    assert msg["provider"] == "openai" and msg["model"] == MODEL


def test_fixture_values(srv):
    """What the cross-checks compare, spelled out once (so they cannot both be wrong)."""
    srv.push(f_parallel_calls())
    msg = reply_of(respond(srv, "--tools", "hi"))
    assert msg["content"] == [
        {"type": "thinking", "thinking": "I will list and read.", "signature": ENC, "itemId": "rs_par"},
        {"type": "toolUse", "id": "call_A1", "name": "bash", "input": '{"command": "ls -l | wc -l"}'},
        {"type": "toolUse", "id": "call_B2", "name": "read", "input": '{"path": "naïve/ファイル.py"}'}]
    assert msg["stopReason"] == "toolUse"
    assert msg["usage"] == {"input": 116, "output": 40, "cacheRead": 256, "cacheWrite": 128, "reasoning": 10}
    srv.push(f_incomplete_length())
    msg = reply_of(respond(srv, "hi"))
    assert msg["stopReason"] == "length" and msg["content"][1] == {"type": "text", "text": "The beginning of a long"}


def test_live_text_and_dimmed_reasoning(srv):
    srv.push(f_reasoning_then_text())
    p = respond(srv, "--live", "hi")
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    assert "Looking** at the question." in err and "The answer is 42." in err
    assert err.index("Then answering.") < err.index("The answer is 42.")


def test_unknown_events_and_stray_fields_are_ignored(srv):
    s = R.Stream()
    s.emit("response.future_feature.started", output_index=0, anything={"x": 1})
    s.message("ok")
    s.emit("response.output_text.annotation.added", item_id="msg_68af01", output_index=0, content_index=0,
           annotation_index=0, annotation={"type": "url_citation", "url": "https://example.com"})
    s.emit("keepalive")
    srv.push(s.completed(usage=R.usage(3, 1)))
    msg = reply_of(respond(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "ok"}] and msg["stopReason"] == "stop"


def test_items_only_in_the_final_response_are_kept(srv):
    """A server that sends no item events, only the finished response."""
    s = R.Stream()
    s.output.append({"id": "msg_z", "type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "all at once", "annotations": []}]})
    srv.push(s.completed(usage=R.usage(5, 3)))
    msg = reply_of(respond(srv, "hi"))
    assert msg["content"] == [{"type": "text", "text": "all at once"}]


def test_partial_reply_keeps_text_and_finished_calls_only():
    """What a reply cut short by the user keeps (stopReason aborted, SPEC 5.1)."""
    from pantolib.providers import openai_responses as M, sse

    s = R.Stream()
    s.reasoning(["Plan."], ENC)
    s.function_call("call_done", "bash", '{"command": "ls"}')
    s.message("Half a sent")
    steps = s.function_call_steps("call_half", "read", '{"path": "a.py"}')
    next(steps), next(steps)
    acc = M.Accumulator()
    for ev in sse.events(c.encode() for c in s.cut()["chunks"]):
        acc.feed(ev)
    assert not acc.ended()
    content, usage = acc.partial()
    assert [b["type"] for b in content] == ["thinking", "toolUse", "text"]
    assert content[1]["id"] == "call_done" and content[2]["text"] == "Half a sent"
    assert usage is None


def test_ctrl_c_keeps_the_partial_reply(srv):
    from conftest import interrupt_when

    s = R.Stream()
    s.reasoning(["Plan."], ENC)
    s.message("Half of it", n=20)
    steps = s.function_call_steps("call_half", "bash", '{"command": "ls"}')
    next(steps), next(steps)
    srv.push(s.cut(stall_after=len(s.chunks), stall=30))
    # "Half of i": the live display holds back a last "t" while it could begin a key
    # (the test keys without their "sk-" prefix begin with "test-").
    p = interrupt_when(srv, ["--api", "openai_responses", "-m", MODEL, "now"], b"", b"Half of i")
    assert p.returncode == 130, p.stderr
    msg = lines(p.stdout)[-1]["message"]
    assert msg["stopReason"] == "aborted"
    assert msg["content"] == [{"type": "thinking", "thinking": "Plan.", "signature": ENC, "itemId": "rs_68af00"},
                              {"type": "text", "text": "Half of it"}]
    assert "usage" not in msg


EVENT_TYPES = ["response.output_item.added", "response.output_item.done", "response.content_part.added",
               "response.output_text.delta", "response.refusal.delta", "response.reasoning_summary_text.delta",
               "response.reasoning_text.delta", "response.function_call_arguments.delta",
               "response.function_call_arguments.done", "response.completed", "response.incomplete",
               "response.failed", "error", ["not", "a", "type"]]
ODD = [None, [], {}, 7, "x", [1], {"type": []}, True]


def test_hostile_event_fields_never_crash():
    """Every handled event with fields of the wrong type: ignored, or a ProviderError."""
    from pantolib.errors import ProviderError
    from pantolib.providers import openai_responses as M
    from pantolib.providers.sse import Event

    fields = ["output_index", "item", "item_id", "content_index", "summary_index", "part", "delta",
              "arguments", "response", "error", "message", "code"]
    for t in EVENT_TYPES:
        for odd in ODD:
            acc = M.Accumulator()
            for f in fields:
                obj = {"type": t, "sequence_number": 1, "output_index": 0, f: odd}
                if f == "item" or f == "response":
                    obj[f] = {"type": odd, "id": odd, "call_id": odd, "name": odd, "arguments": odd,
                              "content": odd, "summary": odd, "encrypted_content": odd, "usage": odd,
                              "incomplete_details": {"reason": odd}, "output": [odd], "status": odd,
                              "error": odd}
                try:
                    acc.feed(Event("message", orjson.dumps(obj)))
                except ProviderError:
                    pass
            content, stop, usage = acc.result()
            assert all(isinstance(b.get(k), str) for b in content for k in b if k != "type")
            assert stop in ("stop", "toolUse", "length", "error")


# --- requests --------------------------------------------------------------------------

def conversation():
    """A session with a reasoning turn of this model, a tool call with broken
    arguments and its result, and an Anthropic turn with its own thinking."""
    sys_ = {"type": "message", "id": "s0000001", "parentId": None, "timestamp": "2026-04-25T14:00:00.000Z",
            "message": {"role": "system", "content": [{"type": "text", "text": "Be terse."}]}}
    u1 = user("look", "u0000001", "s0000001", model=MODEL)
    a1 = assistant([{"type": "thinking", "thinking": "Plan.", "signature": ENC, "itemId": "rs_1"},
                    {"type": "text", "text": "Looking."},
                    {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"command": "ls'}],
                   "a0000001", "u0000001", model=MODEL, stop="toolUse")
    u2 = {**user("", "u0000002", "a0000001", model=MODEL),
          "message": {"role": "user", "content": [{"type": "toolResult", "toolUseId": "call_1",
                                                   "content": "arguments not valid JSON", "isError": True}]}}
    a2 = assistant([{"type": "thinking", "thinking": "hm", "signature": "ANTHROPIC-SIG"},
                    {"type": "text", "text": "Fixed."}], "a0000002", "u0000002",
                   provider="anthropic", model="claude-test")
    a3_thinking_other_model = assistant(
        [{"type": "thinking", "thinking": "other", "signature": "ENC-OTHER", "itemId": "rs_9"},
         {"type": "text", "text": "From a sibling model."}], "a0000003", "u0000003", model="gpt-other")
    u3 = user("again", "u0000003", "a0000002", model="gpt-other")
    u4 = user("now", "u0000004", "a0000003", model=MODEL)
    a4_cut_short = assistant([{"type": "thinking", "thinking": "", "signature": "ENC-ALONE", "itemId": "rs_4"}],
                             "a0000004", "u0000004", model=MODEL, stop="length")
    u5 = user("go on", "u0000005", "a0000004", model=MODEL)
    return jsonl(HEADER, sys_, u1, a1, u2, a2, u3, a3_thinking_other_model, u4, a4_cut_short, u5)


def test_request_items_from_the_conversation(srv):
    srv.push(R.text("ok"))
    p = respond(srv, "--tools", "--max-tokens", "900", "--reasoning", "high", input=conversation())
    assert p.returncode == 0, p.stderr
    body = srv.requests[0].body
    valid_request(body)
    assert body["model"] == MODEL and body["instructions"] == "Be terse."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}]},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": ENC,
         "summary": [{"type": "summary_text", "text": "Plan."}]},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "arguments not valid JSON"},
        {"type": "message", "role": "assistant", "content": "Fixed."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
        {"type": "message", "role": "assistant", "content": "From a sibling model."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "now"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}]
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 900
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert {t["name"] for t in body["tools"]} == {"bash", "read", "write", "edit"}
    assert all(t["type"] == "function" and t["strict"] is False and t["parameters"]["type"] == "object"
               for t in body["tools"])
    assert srv.requests[0].headers["authorization"].startswith("Bearer sk-test-")
    for foreign in (b"ANTHROPIC-SIG", b"ENC-OTHER", b"ENC-ALONE"):
        assert foreign not in srv.requests[0].raw


@pytest.mark.parametrize("level,field", [("none", {"effort": "none"}), ("minimal", {"effort": "minimal", "summary": "auto"}),
                                         ("xhigh", {"effort": "xhigh", "summary": "auto"}), ("off", None), (None, None)])
def test_reasoning_levels(srv, level, field):
    srv.push(R.text("ok"))
    args = ["--reasoning", level] if level else []
    assert respond(srv, *args, "hi").returncode == 0
    body = srv.requests[0].body
    valid_request(body)
    assert body.get("reasoning") == field


@pytest.mark.parametrize("level", ["4096", "bogus"])
def test_reasoning_that_openai_does_not_take_is_a_usage_error(srv, level):
    p = respond(srv, "--reasoning", level, "hi")
    assert_clean_error(p, 2, "panto-send")
    assert srv.requests == []


def test_prompt_cache_key_is_the_session_id_unless_caching_is_off():
    from pantolib.providers import Options, openai_responses as M

    msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    o = Options(MODEL, "http://127.0.0.1:9/v1", session_id="0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee")
    url, _, body = M.build_request(msgs, o)
    assert url == "http://127.0.0.1:9/v1/responses"
    assert body["prompt_cache_key"] == "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
    valid_request(body)
    o.cache = "off"
    assert "prompt_cache_key" not in M.build_request(msgs, o)[2]


def test_default_api_is_responses_on_openais_own_server_only():
    from pantolib import providers

    assert providers.default_api("openai", "https://api.openai.com/v1") == "openai_responses"
    assert providers.default_api("openai", "http://127.0.0.1:8080/v1") == "openai_chat"
    assert providers.default_api("openai", "https://openrouter.ai/api/v1") == "openai_chat"
    _, opts, key_var = providers.configure({}, None, {})
    assert opts.api == "openai_responses" and key_var == "OPENAI_API_KEY"
    _, opts, _ = providers.configure({}, None, {"PANTO_API_STYLE": "openai_chat"})
    assert opts.api == "openai_chat"


def test_style_variable_selects_responses(srv):
    srv.push(R.text("ok"))
    p = send(srv, "-m", MODEL, "hi", PANTO_API_STYLE="openai_responses")
    assert reply_of(p)["content"] == [{"type": "text", "text": "ok"}]
    assert srv.requests[0].path == "/v1/responses"


# --- negotiation -----------------------------------------------------------------------

@pytest.mark.parametrize("message,field", [
    ("Unsupported parameter: 'reasoning.effort' is not supported with this model.", "reasoning"),
    ("Invalid value for 'include': reasoning.encrypted_content is not available", "include"),
    ("Encrypted content is not supported with this model.", "include")])
def test_refused_optional_field_is_dropped_once(srv, message, field):
    srv.push(S.error_reply(400, message, "invalid_request_error"), R.text("fine"))
    p = respond(srv, "--reasoning", "low", "--live", "hi")
    assert reply_of(p)["content"] == [{"type": "text", "text": "fine"}]
    first, second = (r.body for r in srv.requests)
    assert field in first and field not in second
    assert {k: v for k, v in first.items() if k != field} == second
    assert f"the server refused '{field}" in p.stderr.decode()   # by the name the server used


def test_negotiation_of_prompt_cache_key_and_other_refusals():
    from pantolib.http import StatusError
    from pantolib.providers import Options, openai_responses as M

    o = Options(MODEL, "http://127.0.0.1:9/v1", session_id="sid", reasoning="low")
    assert M.negotiate(StatusError("x", 400, "Unknown parameter: 'prompt_cache_key'."), o)
    assert o.dropped == {"prompt_cache_key"}
    assert M.negotiate(StatusError("x", 400, "Unknown parameter: 'prompt_cache_key'."), o) is None  # once
    assert M.negotiate(StatusError("x", 401, "reasoning"), o) is None
    assert M.negotiate(StatusError("x", 422, "'reasoning' is not allowed"), o)
    # reasoning_effort is the name proxies give the Responses field too (LiteLLM, SPEC 5.1)
    p = Options(MODEL, "http://127.0.0.1:9/v1", session_id="sid", reasoning="low")
    assert M.negotiate(StatusError("x", 400, "Function tools with reasoning_effort are not supported"), p)
    assert p.dropped == {"reasoning"}
    assert "reasoning" not in M.build_request([], o)[2] and "prompt_cache_key" not in M.build_request([], o)[2]


def test_other_refusal_fails_without_retry(srv):
    srv.push(S.error_reply(400, "Invalid 'input[0].content': string too long.", "invalid_request_error"))
    p = respond(srv, "hi")
    assert_clean_error(p, 1, "panto-send")
    assert "string too long" in p.stderr.decode() and len(srv.requests) == 1


# --- failures ----------------------------------------------------------------------------

def _partial():
    s = R.Stream()
    s.reasoning(["thinking"], ENC)
    steps = s.message_steps("never finished text", n=3)
    for _ in range(3):
        next(steps)
    return s


FAILURES = {
    "failed": (lambda: _partial().failed("The server had an error\nwhile processing your request.",
                                         "server_error"), "The server had an error while processing"),
    "error_event": (lambda: _partial().error("Rate limit reached for requests", "rate_limit_exceeded"),
                    "Rate limit reached"),
    "cut_off": (lambda: _partial().cut(), "ended before the end of the reply"),
    "cut_before_anything": (lambda: S.reply([]), "ended before any event"),
    "reset": (lambda: _partial().cut(reset_after=6), ""),
    "malformed": (lambda: S.reply([S.sse(R.Stream(start=False).emit("response.created", response={})),
                                   "event: response.output_text.delta\ndata: {not json\n\n"]), "not JSON"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_failure_fails_the_turn_and_keeps_the_prompt(srv, case):
    make, words = FAILURES[case]
    srv.push(make())
    p = respond(srv, "--retries", "0", "keep this prompt")
    assert_clean_error(p, 1, "panto-send")
    err = p.stderr.decode()
    assert words in err and err.count("\n") == 1
    out = lines(p.stdout)
    assert [e["message"]["role"] for e in out if e.get("type") == "message"] == ["system", "user"]
    assert out[-1]["message"]["content"] == [{"type": "text", "text": "keep this prompt"}]


def test_error_event_quoting_the_key_is_redacted(srv):
    from conftest import KEY

    srv.push(R.Stream().error(f"Incorrect API key provided: {KEY}.", "invalid_api_key"))
    p = respond(srv, "hi")
    assert_clean_error(p, 1, "panto-send")
    assert KEY.encode() not in p.stderr + p.stdout and b"[redacted]" in p.stderr


@pytest.mark.parametrize("ending", ["failed", "error"])
def test_context_window_exceeded_is_a_context_full_reply(srv, ending):
    """A failed response whose prompt did not fit ends as stopReason contextFull
    (SPEC 3), so that the session can be compacted and the turn tried again."""
    s = R.Stream()
    message = "Your input exceeds the context window of this model. Please adjust your input and try again."
    srv.push(getattr(s, ending)(message, "context_length_exceeded"))
    msg = reply_of(respond(srv, "hi"))
    assert msg["stopReason"] == "contextFull" and msg["content"] == []


def test_sdk_also_fails_on_the_failure_events(srv):
    import openai

    for make in (FAILURES["failed"][0], FAILURES["error_event"][0]):
        srv.push(make())
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-sdk-test-key-0000", max_retries=0)
        with pytest.raises((openai.APIError, RuntimeError)):
            with client.responses.stream(model=MODEL, input="hi") as stream:
                stream.get_final_response()


# --- a tool loop, and switching APIs -----------------------------------------------------

def sh(srv, cmd, **env):
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, timeout=60,
                       env=env_for(srv, **env))
    assert p.returncode == 0, (cmd, p.stderr.decode())
    return p


def tool_step():
    s = R.Stream(rid="resp_tool")
    s.reasoning(["I should list the files first."], ENC, rid="rs_loop")
    s.function_call("call_loop1", "bash", '{"command": "ls"}')
    return s


def test_tool_loop_sends_reasoning_back_byte_for_byte_then_switch_and_back(srv, isolated):
    (isolated / "notes.txt").write_text("hello\n")
    step = tool_step()
    srv.push(step.completed(usage=R.usage(200, 30, reasoning=20)),
             R.text("There is notes.txt.", R.usage(260, 8, cached=192)))
    api = f"--api openai_responses -m {MODEL}"
    sh(srv, f'panto-send {api} --tools --reasoning medium "what is here?" </dev/null '
            f'| panto-tool --yes --quiet | panto-send {api} --tools --reasoning medium > s1.jsonl')
    first, second = srv.requests
    for r in (first, second):
        valid_request(r.body)
    reasoning_done = step.output[0]
    sent = [i for i in second.body["input"] if i.get("type") == "reasoning"]
    assert sent == [reasoning_done]
    assert orjson.dumps(reasoning_done["encrypted_content"]) in second.raw
    kinds = [i["type"] if i["type"] != "message" else i["role"] for i in second.body["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    call, result = second.body["input"][2], second.body["input"][3]
    assert call == {"type": "function_call", "call_id": "call_loop1", "name": "bash", "arguments": '{"command": "ls"}'}
    assert result["call_id"] == "call_loop1" and "notes.txt" in result["output"]
    entries = lines((isolated / "s1.jsonl").read_bytes())
    msgs = [e["message"] for e in entries if e.get("type") == "message"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert msgs[2]["stopReason"] == "toolUse" and msgs[4]["stopReason"] == "stop"
    assert msgs[2]["content"][0] == {"type": "thinking", "thinking": "I should list the files first.",
                                     "signature": ENC, "itemId": "rs_loop"}

    # on to Anthropic with a tool call of its own: no OpenAI reasoning goes there
    srv.push(S.anthropic_tool("toolu_01Ab", "bash", '{"command": "cat notes.txt"}', thinking="read it",
                              signature="SIG-ANTHROPIC", start_usage={"input_tokens": 300},
                              end_usage={"output_tokens": 12}),
             S.anthropic_text("It says hello.", {"input_tokens": 330, "output_tokens": 1}, {"output_tokens": 5}))
    sh(srv, 'panto-send -p anthropic -m claude-test --tools "read it" < s1.jsonl '
            '| panto-tool --yes --quiet | panto-send --tools > s2.jsonl')
    for r in srv.requests[2:4]:
        assert r.path == "/v1/messages"
        assert ENC.encode() not in r.raw
        thinking = [b for m in r.body["messages"] for b in m["content"] if isinstance(b, dict)
                    and b.get("type") == "thinking"]
        assert all(b["signature"] == "SIG-ANTHROPIC" for b in thinking)
        tool_uses = [b for m in r.body["messages"] for b in m["content"] if isinstance(b, dict)
                     and b.get("type") == "tool_use"]
        results = {b["tool_use_id"] for m in r.body["messages"] for b in m["content"] if isinstance(b, dict)
                   and b.get("type") == "tool_result"}
        assert "call_loop1" in {b["id"] for b in tool_uses} and {b["id"] for b in tool_uses} <= results | {"toolu_01Ab"}

    # and back to Responses: its own reasoning again, none of Anthropic's, every call paired
    srv.push(R.text("Back.", R.usage(400, 2)))
    sh(srv, f'panto-send {api} --tools "and back" < s2.jsonl > s3.jsonl')
    back = srv.requests[-1]
    valid_request(back.body)
    assert b"SIG-ANTHROPIC" not in back.raw
    assert [i for i in back.body["input"] if i.get("type") == "reasoning"] == [reasoning_done]
    calls = [i["call_id"] for i in back.body["input"] if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in back.body["input"] if i.get("type") == "function_call_output"]
    assert calls == outputs == ["call_loop1", "toolu_01Ab"]
    for c in calls:  # each output comes after its call
        idx = [n for n, i in enumerate(back.body["input"]) if i.get("call_id") == c]
        assert back.body["input"][idx[0]]["type"] == "function_call" and idx[0] < idx[1]


def test_switch_to_chat_completions_sends_no_reasoning(srv, isolated):
    srv.push(tool_step().completed(usage=R.usage(200, 30)), S.openai_text("ok"))
    sh(srv, f'panto-send --api openai_responses -m {MODEL} --tools "look" </dev/null '
            f'| panto-tool --yes --quiet | panto-send --api openai_chat --tools > s.jsonl')
    chat = srv.requests[1]
    assert chat.path == "/v1/chat/completions"
    assert ENC.encode() not in chat.raw
    roles = [m["role"] for m in chat.body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert chat.body["messages"][2]["tool_calls"][0]["id"] == chat.body["messages"][3]["tool_call_id"] == "call_loop1"

    # a chat completions tool call, then back to Responses: both calls paired, the reasoning of this model kept
    srv.push(S.openai_tools([("call_chat2", "read", '{"path": "notes.txt"}')]), R.text("ok"))
    sh(srv, 'panto-send --api openai_chat --tools "and read it" < s.jsonl | panto-tool --yes --quiet > s2.jsonl')
    sh(srv, f'panto-send --api openai_responses -m {MODEL} --tools < s2.jsonl > s3.jsonl')
    back = srv.requests[-1]
    valid_request(back.body)
    kinds = [(i["type"] if i["type"] != "message" else i["role"], i.get("call_id")) for i in back.body["input"]]
    assert kinds == [("user", None), ("reasoning", None), ("function_call", "call_loop1"),
                     ("function_call_output", "call_loop1"), ("assistant", None), ("user", None),
                     ("function_call", "call_chat2"), ("function_call_output", "call_chat2")]
