"""Crashes, concurrency and hostile input (SPEC §11), with real processes and files."""
import os
import random
import shutil
import subprocess
import threading
import time

import orjson
import pytest

from builders import SID, header, msg, read, session_file
from conftest import assert_clean_error, run

CRASH_ITERATIONS = int(os.environ.get("PANTO_TEST_CRASHES", "200"))
CRASH_BUDGET = float(os.environ.get("PANTO_TEST_CRASH_SECONDS", "25"))
# The random moments are seeded (PANTO_TEST_SEED=N to try others): a failure can be replayed.
SEED = int(os.environ.get("PANTO_TEST_SEED", "1"))


def new_session(cwd, sid=SID):
    """A session of one prompt and one reply where panto keeps it."""
    return session_file(cwd, sid, data=header(cwd, sid) + msg("00000001", None, "user", "hi")
                        + msg("00000002", "00000001", "assistant", "yo"))


def exe(name):
    path = shutil.which(name)
    assert path, f"{name} not on PATH"
    return path


# -- kill -9 at random moments ----------------------------------------------------------

def _feed(proc, data, hold=None):
    """Write data to proc's stdin, then close it (once `hold` is set, with one)."""
    try:
        proc.stdin.write(data)
        proc.stdin.flush()
        if hold is not None:
            hold.wait()
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _drain(proc, out, first=None, lines=1):
    """Read proc's stdout into out; set `first` once `lines` lines (or the end) came."""
    seen = 0
    while True:
        chunk = proc.stdout.read1(1 << 20)
        if not chunk:
            if first is not None:
                first.set()
            return
        out.append(chunk)
        seen += chunk.count(b"\n")
        if first is not None and seen >= lines:
            first.set()


