"""The REPL's side of the person's terminal: the lines it shows, the prompt
it reads (the line editor and its history), the keys it holds while a turn
runs, and what it draws while a step's pipeline runs (StepScreen): a spinner,
then panto-send's reply as Markdown (LiveReply) and panto-tool's output.

panto-send's live display (its stderr) comes to the REPL through a
pseudo-terminal of its own, so panto-send shows the reply as it does on any
terminal (thinking between its dim marks) and the REPL draws it.
"""
import codecs
import os
import re
import sys
import time

from pantolib import terminal
from pantolib.editor import LineEditor
from pantolib.files import make_dirs, write_all
from pantolib.terminal import BOLD, RESET

# panto-send's live display marks thinking dim (ESC [2m ... ESC [0m); model text
# reaches its display neutralized, so a colour code here is panto-send's own.
_SGR_START = re.compile("\x1b(\\[[0-9;]*)?")
_SGR = re.compile(terminal.SGR)
# what a plumbing command says about a Ctrl-C: the REPL says it once, its own way
_INTERRUPT_NOTE = re.compile(rb"(?m)^panto-[a-z]+: interrupted[^\n]*(\n|$)")
# the advice of panto-send's messages for its own command line ('(raise --timeout)', '(compact
# the session: panto-send --compact)', '(keep more prompts: --keep)'), options and commands the
# REPL does not take: left off, so that every hint it shows can be acted on at its prompt
_CLI_ADVICE = re.compile(rb"(?m)^(panto-send: [^\n]*?) \((?:raise|keep more prompts:|compact the session:) "
                         rb"[^)\n]*--[^)\n]*\)")


def plural(n, word, many=None):
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


class Screen:
    """The terminal as the REPL uses it: say() shows a line, read_line() reads
    a prompt (the line editor on a terminal, else stdin), ask_line() an answer,
    and hold_keys() keeps what is typed during a turn for the next prompt.

    words: what Tab completes at the start of a prompt (the /commands)."""

    def __init__(self, env, out=None, err=None, history=None, words=()):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.tty = _isatty(self.out)
        self.color = terminal.styled(self.out, env)
        # the prompt is edited on the terminal: stdout, or stderr when stdout is piped (panto | tee log)
        shown_on = self.out if self.tty else self.err if _isatty(self.err) else None
        self.interactive = _isatty(sys.stdin) and shown_on is not None
        self.echo = not _isatty(sys.stdin)   # a transcript reads better with the prompts in it
        self.history = history or History(None)
        self.editor = LineEditor(0, shown_on.fileno(), self.history.lines, words) \
            if self.interactive else None
        self.prefill = ""           # text put back at the prompt (/rewind, /edit)
        self._held = None           # the terminal's mode while keys are held (a turn runs)

    # -- output ------------------------------------------------------------------------
    def say(self, text="", style=""):
        if style and self.color:
            text = style + text + RESET
        self.out.write(text + "\n")
        self.out.flush()

    def columns(self):
        """The terminal's width (80 when the output is not a terminal)."""
        return terminal.size(self.out.fileno())[0] if self.tty else 80

    def markdown(self):
        """A Markdown renderer drawing on this screen (markdown.py)."""
        from pantolib.markdown import Renderer

        return Renderer(self.out, tty=self.tty, color=self.color, width=self.columns,
                        height=lambda: terminal.size(self.out.fileno())[1] if self.tty else 24)

    # -- input -------------------------------------------------------------------------
    def read_line(self, entered=None):
        """A prompt: the line editor's text (starting from prefill), or a line of
        stdin with its continuations (a line ending in \\); Edit("eof") at the end.
        entered: called when the line is taken (the line editor: at Enter,
        before the terminal is given back its line mode)."""
        if self.editor is not None:
            initial, self.prefill = self.prefill, ""
            prompt = (BOLD + "> " + RESET) if self.color else "> "
            # again at every prompt: a program run meanwhile (a question of
            # panto-tool, the editor of /edit) may have turned it off
            self.out.flush()
            self.editor.write(terminal.PASTE_ON)
            text = self.editor.read(prompt, initial, entered=entered)
            if not self.tty:    # the prompt went to the terminal: the transcript gets it too
                self.out.write("> " + text + "\n")
            return text
        line = sys.stdin.readline()
        if not line:
            raise terminal.Edit("eof")
        text = line.rstrip("\n")
        while text.endswith("\\"):
            more = sys.stdin.readline()
            if not more:
                break
            text = text[:-1] + "\n" + more.rstrip("\n")
        if entered is not None:
            entered()
        if self.echo:
            self.out.write("> " + text + "\n")
            self.out.flush()
        return text

    def ask_line(self, question):
        """A line typed in answer to a question on its own line ("" for Enter, Ctrl-C or Ctrl-D)."""
        if self.editor is not None:
            self.out.flush()
            try:
                return self.editor.read(question, history=False)
            except (terminal.Edit, KeyboardInterrupt):
                return ""
        self.out.write(question)
        line = sys.stdin.readline()
        if self.echo:
            self.out.write(line if line.endswith("\n") else line + "\n")
        self.out.flush()
        return line.rstrip("\n")

    def type_ahead(self, data):
        """Keys typed while a reply streams: they wait for the next prompt."""
        self.editor.pending += self.editor.decoder.decode(data)

    def queued_line(self):
        """A prompt entered (typed and Enter) while a turn runs, taken from the
        keys held for the next prompt, or None. Only between the turn's
        steps: then nothing else reads the terminal. A line holding an escape
        sequence (a cursor key, a paste) is left for the prompt."""
        if self.editor is None or self._held is None:
            return None
        import select

        try:
            while select.select([0], [], [], 0)[0]:     # line mode: readable once a whole line is there
                data = os.read(0, 65536)
                if not data:
                    break
                self.type_ahead(data.replace(b"\n", b"\r"))
        except OSError:
            pass
        pending = self.editor.pending
        ends = [i for i in (pending.find("\r"), pending.find("\n")) if i >= 0]
        if not ends:
            return None
        end = min(ends)
        line = pending[:end]
        if "\x1b" in line or "\x03" in line:
            return None
        text = []
        for ch in line:
            if ch in ("\x7f", "\b"):
                if text:
                    text.pop()
            elif ch == "\x15":
                text.clear()
            elif ch >= " ":
                text.append(ch)
        if not "".join(text).strip():
            return None
        self.editor.pending = pending[end + 1:]
        return "".join(text)

    def close(self):
        """The terminal as it was before the first prompt (no bracketed paste)."""
        if self.editor is not None:
            self.editor.write(terminal.PASTE_OFF)
            self.out.flush()

    # -- keys typed while a turn runs ------------------------------------------------------
    @property
    def keys_held(self):
        """Whether keys are held (hold_keys) while a turn runs."""
        return self._held is not None

    def hold_keys(self):
        """No echo while a turn runs: keys typed wait, unseen, for the next
        prompt (the line editor reads them first). The terminal
        stays in line mode, so panto-tool's question (which takes it raw and
        flushes what was typed before it) is still told from a turn."""
        import termios

        if self.editor is None or self._held is not None:
            return
        try:
            self._held = termios.tcgetattr(0)
            quiet = termios.tcgetattr(0)
            quiet[3] &= ~(termios.ECHO | termios.ECHONL)
            termios.tcsetattr(0, termios.TCSANOW, quiet)
        except (termios.error, OSError):
            self._held = None

    def release_keys(self):
        import termios

        held, self._held = self._held, None
        if held is not None:
            try:
                termios.tcsetattr(0, termios.TCSANOW, held)   # TCSANOW: what was typed stays
            except (termios.error, OSError):
                pass


