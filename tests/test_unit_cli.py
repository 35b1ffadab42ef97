"""pantolib.cli on its own: every outcome of a command mapped to its exit
status and one line on stderr; writes to standard output that fail name it;
a closed downstream pipe is a quiet success."""
import errno
import io
import os
import sys

import pytest

from pantolib import cli
from pantolib.errors import PantoError, SessionError, UsageError

DOC = """Try a thing.

Usage:
  panto-try [--flag] [--level=N] FILE
  panto-try --help

Options:
  --flag       a flag
  --level=N    a level [default: 1]
"""


def test_parse():
    assert cli.parse(DOC, ["--flag", "x"]) == {"--flag": True, "--level": "1", "FILE": "x", "--help": False}
    with pytest.raises(UsageError) as e:
        cli.parse(DOC, ["--nope=3", "x"])
    assert str(e.value) == ("unknown option '--nope=3' (try --help)\n"
                            "Usage:\n  panto-try [--flag] [--level=N] FILE\n  panto-try --help")
    with pytest.raises(UsageError) as e:
        cli.parse(DOC, ["x", "y"])
    assert str(e.value).startswith("bad usage (try --help)\nUsage:\n")
    with pytest.raises(UsageError, match="^bad usage"):
        cli.parse(DOC, ["-", "--", "x", "y"])   # '-' and '--' are not options


MEMO_DOC = DOC.replace("[--level=N] FILE", "[--level=N] [--no-cache] FILE").replace(
    "  --level=N", "  --no-cache   leave the caches alone\n  --level=N")


def _parse_in_a_process(argv, doc=MEMO_DOC, env=None):
    """cli.parse with a memo in a fresh interpreter: (its answer, whether docopt was imported)."""
    import json
    import subprocess

    code = ("import sys, json; from pantolib import cli; "
            "a = cli.parse(sys.argv[1], json.loads(sys.argv[2]), memo='try-args.memo'); "
            "print(json.dumps([a, 'docopt' in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code, doc, json.dumps(argv)], capture_output=True,
                       env=env, check=True)
    return json.loads(p.stdout)


def test_a_remembered_parse_is_docopts_answer_without_docopt(tmp_path):
    memo = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "try-args.memo")
    want = cli.parse(MEMO_DOC, ["--flag", "x"])
    assert _parse_in_a_process(["--flag", "x"]) == [want, True]      # parsed, and remembered
    assert os.stat(memo).st_mode & 0o777 == 0o600
    assert _parse_in_a_process(["--flag", "x"]) == [want, False]     # recalled
    # other arguments, another usage text: parsed again (and remembered in place of the last)
    assert _parse_in_a_process(["--level=3", "x"]) == [{**want, "--flag": False, "--level": "3"}, True]
    assert _parse_in_a_process(["--level=3", "x"])[1] is False
    other = MEMO_DOC.replace("[default: 1]", "[default: 2]")
    assert _parse_in_a_process(["--level=3", "x"], doc=other)[1] is True
    assert _parse_in_a_process(["x"], doc=other)[0]["--level"] == "2"
    # a memo that is not whole or makes no sense is parsed again
    for bad in (b"", b"garbage", open(memo, "rb").read()[:-3]):
        with open(memo, "wb") as f:
            f.write(bad)
        assert _parse_in_a_process(["x"], doc=other) == [{**want, "--flag": False, "--level": "2"}, True]
    # bad usage is never remembered, and still bad after a good parse
    with pytest.raises(UsageError, match="^bad usage"):
        cli.parse(MEMO_DOC, ["x", "y"], memo="try-args.memo")
    with pytest.raises(UsageError, match="^bad usage"):
        cli.parse(MEMO_DOC, ["x", "y"], memo="try-args.memo")


def test_a_parse_with_no_cache_is_not_remembered():
    memo = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "try-args.memo")
    assert _parse_in_a_process(["--no-cache", "x"])[0]["--no-cache"] is True
    assert not os.path.exists(memo)
    assert _parse_in_a_process(["--no-cache", "x"])[1] is True


