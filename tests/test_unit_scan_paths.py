"""pantolib.scan's less travelled paths, on real files and streams: the
priced-entries scanner on streams without a header, blank first lines,
bad lines and torn tails; the last timestamp when the tail has none; the
first prompt past user entries without text; the byte rule of a line."""
import io
import os
import random

import orjson
import pytest

from builders import header, msg
from pantolib import scan
from pantolib.errors import SessionError

USAGE = {"input": 10, "output": 5}


def _assistant(eid, ts="2026-04-25T17:40:16.000Z", **extra):
    return msg(eid, None, "assistant", "answer", ts=ts, provider="openai", model="gpt-4o", usage=USAGE, **extra)


def _priced(data, stream=False, reader=None, name="s.jsonl"):
    f = reader(data) if reader else io.BytesIO(data)
    p = scan.PricedEntries(f, name, stream=stream)
    return p, [e.get("id") for e in p]


class _ReadOnly:
    """A stream with nothing but read(): it cannot say whether it seeks."""

    def __init__(self, data):
        self.read = io.BytesIO(data).read


def test_priced_entries_of_a_file(tmp_path):
    path = tmp_path / "s.jsonl"
    compaction = orjson.dumps({"type": "compaction", "id": "c1", "parentId": None, "timestamp": "2026-04-25T18:00:00.000Z",
                               "summary": "s", "firstKeptId": None, "provider": "openai", "model": "gpt-4o",
                               "usage": USAGE}) + b"\n"
    path.write_bytes(header("/w") + msg("u1", None, "user", "hi") + _assistant("a1") + b"\n"
                     + b'{"role":"assistant", not json\n'
                     + header("/w")[:-1].replace(b'"session"', b'"session","x":"assistant"') + b"\n"
                     + msg("u2", None, "user", "say \"assistant\"") + compaction
                     + msg("u3", None, "user", "hi", stamp=False, provider="assistant")
                     + b'{"type":"message","id":"a9","message":{"role":"assistant"}}\n'
                     + _assistant("a2") + _assistant("a3")[:-1])
    with open(path, "rb") as f:
        p = scan.PricedEntries(f, str(path))
        assert [e["id"] for e in p] == ["a1", "c1", "a2"]
    assert p.header["type"] == "session" and p.started
    assert p.bad == [(5, "not valid JSON"), (6, "a session header after the first line"), (10, "entry 'timestamp' is missing")]
    assert p.torn == 12
    assert p.notes[-1] == f"{path}:12: the last line has no line feed (a torn write); ignored"
    assert p.notes[0] == f"{path}:5: not valid JSON; not counted"
    assert p.covered == len(path.read_bytes()) - len(_assistant("a3")[:-1])


def test_a_stream_counts_its_unterminated_last_line():
    data = header("/w") + _assistant("a1") + _assistant("a2")[:-1]
    assert _priced(data, stream=True)[1] == ["a1", "a2"]
    p, ids = _priced(data)
    assert ids == ["a1"] and p.torn == 3
    assert _priced(data + b"\n\n  \n", stream=True)[1] == ["a1", "a2"]


@pytest.mark.parametrize("reader", [None, _ReadOnly])   # BytesIO has no descriptor; _ReadOnly cannot seek
def test_line_numbers_of_streams_that_have_no_file(reader):
    data = header("/w") + b"\n" + b'{"x":"assistant"\n' + _assistant("a1") + b'["assistant"]\n'
    p, ids = _priced(data, reader=reader)
    assert ids == ["a1"]
    assert [n for n, _ in p.bad] == [3, 5]


def test_a_stream_without_header_starting_with_blank_lines():
    p, ids = _priced(b"\n   \n" + _assistant("a1") + _assistant("a2"))
    assert ids == ["a1", "a2"] and p.header is None
    p, ids = _priced(b"\n\n" + msg("u1", None, "user", "hi") + _assistant("a1"))
    assert ids == ["a1"] and p.header is None
    p, ids = _priced(b"\n \n\t\n")
    assert ids == [] and p.header is None and not p.started
    p, ids = _priced(b"")
    assert ids == [] and p.torn is None


