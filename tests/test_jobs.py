"""PANTO_JOBS: reading the files of a report in worker processes changes nothing
(panto-ls(1), panto-cost(1) ENVIRONMENT): the same output, notes, exit status
and caches as reading them one by one, on hostile files too."""
import os
import shutil
import signal
import subprocess
import sys
import time

import orjson
import pytest

from conftest import SEED_TOML, run
from pantolib import jobs, paths

SONNET = ("anthropic", "claude-sonnet-4-20250514")
GPT = ("openai", "gpt-4o")


def header(sid, cwd, ts="2026-04-25T14:00:00.000Z"):
    return {"type": "session", "version": 1, "id": sid, "timestamp": ts, "cwd": cwd}


def turn(n, parent, model, day, usage, text="question"):
    u = {"type": "message", "id": f"{n:07x}u", "parentId": parent, "timestamp": f"{day}T14:00:{n % 60:02d}.000Z",
         "provider": model[0], "model": model[1],
         "message": {"role": "user", "content": [{"type": "text", "text": f"{text} {n}"}]}}
    a = {"type": "message", "id": f"{n:07x}a", "parentId": u["id"], "timestamp": f"{day}T14:01:{n % 60:02d}.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "provider": model[0],
                     "model": model[1], "stopReason": "stop", "usage": usage}}
    return [u, a]


def write(path, lines, tail=b""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"".join(orjson.dumps(x) + b"\n" for x in lines) + tail)
    return path


def corpus(root):
    """Forty sessions in three folders, and hostile files among them."""
    made = []
    for i in range(40):
        cwd = f"/home/me/p{i % 3}"
        sid = f"0199aaaa-0000-7000-8000-{i:012d}"
        lines, parent = [header(sid, cwd)], None
        for n in range(1 + i % 4):
            model = SONNET if (i + n) % 2 else GPT
            day = f"2026-04-{10 + (i + n) % 15:02d}"
            usage = {"input": 1000 * (i + 1), "output": 10 * n + i, "cacheRead": i * 7}
            if i % 7 == 3 and n == 0:
                usage = None   # a turn without usage
            pair = turn(n, parent, model, day, usage, text=f"prompt of session {i}")
            if usage is None:
                del pair[1]["message"]["usage"]
            lines += pair
            parent = pair[1]["id"]
        if i % 9 == 5:
            lines.append({"type": "session_info", "id": "1a1a1a1a", "parentId": parent,
                          "timestamp": "2026-04-26T00:00:00.000Z", "name": f"named \x1b[31m{i}"})
        d = paths.session_dir(cwd)
        tail = b""
        if i == 11:
            tail = orjson.dumps(turn(99, parent, GPT, "2026-04-20", {"input": 5, "output": 5})[0])[:-9]  # torn
        made.append(write(os.path.join(d, sid + ".jsonl"), lines, tail))
    d = paths.session_dir("/home/me/p1")
    with open(made[4], "ab") as f:
        f.write(b'{"type":"message", not json\n')          # a broken line in the middle of a session
        f.write(orjson.dumps(turn(50, None, SONNET, "2026-04-22", {"input": 3, "output": 4})[1]) + b"\n")
    with open(os.path.join(d, "notes.jsonl"), "w") as f:
        f.write("just some notes\n")                          # not a session
    write(os.path.join(d, "0199bbbb-0000-7000-8000-000000000001.jsonl"),
          [header("not-a-uuid", "/home/me/p1")])              # a header whose id is no UUID
    open(os.path.join(d, "0199bbbb-0000-7000-8000-000000000002.jsonl"), "wb").close()   # empty
    os.makedirs(os.path.join(d, "folder.jsonl"))              # a directory named .jsonl
    os.symlink("/proc/self/mem", os.path.join(d, "0199bbbb-0000-7000-8000-000000000003.jsonl"))  # EIO, root too
    locked = write(os.path.join(d, "0199bbbb-0000-7000-8000-000000000004.jsonl"),
                   [header("0199bbbb-0000-7000-8000-000000000004", "/home/me/p1")])
    os.chmod(locked, 0)                                       # unreadable, unless root
    return made


