"""panto-send against the dialects of servers nobody on the project wrote
(SPEC 5.1 "Negotiation", "Every server's words", "The wire API stays with
the session"; 5.4 items): llama.cpp's reading of Responses items, LiteLLM's
and other proxies' refusals, negotiation that remembers, context-window
refusals in every form, errors as event streams, whole replies to a
streaming request, and the wire API kept across pipeline steps. The real
console scripts against loopback servers that answer with the real servers'
words."""
import os
import shutil
import signal
import stat
import subprocess
import time

import orjson
import pytest

import responses_server as R
import sse_server as S
from builders import HEADER, assistant, jsonl, lines, user
from conftest import KEY, assert_clean_error, env_for, send

MODEL = "tiny"
# LiteLLM 1.x, /v1/messages to a model without reasoning (llms/openai/responses/transformation.py)
LITELLM_EFFORT = ("litellm.UnsupportedParamsError: tiny doesn't support `reasoning.effort` (its model cost "
                  "map entry lacks `supports_reasoning`). To drop unsupported params set "
                  "`litellm.drop_params = True`")
# LiteLLM, chat completions to an Anthropic-backed model (utils.py, get_optional_params)
LITELLM_PARAMS = ("litellm.UnsupportedParamsError: anthropic does not support parameters: ['reasoning_effort', "
                  "'prompt_cache_key'], for model=claude-tiny. To drop these, set `litellm.drop_params=True` or "
                  "for proxy:\n\n`litellm_settings:\n drop_params: true`\n. \n If you want to use these params "
                  "dynamically send allowed_openai_params=['reasoning_effort', 'prompt_cache_key'] in your request.")


def litellm_error(message, status=400):
    """The LiteLLM proxy's error body (proxy/_types.py ProxyException)."""
    return {"status": status, "body": {"error": {"message": message, "type": "None", "param": None,
                                                 "code": str(status)}}}


@pytest.fixture
def llama():
    """A server that reads Responses items the way llama-server does."""
    with S.Server(check=R.llama_cpp_refusal) as s:
        yield s


def sh(srv, cmd, **env):
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, timeout=90,
                       env=env_for(srv, **env))
    assert p.returncode == 0, (cmd, p.stderr.decode())
    return p


def valid_responses(body):
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    from typed_check import check

    assert check(body, ResponseCreateParamsStreaming) == []


def stderr_lines(p):
    return [x for x in p.stderr.decode().split("\n") if x]


def state_file(isolated):
    return os.path.join(os.environ["XDG_STATE_HOME"], "panto", "refused.json")


# --- Responses items name their type (llama.cpp) --------------------------------------------

def test_the_loopback_server_refuses_as_llama_cpp_does():
    """The test server is strict where llama-server is: a type-less assistant item is refused."""
    def req(items):
        return S.Request("POST", "/v1/responses", {}, orjson.dumps({"model": "m", "input": items}))

    refusal = R.llama_cpp_refusal(req([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]))
    assert refusal["status"] == 400 and refusal["body"]["error"]["message"] == "Cannot determine type of 'item'"
    assert R.llama_cpp_refusal(req([{"type": "message", "role": "assistant", "content": "yo"},
                                    {"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"},
                                    {"type": "function_call_output", "call_id": "c", "output": "x"}])) is None


def test_its_words_are_shown_on_one_line(llama):
    stream = jsonl(HEADER, user("hi", model=MODEL), assistant([{"type": "text", "text": "yo"}], model=MODEL))
    llama.check = lambda req: R.llama_error("Cannot determine type of 'item'")
    p = send(llama, "--api", "openai_responses", "again", input=stream)
    assert_clean_error(p, name="panto-send")
    assert stderr_lines(p) == ["panto-send: openai: HTTP 400: Cannot determine type of 'item'"]


