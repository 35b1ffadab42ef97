"""pantolib.session on its own, on real files under tmp_path: reading a
session (complete, a torn tail, a bad line in the middle; SPEC §4), the
recovery that cuts a torn tail, what Writer puts on disk byte for byte, and
the partial-stream header rules (panto-session(5) PARTIAL STREAMS)."""
import io
import json
import os
import random
import stat

import orjson
import pytest

from builders import OTHER, SID, bare, header, msg, session_bytes
from hostile_lines import SCHEMA, TORN, random_line
from pantolib import paths, session, stream
from pantolib.errors import PantoError, SessionError


def write(p, data):
    with open(p, "wb") as f:
        f.write(data)
    return str(p)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def line_starts(data):
    """Offset of each line of data."""
    out, p = [], 0
    for line in data.split(b"\n")[:-1]:
        out.append(p)
        p += len(line) + 1
    return out


def recovered(path):
    """session.recover on the file, as panto-log replay runs it (the flock held)."""
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return session.recover(path, fd)
    finally:
        os.close(fd)


# -- reading ------------------------------------------------------------------------------------

def test_a_complete_file_is_read_whole(tmp_path):
    data = session_bytes(tmp_path, turns=3)
    p = write(tmp_path / "s.jsonl", data)
    r = session.scan(p)
    assert r.header == orjson.loads(header(tmp_path)) and r.header_raw == header(tmp_path)
    assert list(r.ids) == ["0000aaaa", "0000bbbb", "0001aaaa", "0001bbbb", "0002aaaa", "0002bbbb"]
    assert r.leaf == "0002bbbb"
    assert r.end == r.size == len(data) and r.end_line == 7
    assert r.cut_line is None and r.bad == []
    # each entry's node knows its parent and where its line is
    lines = data.split(b"\n")
    for n, (eid, node) in enumerate(r.ids.items(), 1):
        start, end = line_starts(data)[n], line_starts(data)[n] + len(lines[n]) + 1
        assert data[start:end] == lines[n] + b"\n"
        assert node[:3] == [orjson.loads(lines[n])["parentId"], start, end]
    assert session.scan(p, ids=False).ids == {}
    assert read(p) == data


def test_blank_lines_and_any_layout_are_read(tmp_path):
    e = orjson.loads(msg("0000aaaa", None, "user", "hi"))
    data = header(tmp_path) + b"\n  \r\n" + json.dumps(e, indent=1).replace("\n", "").encode() + b"\r\n\n" \
        + msg("0000bbbb", "0000aaaa", "assistant", "yo") + b"\n"
    r = session.scan(write(tmp_path / "s.jsonl", data))
    assert list(r.ids) == ["0000aaaa", "0000bbbb"] and r.leaf == "0000bbbb"
    assert r.end == r.size == len(data) and r.cut_line is None


@pytest.mark.parametrize("tail", [
    b'{"type":"message","id":"dead',              # cut short, no line feed
    b'{"type":"message","id":"dead\n',            # cut short
    msg("0000cccc", "0000bbbb", "user", "whole but no line feed").rstrip(b"\n"),
    b"}{\n" + b'{"type":"mess',                    # a run of torn lines
    b"}{\n\n  \n",                                 # torn, then blank lines
    header("/x", sid=OTHER),                        # a second header at the end
    b"\0\0\0\n",
], ids=["cut", "cut with line feed", "no line feed", "a run", "then blanks", "second header", "NUL"])
def test_a_torn_tail_is_found_and_recovery_cuts_it(tmp_path, tail):
    good = session_bytes(tmp_path, turns=2)
    p = write(tmp_path / "s.jsonl", good + tail)
    r = session.scan(p)
    assert (r.end, r.size, r.cut_line) == (len(good), len(good) + len(tail), 6)
    assert r.leaf == "0001bbbb" and r.bad == []
    assert read(p) == good + tail                    # reading changes nothing
    r = recovered(p)
    assert r.cut == len(tail) and r.size == r.end == len(good)
    assert read(p) == good                           # cut at the start of the first torn line
    r = recovered(p)
    assert r.cut == 0 and r.cut_line is None and read(p) == good


