"""Pipelines of plumbing commands, as the REPL runs them.

Every child starts with SIGINT, SIGTERM and SIGHUP blocked (it then takes
them as pantolib/signals.py says: from its error boundary on, or never, as
panto-log append), so a Ctrl-C at any moment of a turn reaches each command
as a clean interruption and never kills one inside Python's start-up. A child
whose stderr the REPL draws (panto-send's live reply, panto-tool's display)
gets a pseudo-terminal of its own for it, so it behaves as on any terminal.
"""
import errno
import io
import os
import signal
import subprocess
import sys

from pantolib import files, signals, terminal
from pantolib.conversation import Session

LAUNCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")


def command_argv(name, *args):
    """How the REPL starts a plumbing command (see launch.py): the same Python
    and the same panto, its signals set as pantolib/signals.py says."""
    return [sys.executable, "-P", LAUNCH, name, *args]


def read_session(data):
    """A Session from stream bytes (bare lines, which nothing here writes, are skipped)."""
    return Session.read(io.BytesIO(data), skip_bare=True)


class Cmd:
    """One command of a pipeline: argv, and where its stderr goes (None: the
    terminal; "pty": a pseudo-terminal the REPL reads), its environment
    (None: this process's), and the file descriptors it inherits beyond 0-2."""

    def __init__(self, argv, stderr=None, role=None, env=None, pass_fds=()):
        self.argv, self.stderr, self.role, self.env = argv, stderr, role, env
        self.pass_fds = tuple(pass_fds)


class Interrupts:
    """The Ctrl-C presses of a turn, counted from Enter on and never raised
    (a SIGINT handler, and a context that installs it): the turn's pipelines
    take the ones that came before they started as their own, so a Ctrl-C
    at any moment after Enter cancels the turn the same way, and the prompt
    still reaches the session. While it is installed the terminal does not
    echo Ctrl-C as `^C` (ECHOCTL), which would be glued to the reply."""

    def __init__(self, fd=None):
        self.count = 0
        self.fd = fd            # the terminal, or None
        self._saved = None

    def __call__(self, signum=None, frame=None):
        self.count += 1

    def reset(self):
        """Enter: what counts is from now on."""
        self.count = 0

    def __enter__(self):
        self.count = 0
        self._previous = signal.signal(signal.SIGINT, self)
        if self.fd is not None:
            import termios

            try:
                attrs = termios.tcgetattr(self.fd)
                if attrs[3] & termios.ECHOCTL:
                    self._saved = attrs[:]
                    attrs[3] &= ~termios.ECHOCTL
                    termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
            except (termios.error, OSError):
                self._saved = None
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            import termios

            try:
                attrs = termios.tcgetattr(self.fd)
                attrs[3] |= termios.ECHOCTL
                termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
            except (termios.error, OSError):
                pass
            self._saved = None
        signal.signal(signal.SIGINT, self._previous)


class EscKey:
    """Esc while a reply streams cancels the turn as Ctrl-C does: while
    panto-send runs and no tool does (a tool's question reads the terminal
    itself), the terminal is read key by key (no echo, signals still on); a
    lone Esc sends SIGINT to the REPL's process group, as the terminal's
    Ctrl-C would, and every other key is kept for the next prompt (given to
    `keep`). The terminal's mode is restored by close()."""

    def __init__(self, fd, keep):
        self.fd_in, self.keep = fd, keep
        self.saved = None
        self.off = False

    def fd(self, pipe):
        if self.off:
            return None
        if self.saved is None:
            if pipe.interrupts or not pipe.running("send") or pipe.running("tool"):
                return None
            import termios

            try:
                self.saved = terminal.keys_mode(self.fd_in)
            except (termios.error, OSError):
                self.off = True
                return None
        return self.fd_in

    def read(self):
        try:
            data = os.read(self.fd_in, 4096)
        except OSError:
            data = b""
        if not data:
            self.off = True
            return
        data, esc = terminal.lone_esc(data)
        if data:
            self.keep(data)
        if esc:
            try:
                os.killpg(os.getpgrp(), signal.SIGINT)
            except OSError:
                pass

    def close(self):
        if self.saved is not None:
            terminal.restore_mode(self.fd_in, self.saved)
            self.saved = None


