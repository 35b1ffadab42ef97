"""The one boundary between panto's library and the shell.

Parsing (docopt), the mapping of every outcome to an exit status, the
single stderr line, and the closed downstream pipe are decided here. Every
command's `main` is the command() wrapper below, and the launcher
(launch.py) calls it: one way in, one way out. A command returns an Exit
status (or raises); the signals it takes are armed inside run() (see
signals.py), so an interruption ends as one line and 128 + its number.
"""
import os
import sys


class Exit:
    """Every exit status of panto's commands (the man pages' EXIT STATUS).
    Plain ints, not an IntEnum: enum is 5 ms of every command's start."""

    OK = 0
    FAIL = 1            # what went wrong is said in one line on stderr
    USAGE = 2           # bad usage: the line, then the usage text
    CONTEXT_FULL = 3    # panto-send: the prompt does not fit the context window (compact and retry)
    INTERRUPTED = 130   # Ctrl-C (128 + SIGINT; SIGTERM 143, SIGHUP 129: signals.status())


OK, FAIL, USAGE, CONTEXT_FULL, INTERRUPTED = (Exit.OK, Exit.FAIL, Exit.USAGE, Exit.CONTEXT_FULL,
                                              Exit.INTERRUPTED)


def parse(doc, argv=None, version=True, memo=None):
    """Parse argv against a docopt usage text; bad usage raises UsageError.

    With `memo` (a memo's name, persist.py), a good parse is remembered there
    and recalled the next time the same text and arguments come, with the
    same installed packages (persist.key, with the times of sys.path's
    folders, which an install or removal in them moves; every memo also
    carries the fingerprint of panto's code): docopt answers the same for the
    same input, and a run that recalls it neither imports docopt nor parses
    (about 15 ms of a report's start). Arguments that ask for --no-cache (or
    an abbreviation of it) neither read nor write the memo."""
    args = sys.argv[1:] if argv is None else list(argv)
    if memo is None or _no_cache(args):
        return _docopt(doc, args, version)
    import marshal

    from pantolib import persist

    key = persist.key(doc, args, _installed())
    got = persist.recall(memo, key)    # (the parse's marshal bytes, no notes, status 0)
    if got is not None:
        try:
            parsed = marshal.loads(got[0])
        except (ValueError, EOFError, TypeError):
            parsed = None
        if type(parsed) is dict:
            return parsed
    parsed = _docopt(doc, args, version)
    persist.remember(memo, key, 0, marshal.dumps(dict(parsed), 0), [], 0)
    return parsed


def _no_cache(args):
    """Do these arguments ask for --no-cache (docopt takes a long option's unique prefix)?"""
    for a in args:
        if a == "--":
            return False
        if a.startswith("--n") and "--no-cache".startswith(a):
            return True
    return False


def _installed():
    """The modification times of sys.path's folders (None for one that is not there)."""
    times = []
    for folder in sys.path:
        try:
            times.append(os.stat(folder or ".").st_mtime_ns)
        except OSError:
            times.append(None)
    return [sys.path, times]


def _docopt(doc, args, version):
    from docopt import DocoptExit, docopt

    from pantolib import __version__
    from pantolib.errors import UsageError

    try:
        return docopt(doc, args, version=__version__ if version else None)
    except DocoptExit:
        unknown = [a for a in args if a.startswith("-") and len(a) > 1 and a != "--"
                   and a.split("=", 1)[0] not in doc]
        what = f"unknown option '{unknown[0]}'" if unknown else "bad usage"
        usage = doc[doc.find("Usage:"):].split("\n\n", 1)[0].strip()
        raise UsageError(f"{what} (try --help)\n{usage}") from None


def stdout():
    """The binary stdout, looked up when a command runs; a failed write says
    it was standard output that failed (a full disk under `> FILE`)."""
    return _Stdout(sys.stdout.buffer)


class _Stdout:
    __slots__ = ("raw",)

    def __init__(self, raw):
        self.raw = raw

    def write(self, data):
        try:
            return self.raw.write(data)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise named_stdout(e) from None

    def writelines(self, lines):
        try:
            self.raw.writelines(lines)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise named_stdout(e) from None

    def flush(self):
        try:
            self.raw.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise named_stdout(e) from None