def test_blank_lines_at_the_end_are_not_a_torn_tail(tmp_path):
    data = session_bytes(tmp_path) + b"\n \n"
    r = recovered(write(tmp_path / "s.jsonl", data))
    assert r.cut == 0 and r.end == len(data) and read(tmp_path / "s.jsonl") == data


@pytest.mark.parametrize("bad,why", [
    (b"}{\n", "not valid JSON"),
    (b"[1,2]\n", "not a JSON object"),
    (header("/x", sid=OTHER), "a session header after the first line"),
])
def test_a_bad_line_in_the_middle_is_reported_and_nothing_is_changed(tmp_path, bad, why):
    good = session_bytes(tmp_path, turns=1)
    after = msg("0001aaaa", "0000bbbb", "user", "later") + msg("0001bbbb", "0001aaaa", "assistant", "too")
    p = write(tmp_path / "s.jsonl", good + bad + after)
    with pytest.raises(SessionError) as e:
        session.scan(p)
    assert (e.value.file, e.value.line) == (p, 4)
    assert e.value.message == (f"{why} (the 2 lines after it are intact); panto-log replay --skip-bad prints "
                               f"the session without it")
    with pytest.raises(SessionError):
        recovered(p)
    assert read(p) == good + bad + after
    r = session.scan(p, skip_bad=True)
    assert r.bad == [(4, len(good), len(good) + len(bad), why)]
    assert r.leaf == "0001bbbb" and r.after == 2 and r.end == r.size == len(good + bad + after)
    assert list(r.ids) == ["0000aaaa", "0000bbbb", "0001aaaa", "0001bbbb"]


def test_several_bad_lines_are_counted(tmp_path):
    good = session_bytes(tmp_path, turns=1)
    p = write(tmp_path / "s.jsonl", good + b"}{\n" + msg("0001aaaa", "0000bbbb", "user", "x") + b"nope\n"
              + msg("0001bbbb", "0001aaaa", "assistant", "y"))
    with pytest.raises(SessionError) as e:
        session.scan(p)
    assert e.value.line == 4 and "(the 2 lines after it are intact; 1 more bad lines)" in e.value.message
    assert [b[0] for b in session.scan(p, skip_bad=True).bad] == [4, 6]


@pytest.mark.parametrize("name", list(SCHEMA))
@pytest.mark.parametrize("where", ["middle", "end"])
def test_a_line_that_breaks_the_schema_is_reported_wherever_it_is(tmp_path, name, where):
    good = session_bytes(tmp_path, turns=1)
    after = msg("0001aaaa", "0000bbbb", "user", "later") if where == "middle" else b""
    p = write(tmp_path / "s.jsonl", good + SCHEMA[name] + after)
    with pytest.raises(SessionError) as e:
        recovered(p)
    assert e.value.line == 4
    assert read(p) == good + SCHEMA[name] + after       # never cut
    r = session.scan(p, skip_bad=True)
    assert [b[:3] for b in r.bad] == [(4, len(good), len(good) + len(SCHEMA[name]))]
    assert r.bad[0][3] == e.value.message


def test_a_file_whose_first_line_is_no_header_is_no_session_and_is_never_cut(tmp_path):
    for data, why in [(b"", "not a panto session (empty file)"),
                      (b'{"type":"sess', "not a panto session (the first line is not a session header: "
                                         "the last line has no line feed)"),
                      (b"}{\n" + session_bytes(tmp_path), "not a panto session (the first line is not a session "
                                                          "header: not valid JSON)")]:
        p = write(tmp_path / "s.jsonl", data)
        with pytest.raises(SessionError) as e:
            recovered(p)
        assert e.value.message == why
        assert read(p) == data


@pytest.mark.parametrize("after", [b"", msg("0000bbbb", "0000aaaa", "assistant", "yo"), b'{"type":"sess'])
def test_a_file_that_begins_with_an_entry_is_refused_at_its_first_line(tmp_path, after):
    data = msg("0000aaaa", None, "user", "hi") + after
    p = write(tmp_path / "s.jsonl", data)
    with pytest.raises(SessionError) as e:
        recovered(p)
    assert (e.value.line, e.value.message) == (1, "not a panto session (the first line is not a session header)")
    assert read(p) == data


