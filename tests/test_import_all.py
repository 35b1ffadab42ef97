"""panto-log import --all (SPEC §12): every agent's sessions into panto's
sessions directory, incrementally, each response paid once, and a kill -9 at
any moment followed by a clean run leaves every session whole, nothing twice."""
import fcntl
import os
import resource
import select
import shutil
import signal
import subprocess
import zlib

import pytest
from builders import lines, read
from conftest import assert_clean_error, log, run
from fixtures.records import (B_SID, CC_SID, CX_SID, cc_assistant, cc_path, cc_session, cc_text, cc_usage, cc_user,
                              cx_path, cx_session, oc_answer, oc_db, oc_user, write)


def session_file(sid, cwd):
    from pantolib import paths
    return os.path.join(paths.session_dir(cwd), f"{sid}.jsonl")


def run_all(*extra, env=None):
    p = log("import", "--all", *extra, env=env)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr.decode()
    return p.stderr.decode().strip().splitlines()[-1]


def sessions_in(root):
    """{path under root: bytes} of its session files (not a creation's temporary file)."""
    return {os.path.relpath(p, root): b for p, (b, _, _) in snapshot(root).items()
            if not os.path.basename(p).startswith(".")}


def reference(tmp_path):
    """A run alone on the same sources, in folders of its own: (the sessions it made, its summary)."""
    ref = dict(os.environ, PANTO_SESSION_DIR=str(tmp_path / "ref"), XDG_STATE_HOME=str(tmp_path / "ref-state"))
    summary = run_all(env=ref)
    return sessions_in(ref["PANTO_SESSION_DIR"]), summary


def snapshot(*roots):
    out = {}
    for root in roots:
        for d, _, files in os.walk(root):
            for n in files:
                p = os.path.join(d, n)
                st = os.stat(p)
                out[p] = (read(p), st.st_mtime_ns, st.st_ino)
    return out


def test_every_session_into_its_own_cwd_then_nothing_changed_writes_nothing(agents_home):
    a = write(cc_path(agents_home), cc_session(n=2))
    write(cc_path(agents_home, B_SID, "-home-u-other"), cc_session(B_SID, n=1, cwd="/home/u/other"))
    x = write(cx_path(agents_home), cx_session(n=2))
    summary = run_all()
    assert summary.startswith("panto-log: 3 sessions (3 new, 0 grown, 0 unchanged), added 10 entries; skipped: ")
    assert "split line 3" in summary and "turn_context 1" in summary
    for sid, cwd, src in ((CC_SID, "/home/u/proj", a), (CX_SID, "/home/u/cx", x)):
        path = session_file(sid, cwd)
        assert read(path) == log("import", src).stdout      # the file is the import's stream
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    assert os.path.exists(session_file(B_SID, "/home/u/other"))
    state = os.path.join(os.environ["XDG_STATE_HOME"], "panto")
    before = snapshot(os.environ["PANTO_SESSION_DIR"], state)
    assert all(os.stat(p).st_mode & 0o777 == 0o600 for p in before if p.startswith(state) and
               not p.endswith(("-wal", "-shm")))
    assert run_all() == "panto-log: 3 sessions (0 new, 0 grown, 3 unchanged), added 0 entries"
    assert snapshot(os.environ["PANTO_SESSION_DIR"], state) == before
    # the other commands see them
    ls = subprocess.run(["panto-ls", "--all"], capture_output=True)
    assert ls.returncode == 0 and ls.stdout.count(b"\n") == 3


def test_a_grown_source_adds_its_new_entries_and_a_replaced_one_nothing_twice(agents_home):
    a = cc_path(agents_home)
    write(a, cc_session(n=2))
    run_all()
    path = session_file(CC_SID, "/home/u/proj")
    old = read(path)
    more = cc_session(n=1, start=2)
    more[0]["parentUuid"] = "11111111-b1"
    write(a, more, mode="ab")
    assert run_all() == "panto-log: 1 session (0 new, 1 grown, 0 unchanged), added 2 entries; skipped: split line 1"
    grown = read(path)
    assert grown.startswith(old) and grown == log("import", a).stdout
    # replaced by a shorter file with the same start, then grown again: read from the top, nothing twice
    os.unlink(a)
    write(a, cc_session(n=1))
    assert "0 new, 0 grown, 1 unchanged), added 0 entries" in run_all()
    write(a, cc_session(n=4))
    run_all()
    ids = [o["id"] for o in lines(read(path))[1:]]
    assert len(ids) == len(set(ids)) == 8


