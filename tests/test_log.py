"""panto-log append / replay: the session file rules (SPEC §2-4), through the real command."""
import fcntl
import os
import re
import select
import signal
import stat
import subprocess
import time

import orjson
import pytest

from builders import (OTHER, SID, bare, compacted_session, compaction, header, msg, read, session_bytes,
                      session_file, split_lines)
from conftest import assert_clean_error, log, run
from procs import wait_reading
from pantolib import entries, paths

ID8 = re.compile(rb"^[0-9a-f]{8}$")
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def ok(proc):
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    return proc


# -- format core: ids, timestamps, key order, paths --------------------------------

def test_uuid7_ids_are_version_7_and_time_ordered():
    ids = [entries.uuid7() for _ in range(50)]
    for i in ids:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", i), i
    assert len(set(ids)) == 50
    ms = int(ids[0].replace("-", "")[:12], 16)
    assert abs(ms - time.time() * 1000) < 5000
    assert entries.uuid7()[:13] >= ids[-1][:13]


def test_entry_ids_are_8_hex_and_collision_checked():
    taken = set()
    got = [entries.new_id(taken) for _ in range(2000)]
    assert len(set(got)) == 2000 and taken == set(got)
    assert all(ID8.match(i.encode()) for i in got)

    class FirstThreeTaken(set):     # the first three ids drawn collide with ids already taken
        def __init__(self):
            super().__init__()
            self.asked = []

        def __contains__(self, item):
            self.asked.append(item)
            return len(self.asked) <= 3 or set.__contains__(self, item)

    taken = FirstThreeTaken()
    i = entries.new_id(taken)
    assert len(taken.asked) == 4 and i == taken.asked[3] and i not in taken.asked[:3]
    assert ID8.match(i.encode()) and set(taken) == {i}


def test_entry_id_falls_back_to_a_longer_id_when_every_short_one_is_taken():
    class Everything(set):
        def __contains__(self, item):
            return len(item) == 8
    taken = Everything()
    i = entries.new_id(taken)
    assert len(i) > 8 and re.fullmatch("[0-9a-f]+", i)


def test_timestamps_are_utc_with_milliseconds():
    ts = entries.now_iso()
    assert TS.match(ts), ts
    assert len(ts) == 24


def test_header_and_message_key_order():
    h = entries.make_header("/p")
    assert list(h) == ["type", "version", "id", "timestamp", "cwd"]
    assert h["version"] == 1 and h["type"] == "session"
    m = entries.make_message("user", [entries.text("hi")], None, set(), provider="openai", model="gpt-4o")
    assert list(m) == ["type", "id", "parentId", "timestamp", "provider", "model", "message"]
    assert list(m["message"]) == ["role", "content"]
    s = entries.make_message("system", [entries.text("be brief")], m["id"], set())
    assert "provider" not in s and "model" not in s and s["parentId"] == m["id"]


def test_usage_writes_input_and_output_and_omits_zero_extras():
    assert list(entries.usage_dict(10, 5)) == ["input", "output"]
    u = entries.usage_dict(1, 2, cache_read=3, cache_write=4, reasoning=1, cache_write_1h=2)
    assert u == {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "reasoning": 1, "cacheWrite1h": 2}
    got = entries.usage_of({"usage": {"input": -3, "output": "7", "cacheRead": 4.5, "cacheWrite": 8}})
    assert got["input"] == 0 and got["output"] == 0 and got["cacheRead"] == 0 and got["cacheWrite"] == 8
    assert entries.usage_of({"role": "assistant"}) is None


@pytest.mark.parametrize("cwd, encoded", [
    ("/Users/t/Code/p", "--Users-t-Code-p--"),
    ("/a-b/c", "--a-b-c--"),
    ("/a/b-c", "--a-b-c--"),
    ("//srv/x", "--srv-x--"),
    ("C:\\Users\\t", "--C--Users-t--"),
    ("/", "----"),
])
def test_cwd_encoding(cwd, encoded):
    assert paths.encode_cwd(cwd) == encoded


def _where(tmp_path, env_changes):
    env = dict(os.environ)
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    cwd = "/a-b/c"
    data = session_bytes(cwd)
    ok(log("append", input=data, env=env))
    found = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".jsonl")]
    assert len(found) == 1, found
    assert read(found[0]) == data
    return found[0]


def test_session_dir_prefers_panto_session_dir(tmp_path):
    p = _where(tmp_path, {"PANTO_SESSION_DIR": str(tmp_path / "psd")})
    assert p == str(tmp_path / "psd" / "--a-b-c--" / (SID + ".jsonl"))


def test_session_dir_then_xdg_data_home(tmp_path):
    p = _where(tmp_path, {"PANTO_SESSION_DIR": None, "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert p == str(tmp_path / "xdg" / "panto" / "sessions" / "--a-b-c--" / (SID + ".jsonl"))


def test_session_dir_then_home(tmp_path):
    p = _where(tmp_path, {"PANTO_SESSION_DIR": None, "XDG_DATA_HOME": None, "HOME": str(tmp_path / "h")})
    assert p == str(tmp_path / "h" / ".local" / "share" / "panto" / "sessions" / "--a-b-c--" / (SID + ".jsonl"))


# -- append: deferred creation ---------------------------------------------------------

def test_nothing_on_disk_until_the_first_assistant_entry(isolated, sessions):
    data = header(isolated) + msg("00000001", None, "system", "be brief") + msg("00000002", "00000001", "user", "hi")
    p = ok(log("append", input=data))
    assert p.stdout == data                      # the lines still go downstream
    assert not os.path.exists(sessions)          # no file, no directory
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def test_empty_stream_writes_nothing(isolated):
    p = ok(log("append"))
    assert p.stdout == b""
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def test_first_assistant_entry_creates_the_whole_file(isolated, sessions):
    data = session_bytes(isolated, turns=2)
    p = ok(log("append", input=data))
    assert p.stdout == data
    f = os.path.join(sessions, SID + ".jsonl")
    assert read(f) == data
    assert os.listdir(sessions) == [SID + ".jsonl"]   # no temporary file left behind


def test_file_appears_whole_when_the_assistant_arrives(isolated, sessions):
    """Feed line by line: before the assistant no file; right after its echo, all of it."""
    f = os.path.join(sessions, SID + ".jsonl")
    first = header(isolated) + msg("00000001", None, "user", "hi")
    asst = msg("00000002", "00000001", "assistant", "hello")
    later = msg("00000003", "00000002", "user", "more")
    with Appender() as a:
        a.send(first)
        wait_reading(a.p)       # it has read the lines and waits for more
        a.pump(0)
        assert not os.path.exists(f) and a.echoed == b""
        a.send(asst)
        a.wait_for(first + asst)
        assert read(f) == first + asst
        a.send(later)
        a.wait_for(first + asst + later)
        assert read(f) == first + asst + later


def test_files_0600_directories_0700(isolated, sessions):
    os.umask(0o022)
    ok(log("append", input=session_bytes(isolated)))
    f = os.path.join(sessions, SID + ".jsonl")
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sessions).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.environ["PANTO_SESSION_DIR"]).st_mode) == 0o700