def test_an_entry_without_an_id_in_a_file_is_a_bad_line(tmp_path):
    good = session_bytes(tmp_path)
    p = write(tmp_path / "s.jsonl", good + bare("user", "hi"))
    with pytest.raises(SessionError) as e:
        session.scan(p)
    assert (e.value.line, e.value.message) == (4, "an entry without an 'id' in a session file")
    assert session.scan(p, skip_bad=True).bad == [(4, len(good), len(good) + len(bare("user", "hi")),
                                                   "an entry without an 'id'")]


def test_a_line_longer_than_a_read_is_taken_whole(tmp_path):
    big = msg("0001aaaa", "0000bbbb", "user", "x" * (session.CHUNK * 2 + 17))
    data = session_bytes(tmp_path) + big + msg("0001bbbb", "0001aaaa", "assistant", "ok")
    r = session.scan(write(tmp_path / "s.jsonl", data))
    assert list(r.ids)[-2:] == ["0001aaaa", "0001bbbb"] and r.end == len(data)
    start = len(session_bytes(tmp_path))
    assert r.ids["0001aaaa"][1:3] == [start, start + len(big)]


# -- the reading agrees with the line rules, line by line ---------------------------------------------

def _expected_last(raw):
    """What reading a session file whose last line is raw (with its line
    feed) makes of it, by stream's rules: "cut", "entry" or the reason."""
    if stream.torn(raw):
        return "cut"
    obj = stream.loads(raw)
    if obj is None:                     # complete, but too deep to read
        return stream.DEEP
    try:
        kind = stream.classify(obj)
    except ValueError as e:
        return str(e)
    return {stream.HEADER: "cut", stream.ENTRY: "entry", stream.BARE: "an entry without an 'id' in a session file"}[kind]


def test_reading_applies_the_torn_line_rule_of_stream(tmp_path):
    """session.scan applies the torn-line rule inline, line by line: it
    agrees with stream.torn (and classify) on random and hostile last lines,
    with and without their line feed, and with a valid line after them."""
    rng = random.Random(17)
    good = session_bytes(tmp_path)
    later = msg("0001aaaa", "0000bbbb", "user", "later")
    hostile = [raw for raw in [*TORN.values(), *SCHEMA.values()] if raw]
    lines = [random_line(rng) for _ in range(600)]
    lines += [raw[:rng.randrange(1, len(raw))] for raw in lines[:200]]        # cut short by a crash
    lines = [raw + b"\n" for raw in lines] + [raw.rstrip(b"\n") + b"\n" for raw in hostile]
    seen = {}
    names = (str(tmp_path / f"{n}.jsonl") for n in range(10**6))   # new files: rewriting one costs a flush
    for raw in lines:
        want = _expected_last(raw)
        seen[want] = seen.get(want, 0) + 1
        p = write(next(names), good + raw)
        try:
            r = session.scan(p)
            got = "cut" if r.cut_line == 4 and r.end == len(good) else "entry" if r.end == len(good + raw) else r
        except SessionError as e:
            assert e.line == 4
            got = e.message
        assert got == want, raw
        # without its line feed, any last line is torn
        r = session.scan(write(next(names), good + raw.rstrip(b"\n")))
        assert (r.end, r.cut_line) == (len(good), 4), raw
        # with a valid line after it, a torn line is a bad line, never cut
        p = write(next(names), good + raw + later)
        try:
            r = session.scan(p)
            got = "entry"
            assert r.leaf == "0001aaaa" and r.end == r.size
        except SessionError as e:
            assert e.line == 4
            got = e.message
        if want == "cut":
            assert got.endswith("(the 1 line after it is intact); panto-log replay --skip-bad prints the session "
                                "without it"), raw
        else:
            assert got == want, raw
    assert seen["cut"] > 150 and seen["entry"] > 40 and len(seen) > 5, seen