def test_two_turns_a_tool_loop_and_all_three_apis_against_llama_cpp(llama, isolated):
    (isolated / "notes.txt").write_text("hello\n")
    step = R.Stream(rid="resp_1")
    step.function_call("call_ls1", "bash", '{"command": "ls"}')
    llama.push(step.completed(usage=R.usage(100, 10)), R.text("There is notes.txt.", R.usage(120, 5)))
    # the tool loop: the second panto-send names no API and stays on Responses (the session's)
    sh(llama, f'panto-send --api openai_responses -m {MODEL} --tools "what is here?" </dev/null '
              '| panto-tool --yes --quiet | panto-send --tools > s1.jsonl')
    llama.push(R.text("Second turn.", R.usage(150, 3)))
    sh(llama, 'panto-send --tools "and then?" < s1.jsonl > s2.jsonl')
    llama.push(S.openai_text("On chat completions."))
    sh(llama, 'panto-send --api openai_chat "chat now" < s2.jsonl > s3.jsonl')
    llama.push(S.anthropic_text("On messages."))
    sh(llama, 'panto-send -p anthropic -m claude-tiny "messages now" < s3.jsonl > s4.jsonl')
    llama.push(R.text("Back on Responses."))
    sh(llama, f'panto-send --api openai_responses -m {MODEL} "and back" < s4.jsonl > s5.jsonl')

    assert llama.refused == []
    paths = [r.path for r in llama.requests]
    assert paths == ["/v1/responses"] * 3 + ["/v1/chat/completions", "/v1/messages", "/v1/responses"]
    for r in llama.requests:
        if r.path == "/v1/responses":
            valid_responses(r.body)
            assert all("type" in item for item in r.body["input"])
    last = llama.requests[-1].body["input"]
    kinds = [(i["type"], i.get("role")) for i in last]
    assert ("message", "assistant") in kinds and ("function_call", None) in kinds
    entries = lines((isolated / "s5.jsonl").read_bytes())
    msgs = [e for e in entries if e.get("type") == "message"]
    assert [m["message"].get("api") for m in msgs if m["message"]["role"] == "assistant"] == [
        "openai_responses", "openai_responses", "openai_responses", "openai_chat", "anthropic_messages",
        "openai_responses"]


# --- negotiation: proxies' words, one retry, remembered --------------------------------------

def test_reasoning_through_a_litellm_refusal_on_messages(srv, isolated):
    srv.push(litellm_error(LITELLM_EFFORT), S.anthropic_text("fine"))
    base = jsonl(HEADER, user("earlier", provider="anthropic", model=MODEL))
    p = send(srv, "-p", "anthropic", "-m", MODEL, "--reasoning", "low", "now", input=base)
    assert p.returncode == 0, p.stderr
    first, second = (r.body for r in srv.requests)
    assert first["thinking"]["type"] == "adaptive" and "output_config" in first
    assert "thinking" not in second and "output_config" not in second   # no form of thinking is taken
    assert stderr_lines(p) == ["panto-send: the server refused 'reasoning.effort': sent without thinking"]
    # the next turn, another process: no refusal, no note
    srv.push(S.anthropic_text("again fine"))
    p2 = send(srv, "-p", "anthropic", "-m", MODEL, "--reasoning", "low", "next", input=p.stdout)
    assert p2.returncode == 0 and p2.stderr == b""
    assert len(srv.requests) == 3 and "thinking" not in srv.requests[2].body


def test_a_two_field_refusal_costs_one_retry_and_the_next_turn_none(srv, isolated):
    secret = "pw-0123456789abcdefXYZ"
    url = f"http://proxy-user:{secret}@127.0.0.1:{srv.port}/v1"
    srv.push(litellm_error(LITELLM_PARAMS), S.openai_text("fine"))
    p = send(srv, "-m", MODEL, "--reasoning", "low", "now", input=jsonl(HEADER, user("earlier", model=MODEL)),
             OPENAI_BASE_URL=url)
    assert p.returncode == 0, p.stderr
    assert len(srv.requests) == 2
    first, second = (r.body for r in srv.requests)
    assert {"reasoning_effort", "prompt_cache_key"} <= first.keys()
    assert not {"reasoning_effort", "prompt_cache_key"} & second.keys() and "stream_options" in second
    assert stderr_lines(p) == ["panto-send: the server refused 'reasoning_effort': sent without it; "
                               "'prompt_cache_key': sent without it"]
    srv.push(S.openai_text("still fine"))
    p2 = send(srv, "-m", MODEL, "--reasoning", "low", "next", input=p.stdout, OPENAI_BASE_URL=url)
    assert p2.returncode == 0 and p2.stderr == b""
    assert len(srv.requests) == 3
    assert not {"reasoning_effort", "prompt_cache_key"} & srv.requests[2].body.keys()
    # where it is kept: 0600 in a 0700 directory, without the URL's credentials
    f = state_file(isolated)
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(f)).st_mode) == 0o700
    data = open(f, "rb").read()
    assert secret.encode() not in data and b"proxy-user" not in data and KEY.encode() not in data
    from pantolib import persist
    from pantolib.providers import refusals

    (entry,) = persist.load(f, refusals.KIND)["servers"]
    assert entry["api"] == "openai_chat" and entry["model"] == MODEL
    assert entry["baseUrl"] == f"http://127.0.0.1:{srv.port}/v1"
    assert set(entry["refused"]) == {"reasoning_effort", "prompt_cache_key"}
    # another model on the same server is asked afresh
    srv.push(S.openai_text("other"))
    assert send(srv, "-m", "other-model", "--reasoning", "low", "x", OPENAI_BASE_URL=url).returncode == 0
    assert "reasoning_effort" in srv.requests[3].body


