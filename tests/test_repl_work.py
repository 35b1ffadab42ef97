"""The agent at work (SPEC §9 "At work"), on a real pseudo-terminal against
the scripted server: several calls of one reply in order with the question
last on the screen, no stray key granting a rule, declining with a reason,
what a write changes, abandoned prompts marked for the model."""
import json

import orjson
import pytest

from builders import header, msg
from conftest import repl_env, send

from sse_server import openai_text, openai_tools
from repl_term import Term, read_entries, session_files


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path)


def bash_calls(*commands):
    return openai_tools([(f"call_{i}", "bash", json.dumps({"command": c})) for i, c in enumerate(commands)])


def tool_results(request):
    """The tool results a request sent back, by call id."""
    return {m["tool_call_id"]: m["content"] for m in request.body["messages"] if m["role"] == "tool"}


def asking(t):
    """Whether a question is drawn, on the cursor's row."""
    vt = t.vt()
    return "allow bash?" in vt.text()[vt.r] and vt.c > 0


def question_is_last(t, question):
    """The question is the last thing on the screen, the cursor right after it."""
    vt = t.vt()
    rows = vt.text()
    last = max(i for i, r in enumerate(rows) if r)
    assert question in rows[last], rows[-8:]
    assert vt.r == last and vt.c == len(rows[last]) + 1, (vt.r, vt.c, rows[-8:])   # after "? "
    return rows


# -- several calls in one reply ---------------------------------------------------------

@pytest.mark.parametrize("attempt", range(5))
def test_each_call_is_shown_asked_run_and_displayed_before_the_next(isolated, srv, env, attempt):
    srv.push(bash_calls("echo FIRST-OUT-1; echo FIRST-OUT-2", "echo SECOND-OUT"), openai_text("Both ran."))
    t = Term([], env)
    t.expect("> ")
    t.line("run both")
    t.expect("allow bash?")
    t.wait_for(asking, what="the first question")
    question_is_last(t, "allow bash?")
    t.send("y")
    t.expect("allow bash?")
    t.wait_for(lambda t: "echo SECOND-OUT" in t.screen and asking(t), what="the second question")
    rows = question_is_last(t, "allow bash?")
    first_out = max(i for i, r in enumerate(rows) if "FIRST-OUT-2" in r and "echo" not in r)
    second_call = max(i for i, r in enumerate(rows) if "echo SECOND-OUT" in r)
    assert first_out < second_call, rows      # the first result before the second call is shown
    assert not any("SECOND-OUT" in r and "echo" not in r for r in rows)    # not run yet
    t.send("y")
    t.expect("Both ran.")
    t.expect("> ")
    assert t.quit() == 0
    assert list(tool_results(srv.requests[1]).values()) == ["FIRST-OUT-1\nFIRST-OUT-2\n", "SECOND-OUT\n"]


# -- no stray key grants a rule ---------------------------------------------------------

@pytest.mark.parametrize("attempt", range(5))
def test_a_prompt_typed_at_a_question_grants_no_rule_and_runs_nothing(isolated, srv, env, attempt):
    srv.push(bash_calls("echo ONE", "cat notes.txt"), openai_text("Stopped."), openai_text("Fine."))
    (isolated / "notes.txt").write_text("NOTES\n")
    t = Term([], env)
    t.expect("> ")
    t.line("look")
    t.expect("allow bash?")
    t.send("y")
    t.expect("allow bash? [y]es [n]o [a]lways for 'cat' in this run")
    for key in "look at this":      # a new prompt, one key at a time: nothing answers
        t.send(key)
        t.expect("for 'cat' in this run")  # the answers shown again after each key (after `a`: its second step)
    question_is_last(t, "[a]lways for 'cat'")
    t.send("\x03")              # Ctrl-C: declined, the turn cancelled
    t.expect("> ")
    t.line("/allowed")
    t.expect("/allowed")
    listing = t.expect("> ")
    assert "this run" not in listing, listing
    assert t.quit() == 0
    results = [e for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
               and e["message"]["role"] == "user" and e["message"]["content"][0]["type"] == "toolResult"]
    blocks = results[-1]["message"]["content"]
    assert blocks[0]["content"] == "ONE\n"
    assert blocks[1]["isError"] and "NOTES" not in blocks[1]["content"]