def test_a_response_copied_into_another_file_or_a_sidechain_is_paid_once(agents_home):
    write(cc_path(agents_home), cc_session(n=2))        # first: its first record is older
    resumed = cc_session(n=2)[:3] + cc_session(B_SID, n=1, start=5)
    for r in resumed:
        r["sessionId"] = B_SID
    write(cc_path(agents_home, B_SID), resumed)
    sub = os.path.join(os.path.dirname(cc_path(agents_home)), CC_SID, "subagents", "agent-abc.jsonl")
    write(sub, [cc_user("s1", None, "task", ts="2025-06-01T12:00:00.000Z", isSidechain=True, agentId="abc"),
                cc_assistant("s2", "s1", "msg_11111111_1", [cc_text("answer 1")], cc_usage(101, 21, 7),
                             ts="2025-06-01T12:00:01.000Z", rid="req_other", isSidechain=True, agentId="abc")])
    run_all()
    first = lines(read(session_file(CC_SID, "/home/u/proj")))
    second = lines(read(session_file(B_SID, "/home/u/proj")))
    import uuid
    agent_sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "claude-code:abc"))
    third = lines(read(session_file(agent_sid, "/home/u/proj")))
    paid = [o["message"]["usage"] for o in first[1:] if o["message"]["role"] == "assistant"]
    assert paid == [{"input": 100, "output": 20, "cacheRead": 7}, {"input": 101, "output": 21, "cacheRead": 7}]
    copies = [o for o in second[1:] if o["message"]["role"] == "assistant"]
    assert "usage" not in copies[0]["message"] and copies[0]["billedIn"] == CC_SID
    assert copies[1]["message"]["usage"] == {"input": 105, "output": 25, "cacheRead": 7}
    side = third[-1]
    assert "usage" not in side["message"] and side["billedIn"] == CC_SID
    assert third[0]["parentSession"] == CC_SID and third[0]["relation"] == "subagent"


def test_a_long_resumed_copy_is_paid_once_in_the_order_written(agents_home):
    """Who paid is asked for many responses at once: the entries wait in order."""
    write(cc_path(agents_home), cc_session(n=400))
    resumed = cc_session(n=300) + cc_session(B_SID, n=100, start=1000)
    resumed[900]["parentUuid"] = resumed[899]["uuid"]
    for r in resumed:
        r["sessionId"] = B_SID
    write(cc_path(agents_home, B_SID), resumed)
    assert run_all() == ("panto-log: 2 sessions (2 new, 0 grown, 0 unchanged), added 1600 entries; "
                         "skipped: split line 800")
    second = lines(read(session_file(B_SID, "/home/u/proj")))[1:]
    assert [o.get("parentId") for o in second[1:]] == [o["id"] for o in second[:-1]]
    texts = [o["message"]["content"][0]["text"] for o in second]
    assert texts[:4] == ["question 0", "answer 0", "question 1", "answer 1"]
    assert texts[598:602] == ["question 299", "answer 299", "question 1000", "answer 1000"]
    replies = [o for o in second if o["message"]["role"] == "assistant"]
    assert all(o.get("billedIn") == CC_SID and "usage" not in o["message"] for o in replies[:300])
    assert [o["message"]["usage"]["output"] for o in replies[300:]] == [20 + i for i in range(1000, 1100)]
    assert not any("billedIn" in o for o in lines(read(session_file(CC_SID, "/home/u/proj"))))


def test_dry_run_and_from_and_an_unreadable_agent_directory(agents_home):
    write(cc_path(agents_home), cc_session(n=1))
    write(cx_path(agents_home), cx_session(n=1))
    assert run_all("--dry-run").startswith("panto-log: 2 sessions (2 new, 0 grown, 0 unchanged), would add 4")
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])
    assert not os.path.exists(os.path.join(os.environ["XDG_STATE_HOME"], "panto"))
    assert run_all("--from=codex").startswith("panto-log: 1 session (1 new")
    assert_clean_error(log("import", "--all", "--from=vim"), 1, "panto-log")
    assert not os.path.exists(session_file(CC_SID, "/home/u/proj"))
    # claude-code's projects folder cannot be listed: reported, the rest goes on
    shutil.rmtree(os.path.join(agents_home, "claude", "projects"))
    with open(os.path.join(agents_home, "claude", "projects"), "w") as f:
        f.write("x")
    p = log("import", "--all")
    assert_clean_error(p, 1, "panto-log")
    err = p.stderr.decode()
    assert "claude-code:" in err and "left out" in err and "1 unchanged" in err


