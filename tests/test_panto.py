"""The interactive panto, driven under a real pseudo-terminal against the scripted server."""
import json
import os
import time

import pytest

from conftest import assert_clean_error, run
from repl_term import KEY, Term, make_session, read_entries, roles, session_files, usage, write_session
from sse_server import anthropic_text, openai_text, openai_tools


@pytest.fixture
def env(srv):
    e = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY, OPENAI_MODEL="gpt-4o",
             ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY=KEY, TERM="dumb")
    return e


def test_two_turns_with_a_tool_call_and_confirmation(isolated, srv, env):
    (isolated / "notes.txt").write_text("remember the milk\n")
    srv.push(openai_tools([("call_1", "bash", '{"command": "ls"}')], text="Looking.", usage=usage(50, 5)),
             openai_text("There is notes.txt.", usage=usage(80, 6)),
             openai_text("You are welcome.", usage=usage(90, 4)))
    t = Term([], env)
    t.expect(f"panto — openai: gpt-4o @ {srv.url}/v1")
    t.expect("> ")
    t.line("what files are here?")
    t.expect("allow bash?")
    t.expect("in this run ")
    t.send("y")   # one key, no Enter
    t.expect("There is notes.txt.")
    t.expect("> ")
    t.turn("thanks", "You are welcome.")
    assert t.quit() == 0
    assert KEY not in t.screen
    [path] = session_files(isolated)
    entries = read_entries(path)
    assert roles(entries) == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    result = entries[3]["message"]["content"][0]
    assert result["type"] == "toolResult" and result["toolUseId"] == "call_1"
    assert result["content"] == "notes.txt\n" and "isError" not in result
    assert entries[3]["provider"] == "openai"
    assert entries[2]["message"]["stopReason"] == "toolUse"
    assert entries[-1]["message"]["content"] == [{"type": "text", "text": "You are welcome."}]
    assert len(srv.requests) == 3
    assert srv.requests[0].body["tools"] and srv.requests[1].body["messages"][-1]["role"] == "tool"
    history = isolated.parent / "home" / ".local" / "state" / "panto" / "history"
    text = history.read_text()
    assert "what files are here?" in text and "thanks" in text


