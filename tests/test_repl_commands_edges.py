"""The /commands at their edges, on a real pseudo-terminal against the
scripted server: unusual arguments, a command before there is a session
file, a session file gone or cut short under a running panto, /rewind's
file restore when the kept content is gone or damaged, /edit's editor
failing, @PATH mentions that are not attached, and piped input."""
import hashlib
import json
import os
import re

import pytest

from builders import SID, header, msg, session_file, two_prompts_compacted
from conftest import repl_env, run
from repl_term import Term, read_entries, session_files, write_session
from sse_server import error_reply, openai_text, openai_tools


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path)


def shown_until_prompt(t, command):
    """Enter a /command; what it drew, up to the next prompt (NO_COLOR terminals)."""
    t.line(command)
    t.expect("\r\n")
    shown = t.expect("\x1b[?2004h")     # the next prompt turns bracketed paste on again
    t.expect("> ")
    return [r for r in shown.replace("\r", "").split("\n") if r.strip()]


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- before there is a session file ------------------------------------------------------

def test_commands_that_need_a_session_file_say_so_and_send_nothing(isolated, srv, env):
    t = Term(["--no-tools"], env)
    t.expect("> ")
    need = "no session file yet (it is created by the first reply)"
    for command in ("/name my title", "/tree", "/fork", "/compact keep the names"):
        t.turn(command, need)
    t.turn("/name", "usage: /name TITLE")
    t.turn("/retry", "nothing to retry yet")
    t.turn("/rewind", "no prompts to go back to")
    t.turn("/cost", "nothing spent yet: no session file")
    t.turn("/session", need)
    assert t.quit() == 0
    assert srv.requests == [] and session_files(isolated) == []


def test_help_lists_every_command_and_the_keys(isolated, srv, env):
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    rows = shown_until_prompt(t, "/help")
    assert rows[0] == "commands:"
    listed = [r.split()[0] for r in rows[1:] if r.startswith("  /")]
    assert listed == ["/model", "/model", "/edit", "/retry", "/rewind", "/tree", "/fork", "/name", "/compact",
                      "/allowed", "/cost", "/session", "/help", "/quit"]
    assert rows[-1] == "Ctrl-C cancels the running request or tool (at the prompt: clears the line)."
    assert t.quit() == 0


@pytest.mark.parametrize("word", ["/quit", "/exit", "/q"])
def test_quit_words_end_the_session_with_status_0(isolated, srv, env, word):
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line(word)
    assert t.finish() == 0
    assert srv.requests == []


def test_bad_arguments_get_the_usage(isolated, srv, env):
    t = Term(["--no-tools"], env)
    t.expect("> ")
    usage = "usage: /model [[PROVIDER] MODEL] (PROVIDER is openai or anthropic)"
    t.turn("/model openai gpt-4o extra", usage)
    t.turn("/model mistral large", usage)
    t.turn("/allowed everything", "usage: /allowed [clear]")
    t.turn("/model", "model: openai: gpt-4o @ ")        # still the model it was
    assert t.quit() == 0
    assert srv.requests == []


def test_allowed_under_yes_says_every_call_runs(isolated, srv, env):
    t = Term(["--yes"], env)
    t.expect("> ")
    t.line("/allowed")
    t.expect("--yes: every call runs without asking")
    t.expect("no rules: every bash, write and edit call asks")
    t.expect("> ")
    assert t.quit() == 0


# -- models.toml that cannot be read -----------------------------------------------------

def test_a_broken_models_toml_is_said_by_model_and_cost(isolated, srv, env):
    cfg = isolated.parent / "home" / ".config" / "panto"
    cfg.mkdir(parents=True)
    (cfg / "models.toml").write_text("[openai.gpt-4o\ninput = 2.5\n")
    srv.push(openai_text("Hi."))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.turn("hello", "Hi.")
    where = cfg / "models.toml"
    why = f"{where}:1:15: expected ']' at the end of a table declaration"
    rows = shown_until_prompt(t, "/model")
    assert rows == [f"model: openai: gpt-4o @ {srv.url}/v1 (openai_chat)", why,
                    f"* openai: gpt-4o  (openai_chat, in use)  not in {where}",
                    f"(no models in {where}: /model PROVIDER MODEL switches all the same)",
                    "/model MODEL switches within the provider; /model PROVIDER MODEL to another"], rows
    assert shown_until_prompt(t, "/cost") == [f"panto-cost: {why}"]     # panto-cost's own words
    assert "Traceback" not in t.screen
    assert t.quit() == 0