@pytest.mark.parametrize("first, why, line", [
    (b"not json\n", "not valid JSON", 1),
    (b"\n\n[1, 2]\n", "not a JSON object", 3),
])
def test_a_first_line_that_is_no_session_is_refused(first, why, line):
    with pytest.raises(SessionError) as e:
        _priced(first + _assistant("a1"))
    assert e.value.line == line and why in e.value.message and e.value.file == "s.jsonl"


def test_a_first_line_that_is_not_valid_says_why():
    with pytest.raises(SessionError) as e:
        _priced(b'{"type":"message"}\n')
    assert e.value.message.startswith("not a panto session or stream (") and e.value.line == 1


def test_resuming_a_file_read_before(tmp_path):
    path = tmp_path / "s.jsonl"
    first = header("/w") + _assistant("a1")
    path.write_bytes(first + _assistant("a2") + b"junk\n")
    with open(path, "rb") as f:
        f.seek(len(first))
        p = scan.PricedEntries(f, str(path), start=len(first), started=True)
        assert [e["id"] for e in p] == ["a2"]
    assert p.covered == len(path.read_bytes()) and p.header is None and p.bad == []


def test_priced_predicate():
    assert scan.priced(orjson.loads(header("/w"))) is False
    assert scan.priced(orjson.loads(_assistant("a1"))) is True
    assert scan.priced(orjson.loads(msg("u1", None, "user", "hi"))) is False
    with pytest.raises(ValueError):
        scan.priced({"type": "message"})


@pytest.mark.parametrize("raw, role", [
    (msg("u1", None, "user", "hi")[:-1], "user"),
    (msg("u1", "p", "assistant", "hi")[:-1], "assistant"),
    (msg("u1", None, "system", "hi", stamp=False)[:-1], "system"),
    (b'{"type":"sessionInfo","id":"x","name":"n"}', ""),
    (b'{"type":"compaction","id":"x"}', ""),
    (b'{"type": "message"}', None),
    (b'{"id":"x","type":"message"}', None),
    (b"", None),
])
def test_line_role(raw, role):
    assert scan.line_role(raw) == role


@pytest.mark.parametrize("iso, seconds", [
    ("2026-04-25T00:00:00Z", 1777075200.0), ("2026-04-25T00:00:00", 1777075200.0),
    ("2026-04-25T02:00:00+02:00", 1777075200.0), ("2026-04-25", 1777075200.0),
    ("2026-04", None), (None, None), (1777075200, None), ("not a date", None),
])
def test_epoch(iso, seconds):
    assert scan.epoch(iso) == seconds


def test_role_of_and_kind():
    assert scan.role_of(orjson.loads(msg("u1", None, "user", "hi"))) == "user"
    assert scan.role_of({"type": "sessionInfo", "id": "x", "parentId": None, "timestamp": "t", "name": "n"}) is None
    assert scan.role_of(orjson.loads(header("/w"))) is None
    assert scan.role_of({"type": "message"}) is None and scan.kind(None) is None


