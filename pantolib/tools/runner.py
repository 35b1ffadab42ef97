"""Answer the tool calls of a stream's leaf: confirm, run, show, and build the result entry.

Each call is shown once: by its confirmation question when one is asked,
else by the live display (a header line, an edit's diff); then its result
(the last lines of bash output, one line for the others). A read is one
line, call and outcome together.
"""
import os
import sys
import time

from pantolib import entries, tools
from pantolib.tools import show
from pantolib.tools.confirm import Approver  # noqa: F401  (panto-tool builds one)


def describe(use, width=show.WIDTH):
    """What a call does, on one line (its arguments summarized)."""
    try:
        args = tools.parse_args(use.get("input"))
    except ValueError:
        args = None
    return show.summary(use.get("name", ""), args, use.get("input"), width)


class Display:
    """A short live account of each call on stderr, for people (not for scripts)."""

    def __init__(self, on, cwd=None, env=None, keep=None):
        from pantolib import terminal
        from pantolib.secrets import env_keys

        self.on = on
        self.cwd = cwd
        self.style = show.Style(on and terminal.styled(sys.stderr, env))
        self.keys = env_keys(env) if on else []
        self.live = None    # the Live area of the call running now
        self.keep = keep    # keep(bytes): keys typed while a call runs, for the program that started us
        self.esc = None     # the EscKey of the call running now

    def watch(self, use):
        """What a running bash call tells of its output (tools.run's watch):
        the Live area on a terminal, and Esc watched when keys can be kept;
        None when neither. stop_watching() ends it."""
        if use.get("name") != "bash":
            return None
        from pantolib import terminal

        if self.on and sys.stderr.isatty():
            self.live = Live(self._raw, lambda: terminal.size(2)[0], self.style, self.keys)
        if self.keep is not None:
            self.esc = EscKey.open(self.keep)
        live, esc = self.live, self.esc
        if live is None and esc is None:
            return None

        def watch(chunk):
            if esc is not None:
                esc.poll()
            if live is not None:
                live(chunk)
        return watch

    def stop_watching(self):
        esc, self.esc = self.esc, None
        if esc is not None:
            esc.close()

    def _raw(self, text):
        sys.stderr.write(text)
        sys.stderr.flush()

    def _clear(self):
        live, self.live = self.live, None
        if live is not None:
            live.clear()

    def _write(self, rows):
        self._clear()
        if self.on and rows:
            from pantolib.tools.common import redact

            # results are redacted already; a diff shows lines of the file itself
            sys.stderr.write(redact("\n".join(rows), self.keys) + "\n")
            sys.stderr.flush()

    def before(self, use, args, asked):
        if not asked and use["name"] != "read":
            self._write(show.call(use, args, self.style, cwd=self.cwd))

    def after(self, use, args, content, is_error, asked):
        if use["name"] == "read":   # asked: the question showed the call, only the outcome is left
            self._write(["  " + show.read_outcome(content, is_error, self.style) if asked else
                         show.read_line(args, content, is_error, self.style, use.get("input"))])
        else:
            self._write(show.result(use["name"], content, is_error, self.style))

    def refused(self, use, args, why, asked):
        """A call that did not run: bad arguments, declined, no terminal."""
        self._clear()
        if asked:
            return
        rows = show.call(use, args, self.style, cwd=self.cwd)[:1]
        self._write(rows + [self.style(show.RED, "  " + show.visible_line(why))])


class EscKey:
    """Esc while a call runs stops it as Ctrl-C does: SIGINT to the process
    group, as the terminal's Ctrl-C would send it (so panto cancels the turn
    too). The terminal is read key by key meanwhile (no flush, no echo,
    signals on), and every other key is handed to keep(bytes) at the end,
    for the prompt of the program that started panto-tool."""

    def __init__(self, fd, old, keep):
        self.fd, self.old, self.keep, self.kept = fd, old, keep, b""

    @classmethod
    def open(cls, keep):
        import termios

        from pantolib import terminal

        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return cls(fd, terminal.keys_mode(fd), keep)
        except (termios.error, OSError):
            os.close(fd)
            return None

    def poll(self):
        import select
        import signal

        from pantolib import terminal

        try:
            while select.select([self.fd], [], [], 0)[0]:
                data = os.read(self.fd, 4096)
                if not data:
                    return
                data, esc = terminal.lone_esc(data)
                self.kept += data
                if esc:
                    os.killpg(os.getpgrp(), signal.SIGINT)
                    return
        except OSError:
            pass

    def close(self):
        from pantolib import terminal

        terminal.restore_mode(self.fd, self.old)
        os.close(self.fd)
        self.keep(self.kept)


