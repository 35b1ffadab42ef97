"""The interactive panto against what servers do (SPEC 5.1, §9), under a
real pseudo-terminal and against loopback servers: no dead end after a
prompt too long for the context (refused as llama-server does), and with
--no-tools, the tool calls vLLM invents never run."""
import os

import pytest

import server_words as W
from repl_term import KEY, Term, read_entries, session_files, usage
from sse_server import openai_text

HUGE = "paste " * 400


@pytest.fixture
def env(srv):
    return dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY, OPENAI_MODEL="tiny",
                TERM="dumb")


def too_long():
    """llama-server's refusal of a prompt longer than its context (tools/server: format_error_response,
    ERROR_TYPE_EXCEED_CONTEXT_SIZE, HTTP 400)."""
    return {"status": 400, "body": {"error": {
        "code": 400, "message": "request (2417 tokens) exceeds the available context size (512 tokens), "
                                "try increasing it", "type": "exceed_context_size_error",
        "n_prompt_tokens": 2417, "n_ctx": 512}}}


def sent_texts(req):
    return "".join(str(m.get("content")) for m in req.body["messages"])


def test_a_prompt_too_long_for_the_context_is_set_aside_and_the_next_goes_without_it(isolated, srv, env):
    srv.push(openai_text("Hello there.", usage=usage(40, 3)),
             too_long(),                                            # the long prompt
             openai_text("We greeted each other.", usage=usage(60, 5)),  # the compaction's summary
             too_long(),                                            # the long prompt again, after it
             openai_text("Hi again.", usage=usage(45, 3)),
             openai_text("Still here.", usage=usage(48, 3)))
    t = Term([], env)
    t.expect("> ")
    t.turn("hello", "Hello there.")
    t.line(HUGE)
    t.expect("the prompt is too long for the context window of tiny")    # panto-send's words, its advice left off
    t.expect("compacting, then sending again")
    t.expect("the prompt does not fit the context window of tiny: it stays in the session, set aside")
    t.expect("> ")
    # the compaction's usage line once: the refused resend after it wrote nothing, so it has none
    assert t.screen.count("60 in · 5 out") == 1, t.screen
    t.turn("hi", "Hi again.")
    assert len(srv.requests) == 5
    assert "paste" not in sent_texts(srv.requests[4])
    assert "hello" in sent_texts(srv.requests[4])      # the conversation before it goes on
    assert t.quit() == 0
    # every hint the REPL showed is one that can be acted on in it: no command-line advice
    assert "--keep" not in t.screen and "--compact" not in t.screen
    [path] = session_files(isolated)
    entries = read_entries(path)
    by_id = {e["id"]: e for e in entries}
    long_prompt, hi = (next(e for e in entries if e.get("type") == "message"
                            and {"type": "text", "text": text} in e["message"]["content"]) for text in (HUGE, "hi"))
    # the long prompt stays in the file, on a branch of its own, marked by an empty contextFull reply
    assert hi["parentId"] == long_prompt["parentId"]
    below = [e for e in entries if e.get("parentId") == long_prompt["id"]]
    assert [e["type"] for e in below] == ["compaction"]
    [mark] = [e for e in entries if e.get("parentId") == below[0]["id"]]
    assert mark["message"] == {"role": "assistant", "content": [], "provider": "openai", "model": "tiny",
                               "api": "openai_chat", "stopReason": "contextFull",
                               "usage": {"input": 0, "output": 0}}    # refused: nothing billed
    assert by_id[hi["parentId"]]["message"]["role"] == "assistant"

    # a session resumed with the mark as its leaf would not be; one resumed now goes on from "hi"
    t = Term(["--continue"], env)
    t.expect("> ")
    t.turn("and now?", "Still here.")
    assert t.quit() == 0
    assert "paste" not in sent_texts(srv.requests[5]) and "Hi again." in sent_texts(srv.requests[5])


def test_a_session_resumed_at_a_set_aside_prompt_goes_on_without_it(isolated, srv, env):
    srv.push(openai_text("Hello there.", usage=usage(40, 3)), too_long(),
             openai_text("We greeted each other.", usage=usage(60, 5)), too_long(),
             openai_text("Back.", usage=usage(45, 3)))
    t = Term([], env)
    t.expect("> ")
    t.turn("hello", "Hello there.")
    t.line(HUGE)
    t.expect("does not fit the context window")
    t.expect("> ")
    assert t.quit() == 0
    t = Term(["--continue"], env)
    t.expect("> ")
    t.turn("where were we?", "Back.")
    assert t.quit() == 0
    sent = sent_texts(srv.requests[4])
    assert "paste" not in sent and "hello" in sent and "where were we?" in sent


def test_a_first_prompt_too_long_leaves_no_file_and_the_next_starts_fresh(isolated, srv, env):
    srv.push(too_long(), openai_text("Fresh start.", usage=usage(30, 3)))
    t = Term([], env)
    t.expect("> ")
    t.line(HUGE)
    t.expect("does not fit the context window")
    t.expect("> ")
    t.turn("short one", "Fresh start.")
    assert t.quit() == 0
    assert "--keep" not in t.screen and "--compact" not in t.screen
    assert "paste" not in sent_texts(srv.requests[-1])


def test_no_tools_never_runs_or_asks_about_a_tool_call_the_server_invents(isolated, srv, env):
    srv.push(W.vllm_tool_use("chatcmpl-tool-1", "bash", '{"command": "touch ran"}', text="Sure."),
             W.vllm_tool_use("chatcmpl-tool-2", "bash", '{"command": "touch ran"}'))
    env = dict(env, ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY=KEY)
    t = Term(["--no-tools", "--yes", "-p", "anthropic", "-m", "tiny"], env)
    t.expect("> ")
    t.line("make a file")
    t.expect("although no tools were offered")
    t.expect("> ")
    t.line("again")
    t.expect("although no tools were offered")
    t.expect("> ")
    assert t.quit() == 0
    assert "allow bash" not in t.screen and not (isolated / "ran").exists()
    assert len(srv.requests) == 2 and all("tools" not in r.body for r in srv.requests)
    # the second request carries the first call as text, and no result for it
    assert srv.requests[1].body["messages"][-2] == {"role": "assistant", "content": [
        {"type": "text", "text": "Sure."},
        {"type": "text", "text": '{"name":"bash","arguments":{"command": "touch ran"}}'}]}
    assert srv.requests[1].body["messages"][-1]["content"] == [{"type": "text", "text": "again"}]
    [path] = session_files(isolated)
    replies = [e["message"] for e in read_entries(path) if e.get("type") == "message"
               and e["message"]["role"] == "assistant"]
    assert [m["stopReason"] for m in replies] == ["stop", "stop"]