def test_kill_9_never_loses_an_echoed_line(isolated):
    rng = random.Random(SEED)
    f = new_session(isolated)
    counter = 0
    started = time.monotonic()
    done = partial = torn_cut = landed = 0
    while done < CRASH_ITERATIONS and time.monotonic() - started < CRASH_BUDGET:
        if os.path.getsize(f) > 3_000_000:        # keep each replay cheap: start another session
            f = new_session(isolated, f"0199aaaa-bbbb-7ccc-8ddd-{done:012x}")
        before = read(f)
        sent = []
        for _ in range(rng.randint(1, 40)):
            counter += 1
            size = rng.choice([50, 300, 3000, 3000, 30_000, 200_000])
            sent.append(msg(f"f{counter:07x}", None, "user", "x" * rng.randint(1, size)))
        proc = subprocess.Popen([exe("panto-log"), "append", f], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        echoed = []
        # stdin stays open until the kill, so the appender never ends first: the kill
        # comes at a random moment, or once a random number of lines is echoed, at most
        # half of them (however fast the appender is, it then has the lines after them
        # still to write: with only one left, a fast one had often written it by then)
        killed = threading.Event()
        lines = rng.randint(1, max(1, len(sent) // 2))
        reached = threading.Event()
        feeder = threading.Thread(target=_feed, args=(proc, b"".join(sent), killed))
        reader = threading.Thread(target=_drain, args=(proc, echoed, reached, lines))
        feeder.start()
        reader.start()
        if rng.random() < 0.25:                   # any moment, start-up included
            _alive_after(proc, rng.uniform(0.0, 0.08))
        else:                                     # once `lines` lines are durable and echoed
            assert reached.wait(30), "append did not echo the lines"
        assert proc.poll() is None, "append ended before its input did"
        proc.kill()
        proc.wait()
        killed.set()
        landed += b"".join(echoed).count(b"\n") < len(sent)   # lines were still to be written
        feeder.join(10)
        reader.join(10)
        proc.stdout.close()
        echoed = b"".join(echoed)
        on_disk = read(f)                          # as the crash left it

        r = subprocess.run([exe("panto-log"), "replay", f], capture_output=True)
        assert r.returncode == 0, r.stderr
        after = read(f)
        assert r.stdout == after                   # replay prints the recovered file
        # nothing before changed
        assert after.startswith(before), "recovery changed lines that were there before"
        added = after[len(before):]
        # what was added is whole sent lines, in order
        k = 0
        pos = 0
        while pos < len(added):
            assert added.startswith(sent[k], pos), "the file holds a line that was not sent"
            pos += len(sent[k])
            k += 1
        # every echoed line is in the file; a line whose echo the kill cut short was
        # durable before its echo began, so it is in the file whole
        n = echoed.count(b"\n")
        whole = b"".join(sent[:n])
        assert echoed.startswith(whole), "echo is not the sent lines in order"
        if len(echoed) > len(whole):
            assert sent[n].startswith(echoed[len(whole):])
            n += 1
        assert k >= n, f"{n} lines were (at least partly) echoed but only {k} are in the file"
        # at most one torn line was cut, and it was the next line being written
        cut = on_disk[len(after):]
        assert on_disk.startswith(after)
        if cut:
            torn_cut += 1
            assert b"\n" not in cut[:-1] and k < len(sent) and sent[k].startswith(cut), "more than one line cut"
        if 0 < k < len(sent):
            partial += 1
        done += 1
    assert done >= min(CRASH_ITERATIONS, 40), f"only {done} crashes in {CRASH_BUDGET}s"
    assert partial > 0, "no kill ever landed mid-stream: the test did not test anything"
    # (a third at least: the faster append starts, the more of the kills at "any moment"
    # find it done; alone here 121-143 of 200, once 99 of 200 inside the whole suite)
    assert landed >= done // 3, f"only {landed} of {done} kills came with lines still to write"
    print(f"seed {SEED}: {done} kills, {landed} with lines still to write, {partial} mid-stream, "
          f"{torn_cut} torn tails cut")


def _alive_after(proc, seconds):
    """Wait on the process itself for up to `seconds` (it may end first)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


def test_kill_9_during_creation_leaves_no_file_or_a_whole_one(isolated, sessions):
    rng = random.Random(SEED)
    started = time.monotonic()
    iterations = during = 0
    while iterations < 40 and time.monotonic() - started < 10:
        sid = f"0199aaaa-bbbb-7ccc-8ddd-{iterations:012x}"
        big = "y" * rng.choice([10, 100_000, 3_000_000, 3_000_000])
        data = (header(isolated, sid) + msg("00000001", None, "system", big) + msg("00000002", "00000001", "user", "q")
                + msg("00000003", "00000002", "assistant", "a"))
        f = os.path.join(sessions, sid + ".jsonl")
        proc = subprocess.Popen([exe("panto-log"), "append"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        feeder = threading.Thread(target=_feed, args=(proc, data))
        feeder.start()
        aim = rng.choice(["creation", "creation", "any"])
        if aim == "any":
            _alive_after(proc, rng.uniform(0.0, 0.15))
        else:                   # wait for the temporary file to appear, then kill
            while proc.poll() is None and not os.path.exists(f) and not _tmp_files(sessions):
                pass
        in_creation = proc.poll() is None and bool(_tmp_files(sessions)) and not os.path.exists(f)
        proc.kill()
        proc.wait()
        feeder.join(10)
        during += in_creation
        if os.path.exists(f):
            assert read(f) == data, "a session file appeared half written"
        elif in_creation:
            assert _tmp_files(sessions), "killed inside the creation window, yet its temporary file is gone"
        for t in _tmp_files(sessions):   # what a crash leaves; removed here so the next round sees its own
            os.unlink(os.path.join(sessions, t))
        iterations += 1
    assert during >= 3, f"only {during} of {iterations} kills landed inside the creation window"
    listed = subprocess.run([exe("panto-ls"), "--json"], capture_output=True)
    assert listed.returncode == 0 and b"Traceback" not in listed.stderr
    print(f"seed {SEED}: {iterations} kills, {during} inside the creation window")


def _tmp_files(directory):
    try:
        return [n for n in os.listdir(directory) if n.startswith(".") and n.endswith(".tmp")]
    except FileNotFoundError:
        return []


# -- two appenders on one file ------------------------------------------------------------

def test_concurrent_appenders_do_not_interleave(isolated):
    f = new_session(isolated)
    base = read(f)
    rng = random.Random(7)
    shared = [msg(f"5{i:07x}", None, "user", "shared " + "s" * rng.randint(0, 20000)) for i in range(60)]
    streams = []
    for who in range(2):
        own = [msg(f"{who + 1}{i:07x}", None, "assistant", f"from {who} " + "z" * rng.randint(0, 200_000))
               for i in range(120)]
        mixed = own + shared
        rng.shuffle(mixed)
        streams.append(header(isolated) + b"".join(mixed))
    procs = [subprocess.Popen([exe("panto-log"), "append"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for _ in streams]
    feeders = [threading.Thread(target=_feed, args=(p, s)) for p, s in zip(procs, streams)]
    for t in feeders:
        t.start()
    for t in feeders:
        t.join(60)
    for p in procs:
        assert p.wait(60) == 0, p.stderr.read()
        p.stderr.close()
    data = read(f)
    assert data.startswith(base)
    got = data[len(base):].split(b"\n")
    assert got[-1] == b""
    got = [l + b"\n" for l in got[:-1]]
    ids = [orjson.loads(l)["id"] for l in got]               # every line whole
    assert len(ids) == len(set(ids)), "an entry was written twice"
    wanted = set(shared)
    for s in streams:
        wanted.update(l + b"\n" for l in s.split(b"\n")[1:-1])
    assert set(got) == wanted and len(got) == len(wanted)
    r = run(["panto-log", "replay", f])
    assert r.returncode == 0 and r.stdout == data


# -- hostile input ----------------------------------------------------------------------

HOSTILE = {
    "nul": b"\x00\x00\n",
    "nul-in-json": b'{"type":"message",\x00"id":"x"}\n',
    "invalid-utf8": b'{"type":"message","id":"bad0bad0","parentId":null,"timestamp":"t",'
                    b'"message":{"role":"user","content":[{"type":"text","text":"\xff\xfe"}]}}\n',
    "deep-nesting": b"[" * 100_000 + b"\n",
    "deep-object": b'{"a":' * 100_000 + b"\n",
    "huge-garbage": b"{" + b"x" * 5_000_000 + b"\n",
    "number-id": b'{"type":"message","id":12345678,"parentId":null,"timestamp":"t","message":{"role":"user","content":[]}}\n',
    "number-text": b'{"type":"message","id":"abcd0001","parentId":null,"timestamp":"t",'
                   b'"message":{"role":"user","content":[{"type":"text","text":42}]}}\n',
    "number-role": b'{"type":"message","id":"abcd0001","parentId":null,"timestamp":"t","message":{"role":1,"content":[]}}\n',
    "number-type": b'{"type":7,"id":"abcd0001"}\n',
    "string-header-version": b'{"type":"session","version":"1","id":"x","timestamp":"t","cwd":"/"}\n',
    "array": b"[1,2,3]\n",
    "scalar": b"42\n",
    "truncated": b'{"type":"message","id":"abcd0001","parentId":null,"timestamp":"t","mess\n',
    "surrogate": b'{"type":"message","id":"abcd0001","parentId":null,"timestamp":"t",'
                 b'"message":{"role":"user","content":[{"type":"text","text":"\\ud800"}]}}\n',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_append_rejects_hostile_input_cleanly(isolated, case):
    f = new_session(isolated)
    base = read(f)
    good = msg("0000aaaa", "00000002", "user", "before the bad line")
    p = run(["panto-log", "append", f], input=good + HOSTILE[case] + msg("0000bbbb", "0000aaaa", "user", "after"))
    if case == "surrogate" and p.returncode == 0:
        pytest.skip("a lone surrogate escape is accepted as JSON")
    assert_clean_error(p, 1, "panto-log")
    assert p.stderr.count(b"\n") == 1, p.stderr
    assert len(p.stderr) < 2000
    assert read(f) == base + good                       # what came before is kept, nothing else
    assert p.stdout == good


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_replay_reports_hostile_files_cleanly(isolated, case):
    f = new_session(isolated)
    data = read(f) + HOSTILE[case] + msg("0000bbbb", "00000002", "user", "after")
    with open(f, "wb") as fh:
        fh.write(data)
    p = run(["panto-log", "replay", "--no-repair", f])
    assert b"Traceback" not in p.stderr
    assert read(f) == data
    p = run(["panto-log", "replay", f])
    assert b"Traceback" not in p.stderr and len(p.stderr) < 2000
    if p.returncode == 0:
        # treated as a torn line: cut from there, what came before kept whole
        assert read(f) == p.stdout and data.startswith(p.stdout) and p.stdout.count(b"\n") == 3
    else:
        assert_clean_error(p, 1, "panto-log")
        assert read(f) == data


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_first_line_is_never_truncated(isolated, case):
    f = new_session(isolated)
    data = HOSTILE[case] + read(f)
    with open(f, "wb") as fh:
        fh.write(data)
    assert_clean_error(run(["panto-log", "replay", f]), 1, "panto-log")
    p = run(["panto-ls"])
    assert p.returncode == 0 and b"Traceback" not in p.stderr
    assert read(f) == data


def test_a_5_mb_line_is_a_valid_entry(isolated):
    f = new_session(isolated)
    base = read(f)
    big = msg("b16b16b1", "00000002", "assistant", "\u00e9" * 2_500_000)
    assert len(big) > 5_000_000
    p = run(["panto-log", "append", f], input=big)
    assert p.returncode == 0, p.stderr
    assert p.stdout == big and read(f) == base + big
    r = run(["panto-log", "replay", f])
    assert r.returncode == 0 and r.stdout == base + big
    assert run(["panto-ls"]).stdout.split(b"\t")[3] == b"3 messages"


def test_session_is_a_directory(isolated, tmp_path):
    d = tmp_path / "adir.jsonl"
    d.mkdir()
    for argv in (["replay", str(d)], ["replay", "--no-repair", str(d)], ["append", str(d)]):
        p = run(["panto-log", *argv], input=header(isolated) + msg("00000001", None, "assistant", "x"))
        assert_clean_error(p, 1, "panto-log")
        assert b"directory" in p.stderr


@pytest.mark.parametrize("device", ["/dev/zero", "fifo"])
def test_session_is_a_device_or_fifo(isolated, tmp_path, device):
    """Never read a file that does not end: refused at once, by every reader."""
    if device == "fifo":
        device = str(tmp_path / "a.jsonl")
        os.mkfifo(device)
    for argv in (["panto-log", "replay", device], ["panto-log", "append", device], ["panto-cost", device]):
        p = run(argv, input=msg("0000aaaa", None, "user", "x"), timeout=10)
        assert_clean_error(p, 1, argv[0])
        assert b"not a regular file" in p.stderr


def test_session_is_missing(isolated, tmp_path):
    missing = str(tmp_path / "missing.jsonl")
    p = run(["panto-log", "replay", missing])
    assert_clean_error(p, 1, "panto-log")
    assert not os.path.exists(missing)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files")
def test_session_is_unreadable(isolated):
    f = new_session(isolated)
    os.chmod(f, 0)
    assert_clean_error(run(["panto-log", "replay", f]), 1, "panto-log")
    assert_clean_error(run(["panto-log", "append", f], input=msg("0000aaaa", None, "user", "x")), 1, "panto-log")


def test_session_dir_is_a_file(isolated):
    """The sessions root is a file: creating the session fails cleanly, the stream still flows."""
    root = os.environ["PANTO_SESSION_DIR"]
    with open(root, "wb") as fh:
        fh.write(b"in the way")
    data = header(isolated) + msg("00000001", None, "user", "q") + msg("00000002", "00000001", "assistant", "a")
    p = run(["panto-log", "append"], input=data)
    assert_clean_error(p, 1, "panto-log")
    assert read(root) == b"in the way"
    assert run(["panto-ls"]).returncode == 0


# -- closed downstream pipes, usage ------------------------------------------------------------

def _closed_reader(argv, input=b""):
    proc = subprocess.Popen([exe(argv[0]), *argv[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    t = threading.Thread(target=_feed, args=(proc, input))
    t.start()
    err = proc.stderr.read()
    t.join(30)
    status = proc.wait(30)
    proc.stderr.close()
    return status, err


def test_replay_into_a_closed_pipe_ends_quietly(isolated):
    f = new_session(isolated)
    with open(f, "ab") as fh:
        for i in range(200):
            fh.write(msg(f"c{i:07x}", None, "user", "p" * 2000))
    for argv in (["panto-log", "replay", f], ["panto-log", "replay", "--last"], ["panto-log", "replay", "--no-repair", f]):
        status, err = _closed_reader(argv)
        assert status == 0 and err == b"", (argv, err)
    sh = subprocess.run(["bash", "-c", f"set -o pipefail; panto-log replay '{f}' | head -1"], capture_output=True)
    assert sh.returncode == 0 and sh.stderr == b"" and sh.stdout.count(b"\n") == 1


def test_append_into_a_closed_pipe_still_persists_everything(isolated):
    f = new_session(isolated)
    base = read(f)
    data = b"".join(msg(f"d{i:07x}", None, "user", "q" * 5000) for i in range(100))
    status, err = _closed_reader(["panto-log", "append", f], data)
    assert status == 0 and err == b""
    assert read(f) == base + data
    sh = subprocess.run(["bash", "-c", f"set -o pipefail; panto-log replay '{f}' | panto-log append | head -1"],
                        capture_output=True)
    assert sh.returncode == 0 and sh.stderr == b""


def test_new_session_into_a_closed_pipe_is_still_created(isolated, sessions):
    data = header(isolated) + msg("00000001", None, "user", "q") + msg("00000002", "00000001", "assistant", "a")
    status, err = _closed_reader(["panto-log", "append"], data)
    assert status == 0 and err == b""
    assert read(os.path.join(sessions, SID + ".jsonl")) == data


@pytest.mark.parametrize("argv", [["panto-log"], ["panto-log", "replay", "--frob"], ["panto-log", "append", "-x"],
                                  ["panto-ls", "--frob"], ["panto-ls", "x"]])
def test_usage_errors_exit_2(isolated, argv):
    p = run(argv)
    assert_clean_error(p, 2)
