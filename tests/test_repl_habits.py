"""Habits people bring from other agents, and the commands that ask or draw:
-c/--continue/--last, `panto PROMPT...`, an ambiguous --resume prefix, a
missing key said at start, Tab, /rewind's question, /tree, /fork's title."""
import json
import time

import pytest

from builders import user_texts
from conftest import assert_clean_error, repl_env, run
from sse_server import openai_text
from repl_term import Term, make_session, read_entries, session_files, write_session


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path)


@pytest.mark.parametrize("flag", ["-c", "--continue", "--last"])
def test_continue_resumes_the_last_active_session(isolated, srv, env, flag):
    make_session(srv, env, "an older question", "old")
    time.sleep(0.02)
    last = make_session(srv, env, "the last question", "last")
    srv.push(openai_text("continued"))
    t = Term([flag], env)
    t.expect(f"resumed session {last} (3 entries)")
    t.expect("> ")
    t.turn("go on", "continued")
    assert t.quit() == 0
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["the last question", "go on"]


def test_prompt_words_on_the_command_line_are_the_first_prompt(isolated, srv, env):
    srv.push(openai_text("It is a test."))
    t = Term(["what", "is", "this"], env)
    t.expect("> what is this")
    t.expect("It is a test.")
    t.expect("> ")
    assert t.quit() == 0
    assert srv.requests[0].body["messages"][-1]["content"] == "what is this"
    [path] = session_files(isolated)
    assert user_texts(read_entries(path)) == ["what is this"]


def test_continue_with_a_prompt(isolated, srv, env):
    make_session(srv, env, "first", "one")
    srv.push(openai_text("two"))
    p = run(["panto", "-c", "and", "then?"], env=env)
    assert p.returncode == 0, p.stderr
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first", "and then?"]


def test_an_ambiguous_prefix_lists_at_most_ten_candidates(isolated, env):
    for i in range(12):
        write_session(isolated, f"0199aaaa-0000-7000-8000-0000000000{i:02}")
    p = run(["panto", "--resume", "0199aaaa"], env=env)
    assert p.returncode == 1 and b"Traceback" not in p.stderr
    lines = p.stderr.decode().rstrip("\n").split("\n")
    assert lines[0].startswith("panto: session id '0199aaaa' is ambiguous: 12 sessions match")
    listed = lines[1:]
    assert len(listed) == 11 and listed[-1] == "  … and 2 more"
    for line in listed[:-1]:
        sid, day, hour, prompt = line.split(None, 3)
        assert sid.startswith("0199aaaa-0000-7000-8000-0000000000") and prompt == "do it"
        assert len(day) == 10 and len(hour) == 5 and len(line) < 100


def test_a_missing_key_is_said_at_start(isolated, srv, env):
    e = {k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    t = Term(["--no-tools"], e)
    before = t.expect("> ")
    assert "OPENAI_API_KEY is not set" in before          # before anything is typed
    assert t.quit() == 0


def test_tab_completes_slash_commands(isolated, srv, env):
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.send("/mo\t")
    t.expect("/model ")
    t.send("\r")
    t.expect("model: openai: gpt-4o")
    t.expect("> ")
    t.send("/co\t")                  # /compact and /cost: the choices are shown
    t.expect("/compact  /cost")
    t.send("s\t\r")
    t.expect("nothing spent yet")
    t.expect("> ")
    assert t.quit() == 0


def two_prompts(t):
    for prompt, answer in (("first prompt", "one"), ("second prompt", "two")):
        t.turn(prompt, answer)


def test_a_number_at_the_rewind_question_is_a_choice_not_a_prompt(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("instead"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    two_prompts(t)
    t.line("/rewind")
    t.expect("2  ")
    t.expect("second prompt")
    t.expect("\r\n")
    t.expect("rewind to (number, Enter to cancel): ")   # on a line of its own
    t.turn("2", "taken back: second prompt")
    assert len(srv.requests) == 2                       # the "2" went nowhere
    t.send("\x15")
    t.turn("another", "instead")
    t.line("/rewind")
    t.expect("rewind to (number, Enter to cancel): ")
    t.turn("seven", "not a number from 1 to 2: nothing taken back")
    assert t.quit() == 0
    assert len(srv.requests) == 3
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first prompt", "another"]


def tree_then_quit(t):
    """/tree, then Ctrl-D: what /tree drew, up to the next prompt."""
    t.line("/tree")
    t.expect("\r\n")
    shown = t.expect("\x1b[?2004h")     # up to the next prompt
    t.expect("> ")                      # drawn by the line editor: Ctrl-D is a key now
    assert t.quit() == 0
    return shown


def test_tree_draws_branches_with_glyphs(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("two again"))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"), cols=50)
    t.expect("> ")
    two_prompts(t)
    t.turn("/retry", "two again")
    shown = tree_then_quit(t)
    rows = [r for r in shown.replace("\r", "").split("\n") if r.strip()]
    assert rows == ["● > first prompt", "● ⏺ one", "● > second prompt", "  ├─ ⏺ two", "● └─ ⏺ two again"], rows
    assert "You are panto" not in shown


def test_tree_rows_fit_the_width(isolated, srv, env):
    srv.push(openai_text("a reply " * 30))
    t = Term(["--no-tools"], env, cols=40)
    t.expect("> ")
    t.turn("a prompt that is much longer than forty columns, to be cut", "reply")
    shown = tree_then_quit(t)
    import re

    rows = [re.sub(r"\x1b\[[0-9;]*m", "", r) for r in shown.replace("\r", "").split("\n") if r.strip()]
    assert len(rows) == 2 and all(len(r) <= 39 for r in rows) and rows[0].endswith("…"), rows


def test_fork_keeps_the_title(isolated, srv, env):
    srv.push(openai_text("before the fork"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("first", "before the fork")
    t.turn("/name the refactor", "named: the refactor")
    t.turn("/fork", "forked: now in session ")
    assert t.quit() == 0
    files = session_files(isolated)
    assert len(files) == 2
    [new] = [f for f in files if "parentSession" in json.loads(open(f).readline())]
    names = [e["name"] for e in read_entries(new) if e["type"] == "sessionInfo"]
    assert names == ["the refactor"]
    p = run(["panto-ls"], env=env)
    assert p.stdout.count(b"the refactor") == 2


def test_unknown_option_is_still_a_usage_error(isolated, env):
    assert_clean_error(run(["panto", "--bogus"], env=env), 2, "panto")


def test_rewind_lists_the_prompts_a_compaction_summarized(isolated, srv, env):
    """A turn reads only what its request needs (replay --context), but
    /rewind offers every prompt on the path, those before the compaction too."""
    from builders import SID, two_prompts_compacted

    two_prompts_compacted(isolated)
    srv.push(openai_text("after"))
    t = Term(["--no-tools", "--resume", SID], env)
    t.expect("> ")
    t.turn("the new prompt", "after")
    assert "the early prompt" not in json.dumps(srv.requests[-1].body)   # the turn's stream was partial
    t.line("/rewind")
    t.expect("the early prompt")
    t.expect("the kept prompt")
    t.expect("the new prompt")
    t.expect("rewind to (number, Enter to cancel): ")
    t.turn("1", "taken back: the early prompt")
    t.send("\x15")                                      # the prompt put back: cleared
    assert t.quit() == 0
