"""Caches never lie (SPEC 11): every command that has a cache prints exactly
what it prints without it, across hostile edits of the session files (in
place keeping size and mtime, a same-length edit in the middle then growth,
replaced by rename at the same size, cut and regrown, a rewrite within the
same whole second), hostile cache files (corrupt, one digit changed, a FIFO,
a symlink to /dev/zero, mode 0666, another owner, huge) and an edited
install at the same version. Nothing blocks (every run has a timeout), and
append never writes an id twice nor echoes a line the file lacks."""
import marshal
import os
import random
import shutil
import stat
import subprocess

import orjson
import pytest

from builders import OTHER, compaction, header, msg, session_bytes, session_file, settled, split_lines
from conftest import run
from pantolib import persist

NEEDLE = b"NEEDLEXY"
# Same-length edits in the middle of session A: a turn's usage (panto-cost), a
# prompt's text (panto-ls --grep) and the compaction's firstKeptId (replay --context).
# All lie more than 4 KiB from either end of the file.
EDITS = ((b'"question 10"', b'"NEEDLEXY 10"'), (b'"input":10,"output":5}', b'"input":90,"output":5}'),
         (b'"firstKeptId":"0012aaaa"', b'"firstKeptId":"0011aaaa"'))


def _commands(a):
    return [["panto-ls"], ["panto-ls", "--all", "--grep", NEEDLE.decode()], ["panto-cost", "--all", "--by", "session"],
            ["panto-cost", a], ["panto-log", "replay", "--context", a]]


def _run(args, env=None):
    p = run(args, env=env, timeout=20)     # a run that blocks fails the test
    assert b"Traceback" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr


def _cached(a, env=None, back=False):
    """What the commands print through their caches (results in the order of
    _commands). back: run them last first, so that the commands that share a
    memo (ls and ls --grep, cost and cost FILE) each meet the memo the last
    forward run left (its own), as a command run again does."""
    commands = _commands(a)
    order = range(len(commands) - 1, -1, -1) if back else range(len(commands))
    got = {i: _run(commands[i], env) for i in order}
    return [got[i] for i in range(len(commands))]


def _uncached(a, tmp_path, env=None):
    """The same commands reading no cache: --no-cache, and for replay --context
    (which has none) an empty cache folder of its own."""
    out = []
    for args in _commands(a):
        if args[0] == "panto-log":
            empty = tmp_path / f"empty-{random.getrandbits(64):x}"
            out.append(_run(args, dict(env or os.environ, XDG_CACHE_HOME=str(empty))))
        else:
            out.append(_run(args + ["--no-cache"], env))
    return out


def _where(data, old):
    """Where an edit goes: its text's first place after the first third of the file."""
    return data.index(old, len(data) // 3) if old in data[len(data) // 3:] else data.index(old)


def _edited(data):
    for old, new in EDITS:
        assert len(old) == len(new)
        at = _where(data, old)
        data = data[:at] + new + data[at + len(old):]
    return data


def _compacted(cwd, turns=40, at=20):
    """A session of `turns` turns, compacted after turn `at` keeping from two turns before it."""
    out, parent = [header(cwd), msg("5555aaaa", None, "system", "be brief")], "5555aaaa"
    for i in range(turns):
        u, a = f"{i:04x}aaaa", f"{i:04x}bbbb"
        out += [msg(u, parent, "user", f"question {i}"),
                msg(a, u, "assistant", f"answer {i}", stopReason="stop", provider="openai", model="gpt-4o",
                    usage={"input": 10, "output": 5})]
        parent = a
        if i == at:
            out.append(compaction("cccc0000", parent, f"{i - 2:04x}aaaa"))
            parent = "cccc0000"
    return b"".join(out), parent


def _sessions(cwd):
    """Session A (compacted in its middle) and B, settled: the caches made of them are believed on identity.
    And a price table for their model (the reports price them: its memo is one of the caches)."""
    prices = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto", "models.toml")
    os.makedirs(os.path.dirname(prices), exist_ok=True)
    with open(prices, "w") as f:
        f.write('[openai."gpt-4o"]\ninput = 2.5\noutput = 10\n')
    data, leaf = _compacted(cwd)
    assert all(4096 < _where(data, old) < len(data) - 4096 for old, _ in EDITS)
    a = session_file(cwd, data=data)
    b = session_file(cwd, sid=OTHER, data=session_bytes(cwd, OTHER, turns=2))
    settled(a, b)
    return a, data, leaf


def _put_back(a, st):
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))


def in_place_keeping_size_and_mtime(a, data):
    st = os.stat(a)
    with open(a, "r+b") as f:
        f.write(_edited(data))
    _put_back(a, st)


def same_length_edit_in_the_middle_then_growth(a, data):
    in_place_keeping_size_and_mtime(a, data)
    with open(a, "ab") as f:
        f.write(msg("e0000001", "0027bbbb", "user", "grown"))


def replaced_by_rename_at_the_same_size(a, data):
    st = os.stat(a)
    with open(a + ".new", "wb") as f:
        f.write(_edited(data))
    _put_back(a + ".new", st)
    os.rename(a + ".new", a)