def test_an_install_on_sys_path_parses_again(tmp_path):
    """A package installed or removed in a folder of sys.path moves its time: docopt may be another."""
    site = tmp_path / "site"
    site.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.path.dirname(os.path.dirname(cli.__file__))])}
    assert _parse_in_a_process(["x"], env=env)[1] is True
    assert _parse_in_a_process(["x"], env=env)[1] is False
    (site / "new_package.py").write_text("")
    os.utime(site, ns=(0, os.stat(site).st_mtime_ns + 10**9))   # the new file's second, whatever the clock
    assert _parse_in_a_process(["x"], env=env)[1] is True
    assert _parse_in_a_process(["x"], env=env)[1] is False


def test_parse_version(capsys):
    from pantolib import __version__

    with pytest.raises(SystemExit):
        cli.parse(DOC.replace("panto-try --help", "panto-try --help\n  panto-try --version"), ["--version"])
    assert capsys.readouterr().out.strip() == __version__


def _full(buffered=False):
    return open("/dev/full", "wb", buffering=-1 if buffered else 0)


def _closed_pipe():
    r, w = os.pipe()
    os.close(r)
    return open(w, "wb", buffering=0)


def test_stdout_names_itself_when_a_write_fails():
    with _full() as raw:
        out = cli._Stdout(raw)
        for write in (lambda: out.write(b"x"), lambda: out.writelines([b"a", b"b"])):
            with pytest.raises(OSError) as e:
                write()
            assert (e.value.errno, e.value.filename) == (errno.ENOSPC, "standard output")
    with _full(buffered=True) as raw:
        out = cli._Stdout(raw)
        assert out.write(b"held in the buffer") == 18
        with pytest.raises(OSError) as e:
            out.flush()
        assert (e.value.errno, e.value.filename) == (errno.ENOSPC, "standard output")
        raw.raw.close()   # nothing more to flush


def test_stdout_lets_a_broken_pipe_through():
    with _closed_pipe() as raw:
        out = cli._Stdout(raw)
        for call in (lambda: out.write(b"x"), lambda: out.writelines([b"x"])):
            with pytest.raises(BrokenPipeError):
                call()
    buffered = io.BufferedWriter(_closed_pipe())
    out = cli._Stdout(buffered)
    out.write(b"x")
    with pytest.raises(BrokenPipeError):
        out.flush()
    buffered.raw.close()


def test_stdout_writes(tmp_path):
    with open(tmp_path / "out", "wb") as raw:
        out = cli._Stdout(raw)
        out.write(b"a")
        out.writelines([b"b", b"c"])
        out.flush()
        assert (tmp_path / "out").read_bytes() == b"abc"


def test_named_stdout():
    e = OSError(errno.EIO, "Input/output error")
    named = cli.named_stdout(e)
    assert (named.errno, named.strerror, named.filename) == (errno.EIO, "Input/output error", "standard output")
    with_file = OSError(errno.EIO, "Input/output error", "/some/file")
    assert cli.named_stdout(with_file) is with_file
    plain = OSError("no errno")
    assert cli.named_stdout(plain) is plain