@pytest.mark.parametrize("attempt", range(5))
def test_always_takes_a_then_enter_or_a_capital_a(isolated, srv, env, attempt):
    srv.push(bash_calls("ls", "ls -a", "cat x.txt", "ls -l"), openai_text("Done."))
    (isolated / "x.txt").write_text("X\n")
    t = Term([], env)
    t.expect("> ")
    t.line("look")
    t.expect("[a]lways for 'ls' in this run")
    t.send("a")
    t.expect("Enter")               # the second step, named
    t.send("x")                     # anything but Enter goes back to the question
    t.expect("[a]lways for 'ls' in this run")
    t.send("a")
    t.expect("Enter")
    t.send("\r")                    # confirmed: ls -a runs unasked
    t.expect("[a]lways for 'cat' in this run")
    t.send("A")                     # a capital A is "always" at once
    t.expect("Done.")
    t.expect("> ")
    t.line("/allowed")
    t.expect("/allowed")
    listing = t.expect("> ")
    assert "bash:ls" in listing and "bash:cat" in listing, listing
    assert t.quit() == 0
    sent = tool_results(srv.requests[1])
    assert sent["call_2"] == "X\n"
    assert not any(v.startswith("not run") for v in sent.values()), sent     # ls -l ran unasked under 'ls'


# -- told what happened -------------------------------------------------------------

def test_prompts_that_got_no_reply_are_sent_with_a_note_and_kept_as_typed(isolated, srv, env):
    from sse_server import error_reply

    srv.push(openai_text("Hello."), error_reply(400, "bad request"),
             openai_text("never", stall_after=0, stall=20), openai_text("Third answered."))
    t = Term([], env)
    t.expect("> ")
    t.turn("hello", "Hello.")
    t.turn("first, refactor it all", "bad request")
    t.line("second, no: only the parser")
    t.wait_for(lambda t: len(srv.requests) == 3, what="the third request")
    t.send("\x03")
    t.expect("[cancelled]")
    t.expect("> ")
    t.turn("third, just list the files", "Third answered.")
    assert t.quit() == 0
    users = [m for m in srv.requests[3].body["messages"] if m["role"] == "user"]
    texts = [m["content"] if isinstance(m["content"], str) else "".join(p["text"] for p in m["content"])
             for m in users]
    assert texts[0] == "hello"
    assert texts[1].startswith("first, refactor it all") and texts[1].endswith("[no reply: the request failed]")
    assert texts[2].startswith("second, no: only the parser") and \
        texts[2].endswith("[no reply: cancelled by the user]")
    assert texts[3] == "third, just list the files"
    # the file keeps each prompt as typed; a pipeline building the request sees the same
    prompts = [e["message"]["content"] for e in read_entries(session_files(isolated)[0])
               if e["type"] == "message" and e["message"]["role"] == "user"]
    assert [c[0]["text"] for c in prompts] == ["hello", "first, refactor it all", "second, no: only the parser",
                                               "third, just list the files"]
    assert all(len(c) == 1 for c in prompts)


