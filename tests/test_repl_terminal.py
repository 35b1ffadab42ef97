"""The interactive panto as a person meets it, in a real pseudo-terminal:
paste, multi-line prompts, /edit, feedback, Markdown, NO_COLOR, Ctrl-C at any
moment, and the branch commands (checked in the session file)."""
import json
import os
import random
import re
import stat
import subprocess
import time

import pytest

from builders import user_texts
from conftest import repl_env, run
from sse_server import anthropic_stream, an_block, an_delta, an_end, an_start, an_stop, \
    error_reply, openai_text, openai_tools
from repl_term import Term, read_entries, roles, session_files, usage

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path, anthropic=True)


def has_replay_at():
    p = run(["panto-log", "--help"])
    return b"--at" in p.stdout


needs_at = pytest.mark.skipif(not has_replay_at(), reason="panto-log replay --at is not there yet")


def test_a_forty_line_paste_is_one_prompt(isolated, srv, env):
    srv.push(openai_text("Got all of it."))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    lines = [f"  File \"x.py\", line {i}, in f{i}" for i in range(40)]
    t.send(PASTE_START + "\r".join(lines) + "\r" + PASTE_END)
    t.expect("line 39, in f39")    # all of it at the prompt, nothing sent yet
    assert srv.requests == []
    t.send("\r")
    t.expect("Got all of it.")
    t.expect("> ")
    assert t.quit() == 0
    assert len(srv.requests) == 1
    sent = srv.requests[0].body["messages"][-1]
    assert sent["role"] == "user" and sent["content"] == "\n".join(lines) + "\n"
    [path] = session_files(isolated)
    assert user_texts(read_entries(path)) == ["\n".join(lines) + "\n"]