# -- the session file changed under a running panto -------------------------------------

def one_turn(env, srv, isolated, answer="first answer"):
    srv.push(openai_text(answer))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.turn("first prompt", answer)
    [path] = session_files(isolated)
    return t, path


def test_tree_and_fork_when_the_session_file_is_gone(isolated, srv, env):
    t, path = one_turn(env, srv, isolated)
    os.unlink(path)
    t.turn("/tree", "cannot read the session to draw its tree")
    t.turn("/fork", "cannot fork: the session could not be read")
    assert t.quit() == 0
    assert session_files(isolated) == []        # nothing written by the failed fork


def test_tree_of_a_file_cut_short_ends_at_the_file_s_own_leaf(isolated, srv, env):
    t, path = one_turn(env, srv, isolated)
    srv.push(openai_text("second answer"))
    t.turn("second prompt", "second answer")
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    with open(path, "wb") as f:                 # the last turn cut off by another program
        f.write(b"\n".join(lines[:4]) + b"\n")
    assert shown_until_prompt(t, "/tree") == ["● > first prompt", "● ⏺ first answer"]
    assert t.quit() == 0


def test_a_session_with_no_prompt_yet(isolated, srv, env):
    session_file(isolated, data=header(isolated) + msg("s0000001", None, "system", "be brief"))
    t = Term(["--no-tools", "--resume", SID], env)
    t.expect("> ")
    t.turn("/tree", "no prompts yet")
    t.turn("/retry", "nothing to retry yet")
    t.turn("/rewind", "no prompts to go back to")
    assert t.quit() == 0
    assert srv.requests == []


def test_rewind_to_a_first_prompt_with_nothing_before_it(isolated, srv, env):
    path = write_session(isolated, "0199aaaa-bbbb-7ccc-8ddd-000000000001")
    before = open(path, "rb").read()
    t = Term(["--no-tools", "--resume", "0199aaaa-bbbb-7ccc-8ddd-000000000001"], env)
    t.expect("> ")
    t.turn("/rewind 1", "that prompt has nothing before it to continue from")
    t.turn("/rewind 1111", "that prompt has nothing before it to continue from")   # by its id: the same
    assert t.quit() == 0
    assert open(path, "rb").read() == before


def test_rewind_by_id_and_the_tree_of_two_first_prompts(isolated, srv, env):
    """/rewind ID takes an id prefix (an ambiguous or unknown one is said);
    a prompt sent after taking back the first one is a second root, and the
    tree draws the compaction and leaves the title out."""
    path = two_prompts_compacted(isolated)
    srv.push(openai_text("a new start"))
    t = Term(["--no-tools", "--resume", SID], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.turn("/rewind u000000", "no prompt 'u000000' (see /rewind)")        # both prompts begin so
    t.turn("/rewind a0000001", "no prompt 'a0000001' (see /rewind)")      # a reply: no prompt
    t.turn("/rewind u0000001", "taken back: the early prompt")
    t.send("\x15")                                                        # the prompt put back: cleared
    t.turn("/name two starts", "named: two starts")
    t.turn("another beginning", "a new start")
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] != "system"]
    assert sent == ["another beginning"]
    rows = shown_until_prompt(t, "/tree")
    assert rows == ["  ├─ > the early prompt", "  │  ⏺ early answer", "  │  > the kept prompt", "  │  ⏺ kept answer",
                    "  │  ≡ [compacted]", "● └─ > another beginning", "●    ⏺ a new start"], rows
    assert t.quit() == 0
    assert [e["name"] for e in read_entries(path) if e["type"] == "sessionInfo"] == ["two starts"]


# -- /rewind's files ---------------------------------------------------------------------