def _random_session(rng, cwd):
    """A valid session file: entries laid out compactly or not, blank lines, a tree."""
    out, ids = [header(cwd)], []
    for i in range(rng.randint(0, 80)):
        parent = rng.choice(ids) if ids and rng.random() < 0.2 else (ids[-1] if ids else None)
        eid = f"{i:08x}"
        role = rng.choice(["user", "assistant", "system"])
        if rng.random() < 0.1:
            e = {"type": rng.choice(["sessionInfo", "custom"]), "id": eid, "parentId": parent, "timestamp": "t",
                 "name": "n"}
        else:
            e = orjson.loads(msg(eid, parent, role, rng.choice(["hi", "é\u2028", "\\\"", "x" * 3000])))
        raw = orjson.dumps(e) if rng.random() < 0.7 else json.dumps(e).encode()
        out.append(raw + rng.choice([b"\n", b"\n", b"\r\n", b"\n\n"]))
        ids.append(eid)
    return b"".join(out), ids


def test_reading_agrees_with_parsing_every_line(tmp_path):
    rng = random.Random(29)
    for n in range(150):
        data, ids = _random_session(rng, tmp_path)
        p = write(tmp_path / f"{n}.jsonl", data)
        r = session.scan(p)
        want = [stream.parse_line(raw + b"\n") for raw in data.split(b"\n") if raw.strip()]
        assert [x.kind for x in want[:1]] == [stream.HEADER]
        assert list(r.ids) == [x.obj["id"] for x in want[1:]] == ids
        assert r.leaf == (ids[-1] if ids else None) and r.end == r.size == len(data)
        assert all(r.ids[x.obj["id"]][0] == x.obj["parentId"] for x in want[1:])


def test_a_line_read_already_is_taken_only_at_its_offset_with_its_bytes(tmp_path):
    """scan(known=...): the kept line of scan.last_timestamp stands in for a
    parse only where the file holds those very bytes; anything else (another
    offset, other bytes of the same length, a prefix) is parsed as usual."""
    from pantolib import scan as scan_

    data = header(tmp_path) + msg("00000001", None, "user", "hi") + msg("00000002", "00000001", "assistant", "x" * 5000)
    p = write(tmp_path / "s.jsonl", data)
    kept = []
    assert scan_.last_timestamp(p, kept) is not None
    (at, line, obj), = kept
    assert at == data.rindex(b"\n", 0, len(data) - 1) + 1 and data[at:] == line + b"\n"
    plain = session.scan(p)
    stand_in = dict(obj, id="99999999")
    for known, leaf in (((at, line, obj), "00000002"),                    # the real line: the same result
                        ((at, line, stand_in), "99999999"),               # proof that it is taken, not parsed
                        ((at - 1, line, stand_in), "00000002"),           # another offset
                        ((at, line[:-1] + b"!", stand_in), "00000002"),   # other bytes, same length
                        ((at, line[:-1], stand_in), "00000002")):         # a prefix of the line
        r = session.scan(p, known=known)
        assert (r.leaf, r.end, r.size) == (leaf, plain.end, plain.size)


def test_replay_last_prints_the_file_when_it_compared_tails(isolated):
    """replay --last between two sessions reads both tails to choose, and the
    chosen one's last line is not parsed again: the output is the file."""
    import subprocess

    cwd = str(isolated)
    written = []
    for sid, text, ts in ((SID, "y" * 3000, "2026-05-02T00:00:00.000Z"), (OTHER, "older", "2026-05-01T00:00:00.000Z")):
        data = header(cwd, sid) + msg("00000001", None, "user", "hi") + msg("00000002", "00000001", "assistant", text, ts=ts)
        folder = paths.session_dir(cwd)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        written.append(write(os.path.join(folder, sid + ".jsonl"), data))
    os.utime(written[0], (1, 1))     # older by mtime: only the last entries' times decide
    out = subprocess.run(["panto-log", "replay", "--last"], cwd=cwd, capture_output=True, check=True).stdout
    assert out == read(written[0])


