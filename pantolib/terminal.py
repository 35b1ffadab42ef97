"""The person's terminal: what may reach it, whether to colour it, and the keys read from it.

Every piece of text that comes from a model, a tool or a server and is bound
for a terminal goes through `visible()`: control characters and escape
sequences are shown, not executed, so a reply cannot move the cursor, clear
a line, retitle the window or write the clipboard. Newline and tab are kept.
"""
import os

# C0 controls but \t and \n, DEL, C1 controls, and the Unicode format
# characters that reorder or hide text (bidi overrides and isolates, line and
# paragraph separators, zero-width joiners are left: emoji need them). Every
# one of them is unprintable to str.isprintable(), so text that is printable
# holds none (test_unit_terminal checks it over all of Unicode): such text,
# the common case, is passed on without importing re (~10 ms of a start).
_UNSAFE = "[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]"


def _unsafe():
    import re

    return re.compile(_UNSAFE)     # (compiled once: re keeps it)


def _show(m):
    c = m.group()
    n = ord(c)
    if n < 0x20:
        return "^" + chr(n + 0x40)      # ESC -> ^[, CR -> ^M
    if n == 0x7f:
        return "^?"
    if n <= 0x9f:
        return f"\\x{n:02x}"          # 8-bit CSI 0x9b -> \x9b
    return f"<U+{n:04X}>"


def visible(text):
    """Text with every control character made visible (newline and tab kept)."""
    if text.isprintable():
        return text
    unsafe = _unsafe()
    if not unsafe.search(text):
        return text
    return unsafe.sub(_show, text)


def visible_line(text):
    """visible(), and newlines and tabs shown as spaces: one line for a table cell."""
    return visible(text).replace("\n", " ").replace("\t", " ")


def _escaped(m):
    return f"\\u{ord(m.group()):04x}"


def visible_json(data):
    """JSON text (UTF-8 bytes, as orjson writes it) for a terminal: every
    character visible() would show is written as a \\u escape instead
    (U+009B as \\u009b, U+202E as \\u202e), so the JSON stays valid and
    means the same. Line feeds between JSON lines are kept (inside strings
    orjson escapes them already). `data`: any bytes-like object (a recalled
    memo's output is a view)."""
    text = str(data, "utf-8", "replace")
    unsafe = _unsafe()
    if not unsafe.search(text):
        return data
    return unsafe.sub(_escaped, text).encode("utf-8")


def no_color(env=None):
    """NO_COLOR set to anything but the empty string (no-color.org)."""
    env = os.environ if env is None else env
    return bool(env.get("NO_COLOR"))