def named_stdout(e):
    """An OSError of a write to stdout, with 'standard output' as its file."""
    if getattr(e, "filename", None) or not e.errno:
        return e
    return OSError(e.errno, e.strerror, "standard output")


def stdout_gone():
    """Nothing reads standard output any more: it is a pipe whose reader has
    closed it (poll reports an error on the writing end). A file, a terminal
    or a pipe still read: False."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def stdin():
    return sys.stdin.buffer


def warn(name, message):
    """One line on stderr: `name: message`, made safe for a terminal, with any
    key or key-shaped text hidden (a backstop: writers redact already)."""
    from pantolib import secrets, terminal

    text = terminal.visible_line(secrets.redact(str(message), secrets.env_keys(), keylike=True))
    try:
        sys.stderr.write(f"{name}: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def guard_fds():
    """Commands started with stdin, stdout or stderr closed (`<&-`, `>&-`):
    put /dev/null on the empty descriptor, so that no file panto opens can
    take its number (a session file must never become stdout), and make a
    closed stdout behave as a closed pipe and a closed stdin as an empty one."""
    import io

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if fd == 0:
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        elif fd == 1:
            sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedRaw()), write_through=True)
        else:
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)


class _ClosedRaw(__import__("io").RawIOBase):
    """A closed stdout: the first write fails as a closed pipe does; later
    ones (the final flushes) are swallowed so that nothing more is said."""

    failed = False

    def writable(self):
        return True

    def write(self, b):
        if not self.failed:
            import errno

            self.failed = True
            raise BrokenPipeError(errno.EPIPE, "stdout is closed")
        return len(b)

    def fileno(self):
        return 1


def silence_stdout():
    """After EPIPE: point fd 1 at /dev/null so the final flush cannot fail."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return      # no descriptor to point anywhere
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)


def run(name, func, argv=None):
    """Call func(argv) and map every outcome to an exit status."""
    from pantolib import signals
    from pantolib.errors import PantoError, UsageError

    try:
        guard_fds()
        signals.arm()       # the signals it takes are taken from here on (pantolib/signals.py)
        try:
            status = func(argv)
        finally:
            signals.disarm()
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
        except OSError as e:
            raise named_stdout(e) from None
        return OK if status is None else status
    except SystemExit:
        raise
    except BrokenPipeError:
        silence_stdout()
        return OK
    except UsageError as e:
        first, _, rest = str(e).partition("\n")
        warn(name, first)
        if rest:
            sys.stderr.write(rest + "\n")
        return USAGE
    except PantoError as e:
        warn(name, str(e))
        return FAIL
    except KeyboardInterrupt:
        warn(name, "interrupted")
        return signals.status()
    except ModuleNotFoundError as e:
        top = (e.name or "pantolib").split(".")[0]
        if top == "pantolib" or top in sys.stdlib_module_names:    # not a package to install: a bug
            return _internal(name, e)
        warn(name, f"missing Python package '{e.name}' (install panto with its dependencies: pip install .)")
        return FAIL
    except MemoryError:
        warn(name, "out of memory")
        return FAIL
    except OSError as e:
        where = f"'{e.filename}': " if getattr(e, "filename", None) else ""
        warn(name, f"{where}{e.strerror or e}")
        return FAIL
    except Exception as e:  # the last resort: still one line, no traceback
        return _internal(name, e)


def _internal(name, e):
    if os.environ.get("PANTO_DEBUG") == "1":
        import traceback

        traceback.print_exc()
    warn(name, f"internal error: {type(e).__name__}: {e}")
    return FAIL


def command(name):
    """Decorate a command's `main(argv)`; the wrapper exits with its status."""

    def wrap(func):
        def main(argv=None):
            status = run(name, func, argv)
            try:
                sys.stdout.flush()
            except (BrokenPipeError, OSError, ValueError):
                silence_stdout()
            sys.exit(status)

        main.name, main.__doc__, main.__wrapped__ = name, func.__doc__, func
        return main

    return wrap
