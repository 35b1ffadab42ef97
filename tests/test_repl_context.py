"""No dead end after a too-long prompt (SPEC 5.1, §9): the interactive panto
under a real pseudo-terminal, against a loopback server that refuses a
prompt as llama-server does when it does not fit its context."""
import os

import pytest

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
    t.expect("compacting, then sending again")
    t.expect("the prompt is too long for the context window of tiny, even after compacting")
    t.expect("> ")
    t.turn("hi", "Hi again.")
    assert len(srv.requests) == 5
    assert "paste" not in sent_texts(srv.requests[4])
    assert "hello" in sent_texts(srv.requests[4])      # the conversation before it goes on
    assert t.quit() == 0
    # every hint the REPL showed is one that can be acted on in it: no command-line advice
    assert "--keep" not in t.screen and "panto-send" not in t.screen
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
                               "api": "openai_chat", "stopReason": "contextFull"}
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
    t.expect("even after compacting")
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
    t.expect("even after compacting")
    t.expect("> ")
    t.turn("short one", "Fresh start.")
    assert t.quit() == 0
    assert "--keep" not in t.screen and "panto-send" not in t.screen
    assert "paste" not in sent_texts(srv.requests[-1])