@pytest.mark.parametrize("message, field", [
    ("Unsupported parameter: 'prompt_cache_key' is not supported with this model.", "prompt_cache_key"),
    ("Unrecognized request argument supplied: stream_options", "stream_options"),
    ("Failed to deserialize the JSON body into the target type: unknown field `prompt_cache_key`, expected one "
     "of `messages`, `model`, `reasoning_effort`, `stream_options`, `tools` at line 1 column 212", "prompt_cache_key"),
    ("[{'type': 'extra_forbidden', 'loc': ('body', 'reasoning_effort'), 'msg': 'Extra inputs are not permitted', "
     "'input': 'low'}]", "reasoning_effort"),
])
def test_proxies_words_name_the_field(srv, message, field):
    srv.push(S.error_reply(400, message, "invalid_request_error"), S.openai_text("fine"))
    p = send(srv, "-m", MODEL, "--reasoning", "low", "now", input=jsonl(HEADER, user("earlier", model=MODEL)))
    assert p.returncode == 0, p.stderr
    first, second = (r.body for r in srv.requests)
    assert field in first and field not in second
    assert {k: v for k, v in first.items() if k != field} == second   # nothing else dropped
    assert len(stderr_lines(p)) == 1


def test_a_refusal_that_the_retry_does_not_cure_is_not_remembered(srv, isolated):
    srv.push(S.error_reply(400, "Unknown parameter: 'prompt_cache_key'."),
             S.error_reply(400, "Unknown parameter: 'prompt_cache_key'."))
    assert_clean_error(send(srv, "now", input=jsonl(HEADER, user("earlier"))), name="panto-send")
    assert not os.path.exists(state_file(isolated))


def test_the_memory_forgets_after_a_day_and_survives_bad_files(tmp_path):
    from pantolib.providers import refusals

    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    t0 = 1_800_000_000
    refusals.remember("openai_chat", "http://u:p@h:1/v1?key=k", "m", {"stream_options"}, env=env, now=t0)
    assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env, now=t0 + 3600) == {"stream_options"}
    assert refusals.recall("openai_responses", "http://h:1/v1", "m", env=env, now=t0 + 3600) == set()
    assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env, now=t0 + refusals.REMEMBER + 1) == set()
    refusals.remember("openai_chat", "http://h:1/v1", "m", {"reasoning_effort"}, env=env, now=t0 + 7200)
    assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env, now=t0 + refusals.REMEMBER + 1) == {
        "reasoning_effort"}   # each field keeps the time it was refused
    f = refusals.path(env)
    for junk in (b"\x00\xffnot json", b"[1, 2]", b'{"version": 99, "servers": []}',
                 b'{"version": 1, "servers": [{"api": 1}, "x", {"api": "a", "baseUrl": "b", "model": "c", '
                 b'"refused": {"f": "soon"}}]}'):
        with open(f, "wb") as out:
            out.write(junk)
        assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env) == set()
        refusals.remember("openai_chat", "http://h:1/v1", "m", {"x"}, env=env)
        assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env) == {"x"}
    os.unlink(f)
    os.mkfifo(f)   # never blocks on a file that is not a regular one
    assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env) == set()
    os.unlink(f)
    os.mkdir(f)    # and never fails the turn when it cannot write
    refusals.remember("openai_chat", "http://h:1/v1", "m", {"x"}, env=env)
    assert refusals.recall("openai_chat", "http://h:1/v1", "m", env=env) == set()