# -- append: durable echo ----------------------------------------------------------

class Appender:
    """A running `panto-log append` fed line by line, its echo read as it comes."""

    def __init__(self, *args, env=None):
        import shutil
        self.p = subprocess.Popen([shutil.which("panto-log"), "append", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        os.set_blocking(self.p.stdout.fileno(), False)
        self.echoed = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except OSError:
                pass

    def send(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def pump(self, timeout=0.05):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if r:
            chunk = self.p.stdout.read()
            if chunk:
                self.echoed += chunk
            return chunk
        return None

    def wait_for(self, expected, timeout=10):
        end = time.monotonic() + timeout
        while self.echoed != expected and time.monotonic() < end:
            self.pump()
        assert self.echoed == expected

    def close(self, timeout=10):
        self.p.stdin.close()
        while self.pump(0.2) != b"":
            pass
        return self.p.wait(timeout)


def test_each_line_is_in_the_file_before_it_is_echoed(isolated):
    f = session_file(isolated)
    base = read(f)
    sent = b""
    with Appender(f) as a:
        for i in range(5):
            line = msg(f"1000000{i}", None, "user", f"line {i}")
            a.send(line)
            sent += line
            a.wait_for(sent)
            assert read(f) == base + sent     # echoed, so already in the file
        assert a.close() == 0


@pytest.mark.skipif(not os.path.exists("/usr/bin/strace"), reason="needs strace")
def test_every_line_is_fsynced_before_its_echo(isolated, tmp_path):
    import shutil
    f = session_file(isolated)
    data = b"".join(msg(f"2000000{i}", None, "user", f"durable {i}") for i in range(3))
    trace = tmp_path / "trace"
    p = subprocess.run(["strace", "-f", "-qq", "-s", "4096", "-e", "trace=write,pwritev2,fsync,fdatasync", "-o", str(trace),
                        shutil.which("panto-log"), "append", f], input=data, capture_output=True)
    if p.returncode != 0 and b"ptrace" in p.stderr:
        pytest.skip("ptrace not permitted here")
    ok(p)
    calls = [l for l in trace.read_text().splitlines() if re.search(r"\b(write|pwritev2|fsync|fdatasync)\(", l)]
    # the order per line: write(file fd, line) -> f(data)sync(file fd) -> write(1, ... line ...),
    # or pwritev2(file fd, line, RWF_DSYNC), the write synced as it is made, -> write(1, ...)
    # (lines that arrive together are echoed together, after the last one's sync)
    seq = []
    for l in calls:
        m = re.search(r"(write|pwritev2|fsync|fdatasync)\((\d+)", l)
        if m.group(1) in ("write", "pwritev2") and "durable" in l:
            held = {i for i in range(3) if f"durable {i}" in l}
            seq.append(("w1" if m.group(2) == "1" else "wf", held))
            if m.group(1) == "pwritev2" and "RWF_DSYNC" in l:
                seq.append(("sync", set()))
        elif m.group(1) in ("fsync", "fdatasync"):
            seq.append(("sync", set()))
    assert sum(1 for s, _ in seq if s == "wf") == 3, seq
    for i in range(3):
        wf = [k for k, (s, held) in enumerate(seq) if s == "wf" and i in held]
        w1 = [k for k, (s, held) in enumerate(seq) if s == "w1" and i in held]
        assert len(wf) == 1 and len(w1) == 1, seq
        assert wf[0] < w1[0] and ("sync", set()) in seq[wf[0]:w1[0]], seq


def test_append_keeps_writing_after_ctrl_c_until_eof(isolated):
    f = session_file(isolated)
    base = read(f)
    one = msg("30000001", "0000bbbb", "user", "before ^C")
    two = msg("30000002", "30000001", "assistant", "after ^C")
    with Appender(f) as a:
        a.send(one)
        a.wait_for(one)
        a.p.send_signal(signal.SIGINT)      # delivered before it can read what comes next
        a.send(two)
        assert a.close() == 0, "append died on SIGINT"
        assert a.echoed == one + two
    assert read(f) == base + one + two


# -- append: idempotence, bare entries, headers ---------------------------------------

def test_replay_into_append_writes_nothing(isolated):
    f = session_file(isolated, turns=3)
    st = os.stat(f)
    before = read(f)
    time.sleep(0.02)
    r = ok(log("replay", f))
    a = ok(log("append", input=r.stdout))
    assert a.stdout == r.stdout == before
    assert read(f) == before
    assert os.stat(f).st_mtime_ns == st.st_mtime_ns
    b = ok(log("append", f, input=r.stdout))          # same with FILE named
    assert read(f) == before and b.stdout == before


def test_entry_already_in_the_file_is_not_written_again(isolated):
    f = session_file(isolated)
    base = read(f)
    new = msg("40000001", "0000bbbb", "user", "new")
    data = header(isolated) + split_lines(base)[1] + new + split_lines(base)[2] + new
    p = ok(log("append", input=data))
    assert p.stdout == data
    assert read(f) == base + new


def test_bare_entries_are_completed(isolated):
    f = session_file(isolated)
    base = read(f)
    data = bare("user", "typed with jq") + bare("assistant", "ok")
    p = ok(log("append", f, input=data))
    out = split_lines(p.stdout)
    assert len(out) == 2
    assert read(f) == base + p.stdout
    first, second = (orjson.loads(l) for l in out)
    assert list(first)[:4] == ["type", "id", "parentId", "timestamp"]
    assert ID8.match(first["id"].encode()) and ID8.match(second["id"].encode())
    assert first["parentId"] == "0000bbbb"              # the file's leaf
    assert second["parentId"] == first["id"]
    assert TS.match(first["timestamp"]) and TS.match(second["timestamp"])
    assert first["message"]["content"][0]["text"] == "typed with jq"
    assert out[0] == orjson.dumps(first) + b"\n"       # compact, as panto writes


def test_bare_entry_in_a_new_session_gets_the_stream_leaf_as_parent(isolated, sessions):
    data = header(isolated) + msg("00000001", None, "user", "hi") + bare("assistant", "hello")
    p = ok(log("append", input=data))
    out = split_lines(p.stdout)
    got = orjson.loads(out[2])
    assert got["parentId"] == "00000001" and ID8.match(got["id"].encode())
    assert read(os.path.join(sessions, SID + ".jsonl")) == p.stdout


def test_refuses_a_stream_of_another_session(isolated):
    f = session_file(isolated)
    before = read(f)
    data = header(isolated, sid=OTHER) + msg("50000001", None, "user", "x") + msg("50000002", "50000001", "assistant", "y")
    p = log("append", f, input=data)
    assert_clean_error(p, 1, "panto-log")
    assert read(f) == before


def test_headerless_stream_without_file_is_refused(isolated):
    p = log("append", input=msg("60000001", None, "user", "x") + msg("60000002", "60000001", "assistant", "y"))
    assert_clean_error(p, 1, "panto-log")
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def test_headerless_stream_with_file_goes_into_that_session(isolated):
    f = session_file(isolated)
    base = read(f)
    data = msg("70000001", "0000bbbb", "user", "tail -n +2") + msg("70000002", "70000001", "assistant", "ok")
    p = ok(log("append", f, input=data))
    assert p.stdout == data
    assert read(f) == base + data


def test_headerless_stream_into_a_missing_file_is_refused(isolated, tmp_path):
    f = tmp_path / "nope.jsonl"
    p = log("append", str(f), input=msg("70000001", None, "user", "x") + msg("70000002", "70000001", "assistant", "y"))
    assert_clean_error(p, 1, "panto-log")
    assert not f.exists()


def test_append_to_a_named_new_file_uses_deferred_creation(isolated, tmp_path):
    f = tmp_path / "mine.jsonl"
    data = header(isolated) + msg("00000001", None, "user", "hi")
    ok(log("append", str(f), input=data))
    assert not f.exists()
    data += msg("00000002", "00000001", "assistant", "yo")
    ok(log("append", str(f), input=data))
    assert read(f) == data


def test_append_recovers_a_torn_file_before_writing(isolated):
    f = session_file(isolated)
    base = read(f)
    with open(f, "ab") as fh:
        fh.write(b'{"type":"message","id":"deadbeef","parent')
    new = msg("80000001", "0000bbbb", "user", "after the crash")
    p = ok(log("append", f, input=new))
    assert p.stdout == new
    assert read(f) == base + new


def test_unknown_entry_types_are_written_and_passed_through(isolated, sessions):
    odd = b'{"type":"compaction", "id":"c0c0c0c0",  "parentId":"00000002","timestamp":"x","summary":{"a":[1,2.50]}}\n'
    data = header(isolated) + msg("00000001", None, "user", "hi") + msg("00000002", "00000001", "assistant", "yo") + odd
    p = ok(log("append", input=data))
    assert p.stdout == data
    assert read(os.path.join(sessions, SID + ".jsonl")) == data


def test_invalid_line_mid_stream_keeps_what_came_before(isolated):
    f = session_file(isolated)
    base = read(f)
    good = msg("90000001", "0000bbbb", "user", "kept")
    p = log("append", f, input=good + b'{"type":"message","id":"90000002","parentId":null,"timestamp":"t","message":{"content":[]}}\n'
            + msg("90000003", "90000001", "user", "never reached"))
    assert_clean_error(p, 1, "panto-log")
    assert b":2:" in p.stderr                      # names the line
    assert p.stdout == good
    assert read(f) == base + good


def test_deferred_lines_are_not_echoed_when_append_fails(isolated, sessions):
    # they are on no disk: downstream must not take them for saved (the upstream still has them)
    data = header(isolated) + msg("00000001", None, "user", "keep my prompt")
    p = log("append", input=data + b"not json\n")
    assert_clean_error(p, 1, "panto-log")
    assert p.stdout == b""
    assert not os.path.exists(sessions)


def test_deferred_lines_are_echoed_at_the_end_of_a_stream_without_a_reply(isolated, sessions):
    data = header(isolated) + msg("00000001", None, "user", "no reply came")
    p = ok(log("append", input=data))
    assert p.stdout == data and not os.path.exists(sessions)


# -- replay: selection -----------------------------------------------------------

def test_replay_by_path_id_and_prefix(isolated):
    f = session_file(isolated)
    data = read(f)
    for arg in (f, SID, SID[:8], SID[:20]):
        p = ok(log("replay", arg))
        assert p.stdout == data, arg


def test_replay_relative_path(isolated, tmp_path):
    d = tmp_path / "work" / "sub"
    d.mkdir()
    (d / "s.jsonl").write_bytes(session_bytes(isolated))
    p = ok(log("replay", "sub/s.jsonl"))
    assert p.stdout == session_bytes(isolated)


def test_replay_ambiguous_prefix_lists_candidates(isolated):
    a = "0199aaaa-bbbb-7ccc-8ddd-000000000001"
    b = "0199aaaa-bbbb-7ccc-8ddd-000000000002"
    session_file(isolated, a)
    session_file(isolated, b)
    p = log("replay", "0199aaaa")
    assert_clean_error(p, 1, "panto-log")
    assert a.encode() in p.stderr and b.encode() in p.stderr
    assert p.stdout == b""
    ok(log("replay", a[:-1] + "2"))
    p = ok(log("replay", "0199aaaa-bbbb-7ccc-8ddd-000000000001"))
    assert p.stdout == session_bytes(isolated, a)


def test_replay_unknown_id(isolated):
    session_file(isolated)
    p = log("replay", "ffffffff")
    assert_clean_error(p, 1, "panto-log")
    assert b"ffffffff" in p.stderr


def test_replay_finds_a_session_of_another_directory_by_prefix(isolated, tmp_path):
    """SPEC §4.2: this directory's sessions first, then every directory's."""
    f = session_file(tmp_path / "elsewhere")
    assert ok(log("replay", SID[:8])).stdout == read(f)


def test_replay_id_with_header_cwd_of_another_directory_is_not_found(isolated, tmp_path):
    """Two directories encode alike; the header's cwd is authoritative."""
    a = tmp_path / "work" / "a-b" / "c"
    b = tmp_path / "work" / "a" / "b-c"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    assert paths.session_dir(str(a)) == paths.session_dir(str(b))
    f = session_file(a, SID)
    ok(log("replay", SID[:8], cwd=a))
    assert ok(log("replay", SID[:8], cwd=b)).stdout == read(f)   # an id names one session anywhere


@pytest.mark.parametrize("arg", ["../x", "a/b", "..", "x..y", "/no/such/file.jsonl"])
def test_replay_refuses_ids_that_look_like_paths(isolated, arg):
    session_file(isolated)
    p = log("replay", arg)
    assert_clean_error(p, 1, "panto-log")
    assert p.stdout == b""


def test_replay_last_is_the_most_recently_active(isolated):
    """Activity is the last entry's timestamp (SPEC §4.2): touching a file changes nothing."""
    old = session_file(isolated, "0199aaaa-0000-7ccc-8ddd-000000000001")   # created first
    new = session_file(isolated, "0199bbbb-0000-7ccc-8ddd-000000000002")   # created later
    with open(old, "ab") as f:                                             # but used last
        f.write(orjson.dumps({"type": "message", "id": "1a1a1a1a", "parentId": None,
                              "timestamp": "2030-01-01T00:00:00.000Z",
                              "message": {"role": "user", "content": []}}) + b"\n")
    now = time.time()
    os.utime(old, (now - 100, now - 100))
    os.utime(new, (now, now))
    assert ok(log("replay", "--last")).stdout == read(old)
    assert ok(log("replay")).stdout == read(old)


def test_replay_last_ignores_sessions_of_a_colliding_directory(isolated, tmp_path):
    a = tmp_path / "work" / "a-b" / "c"
    b = tmp_path / "work" / "a" / "b-c"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    pa = session_file(a, "0199aaaa-0000-7ccc-8ddd-000000000001")
    pb = session_file(b, "0199bbbb-0000-7ccc-8ddd-000000000002")
    now = time.time()
    os.utime(pa, (now - 50, now - 50))
    os.utime(pb, (now, now))
    assert ok(log("replay", "--last", cwd=a)).stdout == read(pa)


def test_replay_last_with_no_sessions(isolated):
    p = log("replay", "--last")
    assert_clean_error(p, 1, "panto-log")


# -- replay: recovery ----------------------------------------------------------------

def test_torn_tail_is_truncated(isolated):
    f = session_file(isolated, turns=2)
    base = read(f)
    with open(f, "ab") as fh:
        fh.write(b'{"type":"message","id":"deadbeef","parent')
    p = ok(log("replay", f))
    assert p.stdout == base
    assert read(f) == base
    assert p.stderr and b"Traceback" not in p.stderr       # says what it cut


def test_last_line_without_newline_is_torn_even_if_it_parses(isolated):
    f = session_file(isolated)
    base = read(f)
    extra = msg("a0000001", "0000bbbb", "user", "complete json, no line feed")[:-1]
    with open(f, "ab") as fh:
        fh.write(extra)
    p = ok(log("replay", f))
    assert p.stdout == base and read(f) == base


BAD_LINES = {
    "stray brace": b'}{"type":"message"\n',
    "cut short": b'{"type":"mess\n',
    "lone surrogate": b'{"type":"message","id":"b0000001","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"\\ud800"}]}}\n',
    "1e400": b'{"type":"message","id":"b0000001","parentId":null,"timestamp":"t","n":1e400,"message":{"role":"user","content":[]}}\n',
    # cut short (a complete one is a schema problem: tests/test_hostile.py)
    "deep nesting": b'{"type":"x","id":"b0000001","parentId":null,"timestamp":"t","a":' + b"[" * 1100 + b"]" * 1000 + b'\n',
    "not an object": b'[1, 2]\n',
    "null": b"null\n",
    "second header": header("/elsewhere"),
    "NUL bytes": b"\0\0\0\0\n",
}


@pytest.mark.parametrize("bad", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_bad_line_in_the_middle_is_reported_and_never_cut(isolated, bad):
    # SPEC §4: only a tail is torn; a bad line with valid lines after it is
    # reported (FILE:LINE, how many lines after it are intact) and the file
    # left alone, by replay and by append, which writes nothing.
    f = session_file(isolated, turns=2)
    ls = split_lines(read(f))
    data = b"".join(ls[:3]) + bad + b"".join(ls[3:])
    with open(f, "wb") as fh:
        fh.write(data)
    for p in (log("replay", f), log("append", f, input=bare("user", "more"))):
        assert_clean_error(p, 1, "panto-log")
        assert f"{f}:4: ".encode() in p.stderr
        assert b"(the 2 lines after it are intact)" in p.stderr
        assert p.stdout == b""
        assert read(f) == data
    # --skip-bad prints the rest, names the line, and still changes nothing
    p = ok(log("replay", "--skip-bad", f))
    assert p.stdout == b"".join(ls)
    assert f"{f}:4: ".encode() in p.stderr and read(f) == data


@pytest.mark.parametrize("tail", [b'{"type":"mess', b'{"type":"mess\n', b"}\n\n", header("/x"),
                                  header("/x") + b"garbage\n", b"\0" * 300],
                         ids=["no line feed", "not JSON", "stray brace", "second header",
                              "run of torn lines", "zeros"])
def test_a_torn_tail_is_cut_and_skip_bad_leaves_it_out(isolated, tail):
    f = session_file(isolated, turns=2)
    base = read(f)
    with open(f, "wb") as fh:
        fh.write(base + tail)
    p = ok(log("replay", "--skip-bad", f))
    assert p.stdout == base and read(f) == base + tail     # --skip-bad never modifies
    p = ok(log("replay", f))
    assert p.stdout == base and read(f) == base


def test_skip_bad_repairs_by_hand(isolated, tmp_path):
    f = session_file(isolated, turns=3)
    ls = split_lines(read(f))
    data = ls[0] + b"}\n" + b"".join(ls[1:4]) + b"[]\n" + b"".join(ls[4:]) + b'{"torn'
    with open(f, "wb") as fh:
        fh.write(data)
    p = ok(log("replay", "--skip-bad", f))
    err = p.stderr.decode()
    assert f"{f}:2: " in err and f"{f}:6: " in err and f"{f}:10: " in err
    new = tmp_path / "new.jsonl"
    new.write_bytes(p.stdout)
    os.replace(new, f)
    assert ok(log("replay", f)).stdout == b"".join(ls)


def test_a_file_whose_header_is_torn_is_never_emptied(isolated):
    f = session_file(isolated, data=header(isolated)[:-1])
    for argv in (["replay", f], ["replay", "--skip-bad", f]):
        assert_clean_error(log(*argv), 1, "panto-log")
    assert_clean_error(log("append", f, input=bare("user", "x")), 1, "panto-log")
    assert read(f) == header(isolated)[:-1]


def test_no_repair_leaves_the_file_and_says_what_it_would_cut(isolated):
    f = session_file(isolated)
    base = read(f)
    torn = base + b'{"type":"message","id":"dead'
    with open(f, "wb") as fh:
        fh.write(torn)
    p = ok(log("replay", "--no-repair", f))
    assert p.stdout == base
    assert read(f) == torn
    err = p.stderr.decode()
    assert err.startswith("panto-log: ") and f in err and ("cut" in err or "torn" in err)
    assert str(len(torn) - len(base)) in err or ":4" in err


def test_schema_error_is_reported_with_file_and_line_and_file_unchanged(isolated):
    f = session_file(isolated, turns=2)
    ls = split_lines(read(f))
    broken = b'{"type":"message","id":"b0000001","parentId":"0000bbbb","timestamp":"2026-04-25T17:40:16.000Z","message":{"content":[]}}\n'
    data = b"".join(ls[:3]) + broken + b"".join(ls[3:])
    with open(f, "wb") as fh:
        fh.write(data)
    st = os.stat(f)
    p = log("replay", f)
    assert_clean_error(p, 1, "panto-log")
    assert f"{f}:4:".encode() in p.stderr
    assert read(f) == data and os.stat(f).st_mtime_ns == st.st_mtime_ns


@pytest.mark.parametrize("bad", [
    b'{"type":"message","id":"b0000001","parentId":null,"timestamp":"t","message":{"role":"robot","content":[]}}',
    b'{"type":"message","id":"b0000001","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi"}}',
    b'{"type":"message","id":"b0000001","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":5}]}}',
    b'{"type":"message","id":"b0000001","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"toolUse","id":"x","name":"bash","input":{}}]}}',
    b'{"type":"message","id":"b0000001","parentId":7,"timestamp":"t","message":{"role":"user","content":[]}}',
    b'{"type":"message","id":7,"parentId":null,"timestamp":"t","message":{"role":"user","content":[]}}',
    b'{"type":"message","parentId":null,"timestamp":"t","message":{"role":"user","content":[]}}',
])
def test_schema_errors(isolated, bad):
    f = session_file(isolated)
    data = read(f) + bad + b"\n"
    with open(f, "wb") as fh:
        fh.write(data)
    p = log("replay", f)
    assert_clean_error(p, 1, "panto-log")
    assert f"{f}:4:".encode() in p.stderr
    assert read(f) == data


def test_unknown_entry_types_are_kept(isolated):
    f = session_file(isolated)
    odd = b'{"type":"label","id":"c1c1c1c1","parentId":"0000bbbb","timestamp":"2026-04-25T17:40:16.000Z","text":"v1 \xe2\x9c\x93"}\n'
    data = read(f) + odd + msg("c2c2c2c2", "c1c1c1c1", "user", "after")
    with open(f, "wb") as fh:
        fh.write(data)
    p = ok(log("replay", f))
    assert p.stdout == data and read(f) == data


@pytest.mark.parametrize("data", [
    msg("00000001", None, "user", "no header"),
    b'{"type":"sess',
    b'{"type":"session","version":1,"id":"x","timestamp":"t","cwd":"/"}',      # no line feed
    b"not json at all\n" + msg("00000001", None, "user", "x"),
    b"[1,2,3]\n",
    b"\n\n",
])
def test_never_truncates_to_empty(isolated, data):
    f = session_file(isolated, data=data)
    p = log("replay", f)
    assert_clean_error(p, 1, "panto-log")
    assert read(f) == data
    p = log("append", f, input=msg("00000009", None, "user", "x"))
    assert p.returncode == 1 and read(f) == data


def test_empty_file_is_reported_not_a_session(isolated):
    f = session_file(isolated, data=b"")
    assert_clean_error(log("replay", f), 1, "panto-log")
    assert read(f) == b""


def test_second_header_at_the_end_is_torn_in_the_middle_is_bad(isolated):
    f = session_file(isolated)
    base = read(f)
    with open(f, "wb") as fh:
        fh.write(base + header(isolated))
    assert ok(log("replay", f)).stdout == base and read(f) == base
    data = base + header(isolated) + msg("d0000001", "0000bbbb", "user", "after a second header")
    with open(f, "wb") as fh:
        fh.write(data)
    p = log("replay", f)
    assert_clean_error(p, 1, "panto-log")
    assert f"{f}:4: a session header after the first line (the 1 line after it is intact)".encode() in p.stderr
    assert read(f) == data


def test_blank_lines_are_skipped(isolated):
    f = session_file(isolated, turns=2)
    ls = split_lines(read(f))
    data = ls[0] + b"\n" + ls[1] + b"  \n\n" + b"".join(ls[2:])
    with open(f, "wb") as fh:
        fh.write(data)
    p = ok(log("replay", f))
    assert split_lines(p.stdout) == [l for l in ls]          # every entry kept, none cut
    assert read(f) == data
    # and the replayed stream goes back into append without writing anything
    ok(log("append", input=p.stdout))
    assert read(f) == data


def test_migration_hook_leaves_version_1_unchanged(isolated):
    f = session_file(isolated, turns=2)
    before = read(f)
    st = os.stat(f)
    time.sleep(0.02)
    ok(log("replay", f))
    ok(log("append", f, input=b""))
    assert read(f) == before and os.stat(f).st_mtime_ns == st.st_mtime_ns


def test_newer_format_version_is_refused_unchanged(isolated):
    data = header(isolated, version=2) + msg("00000001", None, "user", "x")
    f = session_file(isolated, data=data)
    p = log("replay", f)
    assert_clean_error(p, 1, "panto-log")
    assert read(f) == data


def wait_for_lock_waiter(proc, timeout=30):
    """Until proc waits for a file lock (a `->` line of its pid in /proc/locks)."""
    deadline = time.monotonic() + timeout
    while True:
        with open("/proc/locks") as f:
            if any("->" in line and line.split()[5:6] == [str(proc.pid)] for line in f):
                return
        assert proc.poll() is None and time.monotonic() < deadline, "replay never waited for the lock"
        time.sleep(0.01)


def test_replay_waits_for_an_appender_holding_the_lock(isolated):
    """A torn tail seen while an appender holds the lock is not cut under its feet."""
    f = session_file(isolated)
    base = read(f)
    fd = os.open(f, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        half = msg("e0000001", "0000bbbb", "user", "being written")
        os.write(fd, half[:20])
        import shutil
        p = subprocess.Popen([shutil.which("panto-log"), "replay", f], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for_lock_waiter(p)
        os.write(fd, half[20:])
        os.fsync(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        out, err = p.communicate(timeout=10)
    finally:
        os.close(fd)
    assert p.returncode == 0, err
    assert read(f) == base + half             # the appender's line survived
    assert out in (base, base + half)


# -- interoperability with the seed's serializer ---------------------------------------

def _zig_file(cwd):
    """Bytes exactly as session.zig's serializeHeader/serializeEntry lay them out."""
    h = ('{"type":"session","version":1,"id":"019dc5ba-53f6-71a5-ab8f-b1f8709c2572",'
         '"timestamp":"2026-04-25T17:40:15.990Z","cwd":"' + str(cwd) + '"}')
    sys_ = ('{"type":"message","id":"s1s2s3s4","parentId":null,"timestamp":"2026-04-25T14:00:00.000Z",'
            '"message":{"role":"system","content":[{"type":"text","text":"You are a helpful assistant."}]}}')
    user = ('{"type":"message","id":"a1b2c3d4","parentId":"s1s2s3s4","timestamp":"2026-04-25T14:00:01.000Z",'
            '"provider":"anthropic","model":"claude-sonnet-4-20250514",'
            '"message":{"role":"user","content":[{"type":"text","text":"What files are in this directory? \u00e9\u2713 \\u0007 tab\\t"}]}}')
    asst = ('{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-04-25T14:00:02.000Z",'
            '"message":{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants to list files...",'
            '"signature":"sig-xyz"},{"type":"text","text":"I\'ll check that for you."},'
            '{"type":"toolUse","id":"tool_abc123","name":"bash","input":"{\\"command\\":\\"ls\\"}"}],'
            '"provider":"anthropic","model":"claude-sonnet-4-20250514","stopReason":"toolUse",'
            '"usage":{"input":1500,"output":85,"cacheRead":800,"reasoning":30}}}')
    tool = ('{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-04-25T14:00:03.000Z",'
            '"provider":"anthropic","model":"claude-sonnet-4-20250514",'
            '"message":{"role":"user","content":[{"type":"toolResult","toolUseId":"tool_abc123","content":"file1.txt\\nfile2.txt"}]}}')
    last = ('{"type":"message","id":"deadbeef","parentId":"c3d4e5f6","timestamp":"2026-04-25T17:40:17.000Z",'
            '"message":{"role":"assistant","content":[{"type":"text","text":"two files"}],'
            '"stopReason":"stop","usage":{"input":100,"output":50}}}')
    return ("\n".join([h, sys_, user, asst, tool, last]) + "\n").encode("utf-8")


def test_a_file_written_by_the_seed_replays_byte_identical(isolated):
    data = _zig_file(isolated)
    d = paths.session_dir(str(isolated))
    os.makedirs(d)
    f = os.path.join(d, "019dc5ba-53f6-71a5-ab8f-b1f8709c2572.jsonl")
    with open(f, "wb") as fh:
        fh.write(data)
    for arg in (f, "019dc5ba", "--last"):
        p = ok(log("replay", arg))
        assert p.stdout == data
    assert read(f) == data
    a = ok(log("append", input=data))                    # nothing new to write
    assert a.stdout == data and read(f) == data
    more = msg("e1e1e1e1", "deadbeef", "user", "continue")
    ok(log("append", f, input=data + more))
    assert read(f) == data + more
    ls = ok(run(["panto-ls", "--json"]))
    got = orjson.loads(ls.stdout)
    assert got["id"] == "019dc5ba-53f6-71a5-ab8f-b1f8709c2572" and got["messages"] == 5


def test_what_panto_writes_without_extensions_matches_the_seed_layout(isolated, sessions):
    """A session panto creates from bare entries keeps the seed's key order."""
    data = header(isolated) + bare("user", "hi") + bare("assistant", "yo")
    ok(log("append", input=data))
    f = os.path.join(sessions, SID + ".jsonl")
    for line in split_lines(read(f))[1:]:
        assert re.match(rb'^\{"type":"message","id":"[0-9a-f]{8}","parentId":(null|"[0-9a-f]{8}"),'
                        rb'"timestamp":"[^"]+","message":\{"role":"(user|assistant)","content":\[', line), line


# -- usage ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [[], ["frob"], ["replay", "a", "b"], ["replay", "--last", "x"],
                                  ["append", "a", "b"], ["append", "--no-repair"], ["--bogus"]])
def test_usage_errors_exit_2(argv):
    p = log(*argv)
    assert p.returncode == 2, p.stderr
    assert b"Traceback" not in p.stderr


# -- replay --context: the path the next request needs, a partial stream -----------------

def test_replay_context_prints_what_the_request_needs_marked_partial(isolated):
    data, kept, _ = compacted_session(isolated)
    f = session_file(isolated, data=data)
    p = ok(log("replay", "--context", f))
    out = split_lines(p.stdout)
    head = orjson.loads(out[0])
    assert head["id"] == SID and head["partial"]["omitted"]
    every = [orjson.loads(l)["id"] for l in split_lines(data)[1:]]
    assert sorted(head["partial"]["omitted"]) == sorted(set(every) - set(kept))
    assert [orjson.loads(l)["id"] for l in out[1:]] == kept
    assert all(l in split_lines(data) for l in out[1:])            # byte for byte, as in the file
    assert p.stdout == ok(log("replay", "--context", f)).stdout   # the same from the cache
    assert read(f) == data


def test_replay_context_of_a_session_without_compaction_is_the_plain_replay(isolated):
    f = session_file(isolated, turns=3)
    assert ok(log("replay", "--context", f)).stdout == read(f)


def test_replay_context_at_an_entry_before_the_compaction(isolated):
    data, _, _ = compacted_session(isolated)
    f = session_file(isolated, data=data)
    plain = ok(log("replay", "--at", "0002bbbb", f)).stdout
    p = ok(log("replay", "--context", "--at", "0002bbbb", f))
    assert split_lines(p.stdout)[1:] == split_lines(plain)[1:]           # no compaction on that path: all of it
    assert orjson.loads(split_lines(p.stdout)[0])["partial"]["omitted"]


def _conversation(stream_bytes):
    import io

    from pantolib.conversation import Session

    s = Session.read(io.BytesIO(stream_bytes))
    return s.messages(), s.active_model(), s.leaf, s.context()[1]


def test_a_partial_stream_builds_the_same_conversation(isolated):
    data, _, leaf = compacted_session(isolated)
    f = session_file(isolated, data=data)
    part = ok(log("replay", "--context", f)).stdout
    assert _conversation(part) == _conversation(data)
    assert _conversation(part)[2] == leaf


def _pipeline_pair(isolated, tmp_path, data, new):
    """Append `new` through the complete-stream and the partial-stream
    pipeline, each to its own copy of a session: (complete, partial) files and echoes."""
    f = session_file(isolated, data=data)
    g = str(tmp_path / "copy.jsonl")
    with open(g, "wb") as fh:
        fh.write(data)
    whole = ok(log("replay", f)).stdout
    part = ok(log("replay", "--context", g)).stdout
    e1 = ok(log("append", f, input=whole + new)).stdout
    e2 = ok(log("append", g, input=part + new)).stdout
    return read(f), read(g), e1, e2, whole, part


def test_the_partial_pipeline_appends_byte_for_byte_what_the_complete_one_does(isolated, tmp_path):
    data, _, leaf = compacted_session(isolated)
    new = (msg("abcd0001", leaf, "user", "one more") +
           msg("abcd0002", "abcd0001", "assistant", "sure", stopReason="stop", provider="openai", model="gpt-4o"))
    f, g, e1, e2, whole, part = _pipeline_pair(isolated, tmp_path, data, new)
    assert f == g == data + new
    assert e1 == whole + new and e2 == part + new           # each echoes its own stream, then the new lines
    # idempotent: the partial stream replayed again writes nothing
    again = ok(log("replay", "--context", str(tmp_path / "copy.jsonl"))).stdout
    ok(log("append", str(tmp_path / "copy.jsonl"), input=again))
    assert read(str(tmp_path / "copy.jsonl")) == data + new


def complete_and_partial(isolated, tmp_path, data, send_args):
    """The same session in two files, one turn of `panto-send SEND_ARGS` on
    each: from the complete stream (replay) and from the partial one (replay
    --context), appended back. (the two files) once both requests were alike."""
    import sse_server as S

    with S.Server(auto=True) as srv:
        env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY="sk-test-0123456789abcdef")
        f = session_file(isolated, data=data)
        g = str(tmp_path / "copy.jsonl")
        with open(g, "wb") as fh:
            fh.write(data)
        for path, flags in ((f, ()), (g, ("--context",))):
            src = ok(log("replay", *flags, path)).stdout
            out = ok(run(["panto-send", "--quiet", *send_args], input=src, env=env)).stdout
            assert out.startswith(src)
            ok(log("append", path, input=out))
        assert len(srv.requests) == 2 and srv.requests[0].body == srv.requests[1].body
    return f, g


def test_the_partial_pipeline_through_panto_send_asks_and_writes_the_same(isolated, tmp_path):
    data, _, leaf = compacted_session(isolated)
    f, g = complete_and_partial(isolated, tmp_path, data, ["next question"])
    added = [split_lines(read(p))[len(split_lines(data)):] for p in (f, g)]

    def shape(raw):
        e = orjson.loads(raw)
        e.pop("id"), e.pop("timestamp")
        e["parentId"] = "new" if e["parentId"] not in (leaf, None) else e["parentId"]
        return e
    assert len(added[0]) == len(added[1]) == 2
    assert [shape(x) for x in added[0]] == [shape(x) for x in added[1]]
    assert orjson.loads(added[1][0])["parentId"] == leaf
    assert orjson.loads(added[1][1])["parentId"] == orjson.loads(added[1][0])["id"]


def test_a_partial_stream_never_creates_a_file_nor_is_taken_for_one(isolated, tmp_path, sessions):
    data, _, _ = compacted_session(isolated)
    f = session_file(isolated, data=data)
    part = ok(log("replay", "--context", f)).stdout
    os.unlink(f)
    p = log("append", f, input=part)
    assert_clean_error(p, 1, "panto-log")
    assert "only part of session" in p.stderr.decode() and not os.path.exists(f)
    saved = tmp_path / "part.jsonl"                    # a partial stream kept in a file is no session file
    saved.write_bytes(part)
    for argv in (("replay", str(saved)), ("append", str(saved))):
        p = log(*argv, input=msg("e0000001", "9999bbbb", "user", "more"))
        assert_clean_error(p, 1, "panto-log")
        assert "partial stream" in p.stderr.decode()
    assert saved.read_bytes() == part


def test_panto_cost_on_a_partial_stream_says_it_is_partial(isolated):
    data, _, _ = compacted_session(isolated)
    f = session_file(isolated, data=data)
    part = ok(log("replay", "--context", f)).stdout
    p = run(["panto-cost", "--json"], input=part)
    assert p.returncode == 0 and "not the whole session" in p.stderr.decode()
    whole = run(["panto-cost", "--json"], input=read(f))
    assert "not the whole session" not in whole.stderr.decode()


def test_panto_ls_skips_a_partial_stream_with_a_note(isolated, sessions):
    data, _, _ = compacted_session(isolated)
    f = session_file(isolated, data=data)
    part = ok(log("replay", "--context", f)).stdout
    with open(os.path.join(sessions, OTHER + ".jsonl"), "wb") as fh:
        fh.write(part.replace(SID.encode(), OTHER.encode(), 1))
    p = run(["panto-ls"])
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1     # the whole session only
    assert "partial stream" in p.stderr.decode()


# -- the index cache never changes what append and replay --context do -----------------------

def _index_files():
    root = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "index")
    return [os.path.join(root, n) for n in os.listdir(root)] if os.path.isdir(root) else []


def _no_cache():
    for p in _index_files():
        os.unlink(p)


def test_the_index_cache_is_private(isolated):
    f = session_file(isolated, turns=2)
    ok(log("append", f, input=msg("e0000001", "0001bbbb", "user", "more")))
    files = _index_files()
    assert len(files) == 1
    assert stat.S_IMODE(os.stat(files[0]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(files[0])).st_mode) == 0o700
    assert b"more" not in read(files[0]) and b"question" not in read(files[0])   # no message text


def test_a_replay_stamps_again_a_cache_it_had_to_check_by_content(isolated):
    """An index cache checked by content (the file's identity moved since it
    was saved, as it does when append saves it within a timestamp tick of its
    last write) and found true of the whole file is saved again by a plain
    replay, stamped before it looked: the next reader believes it on the
    file's identity. A cache that covers less than the file is left as it is."""
    from pantolib import index, persist

    f = session_file(isolated, turns=2)
    ok(log("append", f, input=msg("e0000001", "0001bbbb", "user", "more")))
    os.utime(f)                        # the identity moves (its ctime is now), the bytes do not
    moved = os.stat(f).st_ctime_ns
    while time.time_ns() <= moved + persist.FINE:     # a stamp taken from now on is not racy
        time.sleep(0.005)

    def checked():
        fd = os.open(f, os.O_RDONLY)
        try:
            got = index.load(f, fd, os.fstat(fd))
            return None if got is None else got["checked"]
        finally:
            os.close(fd)

    assert checked() is True
    assert ok(log("replay", f)).stdout == read(f)
    assert checked() is False
    with open(f, "ab") as fh:          # a line the cache does not cover: read, and the cache left as it was
        fh.write(msg("e0000002", "e0000001", "user", "again"))
    [cache] = _index_files()
    before = read(cache)
    assert ok(log("replay", f)).stdout == read(f)
    assert read(cache) == before and checked() is True


def _checked(f):
    """Would the index cache of f be compared by content (True), believed on
    identity (False), or not be used (None)?"""
    from pantolib import index

    fd = os.open(f, os.O_RDONLY)
    try:
        got = index.load(f, fd, os.fstat(fd))
        return None if got is None else got["checked"]
    finally:
        os.close(fd)


def test_a_file_append_just_wrote_is_believed_on_identity_where_changes_always_show(isolated):
    """The next turn's replay comes within a timestamp tick of append's last
    write. Where the filesystem stamps every change after a stat anew
    (persist.settles), append's index entry is believed on identity then;
    elsewhere it is compared by content. Either way, an edit of the same size
    made right after, with the mtime put back, is found: replay prints the
    file as it now is."""
    from pantolib import persist

    f = session_file(isolated, turns=2)
    ok(log("append", f, input=msg("e0000001", "0001bbbb", "user", "more")))
    settles = persist.settles(f, os.stat(f).st_dev)
    assert _checked(f) is (not settles)
    ok(log("append", f, input=msg("e0000002", "e0000001", "user", "again")))
    st = os.stat(f)
    with open(f, "r+b") as fh:
        data = fh.read()
        fh.seek(0)
        fh.write(data.replace(b"again", b"AGAIN"))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(f).st_size == st.st_size and os.stat(f).st_mtime_ns == st.st_mtime_ns
    assert _checked(f) is None
    assert ok(log("replay", f)).stdout == read(f) and b"AGAIN" in read(f)
    assert ok(log("replay", "--context", f)).stdout.count(b"AGAIN") == 1


def test_an_edit_made_while_append_runs_is_never_hidden_by_its_cache(isolated):
    """A same-size edit made between two lines of a running append (a person
    fixing a typo while a turn runs) leaves the file's size as append expects
    it, and append's next write moves its times past the edit's. The index
    entry append then saves must not be believed on identity: replay and
    replay --context answer as they do without any cache."""
    f = session_file(isolated, turns=2)
    ok(log("replay", "--context", f))
    first, second = msg("e0000001", "0001bbbb", "user", "more"), msg("e0000002", "e0000001", "user", "again")
    with Appender(f) as a:
        a.send(first)
        a.wait_for(first)
        data = read(f)
        broken = data.replace(b'"}]}}\n', b'"}]} \n', 1)       # an earlier line, no longer JSON
        assert broken != data and len(broken) == len(data)
        with open(f, "r+b") as fh:
            fh.write(broken)
        a.send(second)
        a.wait_for(first + second)
        a.p.stdin.close()
        assert a.p.wait() == 0
    got = []
    for _ in range(2):
        got.append([(p.returncode, p.stdout, p.stderr) for p in (log("replay", f), log("replay", "--context", f))])
        _no_cache()
    assert got[0] == got[1]
    assert got[1][0][0] != 0        # (the broken line is found without a cache)


def _cut(f, data):
    """Cut the file shorter in place (same inode), at a line boundary."""
    keep = b"".join(split_lines(data)[:-3])
    os.truncate(f, len(keep))


def _rewrite_same_size(f, data):
    """Rewrite it in place with other entries of the same size."""
    new = data.replace(b"answer", b"ANSWER")
    with open(f, "r+b") as fh:
        fh.write(new)


def _replace(f, data):
    with open(f + ".new", "wb") as fh:
        fh.write(data.replace(b"question", b"QUESTION"))
    os.rename(f + ".new", f)


def _torn(f, data):
    with open(f, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn')


def _bad_then_valid(f, data):
    with open(f, "ab") as fh:
        fh.write(b'{"type":"message","id":"bad\n' + msg("f0000001", None, "user", "after"))


@pytest.mark.parametrize("change", [None, _cut, _rewrite_same_size, _replace, _torn, _bad_then_valid])
def test_cached_and_uncached_runs_agree(isolated, change):
    data, _, leaf = compacted_session(isolated)
    f = session_file(isolated, data=data)
    results = []
    for cached in (True, False):
        with open(f, "wb") as fh:
            fh.write(data)
        _no_cache()
        step = [ok(log("replay", "--context", f)).stdout]     # builds the cache
        ok(log("append", f, input=msg("e0000001", leaf, "user", "more")))
        if change is not None:
            change(f, read(f))
        if not cached:
            _no_cache()
        step.append(log("replay", "--no-repair", f))      # reads on from what the cache covers
        if not cached:
            _no_cache()
        step.append(log("replay", "--context", f))
        if not cached:
            _no_cache()
        step.append(log("append", f, input=msg("e0000002", "e0000001", "user", "again") + bare("user", "bare")))
        if not cached:
            _no_cache()
        step.append(log("replay", "--context", f))
        if not cached:
            _no_cache()
        step.append(log("append", f, input=msg("e0000001", leaf, "user", "more")))   # idempotent
        step.append(log("replay", f))
        out = [step[0]] + [(s.returncode, s.stdout, s.stderr) for s in step[1:]]
        results.append((out, read(f)))
    (a, fa), (b, fb) = results

    def same(x, y):     # a bare entry gets a fresh id and time each run
        return re.sub(rb'"id":"[0-9a-f]{8}","parentId":"e0000002","timestamp":"[^"]*"', b"BARE", x) == \
            re.sub(rb'"id":"[0-9a-f]{8}","parentId":"e0000002","timestamp":"[^"]*"', b"BARE", y)
    assert same(fa, fb)
    for x, y in zip(a[1:], b[1:]):
        assert x[0] == y[0] and same(x[1], y[1]) and x[2] == y[2], (x, y)


def test_compaction_of_a_partial_stream_asks_and_keeps_the_same(isolated, tmp_path):
    data, _, _ = compacted_session(isolated)
    f, g = complete_and_partial(isolated, tmp_path, data, ["--compact", "--keep", "1"])
    new = [orjson.loads(split_lines(read(p))[-1]) for p in (f, g)]
    assert new[0]["type"] == new[1]["type"] == "compaction"
    assert new[0]["firstKeptId"] == new[1]["firstKeptId"] == "9999aaaa"
    assert new[0]["parentId"] == new[1]["parentId"] == "9999bbbb"
    # and the next turn's stream follows the new compaction (with the last stamped
    # prompt before it: the one kept has no stamp, and it names the active model)
    head, *rest = split_lines(ok(log("replay", "--context", g)).stdout)
    assert [orjson.loads(x)["id"] for x in rest] == ["5555aaaa", "0005aaaa", "9999aaaa", "9999bbbb", new[1]["id"]]