def _start(env):
    return subprocess.Popen([shutil.which("panto-log"), "import", "--all"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _count_files(root):
    n = 0
    for _, _, files in os.walk(root):
        n += sum(1 for f in files if f.endswith(".jsonl"))
    return n


def _claude_sessions(home, count):
    for i in range(count):
        sid = f"{i:08x}-2222-4333-8444-555555555555"
        recs = cc_session(sid, n=25, cwd=f"/home/u/p{i % 3}")
        if i % 5 == 1:                       # a copy of an earlier session's first reply
            recs[1:3] = cc_session(f"{i - 1:08x}-2222-4333-8444-555555555555", n=1)[1:3]
            recs[1]["parentUuid"] = recs[0]["uuid"]
        write(cc_path(home, sid, f"-home-u-p{i % 3}"), recs)


def _codex_sessions(home, count):
    for i in range(count):
        sid = f"0199aaaa-bbbb-7ccc-8ddd-{i:012x}"
        write(cx_path(home, sid, day=f"2025/09/{1 + i % 3:02d}"), cx_session(sid, n=25))


@pytest.mark.parametrize("agents,kill_after,jobs", [("claude-code", 0, ""), ("claude-code", 1, ""),
                                                     ("claude-code", 7, ""), ("claude-code", 19, ""),
                                                     ("claude-code", 33, ""), ("codex", 1, ""), ("codex", 17, ""),
                                                     ("codex", 33, ""), ("both", 5, ""), ("both", 29, ""),
                                                     ("claude-code", 0, "2"), ("claude-code", 13, "2"),
                                                     ("both", 23, "2")])
def test_kill_9_at_any_moment_then_a_clean_run_leaves_every_session_whole(agents_home, tmp_path, agents,
                                                                          kill_after, jobs):
    """Killed once the Nth session file exists (0: as soon as it starts), then
    run again: the files are byte for byte those of a run never killed. jobs
    "2": the killed run reads its sources in two worker processes."""
    if agents == "claude-code":
        _claude_sessions(agents_home, 40)
    elif agents == "codex":
        _codex_sessions(agents_home, 40)
    else:
        _claude_sessions(agents_home, 20)
        _codex_sessions(agents_home, 20)
    env = dict(os.environ)
    expected, summary = reference(tmp_path)
    assert summary.startswith("panto-log: 40 sessions (40 new")
    assert len(expected) == 40
    root = env["PANTO_SESSION_DIR"]
    proc = _start(dict(env, PANTO_JOBS=jobs))
    while proc.poll() is None and _count_files(root) < kill_after:
        pass                                  # watch the files, not the clock
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL       # it was still running
    assert b"Traceback" not in proc.stderr.read()
    summary = run_all(env=env)
    assert "40 sessions" in summary
    assert sessions_in(root) == expected
    assert run_all(env=env).endswith("(0 new, 0 grown, 40 unchanged), added 0 entries")


def test_sources_read_ahead_in_worker_processes_make_the_same_sessions(agents_home, tmp_path):
    """PANTO_JOBS=2 (sources read by forked workers, taken in order) against
    PANTO_JOBS=1 on the same sources: the same session files byte for byte,
    the same lines on stderr, first with copies billed across files, a
    malformed line, a sub-agent and a file too big to be read ahead, then
    with some grown, then with nothing changed."""
    from pantolib import importing

    _claude_sessions(agents_home, 40)
    _codex_sessions(agents_home, 12)
    sub = os.path.join(os.path.dirname(cc_path(agents_home)), CC_SID, "subagents", "agent-abc.jsonl")
    write(sub, [cc_user("s1", None, "task", ts="2025-06-01T12:00:00.000Z", isSidechain=True, agentId="abc"),
                cc_assistant("s2", "s1", "msg_00000000_0", [cc_text("answer 0")], cc_usage(101, 21, 7),
                             ts="2025-06-01T12:00:01.000Z", rid="req_other", isSidechain=True, agentId="abc")])
    big = cc_session(B_SID, n=1)
    big[0]["message"]["content"] = "x" * (importing.AHEAD + 1000)
    write(cc_path(agents_home, B_SID), big)
    with open(cc_path(agents_home, "00000003-2222-4333-8444-555555555555", "-home-u-p0"), "ab") as f:
        f.write(b'{"type": "user", "message": \n')
    envs = {n: dict(os.environ, PANTO_JOBS=str(n), PANTO_SESSION_DIR=str(tmp_path / f"s{n}"),
                    XDG_STATE_HOME=str(tmp_path / f"state{n}")) for n in (1, 2)}

    def both(*extra):
        out = {}
        for n, env in envs.items():
            p = log("import", "--all", "-v", *extra, env=env)
            assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr
            out[n] = (p.stderr.decode(), sessions_in(env["PANTO_SESSION_DIR"]))
        assert out[1] == out[2]
        return out[1]

    err, files = both()
    assert "54 sessions (54 new" in err and "malformed line" in err and len(files) == 54
    assert sum(b.count(b'"billedIn"') for b in files.values()) == 8 + 1
    for i in (3, 7, 8):
        sid = f"{i:08x}-2222-4333-8444-555555555555"
        more = cc_session(sid, n=2, start=25, cwd=f"/home/u/p{i % 3}")
        more[0]["parentUuid"] = f"{sid[:8]}-b24"
        write(cc_path(agents_home, sid, f"-home-u-p{i % 3}"), more, mode="ab")
    err, _ = both()
    assert "(0 new, 3 grown, 51 unchanged), added 12 entries" in err
    err, _ = both()
    assert "(0 new, 0 grown, 54 unchanged), added 0 entries" in err


def test_two_runs_at_once_make_what_one_makes(agents_home, tmp_path):
    """Two `import --all` started together (a scheduled one and a person's):
    one waits for the other; both end well and the sessions are those of a
    run alone, each response paid once."""
    _claude_sessions(agents_home, 40)
    env = dict(os.environ)
    expected, _ = reference(tmp_path)
    both = [_start(dict(env, PANTO_JOBS=jobs)) for jobs in ("2", "1")]
    for proc in both:
        assert proc.wait(timeout=300) == 0
        err = proc.stderr.read().decode()
        assert "Traceback" not in err and "internal error" not in err, err
    assert sessions_in(env["PANTO_SESSION_DIR"]) == expected
    assert run_all().endswith("(0 new, 0 grown, 40 unchanged), added 0 entries")


def test_a_run_waits_for_the_one_that_holds_the_lock_and_a_dry_run_does_not(agents_home):
    _claude_sessions(agents_home, 3)
    d = os.path.join(os.environ["XDG_STATE_HOME"], "panto", "import")
    os.makedirs(d, mode=0o700)
    fd = os.open(os.path.join(d, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)               # another run holds it
        dry = subprocess.run([shutil.which("panto-log"), "import", "--all", "--dry-run"], capture_output=True,
                             timeout=60)
        assert dry.returncode == 0 and b"would add" in dry.stderr and b"waiting" not in dry.stderr
        proc = _start(dict(os.environ))
        assert select.select([proc.stderr], [], [], 60)[0], "no word of the wait"    # bounded: never a hang
        line = proc.stderr.readline().decode()
        assert line == "panto-log: another 'panto-log import --all' is running: waiting for it to end\n"
        assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])     # it waits before it writes anything
    finally:
        os.close(fd)                                  # that run ends
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read().decode().startswith("panto-log: 3 sessions (3 new")


def test_a_source_deleted_once_read_leaves_the_run_whole(agents_home):
    """Claude Code deletes old transcripts by itself. One read, its session
    written, then deleted before the run saves its record (after a few
    hundred others): the run goes on and ends well, every session whole."""
    _claude_sessions(agents_home, 300)
    first = cc_path(agents_home, f"{0:08x}-2222-4333-8444-555555555555", "-home-u-p0")
    root = os.environ["PANTO_SESSION_DIR"]
    proc = _start(dict(os.environ))
    while proc.poll() is None and _count_files(root) < 3:
        pass                                  # its session is written: watch the files, not the clock
    os.unlink(first)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    assert b"Traceback" not in proc.stderr.read()
    assert _count_files(root) == 300
    assert run_all().endswith("(0 new, 0 grown, 299 unchanged), added 0 entries")


def test_a_full_disk_under_the_table_of_payers_is_one_line_and_a_run_again_finishes(agents_home, tmp_path):
    """The table of who paid cannot grow (RLIMIT_FSIZE: each session file
    fits, the table does not): one line naming it, status 1, no internal
    error; the next run, with room, makes the sessions of a run never
    stopped."""
    _claude_sessions(agents_home, 40)
    env = dict(os.environ)
    expected, _ = reference(tmp_path)
    assert max(len(b) for b in expected.values()) < 32 << 10

    def small():
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 10, 32 << 10))

    p = subprocess.run([shutil.which("panto-log"), "import", "--all"], capture_output=True, preexec_fn=small,
                       timeout=300)
    assert_clean_error(p, 1, "panto-log")
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "billing.sqlite" in err and "run the import again" in err, err
    assert run_all().startswith("panto-log: 40 sessions")
    assert sessions_in(env["PANTO_SESSION_DIR"]) == expected


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_one_sync_per_session_file_per_run(agents_home, tmp_path):
    """Counted with strace: a new session file is synced once (its creation),
    a grown one once (after all its new lines), whatever their lengths."""
    for i in range(3):
        write(cc_path(agents_home, f"{i:08x}-2222-4333-8444-555555555555"),
              cc_session(f"{i:08x}-2222-4333-8444-555555555555", n=40))
    trace = tmp_path / "trace"

    def syncs():
        p = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,pwritev2", "-o", str(trace),
                            shutil.which("panto-log"), "import", "--all"], capture_output=True)
        if p.returncode != 0 and b"ptrace" in p.stderr:
            pytest.skip("ptrace is not permitted here")
        assert p.returncode == 0, p.stderr
        counts = {}
        for line in trace.read_text().splitlines():
            if "sync(" in line or "RWF_DSYNC" in line:
                path = line.split("<", 1)[1].split(">", 1)[0] if "<" in line else "?"
                if path.endswith(".jsonl") or "/.panto-" in path:
                    counts[path] = counts.get(path, 0) + 1
        return counts

    first = syncs()
    assert len(first) == 3 and set(first.values()) == {1}, first       # each creation's temporary file
    for i in range(3):
        sid = f"{i:08x}-2222-4333-8444-555555555555"
        more = cc_session(sid, n=30, start=40)
        more[0]["parentUuid"] = f"{sid[:8]}-b39"
        write(cc_path(agents_home, sid), more, mode="ab")
    grown = syncs()
    assert sorted(grown.values()) == [1, 1, 1] and all(p.endswith(".jsonl") for p in grown), grown
    assert syncs() == {}


