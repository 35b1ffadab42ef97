"""One reader (SPEC §11): the same hostile lines, first, in the middle and
last in a session, fed to every command that reads sessions. Each command's
outcome is pinned: its exit status, whether the file may change, and never
a traceback. What a valid header, a torn line and an entry are is decided
once (pantolib/stream.py), so the commands agree where their jobs overlap:
a bad first line is no session for any of them; a torn tail is cut by the
commands that repair and ignored by those that only read; a bad line with
valid lines after it is never cut."""
import os

import orjson
import pytest

import sse_server as S
from builders import SID, header
from conftest import run
from pantolib import paths

KEY = "sk-test-0123456789abcdefSECRET"


def base(cwd):
    user = {"type": "message", "id": "0000aaaa", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
            "provider": "openai", "model": "gpt-4o",
            "message": {"role": "user", "content": [{"type": "text", "text": "question"}]}}
    reply = {"type": "message", "id": "0000bbbb", "parentId": "0000aaaa", "timestamp": "2026-04-25T17:40:17.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "answer"}],
                         "provider": "openai", "model": "gpt-4o", "stopReason": "stop",
                         "usage": {"input": 1000, "output": 100}}}
    return [header(cwd), orjson.dumps(user) + b"\n", orjson.dumps(reply) + b"\n"]


from hostile_lines import DEEP_SCHEMA, SCHEMA, TORN  # noqa: E402

CASES = [(name, "torn") for name in TORN] + [(name, "schema") for name in SCHEMA]
WHERE = ["first", "middle", "last"]


def hostile(name, cwd):
    if name == "second header":
        return header(cwd)
    return TORN.get(name) or SCHEMA[name]


def layout(lines, bad, where):
    if where == "first":
        return [bad] + lines
    if where == "middle":
        return lines[:2] + [bad] + lines[2:]
    return lines + [bad]


# What each command does, by where the line is and what kind it is.
#   status, and the file afterwards: "same" (untouched), "cut" (the torn tail
#   cut, the rest as it was), "appended" (cut, then the new line added)
EXPECTED = {
    # the commands that recover the file they are given
    "replay": {"first": (1, "same"), "middle": (1, "same"), "last": {"torn": (0, "cut"), "schema": (1, "same")}},
    "append": {"first": (1, "same"), "middle": (1, "same"),
               "last": {"torn": (0, "appended"), "schema": (1, "same")}},
    # replay --skip-bad: prints around bad lines, never changes the file
    "skip-bad": {"first": (1, "same"), "middle": (0, "same"), "last": (0, "same")},
    # panto-ls never modifies; a file without a valid header is not listed
    "ls": {"first": (0, "same"), "middle": (0, "same"), "last": (0, "same")},
    # panto-cost never modifies; it validates the header and assistant entries only
    "cost": {"first": (1, "same"), "middle": (0, "same"), "last": (0, "same")},
    # panto-send reads a stream, which is never repaired: any bad line is an error
    "send": {"first": (1, "same"), "middle": (1, "same"), "last": (1, "same")},
    # and so does panto-tool
    "tool": {"first": (1, "same"), "middle": (1, "same"), "last": (1, "same")},
    # show and tree read a file without repairing it: a torn tail is left out with a note
    "show": {"first": (1, "same"), "middle": (1, "same"), "last": {"torn": (0, "same"), "schema": (1, "same")}},
    "tree": {"first": (1, "same"), "middle": (1, "same"), "last": {"torn": (0, "same"), "schema": (1, "same")}},
}
STDIN = ("send", "tool")          # the commands that read the session as a stream


def expected(command, where, kind):
    e = EXPECTED[command][where]
    return e[kind] if isinstance(e, dict) else e