class LiveReply:
    """panto-send's live stderr, drawn for a person: Markdown, thinking dim."""

    def __init__(self, screen):
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.hold = ""
        self.thinking = False
        self.seen = False
        self.md = screen.markdown()

    def feed(self, data):
        text = self.hold + self.decoder.decode(data, final=not data)
        self.hold = ""
        cut = text.rfind("\x1b")
        if data and cut >= 0 and len(text) - cut < 12 and _SGR_START.fullmatch(text[cut:]):
            text, self.hold = text[:cut], text[cut:]   # maybe the start of a mark: wait for the rest
        pos = 0
        for m in _SGR.finditer(text):
            if m.start() > pos:
                self._show(text[pos:m.start()])
            codes = m.group(1).split(";")
            if "2" in codes:
                self.thinking = True
            elif not m.group(1) or "0" in codes or "22" in codes:
                self.thinking = False
            pos = m.end()
        if pos < len(text):
            self._show(text[pos:])

    def _show(self, text):
        self.seen = True
        (self.md.thinking if self.thinking else self.md.text)(text)

    def end(self):
        self.feed(b"")
        self.md.end()


class StepScreen:
    """What the terminal shows while one pipeline runs: the spinner, panto-send's
    reply (LiveReply) and panto-tool's output; and when the model's time starts.

    panto-tool asks its questions on /dev/tty itself, not through its pty,
    so nothing tells the REPL a question is coming: the spinner is drawn
    while a tool runs only once panto-tool has shown that a call runs
    (its account of the call on the pty, or a question asked: the
    terminal taken out of line mode, or opened by panto-tool, which it
    does for its first question), when nothing may be half-drawn (its
    last output ended a line, a while ago: a question opened then is
    drawn by now) and no question is open (line mode, as panto leaves
    it; a question takes it raw). Never on a timer alone: a slow start
    of panto-tool would put the spinner in front of the question.
    yes: panto-tool asks nothing (--yes).
    """

    def __init__(self, screen, pipe, label, yes):
        self.screen, self.pipe, self.label, self.yes = screen, pipe, label, yes
        self.spin = terminal.Spinner(screen.err, label)
        self.live = LiveReply(screen)
        self.has_tool = any(c.role == "tool" for c in pipe.commands)
        self.line_open, self.shown, self.asked, self.quiet = False, False, False, time.monotonic()
        self.start = time.monotonic()
        self.model_start = self.start   # the model's time starts when the tools are done
        self.held = {}  # after a Ctrl-C: what each child says, shown at its end without the plumbing's notes

    def tick(self, p):
        spin = self.spin
        if p.interrupts or self.live.seen:
            spin.stop()     # here, not in the signal handler: no output from a handler
            return
        if p.running("tool"):
            now = time.monotonic()
            self.model_start = now
            if not _line_mode():      # a question is open: never draw over it
                self.asked = True
                spin.forget()
            elif not self.asked and not self.yes and _has_terminal_open(p, "tool"):
                self.asked, self.quiet = True, now     # a question was asked, or is being drawn
            elif (not self.line_open and now - self.quiet > 0.3
                    and (self.yes or self.shown or self.asked)):
                if spin.label != "running ":
                    spin.restart("running ")
                spin.tick()
        elif p.running("send"):
            if self.has_tool and spin.label != self.label:
                spin.restart(self.label)
            spin.tick()

    def show(self, cmd, data):
        self.spin.stop()
        if cmd.role == "tool":
            self.model_start = time.monotonic()
        if cmd.role == "send":
            data = _CLI_ADVICE.sub(rb"\1", data)
            self.live.feed(data) if data else None
        elif data:
            self.screen.out.flush()
            write_all(self.screen.err.fileno(), data)
            self.line_open, self.shown, self.quiet = not data.endswith(b"\n"), True, time.monotonic()

    def output(self, cmd, data):
        if self.pipe.interrupts:
            self.held[cmd] = self.held.get(cmd, b"") + data
        else:
            self.show(cmd, data)

    def show_held(self):
        for cmd, said in self.held.items():
            self.show(cmd, _INTERRUPT_NOTE.sub(b"", said))

    def end(self):
        self.spin.stop()
        self.live.end()

    def seconds(self):
        """The step's time: the model's alone when tools ran first."""
        return time.monotonic() - (self.model_start if self.has_tool else self.start)