def test_an_archived_copy_of_an_active_rollout_is_left_out(agents_home):
    write(cx_path(agents_home), cx_session(n=2))
    write(cx_path(agents_home, archived=True), cx_session(n=1))       # the same rollout, archived earlier
    other = "0199aaaa-bbbb-7ccc-8ddd-000000000007"
    write(cx_path(agents_home, other, archived=True), cx_session(other, n=1))
    assert run_all().startswith("panto-log: 2 sessions (2 new")
    assert len(lines(read(session_file(CX_SID, "/home/u/cx")))) == 5
    assert os.path.exists(session_file(other, "/home/u/cx"))


def _import_state():
    return os.path.join(os.environ["XDG_STATE_HOME"], "panto", "import")


def _buckets():
    d = _import_state()
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.startswith("offsets-"))


def _grow_claude_sessions(home, count):
    for i in range(count):
        sid = f"{i:08x}-2222-4333-8444-555555555555"
        more = cc_session(sid, n=1, start=25, cwd=f"/home/u/p{i % 3}")
        more[0]["parentUuid"] = f"{sid[:8]}-b24"
        write(cc_path(home, sid, f"-home-u-p{i % 3}"), more, mode="ab")


def test_records_are_kept_in_a_few_files_and_hostile_ones_change_nothing(agents_home, tmp_path):
    """Where each source was read to is kept in at most 16 files (0600), not
    one per source, and the one-file-per-source records of earlier versions
    are swept. A bucket that is garbage, a FIFO, a folder or another
    bucket's is read as nothing: its sources are read again from the top,
    without a hang and without writing anything twice."""
    _claude_sessions(agents_home, 40)
    os.makedirs(_import_state(), mode=0o700)
    earlier = os.path.join(_import_state(), "0123456789abcdef0123456789abcdef.json")
    with open(earlier, "wb") as f:
        f.write(b'{"source": "/gone", "end": 1}')
    assert run_all().endswith("(40 new, 0 grown, 0 unchanged), added 2000 entries; skipped: split line 1000")
    buckets = _buckets()
    assert 1 < len(buckets) <= 16 and not os.path.exists(earlier)
    assert not [n for n in os.listdir(_import_state()) if n.endswith(".json")]
    assert all(os.stat(p).st_mode & 0o777 == 0o600 for p in buckets)
    _grow_claude_sessions(agents_home, 40)
    expected, _ = reference(tmp_path)
    other = read(buckets[0])
    for i, p in enumerate(buckets):
        os.unlink(p)
        kind = i % 4
        if kind == 0:
            with open(p, "wb") as f:
                f.write(b"\x00garbage" * 100)
        elif kind == 1:
            os.mkfifo(p, 0o600)
        elif kind == 2:
            os.mkdir(p, 0o700)
        else:
            with open(p, "wb") as f:
                f.write(other)
    # every source read again from the top (its split lines seen again), only its new turn written
    assert run_all().endswith("(0 new, 40 grown, 0 unchanged), added 80 entries; skipped: split line 1040")
    assert sessions_in(os.environ["PANTO_SESSION_DIR"]) == expected
    # (a folder is not replaced: its sources are read again each run, writing nothing)
    assert "(0 new, 0 grown, 40 unchanged), added 0 entries" in run_all()
    assert sessions_in(os.environ["PANTO_SESSION_DIR"]) == expected


