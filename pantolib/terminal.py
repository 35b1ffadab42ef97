"""The person's terminal: what may reach it, whether to colour it, and the keys read from it.

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
# paste, the same lone Esc. The Esc key while a reply streams
# (pipeline.EscKey) takes the terminal with keys_mode() too, but hands the
# bytes it reads on to the next prompt's Keys.

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
        self.prompt, self.line, self.mode = "", None, None     # while read() runs

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
        from pantolib.files import write_all

        write_all(self.fd_out, s.encode("utf-8", "replace"))

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
            self.mode = keys_mode(self.fd_in, raw=True)
        except termios.error:
            raise Edit("eof") from None
        self.prompt, self.line = prompt, _Line(initial, self.history if history else [])
        self.cursor_row = 0
        try:
            self._draw(first=True)
            while True:
                try:
                    key = self.keys.next()
                except KeyboardInterrupt:   # a SIGINT from outside
                    key = "\x03"
                if self._handle(key):
                    return self.line.text
        finally:
            restore_mode(self.fd_in, self.mode)

    def _handle(self, key):
        """Act on one key; True when it ends the prompt (Enter)."""
        if isinstance(key, tuple):          # a paste: text, whatever it holds
            self.line.insert(key[1])
        elif key in _EDITS:
            _EDITS[key](self.line)
        elif key in self.ACTIONS:
            return getattr(self, self.ACTIONS[key])()
        elif len(key) == 1 and key >= " ":
            self.line.insert(key)
        else:
            return False                    # a key with no use here
        self._edited()
        return False

    # keys that do more than edit the text (the editing keys: _EDITS)
    ACTIONS = {"\r": "_enter", "\n": "_enter", "\x03": "_interrupt", "\x04": "_eof_or_delete",
               "\x0c": "_clear", "\x1a": "_suspend", "\t": "_tab"}

    def _enter(self):
        if self.line.continued():
            self._edited()
            return False
        self._finish()
        try:
            while self.keys.more(0):    # keys already typed after it (a Ctrl-C, say)
                pass
        except Edit:
            pass                        # the end of input comes with the next prompt
        return True

    def _interrupt(self):
        text = self.line.text
        self._finish(text + "^C" if text else text)
        raise Edit("interrupt", text)

    def _eof_or_delete(self):
        """Ctrl-D: the end of input at an empty prompt, else Delete."""
        if not self.line.text:
            self._finish()
            raise Edit("eof")
        self.line.delete()
        self._edited()

    def _clear(self):
        """Ctrl-L: the screen cleared, the prompt at the top."""
        self._write("\x1b[H\x1b[2J")
        self.cursor_row = 0
        self._draw(first=True)

    def _suspend(self):
        """Ctrl-Z: the terminal as it was while panto is stopped, the prompt again after."""
        import signal

        self._finish()
        self._write(PASTE_OFF)
        restore_mode(self.fd_in, self.mode)
        os.kill(0, signal.SIGTSTP)
        self.mode = keys_mode(self.fd_in, raw=True)
        self._write(PASTE_ON)
        self._draw(first=True)

    def _tab(self):
        """Tab: completes a /command being typed, else is a character."""
        text = self.line.text
        if not (self.words and text.startswith("/") and self.line.pos == len(text)
                and not any(c.isspace() for c in text)):
            self.line.insert("\t")
            self._edited()
            return
        text, shown = self._complete_word(text)
        self.line.text, self.line.pos = text, len(text)
        if shown:       # the choices, on a line of their own; the prompt below them
            self._finish()
            self._write(shown + "\r\n")
            self._draw(first=True)
        else:
            self._edited()

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

    # -- drawing -------------------------------------------------------------
    def _edited(self):
        """Redraw after an edit, unless more keys wait (a paste without
        brackets is drawn once, at its end)."""
        if not self.keys.pending or len(self.keys.pending) > 4096:
            self._draw()

    def _draw(self, first=False, whole=None):
        """Draw the prompt over the one drawn before (first: none was): the
        lines around the cursor's that fit on the screen; or whole, this
        text instead, all of it (into the scrollback), the cursor at its end."""
        cols, rows = size(self.fd_out)
        if whole is None:
            text, pos, room = self.line.text, self.line.pos, rows - 2
        else:
            text, pos, room = whole, len(whole), float("inf")
        parts, row, (cursor_row, cursor_col) = _layout(self.prompt, text, pos, cols, room)
        out = ["\r"]
        if not first:
            if self.cursor_row:
                out.append(f"\x1b[{self.cursor_row}A")
            out.append("\x1b[J")
        out.append("\r\n".join(parts))
        out.append(_back_to_cursor(parts[-1], row, cols, cursor_row, cursor_col))
        self.cursor_row = cursor_row
        self._write("".join(out))

    def _finish(self, text=None):
        """Redraw with the cursor after the text (or after text, drawn
        instead) and go to the next line: all of it, however tall, so the
        scrollback holds the whole prompt."""
        self._draw(whole=self.line.text if text is None else text)
        self._write("\r\n")
        self.cursor_row = 0


class _Line:
    """The text being edited, the cursor in it, and the history Up/Down go
    through (its entries, then the text; edits to an entry last while the
    prompt does)."""

    def __init__(self, text, history):
        self.text, self.pos = text, len(text)
        self.hist = history + [text]
        self.at = len(self.hist) - 1

    def insert(self, s):
        self.text, self.pos = self.text[:self.pos] + s + self.text[self.pos:], self.pos + len(s)

    def continued(self):
        """Enter after a `\\` at the end: it becomes a new line (True)."""
        if self.pos == len(self.text) and self.text.endswith("\\"):
            self.text = self.text[:-1] + "\n"
            return True
        return False

    def backspace(self):
        if self.pos:
            self.text, self.pos = self.text[:self.pos - 1] + self.text[self.pos:], self.pos - 1

    def delete(self):
        self.text = self.text[:self.pos] + self.text[self.pos + 1:]

    def left(self):
        self.pos = max(0, self.pos - 1)

    def right(self):
        self.pos = min(len(self.text), self.pos + 1)

    def home(self):
        self.pos = self.text.rfind("\n", 0, self.pos) + 1

    def end(self):
        e = self.text.find("\n", self.pos)
        self.pos = len(self.text) if e < 0 else e

    def kill_to_start(self):
        s = self.text.rfind("\n", 0, self.pos) + 1
        self.text, self.pos = self.text[:s] + self.text[self.pos:], s

    def kill_to_end(self):
        e = self.text.find("\n", self.pos)
        self.text = self.text[:self.pos] + ("" if e < 0 else self.text[e:])

    def rubout_word(self):
        s = _word_start(self.text, self.pos)
        self.text, self.pos = self.text[:s] + self.text[self.pos:], s

    def word_left(self):
        self.pos = _word_start(self.text, self.pos)

    def word_right(self):
        self.pos = _word_end(self.text, self.pos)

    def older(self):
        self._go(-1)

    def newer(self):
        self._go(1)

    def _go(self, step):
        if 0 <= self.at + step < len(self.hist):
            self.hist[self.at] = self.text
            self.at += step
            self.text = self.hist[self.at]
            self.pos = len(self.text)


# the keys that edit the text, and how (LineEditor.ACTIONS: the others)
_EDITS = {
    "\x7f": _Line.backspace, "\x08": _Line.backspace, "delete": _Line.delete,
    "left": _Line.left, "\x02": _Line.left, "right": _Line.right, "\x06": _Line.right,
    "home": _Line.home, "\x01": _Line.home, "end": _Line.end, "\x05": _Line.end,
    "\x15": _Line.kill_to_start, "\x0b": _Line.kill_to_end,
    "\x17": _Line.rubout_word, "word-rubout": _Line.rubout_word,
    "word-left": _Line.word_left, "word-right": _Line.word_right,
    "up": _Line.older, "\x10": _Line.older, "down": _Line.newer, "\x0e": _Line.newer,
}


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


def _layout(prompt, text, pos, cols, room):
    """(parts, rows, (row, column)): the screen lines that show text after
    the prompt (at most room rows of it: the cursor's line and its
    neighbours, with a count of the lines left out), the rows they take on
    a terminal cols wide, and where the cursor at pos is."""
    lines = text.split("\n")
    before = text[:pos]
    li = before.count("\n")                        # the cursor's line
    ci = len(before) - (before.rfind("\n") + 1)     # and its column in it
    heads = [prompt] + [CONTINUATION] * (len(lines) - 1)
    bodies = ["".join(_shown(c) for c in line) for line in lines]
    heights = [max(1, -(-(_styled_width(h) + text_width(b)) // cols)) for h, b in zip(heads, bodies)]
    lo, hi = _window(heights, li, room)
    parts, row = [], 0
    if lo > 0:
        parts.append(_left_out(lo, "above"))
        row += 1
    for i in range(lo, hi + 1):
        if i == li:
            w = _styled_width(heads[i]) + text_width("".join(_shown(c) for c in lines[i][:ci]))
            cursor = row + w // cols, w % cols
        parts.append(heads[i] + bodies[i])
        row += heights[i]
    if hi + 1 < len(lines):
        parts.append(_left_out(len(lines) - hi - 1, "below"))
        row += 1
    return parts, row, cursor


def _window(heights, li, room):
    """(lo, hi): the lines that fit in room rows (heights: each line's
    rows), line li's, then its neighbours below and above in turn."""
    lo = hi = li
    used = heights[li]
    grew = True
    while grew:
        grew = False
        if hi + 1 < len(heights) and used + heights[hi + 1] <= room:
            hi += 1
            used += heights[hi]
            grew = True
        if lo > 0 and used + heights[lo - 1] <= room:
            lo -= 1
            used += heights[lo]
            grew = True
    return lo, hi


def _left_out(n, where):
    return f"{CONTINUATION}… {n} more line{'s' if n != 1 else ''} {where}"


def _back_to_cursor(last, rows, cols, cursor_row, cursor_col):
    """What moves the cursor from the end of what was drawn (rows rows, the
    last one last) back to (cursor_row, cursor_col)."""
    out = ""
    width = _styled_width(last)
    end_row, end_col = rows - 1, width % cols
    if width and width % cols == 0:
        out += " \r"   # out of the pending wrap: onto the next row, where the model has it
        end_row, end_col = rows, 0
    up = end_row - cursor_row
    if up > 0 or end_col != cursor_col:
        out += "\r"
        if up > 0:
            out += f"\x1b[{up}A"
        if cursor_col:
            out += f"\x1b[{cursor_col}C"
    return out


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