def cut_and_regrown(a, data):
    st = os.stat(a)
    at = data.rindex(b"\n", 0, min(_where(data, old) for old, _ in EDITS)) + 1   # the line of the first edit
    os.truncate(a, at)
    with open(a, "ab") as f:
        f.write(_edited(data)[at:])
    _put_back(a, st)


def rewritten_within_the_same_second(a, data):
    """A filesystem with whole-second times: the file's mtime is a whole second,
    and the rewrite keeps it (coarse timestamps, simulated with os.utime)."""
    st = os.stat(a)
    with open(a, "r+b") as f:
        f.write(_edited(data))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))


def _whole_second(a):
    second = os.stat(a).st_mtime_ns // persist.SECOND * persist.SECOND
    os.utime(a, ns=(second, second))


@pytest.mark.parametrize("edit", [in_place_keeping_size_and_mtime, same_length_edit_in_the_middle_then_growth,
                                  replaced_by_rename_at_the_same_size, cut_and_regrown,
                                  rewritten_within_the_same_second])
def test_hostile_edits_of_a_session_change_nothing(isolated, tmp_path, edit):
    a, data, _ = _sessions(isolated)
    if edit is rewritten_within_the_same_second:
        _whole_second(a)
    before = _cached(a)
    assert before == _cached(a) == _uncached(a, tmp_path)          # the caches are made, then used
    assert all(r[0] == 0 for r in before) and [bool(r[1]) for r in before] == [True, False, True, True, True]
    edit(a, data)
    after = _cached(a, back=True)
    assert after == _uncached(a, tmp_path)
    assert all(x[1] != y[1] for x, y in zip(before[1:], after[1:]))   # the edit shows in what they print
    assert _cached(a) == after                                     # and the caches made anew agree
    _append_is_exact(a)


def _append_is_exact(a, extra=b""):
    """replay F | append F writes nothing and echoes the file's own lines;
    a new entry (extra) is written once, and everything echoed is in the file."""
    before = open(a, "rb").read()
    replayed = run(["panto-log", "replay", a], timeout=20)
    assert replayed.returncode == 0, replayed.stderr
    p = run(["panto-log", "append", a], input=replayed.stdout + extra, timeout=20)
    assert p.returncode == 0, p.stderr
    now = open(a, "rb").read()
    assert now == before + extra                                   # nothing twice, nothing lost
    lines = split_lines(now)
    assert all(line in lines for line in split_lines(p.stdout))     # nothing echoed that the file lacks
    ids = [orjson.loads(line).get("id") for line in lines[1:]]
    assert len(ids) == len(set(ids))


def _cache_files():
    root = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names]
    return sorted(out)


def _lying(path):
    """A well-formed cache file (our code, a good CRC) in place of `path` that says
    something untrue: a memo another output, any other cache an empty one."""
    name = os.path.basename(path) if not path.split(os.sep)[-2] == "index" else "index"
    body = bytes(persist.read(path, name))
    if name == "cost-parts.memo":     # a report's parts: its total says other sums
        ctx, token, stamp, idents, parts, (by, json, total, *rest) = marshal.loads(body)
        body = marshal.dumps((ctx, token, stamp, idents, parts, (by, json, [n + 1 for n in total], *rest)), 4)
    elif name == "cost-parts-new.memo":     # what changed since: its total says other sums
        ctx, token, stamp, moved, parts, (total, *rest) = marshal.loads(body)
        body = marshal.dumps((ctx, token, stamp, moved, parts, ([n + 1 for n in total], *rest)), 4)
    elif path.endswith(".memo"):      # the key's length and the key, (stamp, notes, status, length), the output
        n = body.index(b"\n") + 1
        head = body[:n + int(body[:n])]
        stamp, notes, status, _ = marshal.loads(body[len(head):])
        body = head + marshal.dumps((stamp, notes, status, 6), 0) + b"A LIE\n"
    else:
        doc = orjson.loads(body)
        if name == "index":
            doc["nodes"] = {}
        elif "files" in doc:
            doc["files"] = {}
        else:
            doc = {}
        body = orjson.dumps(doc)
    os.unlink(path)
    assert persist.write(path, name, body)


def corrupt(path):
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(random.Random(size).randbytes(size))


def one_digit_changed(path):
    data = bytearray(open(path, "rb").read())
    body = data.index(b"\n") + 1
    digits = [i for i in range(body, len(data)) if 48 <= data[i] <= 57]
    i = random.Random(len(data)).choice(digits)
    data[i] = 48 + (data[i] - 48 + 1) % 10
    with open(path, "wb") as f:
        f.write(data)


def a_fifo(path):
    os.unlink(path)
    os.mkfifo(path, 0o600)


def a_symlink_to_dev_zero(path):
    os.unlink(path)
    os.symlink("/dev/zero", path)


def lying_and_mode_0666(path):
    _lying(path)
    os.chmod(path, 0o666)


