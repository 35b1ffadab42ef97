"""A report carried over (pantolib/report.py) is the report made afresh.

panto-cost keeps each file's priced rows and what it printed of each session
(cost-parts.memo), and when a few files changed, takes their old rows out and
their new ones in. Here, over sessions of panto's own, sub-agents, forks and
a copy, each in two models, random changes — a turn of the same model, of
another model, on another day, a prompt alone, a torn last line, a bad line,
an edit in the middle, a file added or removed — are each followed by a
report through the caches and one with --no-cache: stdout, stderr and the
exit status are the same every time, for every --by, as a table and as JSON.
The carried path must have been taken (the cost cache is then not written),
else this test would prove nothing about it."""
import os
import random
import shutil

import orjson
import pytest

from conftest import SEED_TOML, run
from pantolib import persist

SONNET = ("anthropic", "claude-sonnet-4-20250514")
GPT4O = ("openai", "gpt-4o")
ODD = ("openai", "no-such-model")    # no price: its turns are unpriced
SID = "0199aaaa-0000-7000-8000-{:012d}"


def _line(obj):
    return orjson.dumps(obj) + b"\n"


def _session(i, cwd, parent=None, relation=None, sid=None):
    """A header and two turns, one in each priced model."""
    head = {"type": "session", "version": 1, "id": sid or SID.format(i), "timestamp": "2026-04-25T14:00:00.000Z",
            "cwd": cwd}
    if parent is not None:
        head["parentSession"], head["relation"] = parent, relation
    out = [_line(head)]
    for n, model in enumerate((SONNET, GPT4O)):
        out.append(_turn(f"{i:04x}{n:02x}01", None if n == 0 else f"{i:04x}{n - 1:02x}02", model, "2026-04-25", n))
    return b"".join(out)


def _turn(eid, parent, model, day, n, text="ok"):
    user = {"type": "message", "id": eid, "parentId": parent, "timestamp": f"{day}T14:{n % 60:02d}:00.000Z",
            "provider": model[0], "model": model[1],
            "message": {"role": "user", "content": [{"type": "text", "text": "question"}]}}
    reply = {"type": "message", "id": eid[:-2] + "02", "parentId": eid, "timestamp": f"{day}T14:{n % 60:02d}:30.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "provider": model[0],
                         "model": model[1], "stopReason": "stop",
                         "usage": {"input": 1000 + n, "output": 200 + n, "cacheRead": 50, "cacheWrite": 10}}}
    return _line(user) + _line(reply)


def _tree(root):
    """Sessions in two folders: of panto's own, a sub-agent and its parent, a fork, a copy."""
    files = []
    for i in range(8):
        cwd = f"/w/{i % 2}"
        d = os.path.join(root, f"-w-{i % 2}-")
        os.makedirs(d, mode=0o700, exist_ok=True)
        parent = (SID.format(0), "subagent") if i == 5 else (SID.format(1), "fork") if i == 6 else (None, None)
        path = os.path.join(d, SID.format(i) + ".jsonl")
        with open(path, "wb") as f:
            f.write(_session(i, cwd, *parent))
        files.append(path)
    copy = os.path.join(root, "-w-1-", SID.format(99) + ".jsonl")   # a copy: its header names session 3
    shutil.copyfile(files[3], copy)
    return files + [copy]


class Changes:
    """Random changes to the files of a tree, one at a time."""

    def __init__(self, root, files, seed):
        self.root, self.files, self.rng, self.n = root, list(files), random.Random(seed), 0
        self.undo = None      # a torn or bad line is taken out again by the next change (else every report has a note)

    def one(self):
        rng, self.n = self.rng, self.n + 1
        if self.undo is not None:
            path, data = self.undo
            self.undo = None
            with open(path, "wb") as f:
                f.write(data)
            return "undo"
        path = rng.choice(self.files)
        kind = rng.choices(["same", "model", "odd", "day", "prompt", "torn", "bad", "edit", "add", "remove"],
                           [12, 3, 1, 2, 1, 1, 1, 1, 1, 1])[0]
        eid = f"{0xf000 + self.n:04x}0001"
        if kind == "add":
            i = 100 + self.n
            path = os.path.join(self.root, "-w-0-", SID.format(i) + ".jsonl")
            with open(path, "wb") as f:
                f.write(_session(i, "/w/0"))
            self.files.append(path)
        elif kind == "remove" and len(self.files) > 4:
            self.files.remove(path)
            os.unlink(path)
        elif kind == "edit":       # same length, in the middle: a usage figure
            with open(path, "r+b") as f:
                data = f.read()
                at = data.find(b'"input":100')
                if at >= 0:
                    f.seek(at + len(b'"input":10'))
                    f.write(b"9")
        else:
            with open(path, "rb") as f:
                data = f.read()
            if kind in ("torn", "bad"):
                self.undo = (path, data)
            model = {"model": GPT4O, "odd": ODD}.get(kind, SONNET)
            day = "2026-04-27" if kind == "day" else "2026-04-25"
            add = {"torn": b'{"type":"message","id":"torn"', "bad": b'{"type":"message"}\n',
                   "prompt": _turn(eid, None, model, day, self.n).split(b"\n")[0] + b"\n"}.get(
                kind, _turn(eid, None, model, day, self.n, text="more " * rng.randrange(1, 50)))
            with open(path, "wb") as f:
                f.write(data + add)
        return kind