@pytest.fixture(scope="module")
def srv():
    with S.Server(auto=True) as s:
        yield s


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name,kind", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", list(EXPECTED))
def test_every_reader_on_the_same_hostile_line(isolated, srv, command, name, kind, where):
    good = base(isolated)
    bad = hostile(name, isolated)
    data = b"".join(layout(good, bad, where))
    d = paths.session_dir(str(isolated))
    os.makedirs(d, mode=0o700, exist_ok=True)
    f = os.path.join(d, SID + ".jsonl")
    with open(f, "wb") as fh:
        fh.write(data)
    new = b'{"type":"message","message":{"role":"user","content":[{"type":"text","text":"more"}]}}\n'
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY)
    argv, stdin = {
        "replay": (["panto-log", "replay", f], b""),
        "append": (["panto-log", "append", f], new),
        "skip-bad": (["panto-log", "replay", "--skip-bad", f], b""),
        "ls": (["panto-ls"], b""),
        "cost": (["panto-cost", f], b""),
        "send": (["panto-send", "-p", "openai", "-m", "gpt-4o", "go on"], data),
        "tool": (["panto-tool"], data),
        "show": (["panto-log", "show", f], b""),
        "tree": (["panto-log", "tree", f], b""),
    }[command]
    p = run(argv, input=stdin, env=env)
    err = p.stderr.decode("utf-8", "replace")
    lineno = {"first": 1, "middle": 3, "last": 4}[where]
    if name == "second header" and where == "first":
        where, lineno = "middle", 2       # a valid header before the session's own: a second header in the middle
    status, after = expected(command, where, kind)
    assert p.returncode == status, (p.returncode, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.splitlines()) <= (3 if command == "skip-bad" else 1), err
    now = open(f, "rb").read()
    whole = b"".join(good)
    if after == "same":
        assert now == data
    elif after == "cut":
        assert now == whole and p.stdout == whole
    else:
        assert now.startswith(whole) and len(now.splitlines()) == 4 and b'"more"' in now
    if status == 1:
        assert p.stdout in (b"", ) or command == "send", p.stdout
        if where != "first":
            assert f"{f if command not in STDIN else '<stdin>'}:{lineno}: " in err, err
    if kind == "schema" and name in DEEP_SCHEMA and not (command in ("ls", "cost") or status == 0):
        assert DEEP_SCHEMA[name] in err, err                   # says what is wrong, at that line
    if command == "skip-bad" and status == 0:
        assert p.stdout == whole                     # the session without the bad line
    if command == "ls":
        listed = SID[:8].encode() in p.stdout
        assert listed == (where != "first"), (p.stdout, err)
    if command == "send" and where != "first":
        assert p.stdout == b""                          # nothing passed on from a broken stream


@pytest.mark.parametrize("command", list(EXPECTED))
def test_a_version_2_header_is_refused_by_every_reader(isolated, srv, command):
    good = base(isolated)
    data = header(isolated, version=2) + b"".join(good[1:])
    d = paths.session_dir(str(isolated))
    os.makedirs(d, mode=0o700, exist_ok=True)
    f = os.path.join(d, SID + ".jsonl")
    with open(f, "wb") as fh:
        fh.write(data)
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY)
    argv, stdin = {
        "replay": (["panto-log", "replay", f], b""),
        "append": (["panto-log", "append", f], b'{"type":"message","message":{"role":"user","content":[]}}\n'),
        "skip-bad": (["panto-log", "replay", "--skip-bad", "--last"], b""),
        "ls": (["panto-ls"], b""),
        "cost": (["panto-cost", f], b""),
        "send": (["panto-send", "-p", "openai", "hi"], data),
        "tool": (["panto-tool"], data),
        "show": (["panto-log", "show", f], b""),
        "tree": (["panto-log", "tree", f], b""),
    }[command]
    p = run(argv, input=stdin, env=env)
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert open(f, "rb").read() == data
    if command == "ls":
        assert p.returncode == 0 and SID[:8].encode() not in p.stdout
    else:
        assert p.returncode == 1 and p.stdout == b"", err
        assert "version 2" in err or "no sessions" in err, err


# -- deep nesting that panto can read ------------------------------------------------------------

def deep_list(n):
    return b"[" * n + b"]" * n


def deep_note(n, eid="0000cccc"):
    return (b'{"type":"note","id":"' + eid.encode() + b'","parentId":"0000bbbb","timestamp":"2026-04-25T17:40:18.000Z","a":'
            + deep_list(n) + b"}\n")


