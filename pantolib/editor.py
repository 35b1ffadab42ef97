"""The prompt's line editor: a person's line, edited with the usual keys.

`LineEditor` reads keys through `terminal.Keys` and draws the prompt and its
text (many lines, wrapped to the terminal's width, scrolled when they do not
fit); `_Line` is the text, the cursor and the history, and knows nothing of
the terminal.
"""
import os

from pantolib.terminal import (CONTINUATION, PASTE_OFF, PASTE_ON, Edit, Keys, keys_mode, restore_mode, size,
                               styled_width, text_width, visible)
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
        self.at_top = False         # the prompt starts at the screen's top-left (after Ctrl-L)
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
        """Whether a Ctrl-C came after the Enter that ended the last prompt
        while the terminal was still raw (in one read with it, or before it
        was given back its line mode): it is taken out of what waits for the
        next prompt, and the caller cancels the turn. From the line mode on,
        a Ctrl-C is a signal, which the turn counts."""
        self.keys.drain()   # what reached the terminal in the moment of the switch
        i = self.keys.pending.find("\x03")
        if i < 0:
            return False
        self.keys.pending = self.keys.pending[i + 1:]
        return True

    # -- editing -------------------------------------------------------------
    def read(self, prompt, initial="", history=True, entered=None):
        """Keys typed before the prompt appeared (while a turn ran, unechoed)
        are read first, as if typed now; history: Up/Down go through it.
        entered: called at Enter while the terminal is still raw, so that
        from the moment it is a signal again a Ctrl-C is the next turn's."""
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
                    if entered is not None:
                        entered()
                    self.keys.drain()   # typed since: raw, so a Ctrl-C among them is a key
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
        self.at_top = True      # until the prompt is finished (_draw)
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
        """Tab: completes a /command being typed, or the path of an @PATH
        mention before the cursor, else is a character."""
        text = self.line.text
        start = max(text.rfind(" ", 0, self.line.pos), text.rfind("\n", 0, self.line.pos)) + 1
        if text[start:start + 1] == "@":
            word, shown = _complete_path(text[start:self.line.pos])
            self.line.text = text[:start] + word + text[self.line.pos:]
            self.line.pos = start + len(word)
            if shown:
                self._finish()
                self._write(shown + "\r\n")
                self._draw(first=True)
            else:
                self._edited()
            return
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
        top = self.at_top
        if not first:
            if self.cursor_row:
                out.append(f"\x1b[{self.cursor_row}A")
            if not top:
                out.append("\x1b[J")
        if top:
            # at the screen's top-left (after Ctrl-L) an erase of all below is a
            # clear of the whole screen, which tmux copies into its scrollback:
            # each line is erased after it is drawn, and what is below after the last
            ends = [styled_width(p) % cols for p in parts]
            out.append("\r\n".join(p + ("\x1b[K" if e else "") for p, e in zip(parts, ends)))
            if ends[-1] or not parts[-1]:
                out.append("\x1b[J" + _back_to_cursor(parts[-1], row, cols, cursor_row, cursor_col))
            else:   # a full last row: onto the next one (out of the pending wrap), erase, back
                up = row - cursor_row
                out.append(" \r\x1b[J" + (f"\x1b[{up}A" if up else "") + (f"\x1b[{cursor_col}C" if cursor_col else ""))
        else:
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
        self.at_top = False


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
        """Up: the line above in a prompt of several lines; from its first line, history."""
        start = self.text.rfind("\n", 0, self.pos) + 1
        if start == 0:
            self._go(-1)
            return
        above = self.text.rfind("\n", 0, start - 1) + 1
        self.pos = min(above + (self.pos - start), start - 1)

    def newer(self):
        """Down: the line below in a prompt of several lines; from its last line, history."""
        end = self.text.find("\n", self.pos)
        if end < 0:
            self._go(1)
            return
        start = self.text.rfind("\n", 0, self.pos) + 1
        below_end = self.text.find("\n", end + 1)
        self.pos = min(end + 1 + (self.pos - start), len(self.text) if below_end < 0 else below_end)

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


def _complete_path(word):
    """(the @PATH word completed as far as it goes, the choices to show or "")."""
    prefix = word[1:]
    head, base = os.path.split(prefix)
    try:
        names = sorted(n for n in os.listdir(os.path.expanduser(head) or ".")
                       if n.startswith(base) and (base.startswith(".") or not n.startswith(".")))
    except OSError:
        return word, ""
    if not names:
        return word, ""
    if len(names) == 1:
        path = os.path.join(head, names[0])
        return "@" + path + ("/" if os.path.isdir(os.path.expanduser(path)) else " "), ""
    common = os.path.commonprefix(names)
    if common != base:
        return "@" + os.path.join(head, common), ""
    return word, "  ".join(names[:50]) + ("  …" if len(names) > 50 else "")


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


def _shown(ch):
    """How one character of the person's own text is drawn while editing."""
    if ch == "\t":
        return "    "
    return visible(ch)


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
    heights = [max(1, -(-(styled_width(h) + text_width(b)) // cols)) for h, b in zip(heads, bodies)]
    lo, hi = _window(heights, li, room)
    parts, row = [], 0
    if lo > 0:
        parts.append(_left_out(lo, "above"))
        row += 1
    for i in range(lo, hi + 1):
        if i == li:
            w = styled_width(heads[i]) + text_width("".join(_shown(c) for c in lines[i][:ci]))
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
    width = styled_width(last)
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
