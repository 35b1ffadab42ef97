"""pantolib.tallies on its own: the token sums of real session files read
through cost-cache.json, which never changes a figure: a file alike is not
read, a grown one only where it grew, anything else read again."""
import os

import pytest

from builders import header, msg, settled
from pantolib import models_toml, persist, tallies
from pantolib.errors import SessionError

PRICES = models_toml.parse("[openai.gpt-4o]\ninput = 2.5\noutput = 10\n")
WHEN = "2026-04-25 "


def _turn(i, ts="2026-04-25T17:40:16.000Z", usage=None):
    return (msg(f"{i:04x}aaaa", None, "user", f"question {i}", ts=ts)
            + msg(f"{i:04x}bbbb", f"{i:04x}aaaa", "assistant", f"answer {i}", ts=ts, provider="openai",
                  model="gpt-4o", usage=usage or {"input": 10, "output": 5}))


def _session(path, turns=1):
    """A session file, settled: a cache entry made of it from now on is believed on identity."""
    path.write_bytes(header(path.parent) + b"".join(_turn(i) for i in range(turns)))
    return settled(str(path))


@pytest.fixture
def utc(local_zone):
    """Local days are UTC days."""
    local_zone("UTC")


def _tokens(file):
    """(turns, input, output) of a File's sums."""
    return tuple(map(sum, zip(*((r[5], r[6], r[7]) for r in file.sums)))) if file.sums else (0, 0, 0)


def test_key_is_the_absolute_path(tmp_path, isolated):
    assert tallies._key("/a/b.jsonl") == "/a/b.jsonl"
    assert tallies._key("/a//b.jsonl") == "/a/b.jsonl"
    assert tallies._key("/a/./b.jsonl") == "/a/b.jsonl"
    assert tallies._key("/a/../b.jsonl") == "/b.jsonl"
    assert tallies._key("s.jsonl") == os.path.join(str(isolated), "s.jsonl")


def test_file_notes():
    f = tallies.File("id", [], [[3, "not valid JSON"], [5, "no role"]], 9, None, None)
    assert f.notes("s.jsonl") == ["s.jsonl:3: not valid JSON; not counted", "s.jsonl:5: no role; not counted",
                                  "s.jsonl:9: the last line has no line feed (a torn write); ignored"]
    assert tallies.File("id", [], [], None, None, None).notes("s.jsonl") == []


def test_a_file_read_once_is_answered_from_the_cache(tmp_path):
    name = _session(tmp_path / "s.jsonl", turns=2)
    first = tallies.Files(PRICES)
    got = first.read(name, os.stat(name))
    assert _tokens(got) == (2, 20, 10) and got.header_id is not None
    assert got.created == "2026-04-25T17:40:15.990Z" and got.bad == [] and got.torn is None
    assert first.changed
    first.save()
    assert os.path.exists(persist.path(tallies.NAME))
    again = tallies.Files(PRICES)
    assert list(again.entries) == [name]
    hit = again.read(name, os.stat(name))
    assert (hit.sums, hit.header_id, hit.created) == (got.sums, got.header_id, got.created)
    assert again.changed is False   # nothing to store
    again.save()                    # and nothing written
    uncached = tallies.Files(PRICES, use=False)
    assert uncached.entries == {}
    assert uncached.read(name, os.stat(name)).sums == got.sums
    assert uncached.changed is False


def test_a_cache_of_other_thresholds_is_dropped(tmp_path):
    name = _session(tmp_path / "s.jsonl")
    files = tallies.Files(PRICES)
    files.read(name, os.stat(name))
    files.save()
    tiered = models_toml.parse("[openai.gpt-4o]\ninput = 2.5\noutput = 10\nabove_tokens = 5\ninput_above = 5\n")
    assert tallies.Files(tiered).entries == {}
    assert list(tallies.Files(PRICES).entries) == [name]