def test_warn_hides_keys_and_control_characters(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
    cli.warn("panto-try", "bad key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789\x1b[31m red")
    err = capsys.readouterr().err
    assert err.startswith("panto-try: bad key ") and err.endswith("\n") and err.count("\n") == 1
    assert "abcdefghijklmnopqrstuvwxyz" not in err and "\x1b" not in err


def test_warn_to_a_stderr_that_cannot_be_written_is_quiet(monkeypatch):
    with io.TextIOWrapper(_full(), write_through=True) as full:
        monkeypatch.setattr(sys, "stderr", full)
        cli.warn("panto-try", "lost")              # ENOSPC: nothing raised
        monkeypatch.undo()
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    cli.warn("panto-try", "lost")                  # ValueError: nothing raised


def _raises(e):
    def func(argv):
        raise e
    return func


@pytest.mark.parametrize("error, status, line", [
    (PantoError("it failed"), cli.FAIL, "panto-try: it failed\n"),
    (SessionError("not a session", "s.jsonl", 3), cli.FAIL, "panto-try: s.jsonl:3: not a session\n"),
    (KeyboardInterrupt(), cli.INTERRUPTED, "panto-try: interrupted\n"),
    (MemoryError(), cli.FAIL, "panto-try: out of memory\n"),
    (ModuleNotFoundError("No module named 'httpx'", name="httpx"), cli.FAIL,
     "panto-try: missing Python package 'httpx' (install panto with its dependencies: pip install .)\n"),
    (ModuleNotFoundError("No module named 'pantolib.stram'", name="pantolib.stram"), cli.FAIL,
     "panto-try: internal error: ModuleNotFoundError: No module named 'pantolib.stram'\n"),
    (ModuleNotFoundError("No module named 'json.toolz'", name="json.toolz"), cli.FAIL,
     "panto-try: internal error: ModuleNotFoundError: No module named 'json.toolz'\n"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/s.jsonl"), cli.FAIL,
     "panto-try: '/x/s.jsonl': No such file or directory\n"),
    (OSError("odd"), cli.FAIL, "panto-try: odd\n"),
    (ValueError("oops"), cli.FAIL, "panto-try: internal error: ValueError: oops\n"),
    (BrokenPipeError(), cli.OK, ""),
])
def test_run_maps_every_outcome_to_a_status(capsys, error, status, line):
    assert cli.run("panto-try", _raises(error), []) == status
    assert capsys.readouterr().err == line


def test_run_usage_error_prints_the_usage(capsys):
    assert cli.run("panto-try", _raises(UsageError("bad usage (try --help)\nUsage:\n  panto-try FILE")), []) == cli.USAGE
    assert capsys.readouterr().err == "panto-try: bad usage (try --help)\nUsage:\n  panto-try FILE\n"
    assert cli.run("panto-try", _raises(UsageError("no FILE")), []) == cli.USAGE
    assert capsys.readouterr().err == "panto-try: no FILE\n"


def test_run_passes_the_status_and_system_exit(capsys):
    assert cli.run("panto-try", lambda argv: None, []) == cli.OK
    assert cli.run("panto-try", lambda argv: cli.CONTEXT_FULL, ["x"]) == cli.CONTEXT_FULL
    with pytest.raises(SystemExit):
        cli.run("panto-try", _raises(SystemExit(4)), [])
    seen = []
    cli.run("panto-try", seen.append, ["a", "b"])
    assert seen == [["a", "b"]]
    assert capsys.readouterr().err == ""


def test_run_with_panto_debug_prints_the_traceback(capsys, monkeypatch):
    monkeypatch.setenv("PANTO_DEBUG", "1")
    assert cli.run("panto-try", _raises(ValueError("oops")), []) == cli.FAIL
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("ValueError: oops\npanto-try: internal error: ValueError: oops\n")


def _text_stdout(raw):
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")


def test_run_names_standard_output_when_its_last_flush_fails(capsys, monkeypatch):
    out = _text_stdout(_full())
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.run("panto-try", lambda argv: print("report"), []) == cli.FAIL
    monkeypatch.undo()
    assert capsys.readouterr().err == "panto-try: 'standard output': No space left on device\n"
    out.buffer.raw.close()


def test_run_after_a_closed_pipe_is_quiet_and_ok(capsys, monkeypatch):
    out = _text_stdout(_closed_pipe())
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.run("panto-try", lambda argv: print("report"), []) == cli.OK
    out.flush()      # its descriptor is /dev/null now: nothing fails
    assert os.path.samestat(os.fstat(out.fileno()), os.stat(os.devnull))
    monkeypatch.undo()
    assert capsys.readouterr().err == ""
    out.close()


def test_silence_stdout_without_a_descriptor_is_quiet(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    cli.silence_stdout()


def test_silence_stdout_without_a_descriptor_leaves_no_descriptor_open(monkeypatch):
    before = set(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    cli.silence_stdout()
    assert set(os.listdir("/proc/self/fd")) <= before


def test_command_exits_with_the_status(capsys, monkeypatch):
    @cli.command("panto-try")
    def main(argv):
        """The doc stays."""
        print("out")
        return cli.CONTEXT_FULL if argv else None

    assert (main.name, main.__doc__, main.__name__) == ("panto-try", "The doc stays.", "main")
    with pytest.raises(SystemExit) as e:
        main(["x"])
    assert e.value.code == cli.CONTEXT_FULL
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == cli.OK
    assert capsys.readouterr().out == "out\nout\n"
    out = _text_stdout(_closed_pipe())
    monkeypatch.setattr(sys, "stdout", out)

    @cli.command("panto-try")
    def later(argv):
        out.write("x")       # still buffered when it fails: the wrapper's flush meets the closed pipe
        raise PantoError("failed before flushing")

    with pytest.raises(SystemExit) as e:
        later(None)
    assert e.value.code == cli.FAIL
    assert os.path.samestat(os.fstat(out.fileno()), os.stat(os.devnull))
    monkeypatch.undo()
    assert capsys.readouterr().err == "panto-try: failed before flushing\n"
    out.close()


def test_closed_raw_fails_once():
    raw = cli._ClosedRaw()
    assert raw.writable() and raw.fileno() == 1
    with pytest.raises(BrokenPipeError) as e:
        raw.write(b"x")
    assert e.value.errno == errno.EPIPE
    assert raw.write(b"more") == 4


def test_stdout_and_stdin_are_the_binary_streams():
    assert cli.stdout().raw is sys.stdout.buffer
    assert cli.stdin() is sys.stdin.buffer


def test_guard_fds_puts_dev_null_on_closed_standard_descriptors(monkeypatch):
    for name in ("stdin", "stdout", "stderr"):
        monkeypatch.setattr(sys, name, getattr(sys, name))   # put back afterwards
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    try:
        for fd in (0, 1, 2):
            os.close(fd)
        cli.guard_fds()
        null = os.stat(os.devnull)
        assert all(os.path.samestat(os.fstat(fd), null) for fd in (0, 1, 2))
        assert sys.stdin.buffer.read() == b""           # a closed stdin reads as empty
        with pytest.raises(BrokenPipeError):            # a closed stdout fails as a closed pipe
            sys.stdout.write("x")
            sys.stdout.flush()
        sys.stdout.write("later")
        sys.stdout.flush()                              # then quiet
        sys.stderr.write("said to no one\n")
        again = (sys.stdin, sys.stdout, sys.stderr)
        cli.guard_fds()                                 # all open now: nothing changes
        assert (sys.stdin, sys.stdout, sys.stderr) == again
    finally:
        for fd, copy in zip((0, 1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def test_leave_runs_the_atexit_functions_and_flushes_without_a_teardown(tmp_path):
    """launch.leave: the status, every buffered byte of stdout and stderr, the
    atexit functions; the interpreter's teardown (here, a finalizer) is skipped."""
    import subprocess

    ran = tmp_path / "ran"
    code = ("import atexit, sys\n"
            "from pantolib import launch\n"
            "atexit.register(lambda: open(sys.argv[1], 'w').write('atexit'))\n"
            "class Finalized:\n"
            "    def __del__(self):\n"
            "        print('teardown', file=sys.stderr)\n"
            "kept = Finalized()\n"
            "sys.stdout.write('x' * 100000)\n"
            "sys.stderr.write('last words')\n"
            "launch.leave(3)\n")
    p = subprocess.run([sys.executable, "-c", code, str(ran)], capture_output=True)
    assert p.returncode == 3
    assert p.stdout == b"x" * 100000 and p.stderr == b"last words"
    assert ran.read_text() == "atexit"