def changed_by_tools(isolated, srv, env):
    (isolated / "a.txt").write_bytes(b"alpha\n")
    srv.push(openai_tools([("e1", "edit", json.dumps({"path": "a.txt", "old_text": "alpha", "new_text": "ALPHA"})),
                           ("w1", "write", json.dumps({"path": "new.txt", "content": "made by the tool\n"}))]),
             openai_text("Changed two files."))
    t = Term(["--yes"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.turn("change them", "Changed two files.")
    assert (isolated / "a.txt").read_bytes() == b"ALPHA\n" and (isolated / "new.txt").exists()
    return t


def test_rewind_removes_a_created_file_and_restores_one_deleted_since(isolated, srv, env):
    t = changed_by_tools(isolated, srv, env)
    (isolated / "a.txt").unlink()                       # a person removed it since
    t.line("/rewind 1")
    t.expect("2 files changed since then:")
    t.expect("  a.txt\r\n")
    t.expect("  new.txt (created then)")
    t.expect("put them back as they were? (y/N) ")
    t.send("y\r")
    t.expect("'a.txt' was changed since (by a person or a command); put it back all the same? (y/N) ")
    t.send("y\r")
    t.expect("put back: a.txt")
    t.expect("put back: new.txt (removed: it did not exist)")
    t.expect("> ")
    t.send("\x15")
    assert t.quit() == 0
    assert (isolated / "a.txt").read_bytes() == b"alpha\n"
    assert not (isolated / "new.txt").exists()


def test_rewind_answered_no_leaves_the_files(isolated, srv, env):
    t = changed_by_tools(isolated, srv, env)
    t.line("/rewind 1")
    t.expect("put them back as they were? (y/N) ")
    t.send("n\r")
    t.expect("files left as they are")
    t.expect("> ")
    t.send("\x15")
    assert t.quit() == 0
    assert (isolated / "a.txt").read_bytes() == b"ALPHA\n"
    assert (isolated / "new.txt").read_bytes() == b"made by the tool\n"


def test_a_write_whose_before_cannot_be_kept_is_made_without_an_undo(isolated, srv, env):
    data = isolated.parent / "home" / ".local" / "share" / "panto"
    data.mkdir(parents=True)
    (data / "before").write_text("not a directory\n")    # where the contents would be kept
    (isolated / "a.txt").write_text("old\n")
    srv.push(openai_tools([("w1", "write", json.dumps({"path": "a.txt", "content": "new\n"}))]),
             openai_text("Wrote it."))
    t = Term(["--yes"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.turn("write it", "Wrote it.")
    t.turn("/rewind 1", "the next prompt continues from before it")
    t.send("\x15")
    assert t.quit() == 0
    assert "changed since then" not in t.screen              # nothing recorded to put back
    assert (isolated / "a.txt").read_text() == "new\n"
    [result] = [b for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
                for b in e["message"]["content"] if b["type"] == "toolResult"]
    assert "undo" not in result and not result.get("isError")


def test_rewind_names_many_commands_and_says_what_cannot_be_put_back(isolated, srv, env):
    """A session whose kept contents are gone, damaged or named by no digest;
    bash calls beyond the ten shown, one declined, one whose input is no object."""
    home = isolated.parent / "home"
    files = {name: f"{name} now\n".encode() for name in ("x.txt", "y.txt", "z.txt")}
    for name, now in files.items():
        (isolated / name).write_bytes(now)
    damaged = sha(b"z before\n")
    kept = home / ".local" / "share" / "panto" / "before" / damaged[7:9] / damaged[7:]
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"z tampered\n")
    undo = {"x.txt": "sha256:not-a-digest", "y.txt": sha(b"y before, never kept\n"), "z.txt": damaged}
    calls = [{"type": "toolUse", "id": f"b{i}", "name": "bash", "input": json.dumps({"command": f"echo {i}"})}
             for i in range(12)]
    calls += [{"type": "toolUse", "id": "bad", "name": "bash", "input": "[1]"},
              {"type": "toolUse", "id": "no", "name": "bash", "input": json.dumps({"command": "rm -rf declined"})}]
    calls += [{"type": "toolUse", "id": n, "name": "edit", "input": "{}"} for n in files]
    results = [{"type": "toolResult", "toolUseId": c["id"], "content": "ok"} for c in calls[:13]]
    results.append({"type": "toolResult", "toolUseId": "no", "content": "declined by the user", "isError": True})
    results += [{"type": "toolResult", "toolUseId": n, "content": "edited",
                 "undo": {"path": str(isolated / n), "before": undo[n], "after": sha(files[n])}} for n in files]
    entries = [{"type": "message", "id": "a0000001", "parentId": "u0000001", "timestamp": "2026-04-25T17:40:17.000Z",
                "message": {"role": "assistant", "content": calls, "provider": "openai", "model": "gpt-4o",
                            "stopReason": "toolUse"}},
               {"type": "message", "id": "r0000001", "parentId": "a0000001", "timestamp": "2026-04-25T17:40:18.000Z",
                "message": {"role": "user", "content": results}}]
    data = (header(isolated) + msg("s0000001", None, "system", "be brief")
            + msg("u0000001", "s0000001", "user", "do many things")
            + b"".join(json.dumps(e).encode() + b"\n" for e in entries)
            + msg("a0000002", "r0000001", "assistant", "all done", provider="openai", model="gpt-4o"))
    session_file(isolated, data=data)
    t = Term(["--no-tools", "--resume", SID], dict(env, NO_COLOR="1"))
    t.expect("> ")
    t.line("/rewind 1")
    t.expect("taken back: do many things")
    t.expect("12 commands ran since then and cannot be undone:")
    listed = t.expect("  … and 2 more")
    assert re.findall(r"\$ (echo \d+)", listed) == [f"echo {i}" for i in range(10)]
    assert "declined" not in listed
    t.expect("3 files changed since then:")
    t.expect("put them back as they were? (y/N) ")
    t.send("y\r")
    t.expect("cannot put back 'x.txt': not a content digest: 'sha256:not-a-digest'")
    t.expect("cannot put back 'y.txt': [Errno 2] No such file or directory: ")
    t.expect(f"cannot put back 'z.txt': the content kept for undo under {damaged} is damaged")
    t.expect("> ")
    t.send("\x15")
    assert t.quit() == 0
    for name, now in files.items():
        assert (isolated / name).read_bytes() == now, name


# -- /edit ------------------------------------------------------------------------------

@pytest.mark.parametrize("editor, said", [
    ("/nonexistent/editor", "cannot start the editor '/nonexistent/editor': [Errno 2] No such file or directory"),
    ("false", "the editor exited with status 1: nothing sent"),
    ("sh -c 'rm \"$0\"; exit 3'", "the editor exited with status 3: nothing sent"),    # its file gone too
    ("true", "empty prompt: nothing sent"),
])
def test_edit_that_gives_no_prompt_sends_nothing(isolated, srv, env, editor, said):
    t = Term(["--no-tools"], dict(env, VISUAL=editor))
    t.expect("> ")
    t.turn("/edit", said)
    assert t.quit() == 0
    assert srv.requests == [] and session_files(isolated) == []
    assert os.listdir(env["TMPDIR"]) == []                     # the prompt's file removed


# -- piped input ------------------------------------------------------------------------

def test_piped_edit_sends_the_text_at_once_and_a_backslash_continues(isolated, srv, env):
    srv.push(openai_text("Edited answer."), openai_text("Joined answer."), openai_text("Dangling answer."))
    editor = "sh -c 'printf \"from the editor\\nsecond line\\n\" > \"$0\"'"
    p = run(["panto", "--no-tools"], input=b"/edit\none \\\ntwo\nlast \\\n", env=dict(env, EDITOR=editor))
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "> from the editor  … (2 lines)" in out and "Edited answer." in out
    assert "Joined answer." in out
    sent = [[m["content"] for m in r.body["messages"] if m["role"] == "user"][-1] for r in srv.requests]
    # a backslash on the last line, with nothing after it, is sent as written
    assert sent == ["from the editor\nsecond line", "one \ntwo", "last \\"]
    assert "> last \\\nDangling answer." in out
    assert "Traceback" not in p.stderr.decode()


def test_piped_rewind_reads_its_answer_from_the_next_line(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("again"))
    p = run(["panto", "--no-tools"], input=b"first prompt\nsecond prompt\n/rewind\n2\nsecond, again\n", env=env)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "rewind to (number, Enter to cancel): 2\n" in out
    assert "taken back: second prompt" in out
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first prompt", "second, again"]


# -- @PATH that is not attached -----------------------------------------------------------

def test_mentions_not_attached_and_a_webp_image(isolated, srv, env):
    import base64

    webp = b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(range(40))
    (isolated / "pic.webp").write_bytes(webp)
    (isolated / "blob.bin").write_bytes(b"ELF\x00\x01\x02 binary\n")
    (isolated / "huge.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * (5 * 1000 * 1000))
    (isolated / "adir").mkdir()
    srv.push(openai_text("Looked."))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    prompt = "see @pic.webp, @blob.bin, @huge.png and @adir"
    t.line(prompt)
    t.expect("@pic.webp: attached (image/webp, ")
    t.expect("@blob.bin: not attached (not text)")
    t.expect("@huge.png: not attached (an image of 5.0 MB; at most 5.0 MB)")
    t.expect("Looked.")
    t.expect("> ")
    assert t.quit() == 0
    assert "@adir:" not in t.screen                          # a directory: left as written, nothing said
    [prompt_entry] = [e for e in read_entries(session_files(isolated)[0]) if e["type"] == "message"
                      and e["message"]["role"] == "user"]
    content = prompt_entry["message"]["content"]
    assert content == [{"type": "image", "mediaType": "image/webp", "data": base64.b64encode(webp).decode()},
                       {"type": "text", "text": prompt}]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_a_mention_of_an_unreadable_file_says_why(isolated, srv, env):
    (isolated / "secret.txt").write_text("hidden\n")
    (isolated / "secret.txt").chmod(0)
    srv.push(openai_text("Fine."))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("read @secret.txt", "@secret.txt: not attached (Permission denied)", "Fine.")
    assert t.quit() == 0


# -- /compact that fails -----------------------------------------------------------------

def test_compact_refused_by_the_server_says_it_failed(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("three"),
             error_reply(400, "no summaries today", kind="invalid_request_error"))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    for prompt, answer in (("p1", "one"), ("p2", "two"), ("p3", "three")):
        t.turn(prompt, answer)
    [path] = session_files(isolated)
    before = open(path, "rb").read()
    t.line("/compact")
    t.expect("no summaries today")
    t.expect("[compaction failed]")
    t.expect("> ")
    assert t.quit() == 0
    assert len(srv.requests) == 4
    assert not [e for e in read_entries(path) if e["type"] == "compaction"]
    assert open(path, "rb").read().startswith(before)


# -- the prompt history ------------------------------------------------------------------

def test_history_lines_that_are_not_json_are_kept_as_text(isolated, srv, env):
    state = isolated.parent / "home" / ".local" / "state" / "panto"
    state.mkdir(parents=True)
    (state / "history").write_bytes(b'"an old json prompt"\nplain old prompt\n"broken json\n')
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.send("\x1b[A")
    t.expect('"broken json')
    t.send("\x1b[A")
    t.expect("plain old prompt")
    t.send("\x1b[A")
    t.expect("an old json prompt")
    t.send("\x15")
    assert t.quit() == 0


@pytest.mark.parametrize("blocked", ["history", "panto"])
def test_a_history_that_cannot_be_kept_does_not_stop_the_session(isolated, srv, env, blocked):
    state = isolated.parent / "home" / ".local" / "state"
    (state / "panto").mkdir(parents=True)
    if blocked == "history":
        (state / "panto" / "history").mkdir()           # a directory where the file would be
    else:
        (state / "panto").rmdir()
        (state / "panto").write_text("a file where the directory would be\n")
    srv.push(openai_text("answered"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("a prompt to remember", "answered")
    t.send("\x1b[A")                                    # still in this run's history
    t.expect("a prompt to remember")
    t.send("\x15")
    assert t.quit() == 0
    assert "Traceback" not in t.screen


# -- /retry and /fork around the file -----------------------------------------------------

def lost_prompt(t, path, srv):
    """A prompt entered while the session file is away: nothing is sent (a request of
    the prompt alone would be paid for, and its reply written as another session under
    this one's name); the file comes back."""
    os.rename(path, path + ".away")                     # the file moved away for a moment
    asked = len(srv.requests)
    t.line("the lost prompt")
    t.expect("the lost prompt")
    failed = t.expect("\x1b[?2004h")                    # up to the next prompt
    t.expect("> ")
    assert f"[the session file is gone: {path}; nothing was sent (put it back, then /retry)]" in failed
    assert len(srv.requests) == asked and not os.path.exists(path)
    os.rename(path + ".away", path)


def test_retry_sends_the_prompt_that_never_reached_the_file(isolated, srv, env):
    t, path = one_turn(env, srv, isolated)
    lost_prompt(t, path, srv)
    srv.push(openai_text("found it"))
    t.line("/retry")
    t.expect("retrying: the lost prompt")
    shown = t.expect("\x1b[?2004h")
    t.expect("> ")
    assert t.quit() == 0
    assert "nothing to send" not in shown and "found it" in shown, shown
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first prompt", "the lost prompt"]


def test_a_prompt_after_a_turn_that_could_not_read_the_file_goes_on_from_the_file(isolated, srv, env):
    t, path = one_turn(env, srv, isolated)
    lost_prompt(t, path, srv)
    srv.push(openai_text("next answer"))
    t.turn("next prompt", "next answer")
    assert t.quit() == 0
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["first prompt", "next prompt"]
    prompts = [e["message"]["content"][-1]["text"] for e in read_entries(path)
               if e["type"] == "message" and e["message"]["role"] == "user"]
    assert prompts == ["first prompt", "next prompt"]


def test_fork_of_a_resumed_named_session(isolated, srv, env):
    t, path = one_turn(env, srv, isolated)
    t.turn("/name kept title", "named: kept title")
    assert t.quit() == 0
    sid = json.loads(open(path).readline())["id"]
    t = Term(["--no-tools", "--resume", sid], env)
    t.expect("> ")
    t.turn("/fork", "forked: now in session ")
    assert t.quit() == 0
    [new] = [f for f in session_files(isolated) if f != path]
    names = [e["name"] for e in read_entries(new) if e["type"] == "sessionInfo"]
    assert names == ["kept title"]                      # copied with the conversation, not named twice
    p = run(["panto-ls"], env=env)
    assert p.stdout.count(b"kept title") == 2


# -- more of the settings and questions ---------------------------------------------------

def test_model_listing_when_the_other_provider_s_settings_are_bad(isolated, srv, env):
    t = Term(["--no-tools"], dict(env, ANTHROPIC_MAX_TOKENS="abc", NO_COLOR="1"))
    t.expect("> ")
    t.turn("/model anthropic claude-test", "model: anthropic: claude-test (from the next prompt on)")
    rows = shown_until_prompt(t, "/model")
    assert rows[0] == "ANTHROPIC_MAX_TOKENS must be a positive whole number, not 'abc'", rows
    assert not any(r.startswith("*") for r in rows), rows          # nothing can be marked in use
    assert rows[-1] == "/model MODEL switches within the provider; /model PROVIDER MODEL to another"
    assert t.quit() == 0
    assert srv.requests == []


def test_ctrl_d_and_ctrl_c_at_rewind_s_questions_take_nothing_back(isolated, srv, env):
    t = changed_by_tools(isolated, srv, env)
    t.line("/rewind")
    t.expect("rewind to (number, Enter to cancel): ")
    t.send("\x04")
    t.expect("nothing taken back")
    t.expect("> ")
    t.line("/rewind 1")
    t.expect("put them back as they were? (y/N) ")
    t.send("\x03")
    t.expect("files left as they are")
    t.expect("> ")
    t.send("\x15")
    assert t.quit() == 0
    assert (isolated / "a.txt").read_bytes() == b"ALPHA\n"


def three_turns(t):
    for prompt, answer in (("p1", "one"), ("p2", "two"), ("p3", "three")):
        t.turn(prompt, answer)


def test_compact_cancelled_while_it_waits(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("three"),
             openai_text("a summary that never ends", stall_after=2, stall=30))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    three_turns(t)
    [path] = session_files(isolated)
    t.line("/compact")
    t.expect("a su")                                # the summary began to stream
    t.send("\x03")
    t.expect("[cancelled]")
    t.expect("> ")
    assert t.quit() == 0
    assert not [e for e in read_entries(path) if e["type"] == "compaction"]


def test_compact_from_a_rewound_point_with_nothing_before_it(isolated, srv, env):
    srv.push(openai_text("one"), openai_text("two"), openai_text("three"))
    t = Term(["--no-tools"], dict(env, NO_COLOR="1"))
    t.expect("> ")
    three_turns(t)
    t.turn("/rewind 2", "taken back: p2")
    t.send("\x15")
    t.turn("/compact", "nothing to compact yet")
    assert t.quit() == 0
    assert len(srv.requests) == 3