def test_save_forgets_files_that_are_gone(tmp_path):
    kept, gone = _session(tmp_path / "kept.jsonl"), _session(tmp_path / "gone.jsonl")
    files = tallies.Files(PRICES)
    for name in (kept, gone):
        files.read(name, os.stat(name))
    files.save()
    os.unlink(gone)
    later = tallies.Files(PRICES)
    later.read(kept, os.stat(kept))
    _session(tmp_path / "kept.jsonl", turns=3)   # rewritten: read again, so the cache changes
    assert _tokens(later.read(kept, os.stat(kept))) == (3, 30, 15)
    later.save()
    assert list(tallies.Files(PRICES).entries) == [kept]


def test_a_small_file_keeps_no_covered_range_and_is_read_again_whole_when_it_grows(tmp_path):
    name = _session(tmp_path / "s.jsonl")
    files = tallies.Files(PRICES)
    files.read(name, os.stat(name))
    assert files.entries[name][1:3] == [0, 0] and os.path.getsize(name) < tallies.CRC_FROM
    with open(name, "ab") as f:
        f.write(_turn(7, usage={"input": 1000, "output": 1}))
    assert files._uncovered(name, os.stat(name), None) == os.path.getsize(name)   # the whole file
    assert _tokens(files.read(name, os.stat(name))) == (2, 1010, 6)
    assert files.entries[name][1] == 0


def test_a_grown_file_is_read_from_where_it_was_covered(tmp_path, monkeypatch):
    monkeypatch.setattr(tallies, "CRC_FROM", 1)      # small files keep a covered range too
    path = tmp_path / "s.jsonl"
    name = _session(path)
    files = tallies.Files(PRICES)
    files.read(name, os.stat(name))
    covered = files.entries[name][1]
    assert covered == os.path.getsize(name)
    with open(name, "ab") as f:
        f.write(_turn(7, usage={"input": 1000, "output": 1}))
    grown = files.read(name, os.stat(name))
    assert _tokens(grown) == (2, 1010, 6)
    assert files.entries[name][1] == os.path.getsize(name) > covered


def test_sums_in_the_cache_that_make_no_sense_are_read_again(tmp_path):
    name = _session(tmp_path / "s.jsonl")
    files = tallies.Files(PRICES)
    files.read(name, os.stat(name))
    with open(name, "ab") as f:
        f.write(_turn(7, usage={"input": 1000, "output": 1}))
    files.entries[name][9] = [["openai", "gpt-4o", None, False, 3, -1, 0, 0, 0, 0, 0, 0, 0]]
    assert _tokens(files.read(name, os.stat(name))) == (2, 1010, 6)   # from the first byte: nothing lost


@pytest.mark.parametrize("junk", ["junk", [1, 2, 3], None])
def test_a_cache_entry_that_makes_no_sense_is_ignored(tmp_path, junk):
    name = _session(tmp_path / "s.jsonl", turns=2)
    files = tallies.Files(PRICES)
    files.entries[name] = junk
    assert _tokens(files.read(name, os.stat(name))) == (2, 20, 10)
    assert type(files.entries[name]) is list and len(files.entries[name]) == tallies._LEN


def test_a_file_that_changed_after_its_stat_is_read_as_it_is_now(tmp_path):
    name = _session(tmp_path / "s.jsonl")
    files = tallies.Files(PRICES)
    st = os.stat(name)
    with open(name, "ab") as f:
        f.write(_turn(7))
    assert _tokens(files.read(name, st)) == (2, 20, 10)
    now = os.stat(name)
    assert files.entries[name][0] == [now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns, now.st_ctime_ns]


def test_a_refused_file_is_refused_again_from_the_cache(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'not json\n' + _turn(1))
    files = tallies.Files(PRICES)
    with pytest.raises(SessionError) as first:
        files.read(str(bad), os.stat(bad))
    assert files.entries[str(bad)][10] == [first.value.message, first.value.line]
    with pytest.raises(SessionError) as again:
        files.read(str(bad), os.stat(bad))
    assert (again.value.message, again.value.line) == (first.value.message, first.value.line)


