"""The part of a stream a session file already has is recognised byte for
byte (pantolib/prefix.py), not parsed: the outcome must be the one of the
line-by-line reading on every stream. The reference is the same stream
behind a blank first line (skipped by the reader, and so read line by line
from the top): same status, same output, same messages (line numbers one
lower), same file afterwards, on streams that start with the file's bytes
and then differ, break off, or bring hostile lines (tests/hostile_lines.py)."""
import os
import re
import shutil

import orjson
import pytest

from builders import bare, header, msg, read
from conftest import run
from hostile_lines import SCHEMA, TORN

BIG = "x" * 400_000      # a few lines this long put the file over the 1 MB block, lines across its edges


def _file(cwd):
    """A session of ~1.7 MB: short entries and long ones, linear."""
    out, parent = [header(cwd)], None
    for i in range(12):
        u, a = f"{i:04x}aaaa", f"{i:04x}bbbb"
        text = BIG if i in (2, 5, 6, 9) else f"question {i}"
        out.append(msg(u, parent, "user", text))
        out.append(msg(a, u, "assistant", f"answer {i}", stopReason="stop", provider="openai", model="gpt-4o",
                       usage={"input": 10, "output": 5}))
        parent = a
    return out


def _cases(lines):
    data = b"".join(lines)
    new = msg("e0000001", "000bbbbb", "user", "more")
    second = header("/elsewhere")
    yield "the file", data
    yield "the file and new entries", data + new + bare("user", "bare after")
    yield "the file and a bare entry", data + bare("user", "bare")
    yield "a branch from the middle", b"".join(lines[:9]) + msg("e0000002", "0003aaaa", "user", "branch") \
        + bare("user", "on the branch")
    yield "the file up to a long line, then a bare entry", b"".join(lines[:5]) + bare("user", "after long")
    yield "only the header and a bare entry", lines[0] + bare("user", "first")
    changed = bytearray(data)
    changed[len(data) // 2] ^= 1
    yield "a byte changed inside a long line", bytes(changed)
    yield "an entry written differently", b"".join(lines[:3]) + lines[3].replace(b'{"type":"message",', b'{ "type":"message",') \
        + b"".join(lines[4:])
    yield "cut inside a long line", data[:len(data) // 2]
    yield "cut inside a short line", data[:-20]
    yield "a second header after the file", data + second
    yield "the file twice", data + data
    for name, bad in list(TORN.items())[:6] + list(SCHEMA.items())[:2]:
        if bad is not None:
            yield f"after the file: {name}, then a valid line", data + bad + new
            yield f"last: {name}", data + bad


def _fresh_ids(stream, out):
    """Ids in out that the stream did not bring (completed bare entries), in order."""
    given = set(re.findall(rb'"id":"([0-9a-f]{8})"', stream))
    fresh = []
    for i in re.findall(rb'"id":"([0-9a-f]{8})"', out):
        if i not in given and i not in fresh:
            fresh.append(i)
    return fresh


def _normal(stream, out):
    """Fresh ids and the times of completed entries named by their order."""
    for k, i in enumerate(_fresh_ids(stream, out)):
        out = re.sub(rb'"id":"' + i + rb'","parentId":("[^"]*"|null),"timestamp":"[^"]*"',
                     b'"id":"FRESH%d","parentId":\\1,"timestamp":"NOW"' % k, out)
        out = out.replace(b'"' + i + b'"', b'"FRESH%d"' % k)
    return out


def _one_lower(err):
    return re.sub(rb"<stdin>:(\d+)", lambda m: b"<stdin>:%d" % (int(m.group(1)) - 1), err)


@pytest.fixture
def two_files(tmp_path, isolated):
    lines = _file(isolated)
    paths = []
    for name in ("fast", "slow"):
        d = tmp_path / name
        d.mkdir(mode=0o700)
        paths.append(str(d / "s.jsonl"))
    return lines, paths


def test_append_of_a_stream_that_starts_with_the_file_agrees_with_the_line_by_line_reading(two_files):
    lines, (fast, slow) = two_files
    data = b"".join(lines)
    assert len(data) > 1 << 20
    for name, stream in _cases(lines):
        for p in (fast, slow):
            with open(p, "wb") as f:
                f.write(data)
            os.chmod(p, 0o600)
        a = run(["panto-log", "append", fast], input=stream)
        b = run(["panto-log", "append", slow], input=b"\n" + stream)
        assert b"Traceback" not in a.stderr, name
        assert a.returncode == b.returncode, (name, a.stderr, b.stderr)
        assert _normal(stream, a.stdout) == _normal(stream, b.stdout), name
        assert a.stderr.replace(fast.encode(), b"F") == _one_lower(b.stderr).replace(slow.encode(), b"F"), name
        assert _normal(stream, read(fast)) == _normal(stream, read(slow)), name


def test_append_after_a_file_with_blank_lines_or_a_torn_tail(two_files):
    """A file whose valid part has blank lines (not passed on) or a torn tail (cut first)."""
    lines, (fast, slow) = two_files
    for data in (b"".join(lines[:5]) + b"\n  \n" + b"".join(lines[5:]),
                 b"".join(lines) + b'{"type":"message","id":"torn'):
        for stream in (data, data + msg("e0000001", "000bbbbb", "user", "more")):
            for p in (fast, slow):
                with open(p, "wb") as f:
                    f.write(data)
            a = run(["panto-log", "append", fast], input=stream)
            b = run(["panto-log", "append", slow], input=b"\n" + stream)
            assert (a.returncode, a.stdout) == (b.returncode, b.stdout)
            assert a.stderr.replace(fast.encode(), b"F") == _one_lower(b.stderr).replace(slow.encode(), b"F")
            assert read(fast) == read(slow)


def test_append_without_file_finds_it_by_the_header(isolated, tmp_path):
    from builders import session_file

    f = session_file(isolated, data=b"".join(_file(isolated)))
    stream = read(f) + bare("user", "more")
    out = run(["panto-log", "append"], input=stream)
    assert out.returncode == 0, out.stderr
    new = orjson.loads(read(f).split(b"\n")[-2])
    assert new["parentId"] == "000bbbbb" and new["message"]["content"][0]["text"] == "more"
    assert out.stdout == read(f)


def test_a_file_replaced_while_appending_is_taken_up(isolated, tmp_path):
    """The path names another file when the known part is passed on: its
    lines are then read one by one into the file now there (never echoed
    unless they are in it)."""
    lines = _file(isolated)
    f = str(tmp_path / "s.jsonl")
    with open(f, "wb") as fh:
        fh.write(b"".join(lines))
    import subprocess

    p = subprocess.Popen([shutil.which("panto-log"), "append", f], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(lines[0])
    p.stdin.flush()
    assert p.stdout.read(len(lines[0])) == lines[0]      # the file is open
    os.rename(f, f + ".old")
    with open(f, "wb") as fh:
        fh.write(b"".join(lines[:3]))
    out, err = p.communicate(b"".join(lines[1:]))
    assert p.returncode == 0, err
    assert out == b"".join(lines[1:])
    assert read(f) == b"".join(lines)
    assert b"replaced" in err


# -- panto-send: the file the header names, known to the index cache ------------------

def _stamped(eid, parent, text, api="openai_chat"):
    e = orjson.loads(msg(eid, parent, "user", text))
    if api is not None:
        e = {**{k: v for k, v in e.items() if k != "message"}, "api": api, "message": e["message"]}
    return orjson.dumps(e) + b"\n"


def _compacted(cwd, api="openai_chat"):
    """~1.7 MB: a system entry, turns (long ones among them), an abandoned
    branch, a compaction keeping the last two prompts, a turn after it."""
    from test_log import compaction

    out, parent, ids = [header(cwd), msg("5555aaaa", None, "system", "be brief")], "5555aaaa", []
    for i in range(10):
        u, a = f"{i:04x}aaaa", f"{i:04x}bbbb"
        out += [_stamped(u, parent, BIG if i in (2, 5, 6) else f"question {i}", api),
                msg(a, u, "assistant", f"answer {i}", stopReason="stop", provider="openai", model="gpt-4o",
                    usage={"input": 10, "output": 5})]
        ids.append((u, a))
        parent = a
        if i == 1:
            out.append(_stamped("7777aaaa", ids[0][1], "an abandoned branch", api))
    out += [compaction("cccc0000", parent, ids[-2][0]), _stamped("9999aaaa", "cccc0000", "after it", api),
            msg("9999bbbb", "9999aaaa", "assistant", "ok", stopReason="stop", provider="openai", model="gpt-4o")]
    return out


def _send_cases(lines):
    data = b"".join(lines)
    yield "the file", data
    yield "the file and a tool result", data + bare("user", "a note")
    yield "the file and an entry", data + _stamped("e0000001", "9999bbbb", "more")
    yield "the file and an entry without its API", data + _stamped("e0000001", "9999bbbb", "more", api=None)
    yield "an entry continuing a left-out path", data + _stamped("e0000001", "0003bbbb", "back there")
    yield "an entry whose id is left out", data + _stamped("0003aaaa", "9999bbbb", "same id")
    yield "a branch before the compaction", b"".join(lines[:12]) + _stamped("e0000002", "0004bbbb", "branch")
    yield "up to the compaction", b"".join(lines[:-2])
    changed = bytearray(data)
    changed[len(data) // 3] ^= 1
    yield "a byte changed", bytes(changed)
    yield "cut inside a line", data[:-30]
    yield "a second header", data + header("/elsewhere")
    for name, bad in list(TORN.items())[:5] + list(SCHEMA.items())[:2]:
        if bad is not None:
            yield f"after the file: {name}, then a valid line", data + bad + _stamped("e0000001", "9999bbbb", "x")


def _send_agrees(isolated, lines, cases, cache=True):
    import sse_server as S
    from builders import session_file
    from conftest import env_for

    f = session_file(isolated, data=b"".join(lines))
    if cache:
        assert run(["panto-log", "replay", "--context", f]).returncode == 0    # writes the index cache
    with S.Server(auto=True) as srv:
        env = env_for(srv)
        for name, stream in cases:
            results = []
            for given in (stream, b"\n" + stream):
                n = len(srv.requests)
                p = run(["panto-send", "-p", "openai", "-m", "gpt-4o", "the prompt"], input=given, env=env)
                results.append((p, [r.body for r in srv.requests[n:]]))
            (a, ra), (b, rb) = results
            assert b"Traceback" not in a.stderr, name
            assert (a.returncode, ra) == (b.returncode, rb), (name, a.stderr, b.stderr)
            assert _normal(stream, a.stdout) == _normal(stream, b.stdout), name
            assert a.stderr == _one_lower(b.stderr), name


def test_send_of_a_stream_that_starts_with_the_file_agrees_with_the_line_by_line_reading(isolated):
    """The same requests, output and messages as for the stream behind a
    blank first line, the file (where the header's id puts it) known to the
    index cache: the known part is compared, and only the lines the request
    needs are parsed, or, where that could change the request, all are."""
    lines = _compacted(isolated)
    assert len(b"".join(lines)) > 1 << 20
    _send_agrees(isolated, lines, list(_send_cases(lines)))


@pytest.mark.parametrize("cache,api", [(False, "openai_chat"), (True, None)])
def test_send_without_the_cache_or_with_prompts_naming_no_api_reads_line_by_line(isolated, cache, api):
    lines = _compacted(isolated, api)
    _send_agrees(isolated, lines, list(_send_cases(lines))[:4], cache=cache)


def test_send_does_not_wait_on_a_fifo_where_the_session_file_would_be(isolated):
    import sse_server as S
    from builders import session_file
    from conftest import env_for

    lines = _compacted(isolated)
    f = session_file(isolated, data=b"".join(lines))
    os.unlink(f)
    os.mkfifo(f)
    with S.Server(auto=True) as srv:
        p = run(["panto-send", "-p", "openai", "-m", "gpt-4o", "hi"], input=b"".join(lines), env=env_for(srv),
                timeout=20)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(b"".join(lines))