def test_declined_tool_call_goes_back_to_the_model(isolated, srv, env):
    srv.push(openai_tools([("call_1", "bash", '{"command": "touch ran"}')]),
             openai_text("Fine, I will not."))
    t = Term([], env)
    t.expect("> ")
    t.line("make a file")
    t.expect("in this run ")
    t.decline()
    t.expect("Fine, I will not.")
    t.expect("> ")
    assert t.quit() == 0
    assert not (isolated / "ran").exists()
    tool_msg = srv.requests[1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and "declined" in tool_msg["content"]


def test_ctrl_c_during_a_streamed_reply_keeps_the_session(isolated, srv, env):
    srv.push(openai_text("First answer.", usage=usage(10, 2)),
             openai_text("drip " * 200, pieces=["drip "] * 200, delay=0.1),
             openai_text("Back again."))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("one", "First answer.")
    t.line("two, slowly")
    t.expect("drip drip drip")
    t.send(b"\x03")
    t.expect("aborted · ")     # one line: the partial reply's usage line
    t.expect("> ")
    [path] = session_files(isolated)
    entries = read_entries(path)
    # the partial reply is kept as an aborted assistant entry (panto-send's Ctrl-C contract)
    assert roles(entries) == ["system", "user", "assistant", "user", "assistant"]
    assert entries[-2]["message"]["content"][-1]["text"] == "two, slowly"
    assert entries[-1]["message"]["stopReason"] == "aborted"
    # the session goes on from there
    t.turn("three", "Back again.")
    assert t.quit() == 0
    entries = read_entries(path)
    assert roles(entries) == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    sent = [m for m in srv.requests[2].body["messages"] if m["role"] == "user"]
    assert "two, slowly" in json.dumps(sent) and "three" in json.dumps(sent)
    ok = run(["panto-log", "replay", path])
    assert ok.returncode == 0 and not ok.stderr


def test_ctrl_c_at_the_prompt_does_not_quit(srv, env):
    t = Term([], env)
    t.expect("> ")
    t.send("half a line")
    t.expect("half a line")   # readline has the terminal
    t.send(b"\x03")
    t.expect("> ")
    t.line("/session")
    t.expect("no session file yet")
    t.expect("> ")            # readline has the terminal again: Ctrl-D is EOF
    assert t.p.poll() is None
    assert t.quit() == 0
    assert srv.requests == []


def test_resume_last_and_by_id(isolated, srv, env):
    first = make_session(srv, env, "the first question", "the first answer")
    time.sleep(0.02)
    second = make_session(srv, env, "the second question", "the second answer")
    srv.push(openai_text("continued"))
    t = Term(["--resume"], env)
    t.expect(f"resumed session {second} (3 entries)")
    t.expect("panto — openai: gpt-4o")
    t.expect("the second question")
    t.expect("the second answer")
    t.expect("> ")
    t.turn("go on", "continued")
    assert t.quit() == 0
    msgs = srv.requests[-1].body["messages"]
    assert [m["content"] for m in msgs if m["role"] == "user"] == ["the second question", "go on"]

    t = Term(["--resume", first[:13]], env)
    t.expect(f"resumed session {first} (3 entries)")
    t.expect("the first answer")
    t.expect("> ")
    assert t.quit() == 0
    assert "the second" not in t.screen


def test_resume_with_nothing_to_resume_starts_fresh(env):
    p = run(["panto", "--resume"], env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(b"no sessions to resume; starting fresh.\npanto \xe2\x80\x94 openai: gpt-4o")


def test_unknown_and_ambiguous_ids_exit_1(isolated, env):
    write_session(isolated, "0199aaaa-0000-7000-8000-000000000001")
    write_session(isolated, "0199aaaa-0000-7000-8000-000000000002")
    p = run(["panto", "--resume", "0199aaaa"], env=env)
    assert_clean_error(p, 1, "panto")
    assert b"ambiguous" in p.stderr and b"0199aaaa-0000-7000-8000-000000000001" in p.stderr
    p = run(["panto", "--resume", "ffff"], env=env)
    assert_clean_error(p, 1, "panto")
    assert b"no session 'ffff'" in p.stderr
    p = run(["panto", "--resume", "0199aaaa-0000-7000-8000-000000000002"], env=env)
    assert p.returncode == 0 and b"resumed session 0199aaaa-0000-7000-8000-000000000002 (2 entries)" in p.stdout


def test_interrupted_turn_is_shown_and_not_rerun(isolated, srv, env):
    use = {"type": "toolUse", "id": "call_9", "name": "bash", "input": '{"command": "touch ran"}'}
    path = write_session(isolated, "0199bbbb-0000-7000-8000-000000000001", [use])
    t = Term(["--resume", "--yes"], env)
    t.expect("resumed session 0199bbbb-0000-7000-8000-000000000001 (2 entries)")
    t.expect("bash touch ran")
    t.expect("interrupted")
    t.expect("> ")
    assert t.quit() == 0
    assert not (isolated / "ran").exists() and srv.requests == []
    assert len(read_entries(path)) == 2


def test_model_switch_to_another_provider(isolated, srv, env):
    srv.push(openai_text("from openai"), anthropic_text("from anthropic"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("hello", "from openai")
    t.turn("/model anthropic claude-test", "model: anthropic: claude-test")
    t.turn("and now?", "from anthropic")
    assert t.quit() == 0
    assert [r.path for r in srv.requests] == ["/v1/chat/completions", "/v1/messages"]
    assert srv.requests[1].body["model"] == "claude-test"
    [path] = session_files(isolated)
    entries = read_entries(path)
    users = [e for e in entries if e["message"]["role"] == "user"]
    assert [(u["provider"], u["model"]) for u in users] == [("openai", "gpt-4o"), ("anthropic", "claude-test")]
    assert entries[-1]["message"]["provider"] == "anthropic"
    # a resume continues with the model the session switched to
    p = run(["panto", "--resume"], env=env)
    assert b"panto \xe2\x80\x94 anthropic: claude-test @ " + srv.url.encode() in p.stdout


def test_cost_of_the_session(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    cfg.mkdir(parents=True)
    (cfg / "models.toml").write_text('[openai.gpt-4o]\ninput = 2.5\noutput = 10.0\n')
    srv.push(openai_text("priced", usage=usage(1000, 100)))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line("/cost")
    t.expect("nothing spent yet")
    t.turn("hi", "priced")
    t.turn("/cost", "$0.0035")
    assert t.quit() == 0


def test_max_steps_stops_the_agent_loop(isolated, srv, env):
    srv.push(openai_tools([("call_1", "read", '{"path": "a"}')]), openai_tools([("call_2", "read", '{"path": "b"}')]))
    t = Term(["--max-steps=2"], env)
    t.expect("> ")
    t.turn("loop", "stopped after 2 steps")
    assert t.quit() == 0
    assert len(srv.requests) == 2


def test_sessions_help_version_and_usage(isolated, srv, env):
    p = run(["panto", "sessions"], env=env)
    assert p.returncode == 0 and p.stdout == f"no sessions for {isolated}\n".encode()
    make_session(srv, env, "listed prompt", "ok")
    p = run(["panto", "sessions"], env=env)
    assert p.returncode == 0 and b"listed prompt" in p.stdout
    p = run(["panto", "help"])
    assert p.returncode == 0 and b"panto [options] [--resume [ID] | -c | --continue | --last]" in p.stdout
    assert run(["panto", "--version"]).stdout.strip() == b"0.1.0"
    assert_clean_error(run(["panto", "--bogus"]), 2, "panto")
    assert_clean_error(run(["panto", "--max-steps", "0"]), 2, "panto")


def test_piped_prompts_make_a_transcript(isolated, srv, env):
    srv.push(openai_text("piped answer"))
    p = run(["panto", "--no-tools"], input=b"a piped question\n", env=env)
    assert p.returncode == 0, p.stderr
    assert b"> a piped question\n" in p.stdout
    assert len(session_files(isolated)) == 1


def test_piped_panto_shows_tool_calls_without_escape_sequences(isolated, srv, env):
    # panto-tool draws on a pty the REPL reads: what it draws must follow where
    # the REPL copies it (a file here), not the pty
    env = {k: v for k, v in env.items() if k != "NO_COLOR"}
    srv.push(openai_tools([("call_1", "bash", '{"command": "ls"}')], usage=usage(5, 1)),
             openai_text("done", usage=usage(6, 1)))
    p = run(["panto"], input=b"list the files\n", env=env)
    assert p.returncode == 0, p.stderr
    shown = p.stdout + p.stderr
    assert b"bash" in shown and b"ls" in shown
    assert b"\x1b" not in shown, shown