class Live:
    """The live area under a running bash call: its last show.TAIL lines and
    the seconds it has run, redrawn in place as lines arrive (first after
    FIRST seconds, then at most every EVERY seconds), erased by clear()
    before the call's usual display. Rows are cut to the terminal's width,
    so the area's height is known; keys are hidden as in results."""

    FIRST, EVERY = 0.2, 0.2

    def __init__(self, write, width, style, keys):
        import codecs
        import collections

        self.write, self.width, self.style, self.keys = write, width, style, keys
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.rows = collections.deque(maxlen=show.TAIL)
        self.partial, self.lines, self.drawn = "", 0, 0
        self.started = self.last = time.monotonic()

    def __call__(self, chunk):
        if chunk:
            parts = (self.partial + self.decoder.decode(chunk)).split("\n")
            self.partial = parts.pop()
            self.rows.extend(parts)
            self.lines += len(parts)
        now = time.monotonic()
        if now - self.started >= self.FIRST and now - self.last >= self.EVERY:
            self.last = now
            try:
                self.draw(now)
            except (OSError, ValueError):
                pass

    def draw(self, now):
        from pantolib.tools.common import redact

        width = max(20, self.width() - 1)
        rows = (list(self.rows) + ([self.partial] if self.partial else []))[-show.TAIL:]
        rows = [self.style(show.DIM, "  " + show.cut(show.visible_line(redact(r, self.keys)), width - 2))
                for r in rows]
        count = self.lines + (1 if self.partial else 0)
        said = f"  … running {now - self.started:.1f}s" + (f" · {count:,} line{'s' * (count != 1)}" if count else "")
        rows.append(self.style(show.CYAN, said))
        up = f"\x1b[{self.drawn}A" if self.drawn else ""
        self.write(up + "\r\x1b[J" + "\n".join(rows) + "\n")
        self.drawn = len(rows)

    def clear(self):
        if self.drawn:
            try:
                self.write(f"\x1b[{self.drawn}A\r\x1b[J")
            except (OSError, ValueError):
                pass
            self.drawn = 0


def answer(session, approver, display, cwd=None, timeout=None):
    """The user entry answering the leaf's tool uses, or None when nothing waits.

    Ctrl-C while a call runs still returns the entry: the interrupted call is
    answered `interrupted after N s` with its output so far, never "not run"
    (it ran); Ctrl-C at its question declines it. The calls after it are
    answered as not run, and `interrupted` is set so the caller stops there.
    """
    uses = session.unanswered_tool_uses()
    if not uses:
        return None, False
    blocks, interrupted = [], False
    for use in uses:
        record = {}
        if interrupted:
            content, err = "not run: the user interrupted the previous tool call (Ctrl-C)", True
        else:
            content, err, interrupted = _one(use, approver, display, cwd, timeout, record)
        block = {"type": "toolResult", "toolUseId": use["id"], "content": content}
        if err:
            block["isError"] = True
        if record:
            block["undo"] = record      # what write/edit changed, to be put back (pantolib.undo)
        blocks.append(block)
    stamp = session.active_model()
    if stamp is None:
        msg = session.leaf_message()["message"]
        stamp = (msg.get("provider"), msg.get("model"), msg.get("api"))
    entry = entries.make_message("user", blocks, session.leaf, set(session.ids),
                                 provider=stamp[0], model=stamp[1], api=stamp[2])
    return entry, interrupted


def _one(use, approver, display, cwd, timeout, record=None):
    """(content, is_error, interrupted) for one call."""
    name = use.get("name", "")
    args, problem = tools.check(name, use.get("input"))
    if problem:   # nothing to confirm: it cannot run
        display.refused(use, args, problem, False)
        return problem, True, False
    try:
        return _run_one(use, name, args, approver, display, cwd, timeout, record)
    finally:
        display.stop_watching()


def _run_one(use, name, args, approver, display, cwd, timeout, record):
    started = done = asked = None
    try:
        ok, why, asked = approver.decide(use, args, cwd)
        if not ok:
            display.refused(use, args, why, asked)
            return why, True, False
        display.before(use, args, asked)
        started = time.monotonic()
        content, err = done = tools.run(name, use.get("input"), cwd=cwd, timeout=timeout,
                                        watch=display.watch(use), record=record)
        display.after(use, args, content, err, asked)
        return content, err, False
    except KeyboardInterrupt as e:
        from pantolib import signals

        signals.finish()     # the results are written whatever comes next
        if done is not None:    # it had finished: its own result
            return done[0], done[1], True
        if started is None:     # at its question (or deciding), or just before it started
            if asked is None and signals.cause() == "Ctrl-C":
                return DECLINED, True, True
            return f"not run: {signals.cause()} came before it started", True, True
        content = interrupted(e, time.monotonic() - started)
        try:
            display.after(use, args, content, True, asked)
        except (OSError, ValueError):
            pass
        return content, True, True


DECLINED = "not run: declined (Ctrl-C at the confirmation)"


def interrupted(e, seconds):
    """The result of a call stopped by Ctrl-C (SIGTERM, SIGHUP): `interrupted after N s`, then
    what it printed so far (capped, keys hidden)."""
    from pantolib.secrets import env_keys
    from pantolib.tools.common import CAP, cap_text, redact

    seconds = getattr(e, "seconds", seconds)
    output = getattr(e, "output", None)
    from pantolib import signals

    text = f"interrupted after {seconds:.1f} s ({signals.cause()}: the call was stopped)"
    if output:
        text += "\n" + redact(cap_text(output, CAP + 1024), env_keys())
    return text