def test_a_fifo_named_like_a_source_is_never_opened(agents_home):
    """A FIFO where a sub-agent's transcript or a rollout would be is never
    opened (its open would wait for a writer forever): each is named as a
    source that failed, and every other session is imported. (A FIFO where
    a transcript would be is not even listed: only files are.)"""
    _claude_sessions(agents_home, 2)
    _codex_sessions(agents_home, 1)
    sub = os.path.join(os.path.dirname(cc_path(agents_home, CC_SID)), CC_SID, "subagents")
    os.makedirs(sub)
    fifos = [os.path.join(sub, "agent-a1b2c3.jsonl"), cx_path(agents_home, "0199ffff-bbbb-7ccc-8ddd-000000000000")]
    for path in fifos + [cc_path(agents_home, B_SID)]:
        os.mkfifo(path, 0o600)
    for extra, summary in (((), "3 sessions (3 new, 0 grown, 0 unchanged), added 150 entries; "
                                "skipped: split line 50, turn_context 1; 2 sources failed"),
                           (("--dry-run",), "3 sessions (0 new, 0 grown, 3 unchanged), would add 0 entries; "
                                            "2 sources failed")):
        p = log("import", "--all", *extra, timeout=30)
        err = p.stderr.decode().strip().splitlines()
        assert p.returncode == 1 and "Traceback" not in p.stderr.decode(), err
        assert sorted(err[:-1]) == sorted(f"panto-log: {f}: not a regular file (a FIFO's open would wait for a "
                                          f"writer); left out" for f in fifos)
        assert err[-1] == f"panto-log: {summary}", err[-1]
    assert len(sessions_in(os.environ["PANTO_SESSION_DIR"])) == 3


def test_the_record_of_a_source_deleted_is_forgotten(agents_home):
    """Claude Code deletes transcripts after 30 days: their records do not pile up."""
    _claude_sessions(agents_home, 3)
    run_all()
    gone, kept = (cc_path(agents_home, f"{i:08x}-2222-4333-8444-555555555555", f"-home-u-p{i}") for i in (1, 2))

    def remembered():
        return b"".join(read(p) for p in _buckets())

    assert gone.encode() in remembered() and kept.encode() in remembered()
    os.unlink(gone)
    assert run_all().endswith("(0 new, 0 grown, 2 unchanged), added 0 entries")
    assert gone.encode() not in remembered() and kept.encode() in remembered()


def _answers(path):
    """(usage, billedIn) of each assistant message of a session file."""
    return [(e["message"].get("usage"), e.get("billedIn")) for e in lines(read(path))
            if e.get("type") == "message" and e["message"]["role"] == "assistant"]