def test_job_reads_one_file_as_read_would(tmp_path):
    """What a worker sends back: the fields of read()'s File (plain values, which marshal takes), the error, the cache entry."""
    name = _session(tmp_path / "s.jsonl", turns=2)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'not json\n')
    files = tallies.Files(PRICES)
    got, error, entry = files._job((name, os.stat(name), name), None)
    assert error is None and _tokens(tallies.File(*got)) == (2, 20, 10) and entry == files.entries[name]
    got, error, entry = files._job((str(bad), os.stat(bad), str(bad)), None)
    assert got is None and isinstance(error, SessionError) and entry[10] == [error.message, error.line]
    missing = str(tmp_path / "missing.jsonl")
    got, error, entry = files._job((missing, os.stat(name), missing), None)
    assert got is None and isinstance(error, FileNotFoundError) and entry is None
    assert files._job((name, os.stat(name), name), None)[2] is None   # answered from the cache: nothing new


def test_read_ahead_with_one_process_reads_nothing_ahead(tmp_path, monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "1")
    name = _session(tmp_path / "s.jsonl")
    files = tallies.Files(PRICES)
    files.read_ahead([(name, os.stat(name)), (name, os.stat(name)), (str(tmp_path / ".." / tmp_path.name / "s.jsonl"),
                                                                      os.stat(name))])
    assert files._ready == {} and files.entries == {}
    assert files._uncovered(name, os.stat(name), None) == os.path.getsize(name)
    files.read(name, os.stat(name))
    assert files._uncovered(name, os.stat(name), None) is None
    # with a span the cache cannot answer before the last time is known; nothing is left to read though
    assert files._uncovered(name, os.stat(name), ("2026-01-01", None)) == 0


def test_read_ahead_in_workers_hands_out_what_they_found(tmp_path, monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "2")
    names = [_session(tmp_path / f"s{i}.jsonl", turns=i + 1) for i in range(3)]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'not json\n')
    todo = [(n, os.stat(n)) for n in names + [str(bad)]]
    files = tallies.Files(PRICES)
    files.read_ahead(todo)      # the answers are taken as read() asks for each file, in order
    assert set(files._waiting) == set(names + [str(bad)]) and files._ready == {} and files.entries == {}
    assert _tokens(files.read(*todo[0])) == (1, 10, 5)
    assert set(files._waiting) == set(names[1:] + [str(bad)])
    assert [_tokens(files.read(n, st)) for n, st in todo[1:3]] == [(2, 20, 10), (3, 30, 15)]
    with pytest.raises(SessionError):
        files.read(*todo[3])
    assert files._waiting == {} and files._ready == {} and set(files.entries) == set(names + [str(bad)])
    files.close()


@pytest.mark.parametrize("span, inside", [
    ((None, None), True), (("2026-04-25", None), True), (("2026-04-26", None), False),
    ((None, "2026-04-25"), True), ((None, "2026-04-24"), False),
])
def test_a_span_leaves_out_files_outside_it(tmp_path, utc, span, inside):
    name = _session(tmp_path / "s.jsonl")
    files = tallies.Files(PRICES)
    got = files.read(name, os.stat(name), span)
    assert (got is not None) is inside
    again = tallies.Files(PRICES)
    again.entries = files.entries
    got = again.read(name, os.stat(name), span)
    assert (got is not None) is inside and files.entries[name][6] == "2026-04-25T17:40:16.000Z"


def test_what_a_span_learns_is_kept_in_the_cache(tmp_path, utc):
    name = _session(tmp_path / "s.jsonl", turns=2)
    files = tallies.Files(PRICES)
    assert _tokens(files.read(name, os.stat(name))) == (2, 20, 10)
    assert files.entries[name][6] is False            # the last time not looked for
    files.changed = False
    assert files.read(name, os.stat(name), ("2026-05-01", None)) is None
    assert files.entries[name][6] == "2026-04-25T17:40:16.000Z" and files.changed
    assert files.entries[name][9] is not None          # the sums stay
    later = tallies.Files(PRICES)
    later.read(name, os.stat(name))
    assert _tokens(later.read(name, os.stat(name), ("2026-04-01", "2026-04-30"))) == (2, 20, 10)
    assert later.entries[name][6] == "2026-04-25T17:40:16.000Z"

    other = _session(tmp_path / "o.jsonl", turns=3)
    first = tallies.Files(PRICES)
    assert first.read(other, os.stat(other), (None, "2026-04-01")) is None
    assert first.entries[other][9] is None             # outside: no sums read
    assert _tokens(first.read(other, os.stat(other), ("2026-04-25", None))) == (3, 30, 15)
    assert first.entries[other][9] is not None