@pytest.fixture
def priced(isolated):
    """The seed's price table where panto-cost looks by default."""
    d = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "models.toml"), "w") as f:
        f.write(SEED_TOML)
    return isolated


VARIANTS = [["--by", "session", "--json"], ["--by", "session"], [], ["--by", "day", "--json"],
            ["--by", "agent"], ["--by", "session", "--since", "2026-04-26"]]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: " ".join(v) or "by model")
def test_a_report_carried_over_is_the_report_made_afresh(priced, variant):
    root = os.environ["PANTO_SESSION_DIR"]
    changes = Changes(root, _tree(root), seed=len(variant) * 31 + sum(map(len, variant)))
    tallies = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "cost-cache.json")
    argv = ["panto-cost", "--all", *variant]
    carried, kinds = 0, []
    first = run(argv)
    assert first.returncode in (0, 1) and b"Traceback" not in first.stderr
    for _ in range(24):
        kinds.append(changes.one())
        before = os.stat(tallies).st_mtime_ns if os.path.exists(tallies) else None
        got = run(argv)
        fresh = run(argv + ["--no-cache"])
        assert (got.returncode, got.stdout, got.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr), kinds
        if kinds[-1] == "same" and before is not None and os.stat(tallies).st_mtime_ns == before:
            carried += 1      # a file grew, and the cost cache was not written: it was not read through it
    if "--since" not in variant:
        assert carried >= 4, (carried, kinds)    # the path under test was taken


def test_a_second_memo_is_read_only_with_the_first_it_goes_with(priced):
    """cost-parts-new.memo names the cost-parts.memo it changes: put back beside
    another one (a crash between their writes, or a copy), it is not read."""
    root = os.environ["PANTO_SESSION_DIR"]
    files = _tree(root)
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    argv = ["panto-cost", "--all", "--by", "session", "--json"]

    def grow(path, n):
        with open(path, "ab") as f:
            f.write(_turn(f"{0xe000 + n:04x}0001", None, SONNET, "2026-04-25", n))

    assert run(argv).returncode == 0
    grow(files[2], 1)
    assert run(argv).returncode == 0                       # carried over: the second memo written
    new = os.path.join(cache, "cost-parts-new.memo")
    with open(new, "rb") as f:
        stale = f.read()
    grow(files[2], 2)
    grow(files[7], 4)                                      # a file the second memo says nothing of
    os.unlink(os.path.join(cache, "cost-parts.memo"))
    assert run(argv).returncode == 0 and not os.path.exists(new)   # made afresh: a first memo of its own
    with open(new, "wb") as f:
        f.write(stale)
    os.chmod(new, 0o600)
    grow(files[4], 3)
    got, fresh = run(argv), run(argv + ["--no-cache"])
    assert (got.returncode, got.stdout, got.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_table_carried_over_through_a_session_cut_back_and_grown_again(priced):
    """A session cut back (to fewer turns, the same file) and grown again is
    carried over each time, and the table by session (whose widths are kept)
    is the table made afresh."""
    root = os.environ["PANTO_SESSION_DIR"]
    files = _tree(root)
    with open(files[2], "rb") as f:
        small = f.read()
    with open(files[2], "ab") as f:             # the widest row: many more tokens than the others
        for n in range(40):
            f.write(_turn(f"{0xd000 + n:04x}0001", None, SONNET, "2026-04-25", n, text="long " * 200))
    with open(files[2], "rb") as f:
        big = f.read()
    tallies = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "cost-cache.json")
    argv = ["panto-cost", "--all", "--by", "session"]
    for data in (big, small, big):
        assert run(argv).returncode == 0
        before = os.stat(tallies).st_mtime_ns
        with open(files[2], "r+b") as f:      # cut back, or grown again: the same file
            f.write(data)
            f.truncate(len(data))
        got, fresh = run(argv), run(argv + ["--no-cache"])
        assert (got.returncode, got.stdout, got.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
        assert os.stat(tallies).st_mtime_ns == before         # carried over, not read through the cost cache


def test_a_large_session_grown_is_carried_over_reading_only_what_it_gained(priced):
    """A changed session of 1 MiB or more is read through the cost cache (from
    where its entry ends), not whole; the report is still carried over, and
    is the report made afresh."""
    root = os.environ["PANTO_SESSION_DIR"]
    files = _tree(root)
    with open(files[3], "ab") as f:
        for n in range(120):
            f.write(_turn(f"{0xc000 + n:04x}0001", None, GPT4O, "2026-04-25", n, text="long " * 2000))
    assert os.path.getsize(files[3]) >= 1 << 20
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    argv = ["panto-cost", "--all", "--by", "session"]
    assert run(argv).returncode == 0
    for n in range(3):
        with open(files[3], "ab") as f:
            f.write(_turn(f"{0xc100 + n:04x}0001", None, SONNET, "2026-04-25", n))
        got, fresh = run(argv), run(argv + ["--no-cache"])
        assert (got.returncode, got.stdout, got.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
        assert os.path.exists(os.path.join(cache, "cost-parts-new.memo"))     # carried over (afresh removes it)
        entry = persist.load(os.path.join(cache, "cost-cache.json"), "cost-cache.json")["files"][files[3]]
        assert entry[1] == os.path.getsize(files[3])       # read on through the cost cache, which covers it all