# -- check_path -----------------------------------------------------------------------------------

def test_check_path_refuses_what_cannot_be_a_session_file(tmp_path):
    with pytest.raises(PantoError, match="no such session file"):
        session.check_path(str(tmp_path / "none.jsonl"))
    with pytest.raises(PantoError, match="is a directory"):
        session.check_path(str(tmp_path))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(PantoError, match="not a regular file"):
        session.check_path(str(tmp_path / "fifo"))
    session.check_path(write(tmp_path / "s.jsonl", session_bytes(tmp_path)))


# -- Writer: what ends up on disk ---------------------------------------------------------------------

def parsed(data, name="<stdin>"):
    return list(stream.read(io.BytesIO(data), name))


class Run:
    """A Writer fed a stream line by line, as panto-log append feeds it."""

    def __init__(self, path=None):
        self.warnings = []
        self.writer = session.Writer(path, warn=self.warnings.append)
        self.echoed = b""

    def feed(self, data):
        for line in parsed(data):
            self.writer.feed_batch([line], self.echo)
        return self

    def echo(self, b):
        self.echoed += b

    def end(self):
        self.echoed += self.writer.finish()
        self.writer.close()
        return self


def test_a_new_session_is_created_only_with_its_first_reply(isolated):
    path = paths.session_path(orjson.loads(header(isolated)))
    head, u = header(isolated), msg("0000aaaa", None, "user", "hi")
    run = Run().feed(head + u)
    assert run.echoed == b"" and not os.path.exists(os.path.dirname(path))   # deferred: nothing yet
    a = msg("0000bbbb", "0000aaaa", "assistant", "yo")
    run.feed(a)
    assert run.echoed == head + u + a                   # echoed once durable
    assert read(path) == head + u + a
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    u2 = msg("0001aaaa", "0000bbbb", "user", "more")
    run.feed(u2)
    assert run.echoed == head + u + a + u2 and read(path) == head + u + a + u2
    run.end()
    assert run.warnings == [] and read(path) == head + u + a + u2
    assert sorted(os.listdir(os.path.dirname(path))) == [SID + ".jsonl"]   # no temporary file left


def test_a_stream_with_no_reply_leaves_nothing_behind(isolated):
    data = header(isolated) + msg("0000aaaa", None, "user", "hi") + msg("0000aaab", "0000aaaa", "user", "again")
    run = Run().feed(data).end()
    assert run.echoed == data
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def test_appending_writes_only_what_the_file_lacks_byte_for_byte(tmp_path):
    old = session_bytes(tmp_path, turns=2)
    p = write(tmp_path / "s.jsonl", old)
    spaced = json.dumps(orjson.loads(msg("0002aaaa", "0001bbbb", "user", "new"))).encode() + b"\n"
    a = msg("0002bbbb", "0002aaaa", "assistant", "answer")
    run = Run(p).feed(old + spaced + a).end()
    assert read(p) == old + spaced + a                 # the line as it came, not reformatted
    assert run.echoed == old + spaced + a and run.warnings == []
    # replaying the session into it writes nothing
    run = Run(p).feed(read(p)).end()
    assert read(p) == old + spaced + a and run.echoed == old + spaced + a


def test_a_batch_is_echoed_once_after_its_last_line_is_written(tmp_path):
    old = session_bytes(tmp_path, turns=1)
    p = write(tmp_path / "s.jsonl", old)
    new = b"".join(msg(f"0001000{i}", "0000bbbb" if i == 0 else f"0001000{i - 1}", "user", f"n{i}") for i in range(3))
    calls = []
    w = session.Writer(p)
    w.feed_batch(parsed(old + new), lambda b: calls.append((b, read(p))))
    w.close()
    assert calls == [(old + new, old + new)]          # one echo, with every line already in the file