def _line_mode():
    """Whether the terminal is in line (canonical) mode, as panto leaves it during a turn."""
    import termios

    try:
        return bool(termios.tcgetattr(0)[3] & termios.ICANON)
    except (termios.error, OSError):
        return False


def _has_terminal_open(pipe, role):
    """Whether the command of that role holds panto's terminal open (Linux:
    /proc; elsewhere False): panto-tool opens it for its first question."""
    try:
        ttys = ("/dev/tty", os.ttyname(0))
        proc = next(c.proc for c in pipe.commands if c.role == role)
        fds = f"/proc/{proc.pid}/fd"
        return any(os.readlink(os.path.join(fds, fd)) in ttys for fd in os.listdir(fds))
    except (OSError, StopIteration):
        return False


def _isatty(f):
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


class History:
    """The prompts typed, kept in the state directory (0600 in 0700); one JSON
    string a line, so a prompt of many lines is one entry."""

    MAX = 1000

    def __init__(self, path):
        self.path = path
        self.lines = []
        if path is None:
            return
        import orjson

        try:
            with open(path, "rb") as f:
                for raw in f.read().splitlines()[-self.MAX:]:
                    try:
                        item = orjson.loads(raw) if raw.startswith(b'"') else raw.decode("utf-8", "replace")
                    except orjson.JSONDecodeError:
                        item = raw.decode("utf-8", "replace")
                    if isinstance(item, str) and item:
                        self.lines.append(item)
        except OSError:
            pass

    def add(self, text):
        if self.lines and self.lines[-1] == text:
            return
        self.lines.append(text)
        if self.path is None:
            return
        import orjson

        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, orjson.dumps(text) + b"\n")
            finally:
                os.close(fd)
        except OSError:
            pass


def setup_history(env=None):
    """The persistent prompt history (a History)."""
    from pantolib import paths

    path = os.path.join(paths.state_dir(env), "history")
    try:
        make_dirs(os.path.dirname(path))   # 0700 whatever the umask
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError:
        return History(None)
    return History(path)