def _pi_session(sid, turns, parent=None):
    """A pi session of `turns` (second, input tokens, output tokens): a prompt and an answer each."""
    recs = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-02T10:00:00.000Z", "cwd": "/home/u/pi"}]
    if parent:
        recs[0]["parentSession"] = parent
    prev = None
    for n, (t, i, o) in enumerate(turns):
        u, a = f"{n:04x}aaaa", f"{n:04x}bbbb"
        ts = f"2026-01-02T10:{t // 60:02d}:{t % 60:02d}.000Z"
        recs.append({"type": "message", "id": u, "parentId": prev, "timestamp": ts,
                     "message": {"role": "user", "content": f"q{t}", "timestamp": 1767348000000 + t * 1000}})
        recs.append({"type": "message", "id": a, "parentId": u, "timestamp": ts,
                     "message": {"role": "assistant", "content": [{"type": "text", "text": f"a{t}"}],
                                 "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                                 "usage": {"input": i, "output": o, "cacheRead": 0, "cacheWrite": 0,
                                           "totalTokens": i + o}, "stopReason": "stop",
                                 "timestamp": 1767348000000 + t * 1000 + 500}})
        prev = a
    return recs


def test_pi_and_opencode_responses_are_each_paid_once_and_only_copies_are_billed_elsewhere(agents_home,
                                                                                          monkeypatch):
    """Each response of another agent is known by its whole billing (pi:
    time, model, tokens; opencode: times, model, tokens): two sessions'
    different responses are each paid by their own session, and only a
    fork's copies are billed in the session they were copied from. (They
    were all known by the agent's name: every response after the first
    was billed in the first session imported.)"""
    pi_dir = os.path.join(agents_home, "pi")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", pi_dir)
    monkeypatch.setenv("OPENCODE_DATA_DIR", os.path.join(agents_home, "opencode"))
    folder = os.path.join(pi_dir, "sessions", "--home-u-pi--")
    a_sid, b_sid, f_sid = (f"0b5b1c2e-1111-4222-8333-44445555666{n}" for n in (1, 2, 3))
    a = write(os.path.join(folder, f"2026-01-02T10-00-00-000Z_{a_sid}.jsonl"), _pi_session(a_sid, [(1, 10, 5), (2, 11, 6)]))
    write(os.path.join(folder, f"2026-01-02T10-01-00-000Z_{b_sid}.jsonl"), _pi_session(b_sid, [(61, 12, 7)]))
    write(os.path.join(folder, f"2026-01-02T10-02-00-000Z_{f_sid}.jsonl"),
          _pi_session(f_sid, [(1, 10, 5), (2, 11, 6), (121, 13, 8)], parent=a))
    oc = oc_db(os.path.join(agents_home, "opencode", "opencode.db"), "ses_one", [
        oc_user("msg_01", 1, [{"type": "text", "text": "hi"}]),
        oc_answer("msg_02", 2, [{"type": "text", "text": "one"}]),
        oc_user("msg_03", 3, [{"type": "text", "text": "again"}]),
        oc_answer("msg_04", 4, [{"type": "text", "text": "two"}])])
    oc.close()
    assert run_all().startswith("panto-log: 4 sessions (4 new")

    pi = "/home/u/pi"
    assert _answers(session_file(a_sid, pi)) == [({"input": 10, "output": 5}, None), ({"input": 11, "output": 6}, None)]
    assert _answers(session_file(b_sid, pi)) == [({"input": 12, "output": 7}, None)]
    assert _answers(session_file(f_sid, pi)) == [(None, a_sid), (None, a_sid), ({"input": 13, "output": 8}, None)]
    (opencode,) = os.listdir(os.path.dirname(session_file("x", "/proj")))     # its only session
    assert _answers(os.path.join(os.path.dirname(session_file("x", "/proj")), opencode)) == \
        [({"input": 10, "output": 5}, None)] * 2


def test_a_pi_file_rewritten_as_version_3_adds_a_branch_whose_responses_are_paid_once(agents_home, monkeypatch):
    """pi rewrites a version 1 file as version 3 when it opens it, giving its
    entries ids: the file is read again from the top, and its entries come
    in as a second branch of the same session (their ids are new), each
    response billed in that session, not paid twice."""
    pi_dir = os.path.join(agents_home, "pi")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", pi_dir)
    sid = "0b5b1c2e-1111-4222-8333-444455556661"
    path = os.path.join(pi_dir, "sessions", "--home-u-pi--", f"2026-01-02T10-00-00-000Z_{sid}.jsonl")
    v3 = _pi_session(sid, [(1, 10, 5), (2, 11, 6)])
    v1 = [{k: v for k, v in r.items() if k not in ("id", "parentId", "version")} for r in v3]
    v1[0]["id"] = sid
    write(path, v1)
    assert run_all().startswith("panto-log: 1 session (1 new")
    write(path, v3)
    assert run_all().startswith("panto-log: 1 session (0 new, 1 grown")
    assert _answers(session_file(sid, "/home/u/pi")) == [({"input": 10, "output": 5}, None), ({"input": 11, "output": 6}, None),
                       (None, sid), (None, sid)]


IMPORT_PRICES = """\
[anthropic."claude-sonnet-4-5"]
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75

[[anthropic."claude-sonnet-4-5".changes]]
since = 2025-06-01
above_tokens = 110
input_above = 6.0
output_above = 22.5

[openai.gpt-5-codex]
input = 1.25
output = 10.0
cache_read = 0.125
"""