def styled(stream, env=None):
    """Whether escape sequences (colour, bold, dim) may be written to stream."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and not no_color(env)


# --- the person at the prompt ------------------------------------------------
#
# panto edits its prompt line itself rather than through CPython's readline:
# readline has no notion of a bracketed paste (each pasted newline is an
# Enter, so a 200-line paste became 200 requests), cannot hold a multi-line
# prompt, and reads keys in a way that delays a Ctrl-C. The editor below
# keeps the terminal in raw mode only while a prompt is being edited, turns
# on bracketed paste (ESC [ ? 2004 h) for as long as panto runs, and treats a
# paste as text whatever it holds: a pasted newline never submits.

CONTINUATION = "  "


def cell_width(ch):
    """Columns one character takes on a terminal (0, 1 or 2)."""
    import unicodedata

    if ch < "\u0300":
        return 1
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def text_width(text):
    """Columns a line of (already visible) text takes."""
    if text.isascii():
        return len(text)
    return sum(cell_width(c) for c in text)


SGR = "\x1b\\[([0-9;]*)m"    # a colour code (Select Graphic Rendition), its numbers as group 1 (a pattern)


def styled_width(text):
    """Columns of text that may hold colour codes (the prompt's own)."""
    import re

    return text_width(re.sub(SGR, "", text))


def size(fd):
    """(columns, rows) of the terminal on fd, with a sane fallback."""
    try:
        cols, rows = os.get_terminal_size(fd)
    except OSError:
        return 80, 24
    # 0 means the size was never set (a bare pty, some serial consoles): unknown, not tiny
    return (max(cols, 10) if cols else 80), (max(rows, 3) if rows else 24)


class Edit(Exception):
    """What ended an edit besides Enter: 'interrupt' (Ctrl-C) or 'eof' (Ctrl-D,
    or the end of the terminal's input)."""

    def __init__(self, how, text=""):
        super().__init__(how)
        self.how, self.text = how, text


# --- keys: the one reader of the person's keys ---------------------------------
#
# The prompt (editor.LineEditor) and panto-tool's one-key question (tools/confirm.py)
# both read through Keys: the same escape sequences, the same bracketed
# paste, the same lone Esc. The Esc key while a reply streams
# (pipeline.EscKey) takes the terminal with keys_mode() too, but hands the
# bytes it reads on to the next prompt's Keys.

def lone_esc(data):
    """(data without it, True) when a read of keys ends in an Esc pressed
    alone (not the start of a sequence such as a cursor key), else (data, False)."""
    if data.endswith(b"\x1b") and not data.endswith(b"\x1b\x1b"):
        return data[:-1], True
    return data, False


def keys_mode(fd, raw=False, flush=False):
    """Make the terminal on fd deliver each key as it is typed, unechoed;
    returns the mode restore_mode() gives back (termios.error: no terminal).
    raw: Ctrl-C, Ctrl-Z and flow control arrive as keys and Enter as CR (the
    prompt handles them); else (cbreak) they keep their meaning. flush: keys
    typed before are dropped."""
    import termios

    old = termios.tcgetattr(fd)
    new = termios.tcgetattr(fd)
    if raw:
        new[0] &= ~(termios.BRKINT | termios.ICRNL | termios.INPCK | termios.ISTRIP | termios.IXON)
        new[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG)
    else:
        new[3] &= ~(termios.ICANON | termios.ECHO)
    new[6][termios.VMIN], new[6][termios.VTIME] = 1, 0
    if flush:
        termios.tcsetattr(fd, termios.TCSAFLUSH, new)
        termios.tcflush(fd, termios.TCIFLUSH)
    else:
        termios.tcsetattr(fd, termios.TCSANOW, new)
    return old


def restore_mode(fd, old, drain=False):
    """Give the terminal on fd back a mode keys_mode() returned, if it is
    still there (drain: after what was written has been sent)."""
    import termios

    try:
        termios.tcsetattr(fd, termios.TCSADRAIN if drain else termios.TCSANOW, old)
    except (termios.error, OSError):
        pass


class Keys:
    """The keys typed on the terminal on fd. A key is a character, a name
    ("up", "home", "delete", "word-left", ...; "esc" for Esc alone,
    "unknown" for a sequence panto has no use for), or ("paste", text) for
    a whole bracketed paste, its line ends made LF. `pending` holds what was
    read and not yet taken."""

    ESC_WAIT = 0.05     # seconds the rest of an escape sequence may take to arrive

    def __init__(self, fd):
        import codecs

        self.fd = fd
        self.pending = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data):
        """Bytes from the terminal, read by someone else: taken as typed."""
        self.pending += self.decoder.decode(data)

    def more(self, wait=None):
        """Read what the terminal has; False on timeout (wait: seconds).
        Raises Edit('eof') at the end of input."""
        import select

        if wait is not None and not select.select([self.fd], [], [], wait)[0]:
            return False
        try:
            data = os.read(self.fd, 65536)
        except InterruptedError:
            return True
        except OSError:         # the terminal has gone (EIO after a hang-up)
            data = b""
        if not data:
            raise Edit("eof")
        self.feed(data)
        return True

    def drain(self):
        """Take in what the terminal has already, never waiting: keys typed
        while nobody was reading (e.g. a Ctrl-C pressed just after Enter,
        which raw mode leaves a key, not a signal)."""
        try:
            while self.more(wait=0):
                pass
        except (Edit, OSError, ValueError):
            pass        # the end of input, or no terminal: the next read says so

    def next(self):
        """The next key, waiting for it."""
        while not self.pending:
            self.more()
        return self._take()

    def batch(self):
        """The keys of one read (with the rest of a sequence or paste begun in
        it): a key pressed alone comes alone; keys typed ahead, or pasted
        without brackets, come several at once."""
        self.more()
        keys = []
        while self.pending:
            keys.append(self._take())
        return keys

    def _take(self):
        """The key at the start of pending, once all of it has arrived."""
        while True:
            got = _parse_key(self.pending)
            if got is None:
                if self.pending.startswith(PASTE_START):
                    self.more()                 # a paste: until its end mark, however long
                    continue
                if self.more(self.ESC_WAIT):    # a sequence: briefly, else it is what came
                    continue
                got = _parse_key(self.pending, final=True)
            key, n = got
            self.pending = self.pending[n:]
            return key