@pytest.mark.parametrize("command", ["replay", "append", "skip-bad", "ls", "cost", "send", "tool", "show", "tree"])
def test_a_valid_entry_nested_1000_deep_is_kept_by_every_reader(isolated, srv, command):
    """Within what orjson reads (1024 levels) a deep entry is a valid line:
    passed on byte for byte, never re-encoded (orjson writes only 254)."""
    good = base(isolated)
    deep_msg = (b'{"type":"message","id":"0000dddd","parentId":"0000cccc","timestamp":"2026-04-25T17:40:19.000Z",'
                b'"message":{"role":"user","content":[{"type":"text","text":"deep","x":' + deep_list(1000) + b'}]}}\n')
    data = b"".join(good) + deep_note(1000) + deep_msg
    d = paths.session_dir(str(isolated))
    os.makedirs(d, mode=0o700, exist_ok=True)
    f = os.path.join(d, SID + ".jsonl")
    with open(f, "wb") as fh:
        fh.write(data)
    write_prices(isolated)
    new = b'{"type":"message","message":{"role":"user","content":[{"type":"text","text":"more"}]}}\n'
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY)
    argv, stdin = {
        "replay": (["panto-log", "replay", f], b""),
        "append": (["panto-log", "append", f], data + new),
        "skip-bad": (["panto-log", "replay", "--skip-bad", f], b""),
        "ls": (["panto-ls"], b""),
        "cost": (["panto-cost", f], b""),
        "send": (["panto-send", "-p", "openai", "-m", "gpt-4o", "go on"], data),
        "tool": (["panto-tool"], data),
        "show": (["panto-log", "show", "--all", f], b""),
        "tree": (["panto-log", "tree", f], b""),
    }[command]
    p = run(argv, input=stdin, env=env)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0, err
    assert "Traceback" not in err and "internal error" not in err, err
    now = open(f, "rb").read()
    if command == "append":
        assert now.startswith(data) and b'"more"' in now[len(data):]
    else:
        assert now == data
    if command in ("replay", "skip-bad", "tool"):
        assert p.stdout == data
    if command in ("append", "send"):
        assert p.stdout.startswith(data)                   # the deep lines byte for byte
    if command == "ls":
        assert SID[:8].encode() in p.stdout
    if command == "cost":
        assert b"gpt-4o" in p.stdout
    if command == "tree":
        assert p.stdout.count(b"\n") == 4 and b"0000dddd*\tuser\t" in p.stdout


def write_prices(cwd):
    d = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "models.toml"), "w") as fh:
        fh.write('[openai.gpt-4o]\ninput = 2.5\noutput = 10.0\n')


@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("command", ["append", "send"])
def test_a_bare_entry_too_deep_to_write_is_refused_at_its_line(isolated, srv, command, depth):
    """A bare entry is written anew when it is completed; one nested deeper
    than panto writes (254 levels) is refused at its line, and the lines
    before it are still passed on."""
    good = base(isolated)
    bare = (b'{"type":"message","message":{"role":"user","content":[{"type":"text","text":"deep","x":'
            + deep_list(depth) + b'}]}}\n')
    data = b"".join(good) + bare
    f = isolated / "s.jsonl"
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY)
    argv = {"append": ["panto-log", "append", str(f)], "send": ["panto-send", "-p", "openai", "-m", "gpt-4o"]}[command]
    p = run(argv, input=data, env=env)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    why = "cannot be completed" if depth == 1000 else "nested more than 1024 levels deep"
    assert err.startswith(f"{argv[0]}: <stdin>:4: ") and why in err, err
    assert not f.exists() or f.read_bytes() == b"".join(good)      # the lines before it, nothing more
    shallow = bare.replace(deep_list(depth), deep_list(200))     # what panto can write is completed
    p = run(argv, input=b"".join(good) + shallow, env=env)
    assert p.returncode == 0, p.stderr
    assert b'"text":"deep"' in p.stdout


def test_an_entry_already_in_the_file_compared_at_any_depth(isolated, tmp_path):
    """The same id written differently: compared without Python's recursion."""
    good = base(isolated)
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join(good) + deep_note(1000))
    same = deep_note(1000).replace(b'"a":', b'"a": ')           # other bytes, same content
    p = run(["panto-log", "append", str(f)], input=b"".join(good) + same)
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    other = deep_note(1000).replace(b"[]", b"[1]")
    p = run(["panto-log", "append", str(f)], input=b"".join(good) + other)
    assert p.returncode == 0, p.stderr
    assert b"0000cccc is already in" in p.stderr and b"different content" in p.stderr
    assert f.read_bytes() == b"".join(good) + deep_note(1000)


