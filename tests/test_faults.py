"""The faults of a hostile world (SPEC §4, §11), each reproduced with real
processes and real files: a full disk, untrusted session ids, a session file
replaced under an appender, Ctrl-C during start-up, a system without hard
links, closed and full stdout, stale temporary files."""
import ctypes
import errno
import fcntl
import os
import random
import resource
import shutil
import signal
import stat
import struct
import subprocess
import threading

import orjson
import pytest

from conftest import assert_clean_error, log, run
from procs import wait_reading
from pantolib import paths
from builders import OTHER, SID, header, msg, read, session_bytes, session_file, split_lines


def exe(name):
    path = shutil.which(name)
    assert path, f"{name} not on PATH"
    return path


def tree(root):
    """Every path under root (to show that nothing was created)."""
    out = set()
    for d, dirs, files in os.walk(root):
        out.update(os.path.join(d, n) for n in dirs + files)
    return out


def new_stream(cwd, sid=SID, text="a reply"):
    return (header(cwd, sid) + msg("00000001", None, "user", "hello")
            + msg("00000002", "00000001", "assistant", text))


# -- a full disk ------------------------------------------------------------------------------

def _fsize(limit):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def _mount_tmpfs(where, size):
    os.makedirs(where, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                       capture_output=True)
    return p.returncode == 0


