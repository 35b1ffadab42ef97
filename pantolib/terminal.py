"""The person's terminal: what may reach it, and whether to colour it.

Every piece of text that comes from a model, a tool or a server and is bound
for a terminal goes through `visible()`: control characters and escape
sequences are shown, not executed, so a reply cannot move the cursor, clear
a line, retitle the window or write the clipboard. Newline and tab are kept.
"""
import os
import re

# C0 controls but \t and \n, DEL, C1 controls, and the Unicode format
# characters that reorder or hide text (bidi overrides and isolates, line and
# paragraph separators, zero-width joiners are left: emoji need them).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


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
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_show, text)


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
    orjson escapes them already)."""
    text = data.decode("utf-8", "replace")
    if not _UNSAFE.search(text):
        return data
    return _UNSAFE.sub(_escaped, text).encode("utf-8")


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


_SGR = re.compile("\x1b\\[[0-9;]*m")


def _styled_width(text):
    """Columns of text that may hold colour codes (the prompt's own)."""
    return text_width(_SGR.sub("", text))


def _shown(ch):
    """How one character of the person's own text is drawn while editing."""
    if ch == "\t":
        return "    "
    return visible(ch)


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
# The prompt (LineEditor) and panto-tool's one-key question (tools/confirm.py)
# both read through Keys: the same escape sequences, the same bracketed
# paste, the same lone Esc.

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


class LineEditor:
    """A prompt line for a person: cursor keys, history, Emacs keys, bracketed paste.

    `read(prompt)` returns the text (possibly many lines), or raises Edit
    ('interrupt' with the text abandoned, or 'eof'). Keys: Left/Right,
    Home/End, Ctrl-A/E, Up/Down (history), Backspace, Delete, Ctrl-D,
    Ctrl-U/K (kill to start/end), Ctrl-W (word back), Alt-B/F (word left,
    right), Ctrl-L (redraw), Enter (a line ending in `\\` continues on the next
    line instead), Ctrl-C, Ctrl-Z (suspend)."""

    def __init__(self, fd_in=0, fd_out=1, history=None, words=()):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.history = history if history is not None else []
        self.words = sorted(words)  # what Tab completes at the start of a prompt (the /commands)
        self.keys = Keys(fd_in)
        self.cursor_row = 0         # rows from the top of the drawn prompt to the cursor

    @property
    def pending(self):
        """Keys read and not yet handled: the next read() handles them first."""
        return self.keys.pending

    @pending.setter
    def pending(self, text):
        self.keys.pending = text

    @property
    def decoder(self):
        """The decoder of what the terminal sends (keys read elsewhere go through it)."""
        return self.keys.decoder

    # -- the terminal --------------------------------------------------------
    def write(self, s):
        """Write to the terminal the prompt is drawn on."""
        self._write(s)

    def _write(self, s):
        data = s.encode("utf-8", "replace")
        while data:
            n = os.write(self.fd_out, data)
            data = data[n:]

    # -- drawing -------------------------------------------------------------
    def _draw(self, prompt, buf, pos, first=False, whole=False):
        cols, rows = size(self.fd_out)
        lines = buf.split("\n")
        before = buf[:pos]
        li = before.count("\n")                        # the cursor's line
        ci = len(before) - (before.rfind("\n") + 1)     # and its column in it
        heads = [prompt] + [CONTINUATION] * (len(lines) - 1)
        bodies = ["".join(_shown(c) for c in line) for line in lines]
        widths = [_styled_width(h) + text_width(b) for h, b in zip(heads, bodies)]

        def rows_of(i):
            return max(1, -(-widths[i] // cols))

        # the lines that fit on the screen: the cursor's, then its neighbours
        room = rows - 2 if not whole else float("inf")    # whole: all of it, into the scrollback
        lo = hi = li
        used = rows_of(li)
        grew = True
        while grew:
            grew = False
            if hi + 1 < len(lines) and used + rows_of(hi + 1) <= room:
                hi += 1
                used += rows_of(hi)
                grew = True
            if lo > 0 and used + rows_of(lo - 1) <= room:
                lo -= 1
                used += rows_of(lo)
                grew = True
        parts, row = [], 0
        if lo > 0:
            parts.append(f"{CONTINUATION}… {lo} more line{'s' if lo != 1 else ''} above")
            row += 1
        cursor_row = cursor_col = 0
        for i in range(lo, hi + 1):
            if i == li:
                w = _styled_width(heads[i]) + text_width("".join(_shown(c) for c in lines[i][:ci]))
                cursor_row, cursor_col = row + w // cols, w % cols
            parts.append(heads[i] + bodies[i])
            row += rows_of(i)
        if hi + 1 < len(lines):
            n = len(lines) - hi - 1
            parts.append(f"{CONTINUATION}… {n} more line{'s' if n != 1 else ''} below")
            row += 1
        out = ["\r"]
        if not first:
            if self.cursor_row:
                out.append(f"\x1b[{self.cursor_row}A")
            out.append("\x1b[J")
        out.append("\r\n".join(parts))
        last = _styled_width(parts[-1])
        end_row, end_col = row - 1, last % cols
        if last and last % cols == 0:
            out.append(" \r")   # out of the pending wrap: onto the next row, where the model has it
            end_row, end_col = row, 0
        up = end_row - cursor_row
        if up > 0 or end_col != cursor_col:
            out.append("\r")
            if up > 0:
                out.append(f"\x1b[{up}A")
            if cursor_col:
                out.append(f"\x1b[{cursor_col}C")
        self.cursor_row = cursor_row
        self._write("".join(out))

    def _finish(self, prompt, buf):
        """Redraw with the cursor after the text and go to the next line: all
        of the text, however tall, so the scrollback holds the whole prompt."""
        self._draw(prompt, buf, len(buf), whole=True)
        self._write("\r\n")
        self.cursor_row = 0

    def interrupted_ahead(self):
        """Whether a Ctrl-C was read already, after the Enter that ended the
        last prompt (keys that came in one read with it): it is taken out of
        what waits for the next prompt, and the caller cancels the turn."""
        i = self.keys.pending.find("\x03")
        if i < 0:
            return False
        self.keys.pending = self.keys.pending[i + 1:]
        return True

    # -- editing -------------------------------------------------------------
    def read(self, prompt, initial="", history=True):
        """Keys typed before the prompt appeared (while a turn ran, unechoed)
        are read first, as if typed now; history: Up/Down go through it."""
        import termios

        try:
            old = keys_mode(self.fd_in, raw=True)
        except termios.error:
            raise Edit("eof") from None
        buf, pos = initial, len(initial)
        hist = (self.history if history else []) + [buf]
        at = len(hist) - 1
        self.cursor_row = 0
        try:
            self._draw(prompt, buf, pos, first=True)
            while True:
                try:
                    k = self.keys.next()
                except KeyboardInterrupt:   # a SIGINT from outside
                    k = "\x03"
                if isinstance(k, tuple):    # a paste: text, whatever it holds
                    buf, pos = buf[:pos] + k[1] + buf[pos:], pos + len(k[1])
                elif k in ("\r", "\n"):
                    if buf[:pos].endswith("\\") and pos == len(buf):
                        buf, pos = buf[:-1] + "\n", len(buf)
                    else:
                        self._finish(prompt, buf)
                        try:
                            while self.keys.more(0):    # keys already typed after it (a Ctrl-C, say)
                                pass
                        except Edit:
                            pass                    # the end of input comes with the next prompt
                        return buf
                elif k == "\x03":
                    self._finish(prompt, buf + "^C" if buf else buf)
                    raise Edit("interrupt", buf)
                elif k == "\x04":
                    if not buf:
                        self._finish(prompt, buf)
                        raise Edit("eof")
                    buf = buf[:pos] + buf[pos + 1:]
                elif k in ("\x7f", "\x08"):
                    if pos:
                        buf, pos = buf[:pos - 1] + buf[pos:], pos - 1
                elif k == "delete":
                    buf = buf[:pos] + buf[pos + 1:]
                elif k in ("left", "\x02"):
                    pos = max(0, pos - 1)
                elif k in ("right", "\x06"):
                    pos = min(len(buf), pos + 1)
                elif k in ("home", "\x01"):
                    pos = buf.rfind("\n", 0, pos) + 1
                elif k in ("end", "\x05"):
                    e = buf.find("\n", pos)
                    pos = len(buf) if e < 0 else e
                elif k == "\x15":           # Ctrl-U: kill to the start of the line
                    s = buf.rfind("\n", 0, pos) + 1
                    buf, pos = buf[:s] + buf[pos:], s
                elif k == "\x0b":           # Ctrl-K: kill to the end of the line
                    e = buf.find("\n", pos)
                    buf = buf[:pos] + ("" if e < 0 else buf[e:])
                elif k in ("\x17", "word-rubout"):
                    s = _word_start(buf, pos)
                    buf, pos = buf[:s] + buf[pos:], s
                elif k == "word-left":
                    pos = _word_start(buf, pos)
                elif k == "word-right":
                    pos = _word_end(buf, pos)
                elif k in ("up", "\x10", "down", "\x0e"):
                    step = -1 if k in ("up", "\x10") else 1
                    if 0 <= at + step < len(hist):
                        hist[at] = buf
                        at += step
                        buf = hist[at]
                        pos = len(buf)
                elif k == "\x0c":
                    self._write("\x1b[H\x1b[2J")
                    self.cursor_row = 0
                    self._draw(prompt, buf, pos, first=True)
                    continue
                elif k == "\x1a":
                    self._finish(prompt, buf)
                    self._write(PASTE_OFF)
                    restore_mode(self.fd_in, old)
                    import signal

                    os.kill(0, signal.SIGTSTP)
                    old = keys_mode(self.fd_in, raw=True)
                    self._write(PASTE_ON)
                    self._draw(prompt, buf, pos, first=True)
                    continue
                elif k == "\t" and self.words and buf.startswith("/") and pos == len(buf) \
                        and not any(c.isspace() for c in buf):
                    buf, shown = self._complete_word(buf)
                    pos = len(buf)
                    if shown:       # the choices, on a line of their own; the prompt below them
                        self._finish(prompt, buf)
                        self._write(shown + "\r\n")
                        self._draw(prompt, buf, pos, first=True)
                        continue
                elif isinstance(k, str) and len(k) == 1 and (k >= " " or k == "\t"):
                    buf, pos = buf[:pos] + k + buf[pos:], pos + 1
                else:
                    continue
                if not self.keys.pending or len(self.keys.pending) > 4096:
                    self._draw(prompt, buf, pos)
        finally:
            restore_mode(self.fd_in, old)

    def _complete_word(self, buf):
        """(the text, the choices to show or ""): Tab at the end of `/wo`."""
        match = [w for w in self.words if w.startswith(buf)]
        if len(match) == 1:
            return match[0] + " ", ""
        if not match:
            return buf, ""
        import os.path

        common = os.path.commonprefix(match)
        if common != buf:
            return common, ""
        return buf, "  ".join(match)


def _word_start(buf, pos):
    while pos and buf[pos - 1].isspace():
        pos -= 1
    while pos and not buf[pos - 1].isspace():
        pos -= 1
    return pos


def _word_end(buf, pos):
    while pos < len(buf) and buf[pos].isspace():
        pos += 1
    while pos < len(buf) and not buf[pos].isspace():
        pos += 1
    return pos


# --- feedback while waiting ---------------------------------------------------

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
        pad = " " * max(0, self.shown - text_width(text))
        self._put("\r" + text + pad + ("\b" * len(pad)))
        self.shown = text_width(text)

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