@pytest.fixture
def env(isolated, tmp_path):
    d = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "models.toml"), "w") as f:
        f.write(SEED_TOML)
    made = corpus(os.environ["PANTO_SESSION_DIR"])

    def with_jobs(n):
        e = dict(os.environ, PANTO_JOBS=str(n), XDG_CACHE_HOME=str(tmp_path / f"cache{n}"))
        return e
    return made, with_jobs


COMMANDS = [["panto-ls", "--all"], ["panto-ls", "--all", "--json"], ["panto-ls", "--all", "--grep", "session 1"],
            ["panto-ls", "--all", "--json", "--grep", "prompt"]]
COMMANDS += [["panto-cost", "--all", "--by", by, *j] for by in ("model", "session", "day") for j in ([], ["--json"])]
COMMANDS += [["panto-cost", "--all", "--by", "session", "--since", "2026-04-15"],
             ["panto-cost", "--all", "--json", "--until", "2026-04-12"], ["panto-cost", "--all", "--strict"]]


def both(args, with_jobs):
    """The same command with one and with two workers: everything it shows."""
    got = []
    for n in (1, 2):
        p = run(args, env=with_jobs(n))
        assert b"Traceback" not in p.stderr, p.stderr
        got.append((p.stdout, p.stderr, p.returncode))
    return got


def caches(with_jobs):
    """What each run's caches hold, without the times they were made (persist.now)."""
    import marshal

    from pantolib import persist

    out = []
    for n in (1, 2):
        d = os.path.join(with_jobs(n)["XDG_CACHE_HOME"], "panto")
        docs = {}
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            body = bytes(persist.read(path, name))
            if name.startswith("cost-parts"):     # a report's parts: without the token and the time
                docs[name] = marshal.loads(body)[3:]
            elif name.endswith(".memo"):   # its key's length and key (which hold the times), then the rest
                n = body.index(b"\n") + 1
                _, notes, status, length = marshal.loads(body[n + int(body[:n]):])
                docs[name] = [body[len(body) - length:], notes, status]
            elif name == "ls-cache.json":
                docs[name] = {p: [e[0], e[2]] for p, e in persist.load(path, name).items()}
            else:
                doc = persist.load(path, name)
                docs[name] = dict(doc, files={p: e[:11] for p, e in doc["files"].items()})
        out.append(docs)
    return out


def same_everywhere(with_jobs):
    for args in COMMANDS:
        for extra in ([], ["--no-cache"]):
            one, two = both(args + extra, with_jobs)
            assert one == two, args + extra
            assert one[0], args       # it did report something
    one, two = caches(with_jobs)
    assert one == two
    assert {"ls-cache.json", "cost-cache.json"} <= set(one)


def test_two_workers_report_exactly_what_one_does(env):
    made, with_jobs = env
    same_everywhere(with_jobs)
    err = run(["panto-cost", "--all"], env=with_jobs(2)).stderr.decode()
    assert "the last line has no line feed" in err and "not a panto session" in err
    assert "Input/output error" in err                     # the unreadable file, named as one path would
    err = run(["panto-ls", "--all", "--no-cache"], env=with_jobs(2)).stderr.decode()
    assert "Input/output error" in err and "not a UUID" in err