def test_a_pipeline_sees_the_same_notes(isolated, srv):
    cancelled = orjson.dumps({"type": "noReply", "id": "n0000001", "parentId": "u0000002",
                              "timestamp": "2026-04-25T17:40:17.000Z", "reason": "cancelled"}) + b"\n"
    data = (header(isolated) + msg("u0000001", None, "user", "one") + msg("u0000002", "u0000001", "user", "two")
            + cancelled + msg("u0000003", "n0000001", "user", "three") + msg("a0000001", "u0000003", "assistant", "sure"))
    srv.push(openai_text("ok"))
    p = send(srv, "--model", "gpt-4o", "four", input=data)
    assert p.returncode == 0, p.stderr
    sent = [m["content"] for m in srv.requests[0].body["messages"] if m["role"] == "user"]
    flat = [c if isinstance(c, str) else "\n".join(x["text"] for x in c) for c in sent]
    assert flat == ["one\n[no reply]", "two\n[no reply: cancelled by the user]", "three", "four"]
    assert [m["role"] for m in srv.requests[0].body["messages"]][-2:] == ["assistant", "user"]
    assert p.stdout.startswith(data)        # the stream passes through as it was


# -- what a write changes -----------------------------------------------------------

def test_a_write_over_an_existing_file_is_shown_as_a_diff_against_it(isolated, srv, env):
    old = "".join(f"line {i}\n" for i in range(1, 301))
    (isolated / "big.txt").write_text(old)
    new = old.replace("line 200\n", "line 200 changed by hand\n").replace("line 20\n", "line twenty\n")
    new = new.replace("line 290\n", "".join(f"added {k}\n" for k in range(70)))
    srv.push(openai_tools([("call_0", "write", json.dumps({"path": "big.txt", "content": new}))]),
             openai_text("Not written."))
    t = Term([], dict(env, PAGER="cat"))
    t.expect("> ")
    t.line("rewrite it")
    shown = t.expect("allow write over an existing file?")
    assert "replaces an existing file" in shown
    assert " 20 - line 20" in shown and " 20 + line twenty" in shown
    assert "200 - line 200" in shown and "200 + line 200 changed by hand" in shown
    assert "line 100" not in shown                   # unchanged lines far from a change are not shown
    assert "more lines of the diff" in shown
    t.expect("[v]iew all (")
    t.expect("of the diff hidden)")
    t.send("v")
    whole = t.expect("allow write over an existing file?")
    assert "added 69" in whole and "290 - line 290" in whole    # the whole diff, its end included
    t.send("\r")
    t.expect("> ")
    assert t.quit() == 0
    assert (isolated / "big.txt").read_text() == old


# -- decline with a reason ------------------------------------------------------------

def test_n_opens_a_line_for_an_instruction_and_the_turn_goes_on(isolated, srv, env):
    srv.push(bash_calls("rm -rf build", "ls"), openai_text("Using make clean instead."),
             bash_calls("rm -rf dist"), openai_text("Left alone."))
    t = Term([], env)
    t.expect("> ")
    t.line("clean up")
    t.expect("allow bash?")
    t.send("n")
    t.expect("instead (Enter: just decline): ")
    t.send("use make cleen")
    t.send("\x7f\x7f")              # Backspace edits the line
    t.send("an\r")
    t.expect("allow bash?")         # the next call of the reply is still asked
    t.send("n")
    t.expect("instead (Enter: just decline): ")
    t.send("\r")                    # Enter alone: declined plainly
    t.expect("Using make clean instead.")    # the turn went on: the model read the instruction
    t.expect("> ")
    t.line("and dist")
    t.expect("allow bash?")
    t.send("\r")                    # Enter at the question declines at once, no line opens
    t.expect("Left alone.")
    t.expect("> ")
    assert t.quit() == 0
    sent = tool_results(srv.requests[1])
    assert sent == {"call_0": "declined by the user: use make clean",
                    "call_1": "not run: the user declined this 'bash' call"}
    assert tool_results(srv.requests[3])["call_0"] == "not run: the user declined this 'bash' call"
    assert t.screen.count("instead (Enter: just decline)") == 2


# -- watching a command ---------------------------------------------------------------