def test_concurrent_writers_leave_a_whole_file(tmp_path):
    import sys

    from pantolib.providers import refusals

    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    code = ("import sys; from pantolib.providers import refusals\n"
            "for i in range(40): refusals.remember('openai_chat', 'http://h/v1', sys.argv[1] + str(i), {'f'})")
    procs = [subprocess.Popen([sys.executable, "-c", code, f"m{n}-"], env=env) for n in range(6)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    f = refusals.path(env)
    from pantolib import persist

    doc = persist.load(f, refusals.KIND)
    # the writers take turns (a lock on the directory): no refusal is lost but to the cap
    assert doc["version"] == 1 and len(doc["servers"]) == refusals.MAX_SERVERS
    assert os.listdir(os.path.dirname(f)) == ["refused.json"]   # no temporary file left


# --- every server's words ---------------------------------------------------------------------

@pytest.mark.parametrize("message", [
    "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: "
    "OpenAIException - input too large for this model",
    "Context window exceeded: 9000 tokens requested, 8192 allowed",
    "the request exceeds the available context size, try increasing it",
    "This endpoint's maximum context length is 8192 tokens. However, you requested about 9001 tokens.",
    "Your input exceeds the context window of this model.",
    "context_length_exceeded",
    "prompt is too long: 215000 tokens > 200000 maximum",
])
def test_context_window_refusals_in_every_form_exit_3(srv, message):
    srv.push(S.error_reply(400, message, "invalid_request_error"))
    p = send(srv, "-m", MODEL, "now", input=jsonl(HEADER, user("earlier", model=MODEL)))
    assert_clean_error(p, status=3, name="panto-send")
    assert len(srv.requests) == 1


def test_a_context_window_error_inside_the_stream_exits_3(srv):
    srv.push(S.openai_stream([{"error": {"message": "This model's maximum context length is 4096 tokens",
                                         "type": "invalid_request_error", "code": "context_length_exceeded"}}]))
    p = send(srv, "now", input=jsonl(HEADER, user("earlier")))
    assert_clean_error(p, status=3, name="panto-send")


@pytest.mark.parametrize("api", ["openai_chat", "anthropic_messages", "openai_responses"])
def test_an_error_answered_as_an_event_stream_is_shown_by_its_message(srv, api):
    body = ('data: {"error": {"message": "upstream model crashed\\nwhile loading", "type": "server_error"}}\n\n'
            "data: [DONE]\n\n")
    srv.push({"status": 500, "headers": {"content-type": "text/event-stream"}, "body": body})
    p = send(srv, "--api", api, "--retries", "0", "now")
    assert_clean_error(p, name="panto-send")
    (line,) = stderr_lines(p)
    assert "HTTP 500: upstream model crashed while loading" in line and "data:" not in line
    # and in a 200 stream too
    srv.push(S.reply([S.sse({"error": {"message": "out of memory", "type": "server_error"}})]))
    p = send(srv, "--api", api, "now")
    assert_clean_error(p, name="panto-send")
    (line,) = stderr_lines(p)
    assert "out of memory" in line and "data:" not in line


WHOLE = {
    "openai_chat": {"id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": MODEL, "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.", "reasoning_content": "list first",
            "tool_calls": [{"id": "call_w1", "type": "function",
                            "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 7}},
    "anthropic_messages": {"id": "msg_9", "type": "message", "role": "assistant", "model": MODEL,
                           "content": [{"type": "thinking", "thinking": "list first", "signature": "SIG9"},
                                       {"type": "text", "text": "Let me look."},
                                       {"type": "tool_use", "id": "call_w1", "name": "bash",
                                        "input": {"command": "ls"}}],
                           "stop_reason": "tool_use", "stop_sequence": None,
                           "usage": {"input_tokens": 50, "output_tokens": 7}},
    "openai_responses": {"id": "resp_9", "object": "response", "status": "completed", "model": MODEL, "output": [
        {"id": "rs_9", "type": "reasoning", "summary": [{"type": "summary_text", "text": "list first"}],
         "encrypted_content": "ENC9"},
        {"id": "msg_9", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
        {"id": "fc_9", "type": "function_call", "call_id": "call_w1", "name": "bash",
         "arguments": '{"command": "ls"}', "status": "completed"}],
        "usage": R.usage(50, 7)},
}


@pytest.mark.parametrize("api", list(WHOLE))
def test_a_whole_reply_to_a_streaming_request_is_taken_as_the_reply(srv, api):
    srv.push({"status": 200, "body": WHOLE[api]})
    p = send(srv, "--api", api, "-m", MODEL, "--tools", "--live", "look")
    assert p.returncode == 0, p.stderr
    msg = lines(p.stdout)[-1]["message"]
    assert msg["api"] == api and msg["stopReason"] == "toolUse"
    kinds = [b["type"] for b in msg["content"]]
    assert kinds == ["thinking", "text", "toolUse"]
    assert msg["content"][1] == {"type": "text", "text": "Let me look."}
    use = msg["content"][2]
    assert use["id"] == "call_w1" and use["name"] == "bash" and orjson.loads(use["input"]) == {"command": "ls"}
    assert msg["usage"]["input"] == 50 and msg["usage"]["output"] == 7
    err = p.stderr.decode()
    assert "the server ignored stream: true and sent the whole reply at once: taken as the reply" in err
    assert "check the base URL" not in err and "Let me look." in err   # shown live too


def _interrupt_once_asked(srv, stream):
    srv.push(S.reply([": keep-alive\n\n"], stall_after=1, stall=60))
    before = len(srv.requests)
    proc = subprocess.Popen([shutil.which("panto-send"), "now"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env_for(srv))
    proc.stdin.write(stream)
    proc.stdin.close()
    deadline = time.monotonic() + 30
    while len(srv.requests) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(srv.requests) == before + 1     # the request is out: whatever panto-send waits for now, no reply has begun
    proc.send_signal(signal.SIGINT)
    out, err = proc.stdout.read(), proc.stderr.read()
    return proc.wait(timeout=30), out, err


def test_notes_say_only_what_is_true_of_the_prompt(srv):
    status, out, err = _interrupt_once_asked(srv, b"")
    assert status == 130
    assert err.decode().strip().split("\n")[-1] == "panto-send: interrupted before the reply began"
    status, out, err = _interrupt_once_asked(srv, jsonl(HEADER, user("earlier"), assistant(
        [{"type": "text", "text": "yes"}])))
    assert status == 130
    assert err.decode().strip().split("\n")[-1] == \
        "panto-send: interrupted before the reply began (the prompt is kept)"


# --- the wire API stays with the session -----------------------------------------------------

def test_the_api_stays_across_pipeline_steps(srv, isolated):
    f = isolated / "s.jsonl"
    srv.push(R.text("one"))
    sh(srv, f'panto-send --api openai_responses -m {MODEL} "hi" </dev/null | panto-log append {f} >/dev/null')
    srv.push(R.text("two"))
    sh(srv, f'panto-log replay {f} | panto-send "again" | panto-log append {f} >/dev/null')
    assert [r.path for r in srv.requests] == ["/v1/responses", "/v1/responses"]
    users = [e for e in lines(f.read_bytes()) if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert [list(u)[4:7] for u in users] == [["provider", "model", "api"]] * 2
    assert [u["api"] for u in users] == ["openai_responses"] * 2
    # PANTO_API_STYLE and --api say otherwise
    srv.push(S.openai_text("three"), R.text("four"))
    sh(srv, f'panto-log replay {f} | panto-send "env" | panto-log append {f} >/dev/null',
       PANTO_API_STYLE="openai_chat")
    assert srv.requests[-1].path == "/v1/chat/completions"
    sh(srv, f'panto-log replay {f} | panto-send --api openai_responses "flag" | panto-log append {f} >/dev/null',
       PANTO_API_STYLE="openai_chat")
    assert srv.requests[-1].path == "/v1/responses"


def test_a_stream_without_api_stamps_keeps_todays_default(srv):
    srv.push(S.openai_text("ok"))
    p = send(srv, "-m", MODEL, "now", input=jsonl(HEADER, user("earlier", model=MODEL),
                                                  assistant([{"type": "text", "text": "yes"}], model=MODEL)))
    assert p.returncode == 0, p.stderr
    assert srv.requests[0].path == "/v1/chat/completions"


def test_a_tool_result_carries_the_api_of_its_call(srv, isolated):
    step = R.Stream()
    step.function_call("call_t1", "bash", '{"command": "true"}')
    srv.push(step.completed())
    p = sh(srv, f'panto-send --api openai_responses -m {MODEL} --tools "run" </dev/null | panto-tool --yes --quiet')
    result = lines(p.stdout)[-1]
    assert result["message"]["content"][0]["type"] == "toolResult"
    assert (result["provider"], result["model"], result["api"]) == ("openai", MODEL, "openai_responses")


def test_the_repl_takes_api(srv, isolated):
    from conftest import run

    srv.push(R.text("first"), S.anthropic_text("second"), R.text("third"))
    env = env_for(srv, OPENAI_MODEL=MODEL)
    p = run(["panto", "--no-tools", "--api", "openai_responses"],
            input=b"one\n/model anthropic claude-tiny\ntwo\n/model openai tiny\nthree\n", env=env)
    assert p.returncode == 0, p.stderr
    assert [r.path for r in srv.requests] == ["/v1/responses", "/v1/messages", "/v1/responses"]
    bad = run(["panto", "--api", "openai_chat", "-p", "anthropic"], env=env)
    assert_clean_error(bad, status=2, name="panto")
    bad = run(["panto", "--api", "bogus"], env=env)
    assert_clean_error(bad, status=2, name="panto")