def test_after_appends_cuts_and_replacements_the_caches_still_agree(env):
    made, with_jobs = env
    same_everywhere(with_jobs)                              # caches written
    with open(made[0], "ab") as f:                          # grown by a turn
        f.write(b"".join(orjson.dumps(x) + b"\n" for x in turn(77, None, SONNET, "2026-04-24", {"input": 9})))
    with open(made[1], "r+b") as f:                         # cut
        f.truncate(os.path.getsize(made[1]) // 2)
    data = open(made[2], "rb").read().replace(b"question", b"QUESTION")
    os.unlink(made[2])
    with open(made[2], "wb") as f:                          # replaced
        f.write(data)
    with open(made[11], "ab") as f:                         # the torn tail mended
        f.write(b'"}]}}\n')
    same_everywhere(with_jobs)


def test_explicit_files_and_their_errors_are_the_same(env):
    made, with_jobs = env
    d = paths.session_dir("/home/me/p1")
    for extra in ([], [os.path.join(d, "notes.jsonl")], [os.path.join(d, "0199bbbb-0000-7000-8000-000000000003.jsonl")]):
        one, two = both(["panto-cost", "--by", "session", *made, made[0], *extra], with_jobs)
        assert one == two
    assert one[2] == 1 and one[1].startswith(b"panto-cost: ")   # the unreadable file named on the line


def test_workers_answer_in_order_and_a_crashed_one_loses_only_its_own(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "2")
    items = list(range(20))

    def fn(i):
        if i == 13:
            os._exit(3)          # a worker dying mid-way
        if i == 7:
            raise OSError(5, "Input/output error", f"file{i}")
        return {"n": i, "square": i * i}

    done = jobs.run(items, fn, [100] * 20)
    assert 13 not in done
    assert done[7][0] is False and isinstance(done[7][1], OSError) and done[7][1].strerror == "Input/output error"
    for i, (ok, value) in done.items():
        if i != 7:
            assert ok and value == {"n": i, "square": i * i}
    assert len(done) >= 10       # the other worker's share is whole
    monkeypatch.setenv("PANTO_JOBS", "1")
    assert jobs.run(items, fn, [100] * 20) == {}


def test_the_automatic_choice(monkeypatch):
    monkeypatch.delenv("PANTO_JOBS", raising=False)
    assert jobs.workers(1, 1 << 30) == 1                    # one file: one reader
    assert jobs.workers(10, 1 << 30) == min(len(os.sched_getaffinity(0)), 10)    # (each file: one worker)
    assert jobs.workers(1000, 1 << 20) == 1                 # too few bytes
    assert jobs.workers(1000, 1 << 30) == min(len(os.sched_getaffinity(0)), 1000)
    most = jobs.MAX_PER_CPU * len(os.sched_getaffinity(0))
    for value, want in (("3", min(3, most)), ("1", 1), ("50", min(20, most)), ("x", 1), ("-2", 1), ("0", 1)):
        monkeypatch.setenv("PANTO_JOBS", value)
        assert jobs.workers(20, 1 << 10) == want, value


def test_ctrl_c_ends_the_workers_without_a_traceback(env, tmp_path):
    made, with_jobs = env
    sid, cwd = "0199cccc-0000-7000-8000-000000000000", "/home/me/big"
    lines, parent = [header(sid, cwd)], None
    for n in range(300):
        pair = turn(n, parent, SONNET, "2026-04-20", {"input": n, "output": 1}, text="x" * 100)
        lines += pair
        parent = pair[1]["id"]
    first = write(os.path.join(paths.session_dir(cwd), sid + ".jsonl"), lines)
    for i in range(1, 600):                                 # enough work to be interrupted in
        shutil.copy(first, first.replace("000000000000.jsonl", f"{i:012d}.jsonl"))
    exe = shutil.which("panto-cost")
    # The moment varies: right as the first worker is seen (the parent may be
    # forking the next one, the child not yet its own handlers), then a little
    # later. A child that took the parent's handler unwound as a second parent:
    # "interrupted" said twice, or a worker left writing to a pipe nobody read.
    for delay in (0, 0, 0, 0, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.02):
        p = subprocess.Popen([exe, "--all", "--no-cache"], env=with_jobs(2), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        children = f"/proc/{p.pid}/task/{p.pid}/children"
        while p.poll() is None:                             # until its workers run (or it ends)
            try:
                with open(children) as f:
                    if f.read().split():
                        break
            except OSError:
                pass
        assert p.poll() is None, "the report ended before its workers could be seen"
        if delay:
            time.sleep(delay)                               # a moment later (any moment must do)
        os.killpg(p.pid, signal.SIGINT)                     # Ctrl-C: the whole foreground group
        try:
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        assert b"Traceback" not in err
        assert (p.returncode, err) == (130, b"panto-cost: interrupted\n"), delay
        assert _group_empty(p.pid), delay                   # no worker left behind


# panto-cost as its console script runs it, with a Ctrl-C delivered at the
# first instant after each fork returns: in the child (before the worker has
# its own handlers) or in the parent (before it has counted its worker).
AT_FORK = """
import os, signal, sys
from pantolib import launch, signals
signals.start("panto-cost", sys.argv[2:])
where, fork = sys.argv[1], os.fork
def forked():
    pid = fork()
    if (pid == 0) == (where == "child"):
        os.kill(os.getpid(), signal.SIGINT)
    return pid
os.fork = forked
launch.run("panto-cost", sys.argv[2:])
"""


@pytest.mark.parametrize("where", ["child", "parent"])
def test_a_signal_at_the_instant_of_a_fork(env, where):
    made, with_jobs = env
    alone = run(["panto-cost", "--all", "--no-cache", "--by", "session"], env=with_jobs(1))
    p = subprocess.Popen([sys.executable, "-c", AT_FORK, where, "--all", "--no-cache", "--by", "session"],
                         env=with_jobs(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert b"Traceback" not in err
    if where == "child":      # that worker ends; the parent reads its files itself, and says nothing of it
        assert (p.returncode, out, err) == (alone.returncode, alone.stdout, alone.stderr)
    else:                     # the parent is interrupted once, its workers with it
        assert (p.returncode, out, err) == (130, b"", b"panto-cost: interrupted\n")
    assert _group_empty(p.pid)


def _group_empty(pgid):
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state, _, group = f.read().rsplit(")", 1)[1].split()[:3]
                if int(group) == pgid and state != "Z":    # a zombie has ended: it only awaits its parent
                    return False
            except (OSError, IndexError, ValueError):
                continue
    return True


def test_a_report_counts_each_file_as_the_workers_answer_and_reads_none_itself(tmp_path, monkeypatch):
    """tallies.Files.read_ahead: the workers read every file (jobs.ordered), and
    the report takes each answer in its turn while they go on; had an answer
    been refused (a worker asked for the next ones itself), the parent would
    have read the file again, with the same result, only slower."""
    from pantolib import models_toml, tallies

    monkeypatch.setenv("PANTO_JOBS", "2")
    files = []
    for i in range(40):
        sid = f"0199bbbb-0000-7000-8000-{i:012d}"
        path = write(str(tmp_path / "s" / f"{sid}.jsonl"), [header(sid, "/home/me")] +
                     turn(i, None, SONNET, "2026-04-20", {"input": i + 1, "output": 1}))
        files.append((path, os.stat(path)))
    readers, real = tmp_path / "readers", tallies.Files._read

    def traced(self, f, name, *args):
        with open(readers, "a") as out:
            out.write(f"{os.getpid()}\n")
        return real(self, f, name, *args)

    monkeypatch.setattr(tallies.Files, "_read", traced)
    (tmp_path / "models.toml").write_text(SEED_TOML)
    reader = tallies.Files(models_toml.load(str(tmp_path / "models.toml")), use=False)
    reader.read_ahead(files)
    got = [reader.read(name, st) for name, st in files]
    reader.close()
    assert [g.header_id for g in got] == [f"0199bbbb-0000-7000-8000-{i:012d}" for i in range(40)]
    pids = readers.read_text().split()
    assert len(pids) == 40 and str(os.getpid()) not in pids
