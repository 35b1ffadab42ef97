"""panto-log show (SPEC §4.1): a session as Markdown for people."""
import os
import subprocess
import shutil

import orjson

from conftest import assert_clean_error, run
from on_terminal import on_a_terminal

SID = "0199aaaa-bbbb-7ccc-8ddd-000000000001"


def msg(eid, parent, role, content, **extra):
    e = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:16.000Z"}
    if role == "user":
        e["provider"], e["model"] = "anthropic", "claude-sonnet-4-5"
    m = {"role": role, "content": content}
    m.update(extra)
    e["message"] = m
    return e


def text(s):
    return {"type": "text", "text": s}


LONG = "\n".join(f"line {i}" for i in range(500))


def rich_session(cwd):
    return [
        {"type": "session", "version": 1, "id": SID, "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(cwd)},
        msg("00000001", None, "system", [text("You are terse.")]),
        msg("00000002", "00000001", "user", [text("list the files\nplease")]),
        msg("00000003", "00000002", "assistant",
            [{"type": "thinking", "thinking": "I should run ls.\nThen answer.", "signature": "SIG"},
             text("Looking."),
             {"type": "toolUse", "id": "toolu_1", "name": "bash", "input": '{"command": "ls ```"}'}],
            provider="anthropic", model="claude-sonnet-4-5", stopReason="toolUse",
            usage={"input": 120, "output": 30, "cacheRead": 1000}),
        msg("00000004", "00000003", "user",
            [{"type": "toolResult", "toolUseId": "toolu_1", "content": LONG, "isError": True}]),
        {"type": "compaction", "id": "00000005", "parentId": "00000004", "timestamp": "2026-04-25T17:41:00.000Z",
         "summary": "The user asked for files; ls failed.", "firstKeptId": None,
         "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": {"input": 900, "output": 40}},
        msg("00000006", "00000005", "assistant", [text("Here: a, b.")],
            provider="anthropic", model="claude-sonnet-4-5", stopReason="stop"),
        {"type": "sessionInfo", "id": "00000007", "parentId": "00000006", "timestamp": "2026-04-25T17:42:00.000Z",
         "name": "files"},
    ]


def write(path, rows, tail=b""):
    with open(path, "wb") as f:
        f.write(b"".join(orjson.dumps(r) + b"\n" for r in rows) + tail)
    return str(path)


def show(*args, **kw):
    p = run(["panto-log", "show", *args], **kw)
    assert p.returncode == 0, p.stderr
    assert b"Traceback" not in p.stderr
    return p.stdout.decode()


def test_markdown_of_every_kind_of_entry(isolated, tmp_path):
    md = show(write(tmp_path / "s.jsonl", rich_session(isolated)))
    heads = [l for l in md.splitlines() if l.startswith("#")]
    assert heads == [f"# session {SID}", "## system", "## user", "## assistant (anthropic claude-sonnet-4-5)",
                     "## tool results", "## compaction (anthropic claude-sonnet-4-5)",
                     "## assistant (anthropic claude-sonnet-4-5)"]
    assert "list the files\nplease\n" in md                      # text as is
    assert "> I should run ls.\n> Then answer.\n" in md            # thinking as a quote
    assert "SIG" not in md
    # the tool call fenced with more backticks than it holds
    assert '````json\n{"command": "ls ```"}\n````\n' in md
    assert "*usage: 120 input · 1000 cache read · 30 output · stop: toolUse*" in md
    # a long result is cut, and says so
    assert "line 39\n```" in md and "line 40\n" not in md
    assert "tool error (toolu_1)" in md and "cut:" in md and "whole result is in the session file" in md
    assert "The user asked for files; ls failed." in md
    assert "*usage: 900 input · 40 output*" in md
    assert "*named: files*" in md
    assert md.count("*usage:") == 3                               # both assistants and the compaction


def test_active_path_at_and_all(branched):
    srv, path, e = branched
    md = show(path)
    assert "first question" in md and "branch c" in md and "four" in md
    assert "second question" not in md and "branch b" not in md
    assert md.count("## user") == 2 and md.count("## assistant (openai ") == 2
    at = show("--at", e["a3"]["id"][:7], path)
    assert "branch b" in at and "three" in at and "branch c" not in at
    every = show("--all", path)
    order = [every.index(t) for t in ("first question", "second question", "branch b", "branch c")]
    assert order == sorted(order)
    assert every.count("*usage:") == 4


def test_show_reads_a_stream_on_stdin_and_never_writes(isolated, tmp_path, branched):
    srv, path, e = branched
    data = open(path, "rb").read()
    st = os.stat(path)
    assert show("-", input=data) == show(path)
    assert show("--last") == show(path)
    assert open(path, "rb").read() == data and os.stat(path).st_mtime_ns == st.st_mtime_ns
    # a torn tail is left out of the transcript and left in the file
    torn = write(tmp_path / "t.jsonl", rich_session(isolated), tail=b'{"type":"message","id":"dead')
    before = open(torn, "rb").read()
    p = run(["panto-log", "show", torn])
    assert p.returncode == 0 and b"torn" in p.stderr and b"dead" not in p.stdout
    assert open(torn, "rb").read() == before


def test_a_stream_that_is_not_a_session_is_an_error(isolated):
    p = run(["panto-log", "show", "-"], input=b"not json\n")
    assert_clean_error(p, 1, "panto-log")
    p = run(["panto-log", "show", "--at", "zzz", "-"], input=orjson.dumps(rich_session("/x")[0]) + b"\n")
    assert_clean_error(p, 1, "panto-log")


def test_terminal_output_shows_escapes_a_file_keeps_them(isolated, tmp_path):
    rows = rich_session(isolated)
    rows[2] = msg("00000002", "00000001", "user", [text("red \x1b[31mtext\x1b]0;title\x07 \u202eevil")])
    path = write(tmp_path / "s.jsonl", rows)
    piped = show(path)
    assert "\x1b[31m" in piped                        # exported as written
    out = on_a_terminal([shutil.which("panto-log"), "show", path])
    assert b"\x1b" not in out and b"\x07" not in out and "\u202e".encode() not in out
    assert b"red ^[[31mtext^[]0;title^G <U+202E>evil" in out


def test_closed_downstream_is_quiet(isolated, tmp_path):
    rows = rich_session(isolated)
    for i in range(200):
        rows.append(msg(f"1{i:07d}", rows[-1]["id"], "user", [text("more " * 50)]))
    path = write(tmp_path / "s.jsonl", rows)
    p = subprocess.run(["bash", "-o", "pipefail", "-c", f"panto-log show {path} | head -1"], capture_output=True)
    assert p.returncode == 0 and p.stderr == b"" and p.stdout == f"# session {SID}\n".encode()


def imported_session(cwd):
    """A session as panto-log import writes one (SPEC 12): its header names the
    agent and the parent, images in a prompt and in a tool's results, a copy of
    a reply billed elsewhere, a branch summary."""
    import base64

    png = base64.b64encode(b"\x89PNG" + b"\0" * (123 * 1024 - 4)).decode()
    small = base64.b64encode(b"GIF89a" + b"\1" * 994).decode().rstrip("=")   # unpadded: 1000 bytes
    return [
        {"type": "session", "version": 1, "id": SID, "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(cwd),
         "source": {"agent": "claude-code", "path": "/p/s.jsonl", "id": "a1b2"},
         "parentSession": "0199aaaa-bbbb-7ccc-8ddd-00000000000f", "relation": "subagent"},
        msg("00000001", None, "user", [text("what is wrong here?"),
                                        {"type": "image", "mediaType": "image/png", "data": png}]),
        dict(msg("00000002", "00000001", "assistant",
                 [{"type": "toolUse", "id": "toolu_9", "name": "Read", "input": '{"file_path": "/a.gif"}'}],
                 provider="anthropic", model="claude-opus-4-5", stopReason="toolUse"),
             billedIn="0199aaaa-bbbb-7ccc-8ddd-00000000000f"),
        msg("00000003", "00000002", "user", [{"type": "toolResult", "toolUseId": "toolu_9", "content": "a.gif"},
                                              {"type": "image", "mediaType": "image/gif", "data": small}]),
        {"type": "branchSummary", "id": "00000004", "parentId": "00000003", "timestamp": "2026-04-25T17:41:00.000Z",
         "summary": "Tried reading it as text; gave up.", "fromId": "00000002",
         "provider": "anthropic", "model": "claude-haiku-4-5", "usage": {"input": 50, "output": 5}},
        msg("00000005", "00000004", "user", [{"type": "image", "mediaType": "image/webp", "data": 7}]),
    ]


def test_an_imported_session_shows_images_by_type_and_size(isolated, tmp_path):
    path = write(tmp_path / "s.jsonl", imported_session(isolated))
    md = show(path)
    heads = [l for l in md.splitlines() if l.startswith("#")]
    assert heads == [f"# session {SID}", "## user", "## assistant (anthropic claude-opus-4-5)", "## tool results",
                     "## branch summary (anthropic claude-haiku-4-5)", "## user"]
    assert "imported from claude-code" in md and "subagent of 0199aaaa-bbbb-7ccc-8ddd-00000000000f" in md
    assert "what is wrong here?\n\n*[image: image/png, 123 KB]*\n" in md
    assert "*[image: image/gif, 1000 bytes]*" in md and "*[image: not readable]*" in md
    assert "AAAA" not in md                                        # never the data itself
    assert "*usage: paid in session 0199aaaa-bbbb-7ccc-8ddd-00000000000f · stop: toolUse*" in md
    assert "*summary of a branch left behind (left at 00000002):*\n\nTried reading it as text; gave up.\n" in md
    assert "*usage: 50 input · 5 output*" in md
    assert show("--all", path) == md                               # one path: the same entries


def test_tree_of_an_imported_session(isolated, tmp_path):
    path = write(tmp_path / "s.jsonl", imported_session(isolated))
    got = [orjson.loads(x) for x in run(["panto-log", "tree", "--json", path]).stdout.splitlines()]
    assert [(g["type"], g["role"], g["text"]) for g in got] == [
        ("message", "user", "what is wrong here?"), ("message", "assistant", '[Read] {"file_path": "/a.gif"}'),
        ("message", "user", "[result] a.gif"), ("branchSummary", None, "Tried reading it as text; gave up."),
        ("message", "user", "[image: not readable]")]
    rows = run(["panto-log", "tree", path]).stdout.decode().splitlines()
    assert rows[3].split("\t")[1].strip() == "branchSummary"