def test_a_bare_entry_is_completed_on_the_leaf_and_written_as_echoed(tmp_path):
    old = session_bytes(tmp_path, turns=1)
    p = write(tmp_path / "s.jsonl", old)
    run = Run(p).feed(old + bare("user", "typed by hand")).end()
    new = read(p)[len(old):]
    assert run.echoed == old + new
    e = orjson.loads(new)
    assert new == stream.dumps(e)
    assert list(e)[:4] == ["type", "id", "parentId", "timestamp"] and e["parentId"] == "0000bbbb"
    assert e["message"] == {"role": "user", "content": [{"type": "text", "text": "typed by hand"}]}
    assert e["id"] not in ("0000aaaa", "0000bbbb")
    # a headerless stream into FILE works the same
    run = Run(p).feed(bare("assistant", "second")).end()
    e2 = orjson.loads(read(p)[len(old) + len(new):])
    assert e2["parentId"] == e["id"] and run.echoed == stream.dumps(e2)


def test_appending_first_cuts_a_torn_tail(tmp_path):
    old = session_bytes(tmp_path, turns=1)
    p = write(tmp_path / "s.jsonl", old + b'{"type":"mess')
    u = msg("0001aaaa", "0000bbbb", "user", "after the crash")
    run = Run(p).feed(u).end()
    assert read(p) == old + u
    assert run.warnings == [f"{p}:4: cut a torn tail (13 bytes)"]


def test_appending_refuses_a_file_with_a_bad_line_and_writes_nothing(tmp_path):
    old = session_bytes(tmp_path, turns=1) + b"}{\n" + msg("0001aaaa", "0000bbbb", "user", "x")
    p = write(tmp_path / "s.jsonl", old)
    with pytest.raises(SessionError, match="not valid JSON"):
        Run(p).feed(msg("0001bbbb", "0001aaaa", "assistant", "y"))
    assert read(p) == old


def test_a_stream_of_another_session_is_refused(tmp_path):
    old = session_bytes(tmp_path)
    p = write(tmp_path / "s.jsonl", old)
    with pytest.raises(PantoError, match=f"the stream is session {OTHER} but .* is session {SID}: refusing"):
        Run(p).feed(header(tmp_path, sid=OTHER) + msg("0001aaaa", None, "user", "x"))
    assert read(p) == old


def test_a_headerless_stream_needs_a_file(isolated):
    with pytest.raises(PantoError, match="no session header"):
        Run().feed(msg("0000aaaa", None, "user", "x"))
    with pytest.raises(PantoError, match="does not exist and the stream has no session header"):
        Run(str(isolated / "none.jsonl")).feed(msg("0000aaaa", None, "user", "x"))
    assert not os.path.exists(isolated / "none.jsonl")


def test_an_entry_the_file_has_with_other_content_is_kept_as_the_file_has_it(tmp_path):
    old = session_bytes(tmp_path)
    p = write(tmp_path / "s.jsonl", old)
    changed = msg("0000aaaa", None, "user", "changed")
    run = Run(p).feed(changed).end()
    assert read(p) == old
    assert run.warnings == [f"entry 0000aaaa is already in '{p}' with different content; kept the file's"]
    # the same entry laid out otherwise is the same entry
    spaced = json.dumps(orjson.loads(msg("0000aaaa", None, "user", "question 0"))).encode() + b"\n"
    run = Run(p).feed(spaced).end()
    assert read(p) == old and run.warnings == []


# -- partial streams -------------------------------------------------------------------------------

def test_the_partial_header_rules():
    h = orjson.loads(header("/w"))
    assert not stream.is_partial(h) and stream.omitted_ids(h) == []
    line = stream.partial_header(h, ["0000aaaa", "0000bbbb"])
    assert line == orjson.dumps(h)[:-1] + b',"partial":{"omitted":["0000aaaa","0000bbbb"]}}\n'
    p = orjson.loads(line)
    assert stream.is_partial(p) and stream.omitted_ids(p) == ["0000aaaa", "0000bbbb"]
    assert stream.classify(p) == stream.HEADER
    assert stream.is_partial(dict(h, partial={})) and stream.omitted_ids(dict(h, partial={})) == []
    assert not stream.is_partial(dict(h, partial=None))
    assert stream.omitted_ids(dict(h, partial={"omitted": ["a", 1, None, "b"]})) == ["a", "b"]
    assert stream.omitted_ids(dict(h, partial={"omitted": "ab"})) == []
    assert stream.omitted_ids(dict(h, partial=["a"])) == []
    assert not stream.is_partial(None) and stream.omitted_ids(None) == []