def _big_claude_session(home, i):
    """A Claude Code session of about 7.8 MB (1,900 turns; 5.6 MB as panto's), its path."""
    text = "lorem ipsum " * 200
    sid = f"{0xb16 + i:08x}-3333-4333-8444-555555555555"      # (its responses' ids: of its own)
    recs = cc_session(sid, n=1900, cwd=f"/home/u/big{i}")
    for r in recs:
        if r["type"] == "user":
            r["message"]["content"] += f" {text}"
    path = cc_path(home, sid, f"-home-u-big{i}")
    write(path, recs)
    return path


def test_a_first_import_leaves_panto_cost_nothing_to_read(agents_home, tmp_path):
    """The files a first import makes whole come with their entries in
    panto-cost's cache (tallies.made): each the entry panto-cost stores
    when it reads the file itself (copies billed in another session
    included, a covered range and its CRC-32 for a large one), and the
    reports read through them are those read afresh."""
    from pantolib import persist

    _claude_sessions(agents_home, 40)
    _codex_sessions(agents_home, 12)
    _big_claude_session(agents_home, 0)
    config = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto")
    os.makedirs(config)
    with open(os.path.join(config, "models.toml"), "w") as f:
        f.write(IMPORT_PRICES)
    env = dict(os.environ, PANTO_JOBS="2")
    assert "53 sessions (53 new" in run_all(env=env)
    made = sessions_in(env["PANTO_SESSION_DIR"])
    assert sum(b.count(b'"billedIn"') for b in made.values()) == 8
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "cost-cache.json")
    kept = persist.load(cache, "cost-cache.json")["files"]
    root = env["PANTO_SESSION_DIR"]
    assert sorted(kept) == sorted(os.path.join(root, name) for name in made)
    assert all(type(entry[13]) is bool for entry in kept.values())     # (persist.settles: its probe may fail)
    for name, entry in kept.items():        # the covered range of each, and its CRC-32, are the file's
        with open(name, "rb") as f:
            data = f.read()
        assert entry[1] in (0, len(data)) and entry[2] == (zlib.crc32(data) if entry[1] else 0), name
    assert any(entry[1] for entry in kept.values())

    reports = {}
    for how in ((), ("--no-cache",)):
        for by in ("session", "model", "agent"):
            p = run(["panto-cost", "--all", "--by", by, "--json", *how])
            assert p.returncode == 0, p.stderr
            reports[how, by] = p.stdout
    for by in ("session", "model", "agent"):
        assert reports[(), by] == reports[("--no-cache",), by]
    assert b'"claude-sonnet-4-5"' in reports[(), "model"] and b'"gpt-5-codex"' in reports[(), "model"]

    # an edit of the same size, its modification time put back, is seen at once
    name = next(n for n in sorted(kept) if b'"output":27,' in open(n, "rb").read())
    st = os.stat(name)
    with open(name, "r+b") as f:
        data = f.read()
        f.seek(0)
        f.write(data.replace(b'"output":27,', b'"output":99,', 1))
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns))
    edited = [run(["panto-cost", "--all", "--by", "model", "--json", *how]).stdout for how in ((), ("--no-cache",))]
    assert edited[0] == edited[1] != reports[(), "model"]
    kept = persist.load(cache, "cost-cache.json")["files"]      # (the edited file's entry now panto-cost's)

    os.unlink(cache)
    p = run(["panto-cost", "--all", "--no-cache"])
    assert p.returncode == 0
    p = run(["panto-cost", "--all", "--by", "day"])         # (another report: none is remembered)
    assert p.returncode == 0, p.stderr
    read = persist.load(cache, "cost-cache.json")["files"]
    assert sorted(read) == sorted(kept)
    for name, entry in kept.items():
        mine = read[name]
        assert entry[0] == mine[0] and entry[1:9] + entry[10:11] + entry[12:13] == mine[1:9] + mine[10:11] + mine[12:13]
        assert sorted(map(repr, entry[9])) == sorted(map(repr, mine[9])), name


def test_sources_of_several_mebibytes_are_read_ahead_and_each_made_whole_at_once(agents_home, tmp_path):
    """A source larger than a run of small ones (up to importing.AHEAD) is
    read by a worker too: its session is made whole in one creation, with
    its entry in panto-cost's cache, and is byte for byte the session one
    process makes."""
    from pantolib import importing, persist

    for i in range(3):
        assert 4 << 20 < os.path.getsize(_big_claude_session(agents_home, i)) < importing.AHEAD
    config = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto")
    os.makedirs(config)
    with open(os.path.join(config, "models.toml"), "w") as f:
        f.write(IMPORT_PRICES)
    assert "3 sessions (3 new" in run_all(env=dict(os.environ, PANTO_JOBS="2"))
    root = os.environ["PANTO_SESSION_DIR"]
    made = sessions_in(root)
    cache = persist.load(os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "cost-cache.json"), "cost-cache.json")
    assert cache is not None, "no session came with its cost entry"
    assert sorted(cache["files"]) == sorted(os.path.join(root, name) for name in made)   # (a worker's only)

    alone = dict(os.environ, PANTO_JOBS="1", PANTO_SESSION_DIR=str(tmp_path / "alone"),
                 XDG_STATE_HOME=str(tmp_path / "alone-state"), XDG_CACHE_HOME=str(tmp_path / "alone-cache"))
    assert "3 sessions (3 new" in run_all(env=alone)
    assert sessions_in(alone["PANTO_SESSION_DIR"]) == made
    reports = [run(["panto-cost", "--all", "--by", "session", "--json", *how]) for how in ((), ("--no-cache",))]
    assert reports[0].returncode == 0 and reports[0].stdout == reports[1].stdout