@pytest.mark.parametrize("depth", [300, 1000])
def test_tool_arguments_too_deep_to_send_are_sent_as_an_empty_object(isolated, srv, depth):
    """Arguments panto cannot write inside a request body go as {}, like
    arguments that are not valid JSON; the session keeps them as they were."""
    args = '{"a":' * depth + "1" + "}" * depth
    rows = [orjson.loads(x) for x in base(isolated)]
    rows[2]["message"]["content"] = [{"type": "toolUse", "id": "toolu_1", "name": "bash", "input": args}]
    rows.append({"type": "message", "id": "0000cccc", "parentId": "0000bbbb", "timestamp": "2026-04-25T17:40:18.000Z",
                 "message": {"role": "user", "content": [{"type": "toolResult", "toolUseId": "toolu_1",
                                                          "content": "ok"}]}})
    data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    srv.push(S.anthropic_text("fine"))
    env = dict(os.environ, ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY=KEY)
    p = run(["panto-send", "-p", "anthropic", "-m", "claude-sonnet-4-20250514"], input=data, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(data)
    sent = [b for m in srv.requests[-1].body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    assert sent == [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]


@pytest.mark.parametrize("raw,deep", [
    (b'{"a":' + deep_list(1025) + b"}\n", True),
    (b'{"a":' + b'{ "a" :\t' * 2000 + b"1" + b"}" * 2001 + b"\n", True),       # objects, spaced
    ('{"t":"漢字 \\"[[","a":'.encode() * 600 + deep_list(500) + b"}" * 600 + b"\n", True),   # depth in characters
    (b'{"a":' + deep_list(1000) + b"}\n", False),                          # orjson reads it
    (b'{"a":' + b"[" * 2000 + b"]" * 1999 + b"}\n", False),                 # a bracket short: cut
    (b'{"a":"' + b"[" * 2000 + b'","b":"\\q"}\n', False),                # brackets in a string, a bad escape
    (deep_list(2000) + b"\n", False),                                       # not an object
])
def test_too_deep_is_a_complete_object_refused_only_for_its_depth(raw, deep):
    from pantolib import stream

    assert stream.too_deep(raw) is deep
    assert stream.torn(raw) is (not deep and stream.loads(raw) is None)


# -- what reaches the terminal -------------------------------------------------------------------

EVIL = "rm -rf ~/x # \r\x1b[2K  echo hello \x1b]52;c;ZXZpbA==\x07\x1b]0;owned\x07\x9b2J \u202e txt.exe\n\tok"


def test_the_live_reply_is_shown_with_escapes_made_visible(isolated, srv):
    bare = KEY[len("sk-"):]
    text = EVIL + " and the key " + bare + " and again " + KEY
    srv.push(S.openai_text(text, pieces=[text[i:i + 7] for i in range(0, len(text), 7)]))
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY)
    p = run(["panto-send", "-p", "openai", "-m", "gpt-4o", "--live", "hi"], env=env)
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    assert "\x1b" not in err and "\r" not in err and "\x07" not in err and "\x9b" not in err and "\u202e" not in err
    assert "^M^[[2K  echo hello ^[]52;c;ZXZpbA==^G" in err and "\\x9b2J" in err and "<U+202E>" in err
    assert "\n\tok" in err                                   # newline and tab kept
    assert KEY not in err and bare not in err and err.count("[redacted]") == 2


def test_an_error_line_is_one_visible_line_without_keys(isolated, srv):
    srv.push(S.error_reply(400, "bad \x1b]0;owned\x07 request\nwith key " + KEY + " and sk-other0123456789abcdefXYZ"))
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY)
    p = run(["panto-send", "-p", "openai", "-m", "gpt-4o", "hi"], env=env)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("panto-send: ")
    assert "\x1b" not in err and "\x07" not in err and KEY not in err and "sk-other0123456789abcdefXYZ" not in err


def test_cost_on_a_terminal_shows_model_names_without_acting_on_it(isolated, tmp_path):
    """Model names come from the file: neutralized in the table, and written
    as \\u escapes in --json when stdout is a terminal (still valid JSON)."""
    import shutil

    from on_terminal import EVIL, RAW, on_a_terminal

    rows = [orjson.loads(x) for x in base(isolated)]
    rows[2]["message"]["model"] = "gpt " + EVIL
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    piped = run(["panto-cost", "--json", "--prices", os.devnull, str(f)])
    assert piped.returncode == 0, piped.stderr
    assert "\x9b".encode() in piped.stdout
    shown = on_a_terminal([shutil.which("panto-cost"), "--json", "--prices", os.devnull, str(f)])
    assert not any(c in shown for c in RAW), shown
    assert orjson.loads(shown.replace(b"\r\n", b"\n")) == orjson.loads(piped.stdout)
    table = on_a_terminal([shutil.which("panto-cost"), "--prices", os.devnull, str(f)])
    assert not any(c in table for c in RAW) and b"gpt 8-bit CSI \\x9b2J" in table, table