def _partial_of(data, keep):
    """The partial stream of a session: its header marked, only the entries `keep`."""
    rows = data.split(b"\n")[:-1]
    h = orjson.loads(rows[0])
    entries = [orjson.loads(r) for r in rows[1:]]
    omitted = [e["id"] for e in entries if e["id"] not in keep]
    return stream.partial_header(h, omitted) + b"".join(r + b"\n" for r, e in zip(rows[1:], entries)
                                                       if e["id"] in keep)


def test_appending_a_partial_stream_writes_what_the_complete_one_writes(tmp_path):
    old = session_bytes(tmp_path, turns=3)
    new = msg("0003aaaa", "0002bbbb", "user", "new") + bare("assistant", "reply")
    whole, part = write(tmp_path / "whole.jsonl", old), write(tmp_path / "part.jsonl", old)
    a = Run(whole).feed(old + new).end()
    b = Run(part).feed(_partial_of(old, {"0002aaaa", "0002bbbb"}) + new).end()
    wrote_a, wrote_b = read(whole)[len(old):], read(part)[len(old):]
    assert read(whole)[:len(old)] == read(part)[:len(old)] == old
    assert wrote_a.split(b"\n")[0] == wrote_b.split(b"\n")[0] == new.split(b"\n")[0]
    ea, eb = orjson.loads(wrote_a.split(b"\n")[1]), orjson.loads(wrote_b.split(b"\n")[1])
    assert ea["parentId"] == eb["parentId"] == "0003aaaa" and ea["message"] == eb["message"]
    assert b'"partial"' not in read(part)              # a partial header never reaches a file
    assert b.echoed.startswith(b'{"type":"session"') and b'"partial"' in b.echoed.split(b"\n")[0]
    assert a.warnings == b.warnings == []


def test_a_bare_entry_in_a_partial_stream_never_takes_an_omitted_id(tmp_path):
    old = session_bytes(tmp_path, turns=1)
    p = write(tmp_path / "s.jsonl", old)
    for _ in range(30):
        Run(p).feed(_partial_of(read(p), set()) + bare("user", "x")).end()
    ids = [orjson.loads(r)["id"] for r in read(p).split(b"\n")[1:-1]]
    assert len(ids) == 32 and len(set(ids)) == 32


def test_a_partial_stream_never_creates_a_file(isolated):
    data = session_bytes(isolated, turns=1)
    part = _partial_of(data, {"0000bbbb"})
    with pytest.raises(PantoError, match="is only part of session .*nothing to create it from"):
        Run().feed(part + msg("0001aaaa", "0000bbbb", "user", "x"))
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def test_a_file_that_begins_with_a_partial_header_is_not_a_session(tmp_path):
    data = _partial_of(session_bytes(tmp_path, turns=1), {"0000bbbb"})
    p = write(tmp_path / "s.jsonl", data)
    with pytest.raises(SessionError) as e:
        recovered(p)
    assert e.value.line == 1 and e.value.message.startswith("a partial stream (panto-log replay --context)")
    assert read(p) == data


def test_a_batch_whose_new_file_another_writer_made_first_adds_what_it_lacks_durably(tmp_path):
    """session.Batch (import --all) meant to create a session file; another
    writer made it between: the entries it lacks are appended, written and
    synced by finish(), not left in a buffer."""
    path = str(tmp_path / "s.jsonl")
    lines = session_bytes(tmp_path, turns=3).splitlines(keepends=True)
    batch = session.Batch(path, orjson.loads(lines[0]), lines[0], sync_dir=False)
    for raw in lines[1:]:
        assert batch.add(raw, orjson.loads(raw))
    write(path, b"".join(lines[:3]))                 # the other writer: the header and the first turn
    assert batch.finish() == 4
    batch.close()
    assert read(path) == b"".join(lines)