def test_one_transcript_in_two_project_folders_makes_one_session_with_each_entry_once(agents_home, tmp_path):
    """The same transcript twice (a project folder copied under another name):
    the second is taken line by line into the file the first makes, whether
    read ahead by workers (the run knows the file it made: it asks the
    folder once, not each session) or here."""
    recs = cc_session(n=3)
    write(cc_path(agents_home), recs)
    copy = write(cc_path(agents_home, CC_SID, "-home-u-proj-copy"), recs)    # the first in order ('-' < '/')
    want, summary = reference(tmp_path)
    assert summary == run_all(env=dict(os.environ, PANTO_JOBS="2"))
    assert summary.startswith("panto-log: 2 sessions (1 new, 0 grown, 1 unchanged), added 6 entries")
    assert sessions_in(os.environ["PANTO_SESSION_DIR"]) == want
    assert read(session_file(CC_SID, "/home/u/proj")) == log("import", copy).stdout


def _other_code(tmp_path):
    """PYTHONPATH naming a copy of the installed package: other code, as after
    an upgrade (its fingerprint differs: no record or cache of the code
    installed is trusted)."""
    import sys

    where = subprocess.run([sys.executable, "-c", "import pantolib; print(pantolib.__file__)"], cwd="/",
                           capture_output=True, check=True).stdout.decode().strip()
    site = tmp_path / "site"
    shutil.copytree(os.path.dirname(where), site / "pantolib", ignore=shutil.ignore_patterns("__pycache__"))
    return str(site)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to see how the session files are opened")
def test_after_an_upgrade_a_session_imported_already_is_recognised_by_its_bytes(agents_home, tmp_path):
    """Other code reads every source again from the top (the last run's
    records are not its own). A session file that begins with what its
    source imports to, byte for byte, is left alone, never opened to be
    written, whatever a REPL added to it since; one whose source grew
    gets its new entries, each once; every response stays paid once. A
    dry run first says just that, and the run after opens no source."""
    _claude_sessions(agents_home, 12)           # (the 2nd, 7th and 12th begin with a copy: billed elsewhere)
    env = dict(os.environ, PANTO_JOBS="2")      # (the sources read ahead, each taken whole)
    assert "12 sessions (12 new, 0 grown, 0 unchanged), added 600 entries" in run_all(env=env)
    root = os.environ["PANTO_SESSION_DIR"]
    continued = session_file("00000001-2222-4333-8444-555555555555", "/home/u/p1")
    leaf = lines(read(continued))[-1]["id"]
    added = (b'{"type":"message","id":"e0000001","parentId":"%s","timestamp":"2025-09-01T00:00:00.000Z",'
             b'"message":{"role":"user","content":[{"type":"text","text":"continued in panto"}]}}\n' % leaf.encode())
    assert log("append", continued, input=added).returncode == 0
    grown = "00000003-2222-4333-8444-555555555555"
    more = cc_session(grown, n=1, start=25, cwd="/home/u/p0")
    more[0]["parentUuid"] = f"{grown[:8]}-b24"
    write(cc_path(agents_home, grown, "-home-u-p0"), more, mode="ab")
    expected, _ = reference(tmp_path)
    expected[os.path.relpath(continued, root)] += added
    before = snapshot(root)
    upgraded = dict(env, PYTHONPATH=_other_code(tmp_path))
    for jobs in ("2", "1"):         # (it asks nobody who paid; read here, each entry is looked for by id)
        dry = log("import", "--all", "--dry-run", env=dict(upgraded, PANTO_JOBS=jobs), timeout=120)
        assert dry.stderr.decode().endswith("12 sessions (0 new, 1 grown, 11 unchanged), would add 2 entries; "
                                            "skipped: split line 301\n")
    assert snapshot(root) == before
    trace = tmp_path / "trace"

    def traced_import():
        """An import --all by the other code: its summary, and each opening of a .jsonl file (strace's line)."""
        p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(trace),
                            shutil.which("panto-log"), "import", "--all"], env=upgraded, capture_output=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stderr.decode(), [line for line in trace.read_text().splitlines() if ".jsonl" in line]

    said, opened = traced_import()
    assert said.endswith("12 sessions (0 new, 1 grown, 11 unchanged), added 2 entries; skipped: split line 301\n")
    assert sessions_in(root) == expected
    written = {line.split('"')[1] for line in opened if ("O_RDWR" in line or "O_WRONLY" in line) and root in line}
    assert written == {session_file(grown, "/home/u/p0")}
    after = snapshot(root)
    assert {p: v for p, v in after.items() if grown not in p} == {p: v for p, v in before.items() if grown not in p}
    # what it recognised it recorded: the next run opens no source again
    said, opened = traced_import()
    assert said.endswith("12 sessions (0 new, 0 grown, 12 unchanged), added 0 entries\n"), said
    sources = os.path.join(agents_home, "claude")
    assert [line for line in opened if sources in line] == []
    assert snapshot(root) == after