def test_outside():
    assert tallies._outside((None, None), "2026-04-25T00:00:00Z", "2026-04-26T00:00:00Z") is False
    assert tallies._outside(("2026-05-01", None), None, "not a time") is False
    assert tallies._outside((None, "2026-01-01"), "not a time", None) is False


def test_the_lineage_of_a_file_is_kept_in_the_cache_and_survives_growth(tmp_path):
    """agent, parentSession and relation of the header (stream.lineage): read once, then
    answered from the cache, kept when the file grows, and a cached one that makes
    no sense is read again."""
    import orjson

    path = tmp_path / "s.jsonl"
    head = orjson.loads(header(tmp_path))
    head.update(source={"agent": "codex", "path": "/x", "id": "y"}, parentSession="p-1", relation="subagent")
    path.write_bytes(orjson.dumps(head) + b"\n" + _turn(0))
    name = settled(str(path))      # so the entry below is believed on identity
    first = tallies.Files(PRICES)
    assert first.read(name, os.stat(name)).lineage == ("codex", "p-1", "subagent")
    first.save()
    again = tallies.Files(PRICES)
    assert again.read(name, os.stat(name)).lineage == ("codex", "p-1", "subagent") and not again.changed
    with open(name, "ab") as f:
        f.write(_turn(1))
    grown = tallies.Files(PRICES)
    got = grown.read(name, os.stat(name))
    assert got.lineage == ("codex", "p-1", "subagent") and _tokens(got) == (2, 20, 10)
    grown.entries[name][12] = ["codex", 5, None]
    assert grown.read(name, os.stat(name)).lineage == ("codex", "p-1", "subagent")
    plain = _session(tmp_path / "plain.jsonl")
    assert tallies.Files(PRICES).read(plain, os.stat(plain)).lineage == ("panto", None, None)


def test_sums_moved_by_copies_billed_elsewhere_are_those_of_the_session_counted_again(utc):
    """An import writes a copy of a response paid in another session without
    its usage (billedIn), and moves the session's token sums rather than
    counting every entry again: the rows are rows_of's, in another order."""
    import random

    import orjson

    from pantolib import importing

    prices = models_toml.parse("[openai.gpt-4o]\ninput = 2.5\noutput = 10\nabove_tokens = 200\n"
                               "input_above = 5\noutput_above = 15\n[anthropic.claude-x]\ninput = 3\noutput = 15\n")
    rnd = random.Random(5)
    for _ in range(200):
        entries = []
        for i in range(rnd.randint(1, 12)):
            provider, model = rnd.choice([("openai", "gpt-4o"), ("anthropic", "claude-x"), ("anthropic", "other")])
            usage = {"input": rnd.choice([0, 50, 300]), "output": rnd.randint(0, 9), "cacheRead": rnd.choice([0, 7])}
            raw = msg(f"{i:04x}bbbb", None, "assistant", "a", ts=f"2026-04-{rnd.randint(20, 26)}T0{rnd.randint(0, 9)}"
                      ":15:00.000Z", provider=provider, model=model, usage=usage)
            entries.append(orjson.loads(raw))
        rows = tallies.rows_of(prices, entries)
        billed = rnd.sample(range(len(entries)), rnd.randint(1, len(entries)))
        was = [orjson.loads(orjson.dumps(entries[k])) for k in billed]
        now = [importing._billed_in(entries[k], "0199aaaa-0000-7000-8000-000000000000") for k in billed]
        got = tallies.moved(prices, rows, was, now)
        assert sorted(map(repr, got)) == sorted(map(repr, tallies.rows_of(prices, entries)))
