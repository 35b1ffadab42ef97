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
from conftest import run
from pantolib import paths

SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
KEY = "sk-test-0123456789abcdefSECRET"


def header(cwd, version=1):
    return orjson.dumps({"type": "session", "version": version, "id": SID,
                         "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(cwd)}) + b"\n"


def base(cwd):
    user = {"type": "message", "id": "0000aaaa", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
            "provider": "openai", "model": "gpt-4o",
            "message": {"role": "user", "content": [{"type": "text", "text": "question"}]}}
    reply = {"type": "message", "id": "0000bbbb", "parentId": "0000aaaa", "timestamp": "2026-04-25T17:40:17.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "answer"}],
                         "provider": "openai", "model": "gpt-4o", "stopReason": "stop",
                         "usage": {"input": 1000, "output": 100}}}
    return [header(cwd), orjson.dumps(user) + b"\n", orjson.dumps(reply) + b"\n"]


# Lines a crash could have left (torn when last) ...
TORN = {
    "stray brace": b"}{\n",
    "cut short": b'{"type":"message","id":"dead\n',
    "lone surrogate": b'{"type":"message","id":"c0000001","parentId":null,"timestamp":"t","message":'
                      b'{"role":"user","content":[{"type":"text","text":"\\ud800"}]}}\n',
    "1e400": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","n":1e400}\n',
    "nesting 1100": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","a":'
                    + b"[" * 1100 + b"]" * 1100 + b"}\n",
    "not an object": b"[1,2,3]\n",
    "null": b"null\n",
    "NUL bytes": b"\0\0\0\0\0\0\n",
    "invalid UTF-8": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","x":"\xff\xfe"}\n',
    "second header": None,          # filled in per test (it names the test's cwd)
}
# ... and a complete object that breaks the schema: never a crash artifact
SCHEMA = {
    "message without role": b'{"type":"message","id":"c0000001","parentId":null,"timestamp":"t",'
                            b'"message":{"content":[]}}\n',
    "id a number": b'{"type":"message","id":7,"parentId":null,"timestamp":"t","message":{"role":"user","content":[]}}\n',
}
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
}


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
            assert f"{f if command != 'send' else '<stdin>'}:{lineno}: " in err, err
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