def test_a_running_command_streams_into_a_live_area_replaced_by_the_usual_display(isolated, srv, env):
    import os

    os.mkfifo(isolated / "gate")
    command = "echo LIVE-START; echo LIVE-SECOND; read x < gate; seq 1 20000; echo LIVE-END"
    srv.push(openai_tools([("call_0", "bash", json.dumps({"command": command}))]), openai_text("Counted."))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.line("count")
    t.expect("LIVE-SECOND")                  # shown while the command still runs (it waits at the gate)
    t.expect("running ")
    t.expect("2 lines")
    live = t.vt().screen()
    assert any("LIVE-START" in r for r in live) and any("… running" in r for r in live), live
    with open(isolated / "gate", "w") as gate:
        gate.write("go\n")
    t.expect("Counted.")
    t.expect("> ")
    rows = t.vt().text()
    assert not any("… running" in r for r in rows), rows[-30:]        # the live area is gone
    end = max(i for i, r in enumerate(rows) if r.strip() == "LIVE-END")
    assert "earlier lines not shown" in rows[end - 10], rows[end - 12:end + 1]      # the usual last 10 lines
    assert t.quit() == 0
    result = tool_results(srv.requests[1])["call_0"]
    assert "[… 20,003 lines, 108.9 KB: the first " in result and " lines kept]" in result
    assert result.startswith("LIVE-START\nLIVE-SECOND\n1\n") and result.endswith("20000\nLIVE-END\n")


def test_esc_cancels_a_running_tool_as_ctrl_c_does(isolated, srv, env):
    import os

    os.mkfifo(isolated / "gate")
    srv.push(openai_tools([("call_0", "bash", json.dumps({"command": "echo WAITING; read x < gate"}))]),
             openai_text("never"))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.line("wait for it")
    t.expect("WAITING")
    t.send("ahead")             # typed while it runs: kept for the next prompt
    t.expect("running")
    t.send("\x1b")
    t.expect("[cancelled]")
    t.expect("> ")
    t.expect("ahead")           # at the prompt, to be edited or sent
    t.send("\x15")              # Ctrl-U: not sent
    assert t.quit() == 0
    assert len(srv.requests) == 1          # the turn ended: nothing sent after the tool
    [entry] = [e for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
               and e["message"]["content"][0]["type"] == "toolResult"]
    block = entry["message"]["content"][0]
    assert block["isError"] and block["content"].startswith("interrupted after ") and "WAITING" in block["content"]


# -- undo ---------------------------------------------------------------------------

def test_rewind_puts_back_files_and_leaves_a_file_changed_since_alone(isolated, srv, env):
    import os
    import stat

    originals = {"a.txt": b"alpha\r\nno final newline", "b.txt": "béta\n".encode() + b"\xff\xfe raw\n",
                 "c.txt": b"".join(b"gamma %d\n" % i for i in range(50)), "d.txt": b"delta\n"}
    for name, data in originals.items():
        (isolated / name).write_bytes(data)
    edit = lambda cid, path, old, new: (cid, "edit", json.dumps({"path": path, "old_text": old, "new_text": new}))
    srv.push(openai_tools([edit("e1", "a.txt", "alpha", "ALPHA"), edit("e2", "b.txt", "béta", "BETA"),
                           edit("e3", "c.txt", "gamma 7\ngamma 8\n", "G\n"),
                           ("w1", "write", json.dumps({"path": "d.txt", "content": "a new d\n"})),
                           ("b1", "bash", json.dumps({"command": "echo ran > log.txt"}))]),
             openai_text("Changed four files."))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.turn("change them", "Changed four files.")
    assert (isolated / "a.txt").read_bytes() == b"ALPHA\r\nno final newline"
    (isolated / "c.txt").write_bytes(b"my own change\n")        # a person changes a file since
    t.line("/rewind 1")
    t.expect("taken back")
    t.expect("echo ran > log.txt")                             # the commands that ran are named
    t.expect("4 files changed since then")
    t.expect("put them back as they were? (y/N) ")
    t.send("y\r")
    t.expect("'c.txt' was changed since")
    t.send("\r")                                               # not confirmed: left alone, named
    t.expect("left as it is: c.txt")
    t.expect("> ")
    t.send("\x15")
    assert t.quit() == 0
    for name in ("a.txt", "b.txt", "d.txt"):
        assert (isolated / name).read_bytes() == originals[name], name      # byte for byte
    assert (isolated / "c.txt").read_bytes() == b"my own change\n"
    assert (isolated / "log.txt").exists()                     # what bash did is not undone
    # the results record the path and the digests; the contents kept are private
    results = [b for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
               for b in e["message"]["content"] if b["type"] == "toolResult"]
    undo = [b["undo"] for b in results if "undo" in b]
    assert [os.path.basename(u["path"]) for u in undo] == ["a.txt", "b.txt", "c.txt", "d.txt"]
    assert all(u["before"].startswith("sha256:") and u["after"].startswith("sha256:") for u in undo)
    kept = [f for f in (isolated.parent / "home" / ".local" / "share" / "panto" / "before").rglob("*")
            if f.is_file()]
    assert len(kept) == 4
    for f in kept:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600 and stat.S_IMODE(f.parent.stat().st_mode) == 0o700


