"""Keep sessions on disk: append a stream durably, or replay a session file.

Usage:
  panto-log append [FILE]
  panto-log replay [--no-repair] [SESSION | --last]
  panto-log -h | --help
  panto-log --version

Commands:
  append        Persist every entry of the stream on stdin that the session
                file does not have yet, echoing each line once it is durable.
                Without FILE the header decides the file (see panto-session(5)).
  replay        Recover a session file (cut a torn tail) and print its lines.
                SESSION is a path, a session id or a unique id prefix; without
                one, or with --last, the most recently active session here.

Options:
  --no-repair   Read without cutting a torn tail; say on stderr what would go.
  --last        The session of this directory with the most recent activity.
  -h --help     Show this help.
  --version     Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-log"


@cli.command(NAME)
def main(argv=None):
    args = cli.parse(__doc__, argv)
    if args["append"]:
        return append(args["FILE"])
    return replay(args["SESSION"], args["--no-repair"])


def append(path):
    import signal

    from pantolib import session, stream

    # Ctrl-C in the terminal reaches every process of the pipeline; the lines
    # already received must still be written, so append ends at EOF only.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = cli.stdout()
    downstream = [True]

    def echo(data):
        if data and downstream[0]:
            try:
                out.write(data)
                out.flush()
            except BrokenPipeError:
                # Nobody reads any more: keep persisting, stop echoing.
                downstream[0] = False
                cli.silence_stdout()

    writer = session.Writer(path)
    try:
        for line in stream.read(cli.stdin()):
            echo(writer.feed(line))
        echo(writer.finish())
    except BaseException:
        echo(writer.finish())
        raise
    finally:
        writer.close()
    return cli.OK


def replay(arg, no_repair):
    import fcntl

    from pantolib import paths, session
    from pantolib.errors import PantoError

    if arg is None:
        path = paths.last_session()
        if path is None:
            raise PantoError(f"no sessions in {paths.session_dir()} (start one with panto-send)")
    else:
        path = paths.resolve(arg)
    session.check_path(path)
    r = session.scan(path)
    if r.end < r.size:
        what = f"{r.size - r.end} bytes from line {r.cut_line}"
        if no_repair:
            cli.warn(NAME, f"{path}:{r.cut_line}: torn tail; a repair would cut {what}")
        else:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)   # an appender may be mid-write
                r = session.scan(path)
                cut = session.repair(path, r, fd)
            finally:
                os.close(fd)
            if cut:
                cli.warn(NAME, f"{path}:{r.cut_line}: cut a torn tail ({cut} bytes)")
    _copy(path, r.end)
    return cli.OK


def _copy(path, length):
    """Write the first `length` bytes of the file to stdout."""
    out = cli.stdout()
    out.flush()
    fd_out = sys.stdout.fileno()
    with open(path, "rb") as f:
        offset = 0
        try:
            while offset < length:
                n = os.sendfile(fd_out, f.fileno(), offset, min(length - offset, 1 << 24))
                if n == 0:
                    break
                offset += n
            return
        except OSError as e:
            if isinstance(e, BrokenPipeError) or offset:
                raise
        f.seek(offset)
        while offset < length:
            chunk = f.read(min(length - offset, 1 << 20))
            if not chunk:
                break
            out.write(chunk)
            offset += len(chunk)