def test_chunks_carry_a_line_longer_than_a_read(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a" * 50 + b"\n" + b"b" * 10 + b"\nc" + b"torn")
    with open(path, "rb") as f:
        got = [buf[:end] for buf, end in scan.chunks(f, size=8)]
    assert [line for piece in got for line in piece.split(b"\n") if line] == [b"a" * 50, b"b" * 10]
    assert all(piece.endswith(b"\n") for piece in got)


def _entry(i, ts):
    return orjson.dumps({"type": "message", "id": f"e{i}", "parentId": None, "timestamp": ts,
                         "message": {"role": "user", "content": []}}) + b"\n"


def test_last_timestamp_when_the_tail_has_none(tmp_path):
    path = tmp_path / "s.jsonl"
    good = "2026-04-25T17:40:16.000Z"
    path.write_bytes(header("/w") + _entry(0, good) + b"".join(_entry(i, "yesterday") for i in range(1, 70)))
    assert scan.last_timestamp(str(path)) is None           # 64 lines back and none: given up
    path.write_bytes(header("/w") + _entry(0, good) + b"".join(_entry(i, "yesterday") for i in range(1, 60)))
    assert scan.last_timestamp(str(path)) == good
    path.write_bytes(header("/w") + b"".join(_entry(i, "yesterday") for i in range(1, 10)))
    assert scan.last_timestamp(str(path)) is None           # back to the header
    path.write_bytes(b"".join(_entry(i, "yesterday") for i in range(1, 10)))
    assert scan.last_timestamp(str(path)) is None           # the whole file and none
    path.write_bytes(b"")
    assert scan.last_timestamp(str(path)) is None
    long = "x" * 10_000
    path.write_bytes(_entry(0, good) + b"".join(_entry(i, "yesterday" + long) for i in range(1, 8)))
    assert scan.last_timestamp(str(path)) == good           # read back in growing steps


def test_last_in_a_buffer():
    good = "2026-04-25T17:40:16.000Z"
    buf = header("/w") + _entry(0, good) + _entry(1, "bad")
    assert scan._last_in(buf, len(buf)) == (True, good)
    assert scan._last_in(b"", 0) == (False, None)
    only = _entry(1, "bad") + _entry(2, "bad")
    assert scan._last_in(only, len(only)) == (False, None)   # the buffer began mid-file: not decided
    head = header("/w") + _entry(1, "bad")
    assert scan._last_in(head, len(head)) == (True, None)
    many = _entry(0, good) + b"".join(_entry(i, "bad") for i in range(1, 70))
    assert scan._last_in(many, len(many)) == (True, None)     # 64 lines back: given up


def test_summarize_a_file_whose_tail_has_no_time(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(header("/w") + msg("u1", None, "user", "hi") + _entry(2, "bad") + _entry(3, "bad"))
    s = scan.summarize(str(path))
    assert (s.messages, s.prompt, s.last) == (3, "hi", "2026-04-25T17:40:16.000Z")


def test_the_first_prompt_is_the_first_user_text(tmp_path):
    path = tmp_path / "s.jsonl"
    image = orjson.dumps({"type": "message", "id": "u1", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
                          "message": {"role": "user", "content": [{"type": "image", "data": "x",
                                                                   "mimeType": "image/png"}]}}) + b"\n"
    path.write_bytes(header("/w") + image + msg("u2", "u1", "user", "the question") + msg("u3", "u2", "user", "later"))
    assert scan.summarize(str(path)).prompt == "the question"
    path.write_bytes(header("/w") + image)
    s = scan.summarize(str(path))
    assert (s.messages, s.prompt) == (1, None)
    buf = image[:-1]      # a line without its line feed at the end of a buffer
    assert scan._first_prompt(buf, len(buf)) is None


def test_summarize_refuses_what_is_no_whole_session(tmp_path):
    path = tmp_path / "s.jsonl"
    for data, why in [(b"", "not a panto session (empty file)"), (b"{}\n", "not a panto session"),
                      (header("/w")[:-2] + b',"partial":{"omitted":[]}}\n',
                       "a partial stream (panto-log replay --context), not a whole session")]:
        path.write_bytes(data)
        with pytest.raises(scan.NotASession) as e:
            scan.summarize(str(path))
        assert str(e.value) == why


def test_activity():
    assert scan.activity("2026-04-25T00:00:00Z", 5 * 10**9) == 1777075200.0
    assert scan.activity("bad", 5 * 10**9) == 5.0
    assert scan.activity(None, 1_500_000_000) == 1.5


def test_searcher_agrees_with_find():
    memmem = scan.memmem()
    if memmem is None:
        pytest.skip("no memmem in this C library")
    buf = b"abc needle xyz needle" * 3
    find = scan.searcher(memmem, buf, len(buf) - 5)
    for needle, start, stop in [(b"needle", 0, 30), (b"needle", 5, 30), (b"zzz", 0, 30), (b"needle", 10, 10),
                                (b"needle", 40, len(buf)), (b"abc", 0, len(buf) - 5)]:
        assert find(needle, start, stop) == (-1 if start >= stop else buf.find(needle, start, stop))


def test_priced_entries_of_a_large_file_in_small_reads(tmp_path):
    path = tmp_path / "s.jsonl"
    turns = [_assistant(f"a{i:04d}") for i in range(200)]      # past FAST_FROM: searched with memmem
    long = _assistant("long", content=[{"type": "text", "text": "x" * 5000}])
    path.write_bytes(header("/w") + b"".join(turns) + long + msg("u1", None, "user", "bye"))
    for chunk in (scan.CHUNK, 1000):   # lines longer than a read are gathered
        with open(path, "rb") as f:
            p = scan.PricedEntries(f, str(path), chunk=chunk)
            assert [e["id"] for e in p] == [f"a{i:04d}" for i in range(200)] + ["long"]
        assert p.bad == [] and p.torn is None and p.notes == []
        assert p.covered == os.path.getsize(path)


def test_summarize_a_file_larger_than_a_read_whose_last_read_has_no_time(tmp_path):
    path = tmp_path / "s.jsonl"
    good = "2026-04-25T17:40:16.000Z"
    huge = orjson.dumps({"type": "message", "id": "u2", "parentId": "u1", "timestamp": "bad",
                         "message": {"role": "user", "content": [{"type": "text", "text": "x" * scan.CHUNK}]}}) + b"\n"
    path.write_bytes(header("/w") + msg("u1", None, "user", "first", ts=good) + huge + _entry(3, "bad"))
    s = scan.summarize(str(path))
    assert (s.messages, s.prompt, s.last) == (3, "first", good)


def _last_timestamp_by_the_rule(data):
    """The full rule, on the whole file at once: the last TAIL_LINES complete lines, newest first."""
    for raw in reversed(data.split(b"\n")[:-1][-scan.TAIL_LINES:]):
        obj = scan.stream.loads(raw)
        k = scan.kind(obj)
        if k == scan.stream.HEADER:
            return None
        if k == scan.stream.ENTRY and scan.epoch(obj["timestamp"]) is not None:
            return obj["timestamp"]
    return None


def test_last_timestamp_read_back_agrees_with_the_rule_on_random_files(tmp_path):
    """Read back from the end in growing steps (4 KB, doubling), it decides
    as the rule does on the whole file: lines across step edges, blank and
    hostile lines, a header anywhere, torn tails, 60-70 undecided lines."""
    from hostile_lines import TORN, random_line

    rng = random.Random(30)
    torn = [v for v in TORN.values() if v is not None and len(v) < 10_000]
    path = tmp_path / "s.jsonl"
    seen = set()
    for _ in range(300):
        lines = [header("/w")] if rng.random() < 0.8 else []
        for i in range(rng.choice([0, 1, 3, 20, 63, 64, 65, 70])):
            r = rng.random()
            if r < 0.5:
                lines.append(random_line(rng) + b"\n")
            elif r < 0.7:
                stamp = rng.choice(["yesterday", "2026-04-25T17:40:16.000Z"])
                lines.append(_entry(i, stamp + "x" * rng.choice([0, 0, 100, 3000, 5000, 9000])))
            elif r < 0.8:
                lines.append(rng.choice([b"\n", b"  \n", header("/w")]))
            else:
                lines.append(rng.choice(torn))
        tail = rng.choice([b"", b"", b'{"type":"message","id":"torn"', _entry(99, "2026-04-25T17:40:16.000Z")[:-1]])
        data = b"".join(lines) + tail
        path.write_bytes(data)
        want = _last_timestamp_by_the_rule(data)
        assert scan.last_timestamp(str(path)) == want, data[-300:]
        seen.add(want is None)
    assert seen == {True, False}