def lying_and_of_another_owner(path):
    _lying(path)
    os.chown(path, 4321, 4321)


def lying_and_huge(path):
    _lying(path)
    with open(path, "r+b") as f:       # a sparse tail: 100 MB that take no disk
        f.truncate(100 << 20)


@pytest.mark.parametrize("attack", [corrupt, one_digit_changed, a_fifo, a_symlink_to_dev_zero, lying_and_mode_0666,
                                    lying_and_of_another_owner, lying_and_huge])
def test_hostile_cache_files_are_never_trusted_nor_waited_on(isolated, tmp_path, attack):
    if attack is lying_and_of_another_owner and os.geteuid() != 0:
        pytest.skip("a file of another user needs root to make")
    a, data, leaf = _sessions(isolated)
    right = _cached(a)
    assert right == _cached(a) == _uncached(a, tmp_path)
    _append_is_exact(a)                 # (the index is written by append too)
    files = _cache_files()
    assert len(files) >= 8 and any("/index/" in f for f in files) and any(f.endswith("/prices.memo") for f in files)
    for f in files:
        attack(f)
    assert _cached(a, back=True) == right      # nothing trusted (each run has a timeout: nothing waited on)
    for f in files:                     # and each is replaced by a good one
        st = os.lstat(f)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid(), f
        assert st.st_size < 1 << 20, f
    assert _cached(a) == right
    _append_is_exact(a, msg("e0000001", leaf, "user", "one more"))


def test_a_forged_index_never_makes_append_skip_or_echo_what_the_file_lacks(isolated):
    """A well-formed index (our code, a good CRC) that claims an entry the file
    does not hold, or puts an entry at the wrong offset: append checks the
    line before skipping an id, and replay --context the lines it sends."""
    a, data, leaf = _sessions(isolated)
    right = run(["panto-log", "replay", "--context", a], timeout=20)
    assert right.returncode == 0
    (index,) = [f for f in _cache_files() if "/index/" in f]
    doc = persist.load(index, "index")
    first = next(k for k, v in doc["nodes"].items() if v[1] == len(split_lines(data)[0]))
    doc["nodes"][first][1:3] = [3, 40]                                # its offsets moved into the header
    assert persist.save(index, "index", doc)
    assert run(["panto-log", "replay", "--context", a], timeout=20).stdout == right.stdout
    n = doc["nodes"][leaf]
    doc["nodes"]["e0000001"] = [leaf, n[1], n[2], None, None]        # an entry the file lacks, at the leaf's line
    assert persist.save(index, "index", doc)
    _append_is_exact(a, msg("e0000001", leaf, "user", "really new"))


def test_an_edited_install_at_the_same_version_invalidates_every_cache(isolated, tmp_path):
    """A copy of the installed package (the one the commands run), run through
    PYTHONPATH: after an edit of what the reports print, every command prints
    the new output at once."""
    import sys

    where = subprocess.run([sys.executable, "-c", "import pantolib; print(pantolib.__file__)"], cwd="/",
                           capture_output=True, check=True).stdout.decode().strip()
    site = tmp_path / "site"
    shutil.copytree(os.path.dirname(where), site / "pantolib", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(site))
    a, data, _ = _sessions(isolated)
    before = _cached(a, env)
    assert before == _cached(a, env) == _uncached(a, tmp_path, env)
    for module, old, new in (("cmd/ls.py", 'f"{n} messages"', 'f"{n} MESSAGES"'), ("report.py", '"TURNS"', '"TOURS"'),
                             ("index.py", "Reading a long session", "Reading a LONG session")):
        f = site / "pantolib" / module
        text = f.read_text()
        assert old in text
        f.write_text(text.replace(old, new))    # the same size or not: any edit is other code
    after = _cached(a, env, back=True)
    assert after == _uncached(a, tmp_path, env)
    assert [x == y for x, y in zip(before, after)] == [False, True, False, False, True]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to see what is opened")
@pytest.mark.parametrize("args", [["panto-ls", "--no-cache"], ["panto-ls", "--all", "--grep=question", "--no-c"],
                                  ["panto-cost", "--all", "--no-cache"], ["panto-cost", "--no-cache", "--by", "day"]])
def test_no_cache_neither_reads_nor_writes_any_cache_or_memo(isolated, tmp_path, args):
    """--no-cache (or its abbreviation) opens nothing in the cache folder, the
    memo of its command line included, even where every cache is there."""
    a, _, _ = _sessions(isolated)
    _cached(a)
    _cached(a)
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    before = {f: open(f, "rb").read() for f in _cache_files()}
    trace = tmp_path / "trace"
    if args[0] == "panto-cost" and "--all" not in args:
        args = args + [a]
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat,openat2,stat,newfstatat,rename,renameat2",
                        "-o", str(trace), shutil.which(args[0]), *args[1:]], capture_output=True, timeout=30)
    assert p.returncode == 0 and p.stdout, p.stderr
    assert cache not in trace.read_text()
    assert {f: open(f, "rb").read() for f in _cache_files()} == before