# -- smaller things -------------------------------------------------------------------

def test_model_alone_lists_models_toml_and_model_alone_keeps_the_provider(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    cfg.mkdir(parents=True)
    (cfg / "models.toml").write_text("[openai.gpt-4o]\ninput = 2.5\noutput = 10\ncontext = 128000\n"
                             "[openai.gpt-4o-mini]\ninput = 0.15\noutput = 0.6\n"
                             "[anthropic.claude-test]\ninput = 3\noutput = 15\n")
    srv.push(openai_text("Hi.", usage={"prompt_tokens": 5, "completion_tokens": 1}, finish="length"),
             openai_text("Mini."))
    t = Term([], env)
    t.expect("> ")
    t.turn("hello", "Hi.", "cut at the token limit")        # a reply cut at the token limit says so
    t.line("/model")
    t.expect("/model")
    listing = t.expect("/model MODEL switches")
    rows = [r.strip() for r in listing.replace("\x1b[1m", "").replace("\x1b[0m", "").split("\n") if r.strip()]
    assert any(r.startswith("* openai: gpt-4o ") and "(openai_chat, in use)" in r for r in rows), rows
    assert "openai: gpt-4o-mini" in rows and "anthropic: claude-test" in rows, rows
    t.expect("> ")
    t.turn("/model gpt-4o-mini", "model: openai: gpt-4o-mini")     # the provider kept
    t.turn("again", "Mini.")
    assert t.quit() == 0
    assert srv.requests[1].body["model"] == "gpt-4o-mini"


def test_man_panto_finds_the_pages_once_the_venv_is_on_path():
    import os
    import shutil
    import subprocess

    if shutil.which("man") is None:
        pytest.skip("no man(1) here")
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    bindir = os.path.dirname(shutil.which("panto"))
    env["PATH"] = bindir + os.pathsep + "/usr/bin:/bin"
    for page in (["panto"], ["panto-tool"], ["5", "panto-session"]):
        p = subprocess.run(["man", "-w", *page], capture_output=True, env=env, text=True)
        assert p.returncode == 0, (page, p.stderr)
        assert os.path.realpath(p.stdout.strip()).startswith(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), p.stdout


def test_up_and_down_move_between_the_lines_of_a_multi_line_prompt(isolated, srv, env):
    srv.push(openai_text("first ok"), openai_text("second ok"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("earlier prompt", "first ok")
    t.send("one\\\r")               # a line ending in \ goes on on the next line
    t.send("two")
    t.send("\x1b[A")                # Up: to the first line, not the history
    t.send("X")
    t.send("\x1b[B")                # Down: back to the second line
    t.send("Y\r")
    t.expect("second ok")
    t.expect("> ")
    assert t.quit() == 0
    assert srv.requests[1].body["messages"][-1]["content"] == "oneX\ntwoY"


def test_ctrl_l_redraws_without_copies_of_the_prompt_in_tmux_scrollback(isolated, srv, env, tmp_path):
    import os
    import shutil
    import subprocess
    import time

    if shutil.which("tmux") is None:
        pytest.skip("no tmux here")
    import tempfile

    short = tempfile.mkdtemp(prefix="pt-", dir="/tmp")     # a socket path must stay short
    socket = "panto-" + os.path.basename(short)     # a private server of its own, never the default one

    def private(*args, **kw):
        """tmux on this test's own server: every call names it (-L socket)."""
        return subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", *args], env=env, **kw)

    srv.push(openai_text("one"))
    env = dict(env, TMUX_TMPDIR=short)
    env.pop("TMUX", None)
    private("new-session", "-d", "-x", "100", "-y", "20", shutil.which("panto"), "--no-tools", check=True)

    def pane(history=True):
        back = ["-S", "-200"] if history else []
        return private("capture-pane", "-p", *back, capture_output=True, text=True).stdout

    def until(cond, what):
        deadline = time.monotonic() + 20
        while not cond():
            assert time.monotonic() < deadline, f"{what}: {pane()}"
            time.sleep(0.05)

    try:
        until(lambda: any(r.startswith(">") for r in pane(False).split("\n")), "the prompt")
        private("send-keys", "-l", "hello", check=True)
        private("send-keys", "C-l", check=True)
        until(lambda: pane(False).startswith("> hello"), "the redraw at the top")
        for ch in "abcdef":
            private("send-keys", "-l", ch, check=True)
        until(lambda: "> helloabcdef" in pane(False), "the typed keys")
        everything = pane()
        assert everything.count("> hello") == 2, everything     # once before Ctrl-L, once on the screen
    finally:
        private("kill-server", capture_output=True)
        shutil.rmtree(short, ignore_errors=True)


# -- steering -----------------------------------------------------------------------

def test_a_prompt_entered_while_a_turn_runs_goes_with_the_next_request_after_the_tool_results(
        isolated, srv, env):
    import os

    os.mkfifo(isolated / "gate")
    srv.push(openai_tools([("call_0", "bash", json.dumps({"command": "echo WAITING; read x < gate"}))]),
             openai_tools([("call_1", "bash", json.dumps({"command": "echo two"}))]),
             openai_text("Docs too, then."))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.line("build it")
    t.expect("WAITING")
    t.expect("running")
    t.send("also the docs\r")          # entered while the command runs
    with open(isolated / "gate", "w") as gate:
        gate.write("go\n")
    t.expect("queued: also the docs")
    t.expect("Docs too, then.")
    t.expect("> ")
    assert t.quit() == 0
    assert len(srv.requests) == 3
    last = srv.requests[2].body["messages"]
    assert last[-2]["role"] == "tool" and last[-2]["content"] == "two\n"
    assert last[-1] == {"role": "user", "content": "also the docs"} or \
        last[-1]["role"] == "user" and "also the docs" in json.dumps(last[-1]["content"])
    users = [e for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
             and e["message"]["role"] == "user" and e["message"]["content"][0]["type"] == "text"]
    assert [u["message"]["content"][0]["text"] for u in users] == ["build it", "also the docs"]


# -- mentions -------------------------------------------------------------------------

def test_at_path_attaches_a_text_file_and_records_an_image(isolated, srv, env):
    import base64

    (isolated / "notes.txt").write_text("first note\nsecond note\n")
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    (isolated / "shot.png").write_bytes(png)
    (isolated / "big.log").write_text("".join(f"log line {i}\n" for i in range(20000)))
    srv.push(openai_text("Read them."), openai_text("Later."))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line("look at @notes.txt and @shot.png, also @big.log and @missing.txt")
    t.expect("@notes.txt: attached (2 lines)")
    t.expect("@shot.png: attached (image/png")
    t.expect("@big.log: attached (")
    t.expect("Read them.")
    t.expect("> ")
    t.turn("and now?", "Later.")
    assert t.quit() == 0
    sent = json.dumps(srv.requests[0].body["messages"][-1])
    assert "[file @notes.txt]\\nfirst note\\nsecond note\\n" in sent
    assert "look at @notes.txt and @shot.png, also @big.log and @missing.txt" in sent
    assert "[file @big.log]" in sent and "[\\u2026 cut: the first " in sent and "log line 19999" not in sent
    [prompt] = [e for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
                and e["message"]["role"] == "user" and "notes" in json.dumps(e)]
    content = prompt["message"]["content"]
    assert content[-1] == {"type": "text", "text": "look at @notes.txt and @shot.png, also @big.log and @missing.txt"}
    [image] = [b for b in content if b["type"] == "image"]
    assert image["mediaType"] == "image/png" and base64.b64decode(image["data"]) == png
    assert "@missing.txt" not in "".join(b.get("text", "") for b in content[:-1])   # no such file: left as written
    # the next request carries the conversation on, the attachments included
    assert "[file @notes.txt]" in json.dumps(srv.requests[1].body["messages"])


def test_tab_completes_the_path_of_a_mention(isolated, srv, env):
    (isolated / "docs").mkdir()
    (isolated / "docs" / "guide-intro.md").write_text("The guide.\n")
    srv.push(openai_text("Seen."))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.send("read @do\t")            # the directory, then the only file in it
    t.expect("@docs/")
    t.send("g\t")
    t.expect("guide-intro.md")
    t.send("please\r")
    t.expect("@docs/guide-intro.md: attached (1 line)")
    t.expect("Seen.")
    t.expect("> ")
    assert t.quit() == 0
    assert "read @docs/guide-intro.md please" in json.dumps(srv.requests[0].body["messages"][-1])


def test_cost_fits_the_width_counts_tokens_in_as_the_usage_line_and_says_why_unpriced(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    cfg.mkdir(parents=True)
    (cfg / "models.toml").write_text("[openai.gpt-4o]\ninput = 2.5\noutput = 10\ncache_read = 1.25\n")
    usage = {"prompt_tokens": 1200, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 1000}}
    srv.push(openai_text("Priced.", usage=usage),
             openai_text("Unknown model.", usage={"prompt_tokens": 50, "completion_tokens": 5}),
             openai_text("partial", pieces=["part", "ial"], stall_after=2, stall=20))
    t = Term(["--no-tools"], env, cols=60)
    t.expect("> ")
    t.line("one")
    t.expect("Priced.")
    usage_line = t.expect("> ")
    t.line("/model gpt-unlisted-model-with-a-long-name")
    t.expect("> ")
    t.turn("two", "Unknown model.")
    t.line("/model gpt-4o")
    t.expect("> ")
    t.line("three")
    t.expect("par")
    t.send("\x03")
    t.expect("> ")
    t.line("/cost")
    t.expect("/cost")
    t.expect("total")
    report = t.expect("> ")
    assert t.quit() == 0
    assert "1,200 in" in usage_line
    rows = [r for r in t.vt().text() if r]
    start = max(i for i, r in enumerate(rows) if r.startswith("model") and "turns" in r)
    shown = rows[start:]
    assert all(len(r) < 60 for r in shown), shown                     # fits the width
    priced = next(r for r in shown if r.startswith("openai: gpt-4o "))
    assert " 1,200 " in priced, shown                                 # tokens in as the usage line counts them
    text = " ".join(shown)
    assert "does not name" in text and "add its prices there" in text, shown
    assert "/.config/panto/models.toml" in "".join(r.strip() for r in shown), shown    # the file to edit
    assert "no usage reported" in text and "cancelled" in text, shown