def _fill(mnt):
    """Fill the filesystem mounted at mnt to its last byte."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _without_coverage_noise(p):
    """Under `make coverage` the measuring tool cannot save its data past a
    file size limit either, and says so after panto has: drop that part."""
    cut = p.stderr.find(b"Exception ignored in atexit callback: <bound method Coverage")
    if cut >= 0:
        p.stderr = p.stderr[:cut]
    return p


@pytest.mark.parametrize("limit", [1, 150, 400])
def test_full_disk_during_creation_leaves_nothing_and_names_the_file(isolated, sessions, limit):
    # RLIMIT_FSIZE: the write that crosses the limit is short, the next fails (EFBIG)
    data = new_stream(isolated, text="r" * 2000)
    root = os.environ["PANTO_SESSION_DIR"]
    p = subprocess.run([exe("panto-log"), "append"], input=data, capture_output=True, preexec_fn=_fsize(limit))
    _without_coverage_noise(p)
    assert_clean_error(p, 1, "panto-log")
    err = p.stderr.decode()
    assert os.path.join(sessions, SID + ".jsonl") in err and "File too large" in err
    assert err.count("\n") == 1
    assert p.stdout == b""                        # nothing echoed: none of it is on a disk
    assert not os.path.exists(root)               # no file, no new directory


def test_full_disk_on_a_small_tmpfs(isolated, tmp_path):
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "64k"):
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        env = dict(os.environ, PANTO_SESSION_DIR=str(mnt / "sessions"))
        existing = mnt / "existing.jsonl"
        existing.write_bytes(session_bytes(isolated, OTHER))
        _fill(mnt)
        p = run(["panto-log", "append"], input=new_stream(isolated, text="r" * 3000), env=env)
        assert_clean_error(p, 1, "panto-log")
        assert "No space left on device" in p.stderr.decode() and SID in p.stderr.decode()
        assert not (mnt / "sessions").exists()
        # an append to an existing session on the full disk: refused, nothing echoed, file intact
        before = existing.read_bytes()
        line = msg("e0000001", "0000bbbb", "user", "u" * 5000)
        p = run(["panto-log", "append", str(existing)], input=line, env=env)
        assert_clean_error(p, 1, "panto-log")
        assert str(existing) in p.stderr.decode() and p.stdout == b""
        os.unlink(mnt / "filler")
        assert run(["panto-log", "replay", str(existing)], env=env).stdout == before
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


@pytest.mark.parametrize("room", [1, 100, 400])
def test_a_write_that_fails_mid_line_leaves_no_torn_line(isolated, room):
    # RLIMIT_FSIZE: the write crossing the limit is short, the next one fails (EFBIG)
    f = session_file(isolated)
    before = read(f)
    first = msg("c0000001", "0000bbbb", "user", "fits") if room >= 100 else b""
    second = msg("c0000002", "c0000001" if first else "0000bbbb", "user", "y" * 2000)
    assert len(second) > room
    limit = len(before) + len(first) + room
    p = subprocess.run([exe("panto-log"), "append", f], input=first + second, capture_output=True,
                       preexec_fn=_fsize(limit))
    _without_coverage_noise(p)
    assert_clean_error(p, 1, "panto-log")
    assert f in p.stderr.decode() and "File too large" in p.stderr.decode()
    assert read(f) == before + first                  # cut back to the line's start
    assert p.stdout == first                          # what is durable was echoed, nothing else
    assert log("replay", f).stdout == before + first


def test_a_full_tmpfs_mid_line_leaves_no_torn_line(isolated, tmp_path):
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "64k"):
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        f = mnt / "s.jsonl"
        f.write_bytes(session_bytes(isolated))        # a page partly used: the next write is short
        before = f.read_bytes()
        _fill(mnt)
        line = msg("d0000001", "0000bbbb", "user", "z" * 9000)
        env = dict(os.environ, PANTO_SESSION_DIR=str(mnt / "sessions"))
        p = run(["panto-log", "append", str(f)], input=line, env=env)
        assert_clean_error(p, 1, "panto-log")
        assert "No space left on device" in p.stderr.decode() and str(f) in p.stderr.decode()
        assert p.stdout == b"" and f.read_bytes() == before
        os.unlink(mnt / "filler")
        assert run(["panto-log", "replay", str(f)], env=env).stdout == before
        p = run(["panto-log", "append", str(f)], input=line, env=env)     # room again: it goes on
        assert p.returncode == 0 and f.read_bytes() == before + line
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


# -- an untrusted session id ------------------------------------------------------------------

@pytest.mark.parametrize("sid", ["../../x", "../../../../../../tmp/panto-escape", "/tmp/panto-abs", "", ".hidden",
                                 "..", ".", "a\0b", SID + "/../../x", SID.upper()[:-1] + "/", "0199aaaa",
                                 SID + "\n", " " + SID[1:]])
def test_a_header_id_that_is_not_a_uuid_names_no_file(isolated, tmp_path, sid):
    before = tree(tmp_path)
    p = run(["panto-log", "append"], input=new_stream(isolated, sid))
    assert_clean_error(p, 1, "panto-log")
    assert "not a UUID" in p.stderr.decode()
    assert tree(tmp_path) == before
    assert not os.path.exists("/tmp/panto-escape.jsonl") and not os.path.exists("/tmp/panto-abs.jsonl")


def test_only_the_canonical_form_names_a_file(isolated, tmp_path):
    # the canonical form is lowercase hex: capitals would name a second file
    # for the same session on a case-insensitive filesystem
    assert paths.is_session_id(SID) and not paths.is_session_id(SID.upper())
    before = tree(tmp_path)
    assert_clean_error(run(["panto-log", "append"], input=new_stream(isolated, SID.upper())), 1, "panto-log")
    assert tree(tmp_path) == before
    assert run(["panto-log", "append"], input=new_stream(isolated, SID)).returncode == 0


# -- the session file replaced under an appender ------------------------------------------------

class Slow:
    """panto-log append FILE fed one line at a time, each step waiting for its echo."""

    def __init__(self, path):
        self.proc = subprocess.Popen([exe("panto-log"), "append", path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, line):
        """Write a line, return its echo (b'' if append stopped instead)."""
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def end(self):
        self.proc.stdin.close()
        rest = self.proc.stdout.read()
        err = self.proc.stderr.read()
        self.proc.wait(30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, rest, err.decode()


def _rm(f, isolated):
    os.unlink(f)


def _mv_away(f, isolated):
    os.rename(f, f + ".moved")


def _editor_save(f, isolated):
    """What an editor does: write a copy beside it and rename it over the file."""
    data = read(f)
    with open(f + ".swp", "wb") as fh:
        fh.write(data)
    os.rename(f + ".swp", f)


def _copy_then_rm(f, isolated):
    data = read(f)
    os.unlink(f)
    with open(f, "wb") as fh:
        fh.write(data + msg("f0000001", None, "user", "written by someone else"))


@pytest.mark.parametrize("action", [_rm, _mv_away, _editor_save, _copy_then_rm])
def test_an_appender_notices_its_file_replaced(isolated, action):
    f = session_file(isolated)
    s = Slow(f)
    one, two, three = (msg(f"a000000{i}", None, "user", f"line {i}") for i in (1, 2, 3))
    assert s.send(one) == one
    action(f, isolated)
    assert s.send(two) == two
    assert s.send(three) == three
    status, rest, err = s.end()
    assert status == 0 and rest == b"", err
    assert err.startswith("panto-log: ") and f in err and "Traceback" not in err
    now = read(f)
    assert now.startswith(header(isolated))          # a session again, at its path
    assert now.endswith(two + three)                 # every line echoed after the change is in it
    assert log("replay", f).returncode == 0
    if action is _mv_away:
        assert read(f + ".moved").endswith(one)


@pytest.mark.parametrize("what", ["another session", "not a session", "emptied"])
def test_an_appender_refuses_a_file_that_is_no_longer_its_session(isolated, what):
    f = session_file(isolated)
    s = Slow(f)
    one, two = (msg(f"b000000{i}", None, "user", f"line {i}") for i in (1, 2))
    assert s.send(one) == one
    if what == "another session":
        replacement = session_bytes(isolated, OTHER)
    elif what == "not a session":
        replacement = b"my notes\n"
    else:
        replacement = b""
    with open(f + ".new", "wb") as fh:
        fh.write(replacement)
    os.rename(f + ".new", f) if what != "emptied" else os.truncate(f, 0)
    assert s.send(two) == b""                        # never echoed: it is not in the file at the path
    status, rest, err = s.end()
    assert status == 1 and rest == b"" and "Traceback" not in err and f in err, err
    assert read(f) == replacement


@pytest.mark.parametrize("keep", ["header", "some entries"])
def test_an_appender_stops_when_its_file_is_cut_shorter_in_place(isolated, keep):
    f = session_file(isolated, turns=3)
    s = Slow(f)
    one, two = msg("b1000001", "0002bbbb", "user", "one"), msg("b1000002", "b1000001", "user", "two")
    assert s.send(one) == one
    data = read(f)
    cut = len(split_lines(data)[0]) if keep == "header" else len(b"".join(split_lines(data)[:3]))
    os.truncate(f, cut)                              # the same file, shorter
    assert s.send(two) == b""                        # never echoed, never written
    status, rest, err = s.end()
    assert status == 1 and rest == b"" and "Traceback" not in err, err
    assert "cut shorter" in err and f in err and err.count("\n") == 1
    assert read(f) == data[:cut]


# -- Ctrl-C during start-up ----------------------------------------------------------------------

SIGINT_ROUNDS = int(os.environ.get("PANTO_TEST_SIGINT_ROUNDS", "24"))


def _sigint_round(rng, f, sent, ignored):
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
    proc = subprocess.Popen([exe("panto-log"), "append", f], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=pre)
    out = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))
    errs = []
    err_reader = threading.Thread(target=lambda: errs.append(proc.stderr.read()))
    reader.start()
    err_reader.start()
    delay = rng.uniform(0.0, 0.15)
    timer = threading.Timer(delay, lambda: proc.poll() is None and proc.send_signal(signal.SIGINT))
    timer.start()
    try:
        proc.stdin.write(sent)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    proc.wait(60)
    timer.join()
    reader.join(30)
    err_reader.join(30)
    return proc.returncode, out[0], errs[0].decode(errors="replace")


@pytest.mark.parametrize("ignored", [True, False], ids=["started-as-the-REPL-starts-it", "default-disposition"])
def test_sigint_during_start_up_loses_nothing(isolated, ignored):
    rng = random.Random(int(os.environ.get("PANTO_TEST_SEED", "0")) or 9)
    survived = 0
    for i in range(SIGINT_ROUNDS):
        f = session_file(isolated, sid=f"0199aaaa-bbbb-7ccc-8ddd-{i:012x}")
        before = read(f)
        sent = b"".join(msg(f"{i:04x}{k:04x}", None, "user", "p" * 300) for k in range(20))
        status, out, err = _sigint_round(rng, f, sent, ignored)
        if ignored:
            assert status == 0 and "Traceback" not in err, err
        # the orjson start-up crash, and any traceback from panto's own code
        assert status not in (-signal.SIGSEGV, -signal.SIGABRT), err
        assert "orjson" not in err and "pantolib/" not in err and "docopt" not in err, err
        if status == 0:
            survived += 1
            assert out == sent and read(f) == before + sent, "an appender that survived lost lines"
        else:   # killed by the signal before Python ran panto's first line: nothing echoed, nothing written
            assert out == b"" and read(f) == before, err
    assert survived >= 2, f"only {survived} of {SIGINT_ROUNDS} appenders survived"


def test_keyboard_interrupt_is_one_line_and_status_130(isolated):
    # panto-cost waiting for the rest of its input: interrupted mid-command
    proc = subprocess.Popen([exe("panto-cost")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(header(isolated))
    proc.stdin.flush()
    wait_reading(proc)          # it has read the header: it is in panto's code, waiting for more
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err == b"panto-cost: interrupted\n", err


# -- a filesystem without hard links --------------------------------------------------------------

# x86_64 and aarch64 system call numbers: link/linkat, and renameat2
_NR = {"x86_64": {"link": (86, 265), "renameat2": (316,)}, "aarch64": {"link": (37,), "renameat2": (276,)}}


def _seccomp_refuse(refused):
    """In the child: make these system calls ({number: errno}) fail, as on a
    filesystem (vfat, some FUSE and network ones) that has no hard links, or
    a kernel without renameat2."""
    def pre():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        items = list(refused.items())
        prog = [struct.pack("HBBI", 0x20, 0, 0, 0)]                           # ld [nr]
        for i, (nr, _) in enumerate(items):                                    # jeq nr -> its ret
            prog.append(struct.pack("HBBI", 0x15, len(items), 0, nr))
        prog.append(struct.pack("HBBI", 0x06, 0, 0, 0x7FFF0000))              # ret ALLOW
        for _, err in items:
            prog.append(struct.pack("HBBI", 0x06, 0, 0, 0x00050000 | err))    # ret ERRNO
        buf = ctypes.create_string_buffer(b"".join(prog))
        fbuf = ctypes.create_string_buffer(struct.pack("HxxxxxxP", len(prog), ctypes.addressof(buf)))
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0) != 0:
            os._exit(99)
    return pre


def _no_links(also_renameat2):
    nr = _NR.get(os.uname().machine)
    if nr is None:
        pytest.skip("no system call table for this machine")
    # link on vfat reads EPERM; renameat2 missing from the kernel reads ENOSYS
    refused = {n: errno.EPERM for n in nr["link"]}
    if also_renameat2:
        refused.update({n: errno.ENOSYS for n in nr["renameat2"]})
    return refused


@pytest.mark.parametrize("also_renameat2", [False, True], ids=["rename-noreplace", "exclusive-create"])
def test_racing_creators_without_hard_links_never_replace_a_file(isolated, sessions, also_renameat2):
    refused = _no_links(also_renameat2)
    probe = subprocess.run([exe("panto-log"), "--version"], capture_output=True,
                           preexec_fn=_seccomp_refuse(refused))
    if probe.returncode == 99:
        pytest.skip("seccomp filters are not available here")
    rng = random.Random(5)
    for round_ in range(4):
        sid = f"0199aaaa-bbbb-7ccc-8ddd-{round_:012x}"
        procs, sent, last = [], [], []
        for k in range(6):
            sent.append(header(isolated, sid) + b"".join(msg(f"{k:02x}{j:06x}", None, "user", "q" * rng.randint(1, 3000))
                                                         for j in range(rng.randint(1, 30))))
            last.append(msg(f"{k:02x}ffffff", None, "assistant", "a"))
            procs.append(subprocess.Popen([exe("panto-log"), "append"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          preexec_fn=_seccomp_refuse(refused)))
        for p, data in zip(procs, sent):
            p.stdin.write(data)
            p.stdin.flush()
        for p in procs:            # each has read all of it and waits: none has created the file yet
            wait_reading(p)
        for p, line in zip(procs, last):      # now all create at once
            p.stdin.write(line)
            p.stdin.flush()
        results = [p.communicate(timeout=60) for p in procs]
        f = read(os.path.join(sessions, sid + ".jsonl"))
        for p, (out, err), data, line in zip(procs, results, sent, last):
            assert p.returncode == 0, err
            assert out == data + line
            for entry in split_lines(data)[1:] + [line]:
                assert entry in f, "an echoed line is not in the session file"
        assert len(split_lines(f)) == 1 + sum(len(split_lines(d)) for d in sent)
    assert [n for n in os.listdir(sessions) if n.startswith(".")] == []


# -- closed and full stdout, closed stdin --------------------------------------------------------

COMMANDS = [["panto-log", "append"], ["panto-log", "replay", "--last"], ["panto-ls"], ["panto-ls", "--all"],
            ["panto-cost", "--all"], ["panto-tool", "--list"], ["panto-send", "--version"], ["panto-log", "--help"],
            ["panto-send", "-p", "openai", "hi"]]


@pytest.mark.parametrize("redirect", [">&-", "<&-", "2>&-", "<&- >&-"])
@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_closed_stdin_or_stdout_gives_no_traceback(isolated, argv, redirect):
    session_file(isolated)
    env = dict(os.environ, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    p = subprocess.run(["bash", "-c", f"exec {' '.join(argv)} {redirect}"], capture_output=True, env=env,
                       timeout=60)
    assert b"Traceback" not in p.stderr and b"internal error" not in p.stderr, p.stderr
    assert p.returncode in (0, 1, 2), (p.returncode, p.stderr)
    assert len(p.stderr.splitlines()) <= 1


def test_append_with_stdout_closed_keeps_persisting(isolated):
    f = session_file(isolated)
    base = read(f)
    data = b"".join(msg(f"c{i:07x}", None, "user", "q" * 500) for i in range(50))
    p = subprocess.run(["bash", "-c", f"exec panto-log append '{f}' >&-"], input=data, capture_output=True)
    assert p.returncode == 0 and p.stderr == b""
    assert read(f) == base + data
    # a session file must never take the closed descriptor's number
    p = subprocess.run(["bash", "-c", "exec panto-log append >&-"], input=new_stream(isolated, OTHER),
                       capture_output=True)
    assert p.returncode == 0 and p.stderr == b""
    assert read(os.path.join(paths.session_dir(str(isolated)), OTHER + ".jsonl")) == new_stream(isolated, OTHER)


def test_append_to_dev_full_keeps_persisting_and_says_so(isolated):
    f = session_file(isolated)
    base = read(f)
    data = b"".join(msg(f"d{i:07x}", None, "user", "q" * 500) for i in range(50))
    with open("/dev/full", "wb") as full:
        p = subprocess.run([exe("panto-log"), "append", f], input=data, stdout=full, stderr=subprocess.PIPE)
    assert read(f) == base + data                   # every line persisted
    assert_clean_error(p, 1, "panto-log")
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "No space left on device" in err and f in err


@pytest.mark.parametrize("argv", [["panto-log", "replay"], ["panto-log", "show"], ["panto-ls"],
                                  ["panto-cost", "--example-prices"]])
def test_a_full_stdout_is_named(isolated, argv):
    session_file(isolated)
    with open("/dev/full", "wb") as full:
        p = subprocess.run([exe(argv[0]), *argv[1:]], stdout=full, stderr=subprocess.PIPE, cwd=isolated)
    assert_clean_error(p, 1, argv[0])
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "No space left on device" in err and "standard output" in err, err


def test_closed_stdin_is_an_empty_stream(isolated):
    p = subprocess.run(["bash", "-c", "exec panto-log append <&-"], capture_output=True)
    assert p.returncode == 0 and p.stdout == p.stderr == b""
    f = session_file(isolated)
    base = read(f)
    p = subprocess.run(["bash", "-c", f"exec panto-log append '{f}' <&-"], capture_output=True)
    assert p.returncode == 0 and p.stdout == p.stderr == b"" and read(f) == base


# -- smaller faults ----------------------------------------------------------------------------------

def test_an_id_already_in_the_file_with_other_content_is_reported(isolated):
    f = session_file(isolated)
    base = read(f)
    same = split_lines(base)[1]
    changed = msg("0000aaaa", None, "user", "not what the file says")
    p = run(["panto-log", "append", f], input=same + changed)
    assert p.returncode == 0
    assert p.stdout == same + changed and read(f) == base
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "0000aaaa" in err and "different" in err
    # the same entry written differently (key order) is the same entry: no remark
    obj = orjson.loads(same)
    reordered = orjson.dumps(dict(reversed(list(obj.items())))) + b"\n"
    assert run(["panto-log", "append", f], input=reordered).stderr == b""


def test_stale_temporary_files_are_removed_on_the_next_creation(isolated, sessions):
    os.makedirs(sessions, mode=0o700)
    old, fresh, locked, other = (os.path.join(sessions, n) for n in
                                 (".panto-abc123de.tmp", ".panto-fresh000.tmp", ".panto-locked00.tmp", "notes.tmp"))
    for p in (old, fresh, locked, other):
        with open(p, "wb") as fh:
            fh.write(b"x" * 1000)
    two_hours_ago = os.path.getmtime(old) - 7200
    for p in (old, locked, other):
        os.utime(p, (two_hours_ago, two_hours_ago))
    holder = os.open(locked, os.O_RDONLY)           # as a live (hung) creator would hold it
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        assert run(["panto-log", "append"], input=new_stream(isolated)).returncode == 0
    finally:
        os.close(holder)
    assert not os.path.exists(old)
    assert os.path.exists(fresh) and os.path.exists(locked) and os.path.exists(other)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_directories_panto_creates_are_0700_whatever_the_umask(isolated, umask):
    home = os.environ["HOME"]
    p = subprocess.run([exe("panto-log"), "append"], input=new_stream(isolated), capture_output=True,
                       preexec_fn=lambda: os.umask(umask))
    assert p.returncode == 0, p.stderr
    p = subprocess.run([exe("panto-ls")], capture_output=True, preexec_fn=lambda: os.umask(umask))
    assert p.returncode == 0, p.stderr
    made = [d for d in tree(home) if os.path.isdir(d)]
    assert any(d.endswith(os.path.join(".cache", "panto")) for d in made)
    for d in made:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    f = os.path.join(paths.session_dir(str(isolated)), SID + ".jsonl")
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600


def test_an_entry_nested_too_deeply_to_write_is_a_clean_error(isolated):
    f = session_file(isolated)
    base = read(f)
    deep = b'{"type":"note","data":' + b"[" * 600 + b"]" * 600 + b"}\n"
    p = run(["panto-log", "append", f], input=deep)
    assert_clean_error(p, 1, "panto-log")
    assert b"internal error" not in p.stderr and read(f) == base


# -- the last resort, and retries without retry-after ------------------------------------------------

def test_an_internal_error_is_one_line_and_a_traceback_only_on_request(isolated, tmp_path):
    # a broken dependency (here a docopt that fails) is a bug panto cannot name: one line, exit 1
    fake = tmp_path / "broken"
    fake.mkdir()
    (fake / "docopt.py").write_text("class DocoptExit(SystemExit):\n    pass\n\n"
                                    "def docopt(*args, **kwargs):\n    raise RuntimeError('the parser broke')\n")
    env = dict(os.environ, PYTHONPATH=str(fake))
    for argv in (["panto-log", "tree", "--last"], ["panto-ls"], ["panto-cost", "--all"]):
        p = run(argv, env=env)
        assert_clean_error(p, 1, argv[0])
        assert p.stderr.decode() == f"{argv[0]}: internal error: RuntimeError: the parser broke\n"
    p = run(["panto-ls"], env=dict(env, PANTO_DEBUG="1"))
    assert p.returncode == 1 and b"Traceback" in p.stderr and b"the parser broke" in p.stderr


def test_a_5xx_without_retry_after_is_retried_with_growing_backoff(isolated):
    import re

    import sse_server as S

    with S.Server() as srv:
        srv.push(S.error_reply(503, "busy"), S.error_reply(529, "overloaded"), S.openai_text("at last"))
        env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY="sk-test-0123456789abcdefSECRET")
        p = run(["panto-send", "-p", "openai", "-m", "gpt-4o", "--live", "hi"], env=env)
        assert p.returncode == 0, p.stderr
        assert len(srv.requests) == 3
    waits = [float(w) for w in re.findall(rb"retrying in ([0-9.]+) s", p.stderr)]
    assert len(waits) == 2, p.stderr
    # base 0.5 s doubled each attempt, with +-25% jitter
    assert 0.35 <= waits[0] <= 0.65 and 0.7 <= waits[1] <= 1.3, waits
    assert b"at last" in p.stdout