class Pipeline:
    """Run commands connected stdout to stdin.

    Every child starts with its signals blocked (signals.py: it takes them
    once it can; panto-log append ignores them), so a Ctrl-C at any
    moment reaches each child as a clean interruption, never a traceback
    from inside Python's start-up; the REPL only counts it. A pipeline
    started after a Ctrl-C of its turn (`interrupts` counts it already) sends
    SIGINT to its children itself: they pass their input on and stop, so the
    prompt is written as if the Ctrl-C had come a moment later."""

    HURRY = 3       # Ctrl-C presses during one pipeline before its children are terminated

    def __init__(self, commands, capture=True, stdin_data=None, interrupts=None):
        self.commands = [c if isinstance(c, Cmd) else Cmd(c) for c in commands]
        self.capture = capture
        self.stdin_data = stdin_data
        self.irq = interrupts if interrupts is not None else Interrupts()
        self.before = 0         # presses of the turn before this pipeline started
        self.procs = []
        self.ptys = {}          # master fd -> Cmd

    @property
    def interrupts(self):
        return self.irq.count

    def _on_sigint(self, signum, frame):
        # The terminal sent SIGINT to every process of the foreground group:
        # the children stop by themselves (panto-log append finishes writing
        # first). Pressed again and again, it hurries the ones still running.
        self.irq.count += 1
        if self.irq.count - self.before >= self.HURRY:
            for p in self.procs[:-1]:
                if p.poll() is None:
                    try:
                        p.terminate()
                    except OSError:
                        pass

    def _start(self):
        prev = subprocess.PIPE if self.stdin_data is not None else subprocess.DEVNULL
        for i, cmd in enumerate(self.commands):
            last = i == len(self.commands) - 1
            out = subprocess.PIPE if (not last or self.capture) else None
            err, slave = None, None
            if cmd.stderr == "pty":
                master, slave = _open_pty()
                self.ptys[master] = cmd
                err = slave
            old = signal.pthread_sigmask(signal.SIG_BLOCK, signals.SIGNALS)
            try:
                p = subprocess.Popen(cmd.argv, stdin=prev, stdout=out, stderr=err, env=cmd.env,
                                     pass_fds=cmd.pass_fds)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
                if slave is not None:
                    os.close(slave)
            cmd.proc = p
            if i == 0 and self.stdin_data is not None:
                self.feed = p.stdin
            elif prev not in (subprocess.DEVNULL, subprocess.PIPE):
                prev.close()
            prev = p.stdout
            self.procs.append(p)

    def run(self, on_output=None, on_tick=None, keys=None):
        """(exit statuses, bytes of the last command's stdout). on_output(cmd,
        bytes) gets what a pty child writes to its stderr (b"" at its end);
        keys.read() is called when keys.fd() (None: not now) is readable."""
        import select

        old = signal.signal(signal.SIGINT, self._on_sigint)
        hangup = signals.catch(self._on_sigint)     # SIGTERM, SIGHUP: counted too (the REPL then ends)
        hangup.__enter__()
        self.before = self.irq.count
        try:
            self._start()
            if self.irq.count:  # Ctrl-C before (or while) they started: it is theirs too
                for p in self.procs:
                    try:
                        p.send_signal(signal.SIGINT)
                    except OSError:
                        pass
            feeder = None
            if self.stdin_data is not None:   # in a thread: the echo must be read meanwhile
                import threading

                feeder = threading.Thread(target=_feed, args=(self.feed, self.stdin_data), daemon=True)
                feeder.start()
            chunks = []
            out = self.procs[-1].stdout if self.capture else None
            fds = list(self.ptys) + ([out.fileno()] if out is not None else [])
            while fds:
                key_fd = keys.fd(self) if keys is not None else None
                ready = select.select(fds + ([key_fd] if key_fd is not None else []), [], [], 0.1)[0]
                if not ready and on_tick is not None:
                    on_tick(self)
                if key_fd is not None and key_fd in ready:
                    ready.remove(key_fd)
                    keys.read()
                for fd in ready:
                    try:
                        data = os.read(fd, 1 << 16)
                    except OSError as e:
                        if e.errno != errno.EIO:
                            raise
                        data = b""      # the pty's last writer has gone
                    if fd in self.ptys:
                        if on_output is not None:
                            on_output(self.ptys[fd], data)
                        elif data:
                            files.write_all(2, data)
                    elif data:
                        chunks.append(data)
                    if not data:
                        fds.remove(fd)
                        if fd in self.ptys:
                            os.close(fd)
            if out is not None:
                out.close()
            if feeder is not None:
                feeder.join()
            statuses = []
            for p in self.procs:
                while True:
                    try:
                        statuses.append(p.wait(0.1))
                        break
                    except subprocess.TimeoutExpired:
                        if on_tick is not None:
                            on_tick(self)
            return statuses, b"".join(chunks)
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for fd in list(self.ptys):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.ptys.clear()
            hangup.__exit__()
            signal.signal(signal.SIGINT, old)

    def running(self, role):
        return any(c.role == role and c.proc.poll() is None for c in self.commands)


def _feed(f, data):
    try:
        f.write(data)
        f.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _open_pty():
    """A pseudo-terminal for a child's stderr: raw (no newline translation),
    as wide as panto's own terminal."""
    import fcntl
    import pty
    import struct
    import termios
    import tty

    master, slave = pty.openpty()
    try:
        tty.setraw(slave)
        cols, rows = terminal.size(2)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    except (OSError, termios.error):
        pass
    os.set_inheritable(master, False)
    return master, slave