def test_a_trailing_backslash_continues_the_prompt(isolated, srv, env):
    srv.push(openai_text("two lines seen"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line("first line \\")
    t.expect("  ")
    t.turn("second line", "two lines seen")
    assert t.quit() == 0
    assert len(srv.requests) == 1
    assert srv.requests[0].body["messages"][-1]["content"] == "first line \nsecond line"


def test_edit_writes_the_prompt_in_the_editor(isolated, srv, env, tmp_path):
    srv.push(openai_text("edited prompt seen"))
    script = tmp_path / "ed.sh"
    modes = tmp_path / "modes"
    script.write_text(f'#!/bin/sh\nstat -c %a "$1" > {modes}\nprintf "from the editor\\nline two\\n" > "$1"\n')
    script.chmod(0o755)
    t = Term(["--no-tools"], dict(env, EDITOR=str(script)))
    t.expect("> ")
    t.line("/edit")
    t.expect("line two")            # back at the prompt for a last look, not sent yet
    assert srv.requests == []
    t.send("\r")
    t.expect("edited prompt seen")
    t.expect("> ")
    assert t.quit() == 0
    assert modes.read_text().strip() == "600"
    assert srv.requests[0].body["messages"][-1]["content"] == "from the editor\nline two"


def test_a_pasted_y_does_not_answer_a_tool_question(isolated, srv, env):
    srv.push(openai_tools([("call_1", "bash", '{"command": "touch ran"}')]),
             openai_text("Not run, then."))
    t = Term([], env)
    t.expect("> ")
    t.line("make a file")
    t.expect("allow bash?")
    t.send(PASTE_START + "y\r" + PASTE_END)
    t.expect("pasted text does not answer")
    t.decline()
    t.expect("Not run, then.")
    t.expect("> ")
    assert t.quit() == 0
    assert not (isolated / "ran").exists()


def test_spinner_reply_and_usage_line(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    cfg.mkdir(parents=True)
    (cfg / "models.toml").write_text('[openai.gpt-4o]\ninput = 2.5\noutput = 10.0\ncache_read = 1.25\n'
                                     'context = 128000\n')
    u = {"prompt_tokens": 12000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 9000}}
    srv.push(openai_text("Here it is.", pieces=["Here", " it is."], usage=u, delay=0.4))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line("slow one")
    spinner = t.expect("Here")
    assert re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] waiting \d+\.\ds", spinner), spinner
    t.expect("it is.")
    line = t.expect("> ")
    assert "12,000 in (75% cached)" in line and "300 out" in line, line
    assert re.search(r"\$0\.\d{4}", line) and re.search(r"\d+\.\ds", line), line
    assert "9% of the context" in line, line      # 12,000 of the 128,000 of models.toml
    assert t.quit() == 0


def test_a_tool_run_shows_a_spinner(isolated, srv, env):
    srv.push(openai_tools([("call_1", "bash", '{"command": "sleep 1; echo finished"}')]),
             openai_text("It finished."))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.turn("run it", "running ", "It finished.")
    assert t.quit() == 0


MARKDOWN = "# Title\nSome **bold** and `code`.\n> a quote\n- an item\n\n```\nx = 1\n```\nend\n"


def test_markdown_is_rendered_on_a_terminal(isolated, srv, env):
    srv.push(openai_text(MARKDOWN))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("show markdown", "end")
    assert t.quit() == 0
    screen = t.screen
    assert "│ a quote" in screen and "• an item" in screen
    assert "\x1b[1m\x1b[35m# Title" in screen          # a heading, styled
    assert "\x1b[1mbold\x1b[0m" in screen
    assert "\n> a quote" not in screen.replace("\r", "")


def test_no_color_renders_the_same_layout_without_escapes(isolated, srv, env):
    srv.push(openai_text(MARKDOWN, usage=usage(10, 5)))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.line("show markdown")
    t.expect("\n")
    reply = t.expect(" out")
    t.expect("> ")
    assert t.quit() == 0
    assert "│ a quote" in reply and "• an item" in reply and "**bold**" in reply
    assert "\x1b" not in reply, repr(reply)


def test_thinking_is_dimmed_apart_from_the_text(isolated, srv, env):
    events = [an_start(), an_block(0, {"type": "thinking", "thinking": ""}),
              an_delta(0, {"type": "thinking_delta", "thinking": "pondering deeply"}),
              an_delta(0, {"type": "signature_delta", "signature": "sig"}), an_stop(0),
              an_block(1, {"type": "text", "text": ""}),
              an_delta(1, {"type": "text_delta", "text": "The answer."}), an_stop(1), an_end()]
    srv.push(anthropic_stream(events))
    t = Term(["--no-tools", "-p", "anthropic", "-m", "claude-test"], env)
    t.expect("> ")
    t.turn("think", "The answer.")
    assert t.quit() == 0
    assert "\x1b[2mpondering deeply" in t.screen


def test_piped_output_is_the_text_as_written(isolated, srv, env):
    srv.push(openai_text(MARKDOWN))
    p = run(["panto", "--no-tools"], input=b"markdown please\n", env=env)
    assert p.returncode == 0, p.stderr
    assert MARKDOWN.encode() in p.stdout and b"\x1b" not in p.stdout


def test_escape_sequences_from_the_model_are_shown_not_run(isolated, srv, env):
    srv.push(openai_text("evil \x1b]52;c;aGk=\x07 and \x1b[2J done"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("hi", "done")
    assert t.quit() == 0
    assert "\x1b]52" not in t.screen and "\x1b[2J" not in t.screen and "^[]52" in t.screen


def test_ctrl_c_at_any_moment_of_a_turn_never_prints_a_traceback(isolated, srv, env):
    rng = random.Random(13)
    rounds = 12
    for _ in range(rounds):
        srv.push(openai_text("drip " * 40, pieces=["drip "] * 40, delay=0.05))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    for i in range(rounds):
        t.line(f"question {i}")
        wait = rng.uniform(0.01, 0.15)
        t.expect(f"question {i}")
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            t._read(0.005)
        t.send(b"\x03")
        t.turn("/session", "/session", "\n")
    # The "> " just seen may be the prompt redrawn with the typed-ahead /session:
    # wait for the answer of a command typed after it, so that Ctrl-D reaches
    # the editor (typed while a command runs in cooked mode, the tty drops it).
    t.turn("/model", "model: ")
    assert t.quit() == 0
    assert "Traceback" not in t.screen, t.screen
    assert "refusing" not in t.screen, t.screen
    assert t.screen.count("[cancelled]") == rounds     # each one reached the turn, however early
    for path in session_files(isolated):
        p = run(["panto-log", "replay", path])
        assert p.returncode == 0 and not p.stderr, p.stderr


def keeps_aborted_replies():
    man = os.path.join(os.path.dirname(__file__), "..", "man", "panto-send.1")
    with open(man, encoding="utf-8") as f:
        return "aborted" in f.read()


@pytest.mark.skipif(not keeps_aborted_replies(), reason="panto-send does not keep aborted replies yet")
def test_ctrl_c_keeps_the_partial_reply_on_screen_and_in_the_session(isolated, srv, env):
    srv.push(openai_text("first", usage=usage(10, 2)),
             openai_text("partial " * 200, pieces=["partial "] * 200, delay=0.05))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("short one", "first")
    t.line("long one")
    t.expect("partial partial partial")
    t.send(b"\x03")
    t.expect("aborted · ")      # the cancel, once: the partial reply's usage line
    t.expect("> ")
    assert t.quit() == 0
    assert "Traceback" not in t.screen and "[cancelled]" not in t.screen and "interrupted" not in t.screen
    [path] = session_files(isolated)
    last = read_entries(path)[-1]["message"]
    assert last["role"] == "assistant" and last["stopReason"] == "aborted"
    assert last["content"][0]["text"].startswith("partial partial partial")


def test_second_ctrl_c_at_an_empty_prompt_says_how_to_quit(env):
    t = Term([], env)
    t.expect("> ")
    t.send(b"\x03")
    t.expect("\x1b[?2004h")      # the next prompt is being drawn
    t.expect("> ")
    t.send(b"\x03")
    t.expect("Ctrl-D")
    t.expect("> ")
    assert t.quit() == 0


def test_model_alone_names_the_model_in_use(env, srv):
    t = Term([], env)
    t.expect("> ")
    t.turn("/model", f"model: openai: gpt-4o @ {srv.url}/v1")
    assert t.quit() == 0
    assert "(default)" not in t.screen


def test_retry_after_a_failed_turn_sends_the_prompt_once(isolated, srv, env):
    srv.push(openai_text("first"), error_reply(400, "temporarily refused"), openai_text("after the retry"),
             error_reply(400, "refused again"), openai_text("after up and enter"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("hello", "first")
    t.turn("second question", "temporarily refused")
    t.turn("/retry", "after the retry")
    t.turn("third question", "refused again")
    t.send("\x1b[A")           # Up: the failed prompt back, then Enter
    t.expect("third question")
    t.send("\r")
    t.expect("after up and enter")
    t.expect("> ")
    assert t.quit() == 0
    [path] = session_files(isolated)
    entries = read_entries(path)
    assert user_texts(entries) == ["hello", "second question", "third question"]
    assert roles(entries) == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    last = [m for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert [m["content"] for m in last] == ["hello", "second question", "third question"]


def test_retry_of_a_failed_first_prompt(isolated, srv, env):
    srv.push(error_reply(400, "no such luck"), openai_text("second time lucky"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("only question", "no such luck")
    t.turn("/retry", "second time lucky")
    assert t.quit() == 0
    [path] = session_files(isolated)
    assert user_texts(read_entries(path)) == ["only question"]


@needs_at
def test_retry_after_a_reply_makes_a_sibling(isolated, srv, env):
    srv.push(openai_text("answer one"), openai_text("answer two"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("the question", "answer one")
    t.turn("/retry", "answer two")
    assert t.quit() == 0
    [path] = session_files(isolated)
    entries = read_entries(path)
    users = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "user"]
    replies = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    assert len(users) == 1 and len(replies) == 2
    assert replies[0]["parentId"] == replies[1]["parentId"] == users[0]["id"]
    assert len(srv.requests) == 2 and srv.requests[0].body["messages"] == srv.requests[1].body["messages"]


@needs_at
def test_rewind_branches_from_before_the_chosen_prompt(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("instead"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("first prompt", "one")
    t.turn("second prompt", "two")
    t.line("/rewind")
    t.expect("2  ")
    t.expect("second prompt")
    t.expect("rewind to (number, Enter to cancel): ")
    t.send("\r")
    t.expect("nothing taken back")
    t.expect("> ")
    t.turn("/rewind 2", "taken back")
    t.send("\x15")          # Ctrl-U: away with the prompt put back
    t.turn("another second prompt", "instead")
    assert t.quit() == 0
    [path] = session_files(isolated)
    entries = read_entries(path)
    by_text = {b["text"]: e for e in entries if e["type"] == "message"
               for b in e["message"]["content"] if b["type"] == "text"}
    assert by_text["another second prompt"]["parentId"] == by_text["one"]["id"]
    assert by_text["second prompt"]["parentId"] == by_text["one"]["id"]   # nothing removed
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first prompt", "another second prompt"]


@needs_at
def test_fork_goes_on_in_a_new_session_file(isolated, srv, env):
    srv.push(openai_text("before the fork", usage=usage(1000, 10)), openai_text("after the fork", usage=usage(30, 3)))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("first", "before the fork")
    t.turn("/fork", "forked: now in session ")
    t.turn("second", "after the fork")
    assert t.quit() == 0
    files = session_files(isolated)
    assert len(files) == 2
    heads = {}
    for f in files:
        with open(f) as fh:
            heads[f] = json.loads(fh.readline())
    [old] = [f for f in files if "parentSession" not in heads[f]]
    [new] = [f for f in files if "parentSession" in heads[f]]
    assert heads[new]["parentSession"] == heads[old]["id"] and heads[new]["relation"] == "fork"
    old_entries, new_entries = read_entries(old), read_entries(new)
    assert [e["id"] for e in new_entries[:len(old_entries)]] == [e["id"] for e in old_entries]
    assert user_texts(old_entries) == ["first"] and user_texts(new_entries) == ["first", "second"]
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600
    # the copied reply is billed in the session it came from, once (SPEC 8)
    [paid] = [e for e in old_entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    copy = next(e for e in new_entries if e["id"] == paid["id"])
    assert "usage" in paid["message"] and "usage" not in copy["message"]
    assert copy["billedIn"] == heads[old]["id"] and "billedIn" not in paid
    assert {k: v for k, v in copy.items() if k != "billedIn"} == dict(
        paid, message={k: v for k, v in paid["message"].items() if k != "usage"})
    total = json.loads(run(["panto-cost", "--all", "--json"], env=env).stdout)["total"]
    assert (total["turns"], total["input"], total["output"], total["billedElsewhere"]) == (3, 1030, 13, 1)


def test_allowed_lists_the_rules_and_keeps_none_in_a_file(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    t = Term([], env)
    t.expect("> ")
    t.turn("/allowed", f"no rules: every bash, write and edit call asks (rules that last go in {cfg / 'allow'})")
    t.turn("/allowed clear", "no rules of this run to clear")
    assert "PANTO_ALLOW_FILE" not in open(f"/proc/{t.p.pid}/environ", "rb").read().decode("utf-8", "replace")
    assert t.quit() == 0
    assert os.listdir(env["TMPDIR"]) == []     # no allowance file, ever


def test_history_keeps_a_multi_line_prompt_as_one_entry(isolated, srv, env):
    srv.push(openai_text("ok one"), openai_text("ok two"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.send(PASTE_START + "alpha\rbeta" + PASTE_END + "\r")
    t.expect("ok one")
    t.expect("> ")
    t.send("\x1b[A\r")
    t.expect("ok two")
    t.expect("> ")
    assert t.quit() == 0
    assert [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "user"][-1] == "alpha\nbeta"
    history = isolated.parent / "home" / ".local" / "state" / "panto" / "history"
    assert json.loads(history.read_text().splitlines()[-1]) == "alpha\nbeta"
    assert stat.S_IMODE(os.stat(history).st_mode) == 0o600



def compactions(entries):
    return [e for e in entries if e["type"] == "compaction"]


def test_compact_command_writes_a_compaction(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("three"),
             openai_text("The summary of it all."), openai_text("after compaction"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    for p, a in (("p1", "one"), ("p2", "two"), ("p3", "three")):
        t.turn(p, a)
    t.turn("/compact keep the names")
    t.turn("p4", "after compaction")
    assert t.quit() == 0
    [path] = session_files(isolated)
    [c] = compactions(read_entries(path))
    assert c["summary"] == "The summary of it all."
    assert "keep the names" in json.dumps(srv.requests[3].body)
    assert "The summary of it all." in json.dumps(srv.requests[4].body["messages"])


def test_a_context_full_reply_compacts_and_sends_again_once(isolated, srv, env):
    full = error_reply(400, "This model's maximum context length is 128000 tokens. However, your messages "
                            "resulted in 130000 tokens. Please reduce the length of the messages.",
                       kind="invalid_request_error")
    full["body"]["error"]["code"] = "context_length_exceeded"
    srv.push(openai_text("one"), openai_text("two"), full, openai_text("Summary."), openai_text("fits now"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("p1", "one")
    t.turn("p2", "two")
    t.turn("p3", "compacting", "fits now")
    assert t.quit() == 0
    assert len(srv.requests) == 5
    [path] = session_files(isolated)
    entries = read_entries(path)
    assert len(compactions(entries)) == 1 and user_texts(entries).count("p3") == 1


def test_over_85_percent_of_the_context_compacts_before_the_next_request(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    cfg.mkdir(parents=True)
    (cfg / "models.toml").write_text('[openai.gpt-4o]\ninput = 2.5\noutput = 10.0\ncontext = 1000\n')
    srv.push(openai_text("one", usage=usage(100, 5)), openai_text("two", usage=usage(900, 5)),
             openai_text("Summary."), openai_text("three", usage=usage(200, 5)))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("p1", "one", "10% of the context")
    t.turn("p2", "two", "90% of the context")
    t.turn("p3", "compacting first", "three")
    assert t.quit() == 0
    assert len(srv.requests) == 4
    [path] = session_files(isolated)
    assert len(compactions(read_entries(path))) == 1


def test_a_confirmed_tool_run_shows_a_spinner_after_the_question(isolated, srv, env):
    srv.push(openai_tools([("call_1", "bash", '{"command": "sleep 2; echo finished"}')]),
             openai_text("Done after asking."))
    t = Term([], env)
    t.expect("> ")
    t.line("run it")
    before = t.expect("allow bash?")
    assert "running " not in before
    t.send("y")
    t.expect("running ")
    t.expect("Done after asking.")
    t.expect("> ")
    assert t.quit() == 0


@needs_at
def test_resume_an_id_from_another_directory(isolated, srv, env, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    srv.push(openai_text("made elsewhere"))
    p = subprocess.run(["bash", "-c", 'panto-send --quiet "a question there" </dev/null | panto-log append'],
                       capture_output=True, env=env, cwd=other)
    assert p.returncode == 0, p.stderr
    sid = json.loads(p.stdout.split(b"\n")[0])["id"]
    p = run(["panto", "--resume", sid[:18]], env=env)
    assert p.returncode == 0, p.stderr
    assert f"resumed session {sid}".encode() in p.stdout
    assert f"started in {other}".encode() in p.stdout and b"made elsewhere" in p.stdout


def test_ctrl_c_while_a_tool_runs_stops_it_and_keeps_the_session(isolated, srv, env):
    srv.push(openai_tools([("call_1", "bash", '{"command": "echo started; sleep 30; touch late"}')]),
             openai_text("after the interruption"))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.line("run something long")
    t.expect("running ")
    started = time.monotonic()
    t.send(b"\x03")
    t.expect("[cancelled]")
    t.expect("> ")
    assert time.monotonic() - started < 10
    t.turn("go on", "after the interruption")
    assert t.quit() == 0
    assert "Traceback" not in t.screen and not (isolated / "late").exists()
    [path] = session_files(isolated)
    entries = read_entries(path)
    results = [b for e in entries if e["type"] == "message" for b in e["message"]["content"]
               if b["type"] == "toolResult"]
    assert [r["toolUseId"] for r in results] == ["call_1"]
    assert run(["panto-log", "replay", path]).returncode == 0



class PipedTerm(Term):
    """panto with its stdout sent to a file (panto > FILE) and stdin, stderr on the pty."""

    def __init__(self, args, env, log):
        import fcntl
        import pty
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
        with open(log, "wb") as out:
            self.p = subprocess.Popen(["panto", *args], stdin=slave, stdout=out, stderr=slave, env=env,
                                      start_new_session=True,
                                      preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.fd, self.buf, self.pos = master, b"", 0


def test_piped_output_with_a_terminal_for_the_prompt(isolated, srv, env, tmp_path):
    srv.push(openai_text("# Kept *as written*\n> a quote"))
    log = tmp_path / "transcript"
    t = PipedTerm(["--no-tools"], env, log)
    t.expect("\x1b[?2004h")            # the prompt is edited on the terminal (stderr)
    t.expect("> ")
    t.send(PASTE_START + "one\rtwo" + PASTE_END + "\r")
    t.expect("\x1b[?2004h")            # the next prompt, after the turn
    t.expect("> ")
    assert t.quit() == 0
    assert len(srv.requests) == 1 and srv.requests[0].body["messages"][-1]["content"] == "one\ntwo"
    text = log.read_bytes()
    assert b"> one\ntwo\n" in text and b"# Kept *as written*\n> a quote\n" in text and b"\x1b" not in text


def test_a_context_full_stop_compacts_and_asks_again(isolated, srv, env):
    from sse_server import anthropic_text

    srv.push(anthropic_text("one"), anthropic_text("two"),
             anthropic_text("I ran out of ro", stop="model_context_window_exceeded"),
             anthropic_text("Summary."), anthropic_text("now it fits"))
    t = Term(["--no-tools", "-p", "anthropic", "-m", "claude-test"], env)
    t.expect("> ")
    for p, a in (("p1", "one"), ("p2", "two")):
        t.turn(p, a)
    t.turn("p3", "compacting", "now it fits")
    assert t.quit() == 0
    assert len(srv.requests) == 5
    [path] = session_files(isolated)
    entries = read_entries(path)
    [c] = compactions(entries)
    assert c["parentId"] == next(e["id"] for e in entries if e["type"] == "message"
                                 and e["message"]["content"][-1].get("text") == "p3")
    full = [e for e in entries if e["type"] == "message" and e["message"].get("stopReason") == "contextFull"]
    assert len(full) == 1 and entries[-1]["parentId"] == c["id"]      # the new reply follows the compaction
    assert user_texts(entries).count("p3") == 1