def _parse_key(text, final=False):
    """(key, characters it takes) at the start of text, or None while the
    rest of it may still come (final: it will not)."""
    if text[0] != "\x1b":
        return text[0], 1
    if text.startswith(PASTE_START):
        end = text.find(PASTE_END, len(PASTE_START))
        if end < 0:
            return None
        body = text[len(PASTE_START):end].replace("\r\n", "\n").replace("\r", "\n")
        return ("paste", body), end + len(PASTE_END)
    if len(text) < 2:
        return ("esc", 1) if final else None
    if text[1] not in "[O":
        return _ALT_KEYS.get(text[1], "unknown"), 2
    n = _complete(text)
    if n:
        return _KEYS.get(text[:n], "unknown"), n
    return ("unknown", len(text)) if final else None


def _complete(seq):
    """Length of the complete CSI/SS3 sequence at the start of seq, or 0."""
    if len(seq) < 3:
        return 0
    if seq[1] == "O":
        return 3
    for i in range(2, len(seq)):
        if "@" <= seq[i] <= "~":
            return i + 1
    return 0


_KEYS = {
    "\x1b[A": "up", "\x1b[B": "down", "\x1b[C": "right", "\x1b[D": "left",
    "\x1bOA": "up", "\x1bOB": "down", "\x1bOC": "right", "\x1bOD": "left",
    "\x1b[H": "home", "\x1b[F": "end", "\x1bOH": "home", "\x1bOF": "end",
    "\x1b[1~": "home", "\x1b[4~": "end", "\x1b[7~": "home", "\x1b[8~": "end",
    "\x1b[3~": "delete", "\x1b[1;5D": "word-left", "\x1b[1;5C": "word-right",
    "\x1b[1;3D": "word-left", "\x1b[1;3C": "word-right",
}
_ALT_KEYS = {"b": "word-left", "f": "word-right", "\x7f": "word-rubout"}   # ESC, then the key


class Spinner:
    """`⠋ 1.4s` on a terminal while nothing else is shown; erased by stop().

    It draws with a carriage return and spaces only (no escape sequence), so
    it is the same with NO_COLOR; on anything but a terminal it draws nothing.
    Call tick() often (every ~0.1 s); it redraws at most ten times a second."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, stream, label="", env=None):
        import time

        self.stream, self.label = stream, label
        try:
            self.on = stream.isatty()
        except (AttributeError, ValueError):
            self.on = False
        self.start = time.monotonic()
        self.shown = 0       # columns drawn, 0 when nothing is
        self.frame = 0
        self.last = 0.0

    def restart(self, label=None):
        import time

        if label is not None:
            self.label = label
        self.start = time.monotonic()

    def tick(self):
        import time

        if not self.on:
            return
        now = time.monotonic()
        if self.shown and now - self.last < 0.1:
            return
        self.last = now
        text = f"{self.FRAMES[self.frame % len(self.FRAMES)]} {self.label}{now - self.start:.1f}s"
        self.frame += 1
        width = text_width(text)
        pad = " " * max(0, self.shown - width)
        # counted before the write: a Ctrl-C between the two still has stop() erase all that was drawn
        self.shown = max(self.shown, width)
        self._put("\r" + text + pad + ("\b" * len(pad)))
        self.shown = width

    def forget(self):
        """Something else took the line: leave what was drawn, never erase it."""
        self.shown = 0

    def stop(self):
        if self.shown:
            self._put("\r" + " " * self.shown + "\r")
            self.shown = 0

    def _put(self, s):
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):
            self.on = False


# --- escape codes: the one set panto writes and reads ---------------------------

# SGR: what panto draws with (shown only where styled() says so)
RESET, BOLD, DIM, ITALIC = "\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[3m"
RED, GREEN, YELLOW, MAGENTA, CYAN = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[36m"
# bracketed paste: turned on and off, and the marks around each paste (Keys)
PASTE_ON, PASTE_OFF = "\x1b[?2004h", "\x1b[?2004l"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
