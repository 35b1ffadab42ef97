"""A small terminal, enough to read what panto leaves on a screen and in its
scrollback: printable characters with automatic wrap, CR, LF, BS, cursor
up/down/forward (clamped at the top of the screen, as terminals do), erase
below and to the end of the line; colour and mode sequences are ignored."""
import re

from pantolib.terminal import cell_width

_SEQ = re.compile(r"\x1b\[([?0-9;]*)([ -/]*[@-~])|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-_]|.", re.S)


class Screen:
    def __init__(self, cols=80, rows=24, newline_is_crlf=True):
        self.cols, self.rows = cols, rows
        self.lines = [[]]       # the scrollback and the screen: every row ever drawn
        self.r = self.c = 0     # the cursor, as an index in lines
        self.wrap_next = False
        self.crlf = newline_is_crlf
        self.clamped = 0        # cursor-up moves that would have gone past the top of the screen

    @property
    def top(self):
        return max(0, len(self.lines) - self.rows)

    def feed(self, text):
        for m in _SEQ.finditer(text):
            t = m.group()
            if m.group(2) is not None:
                self._csi(m.group(1), m.group(2))
            elif t.startswith("\x1b"):
                continue
            elif t == "\r":
                self.c, self.wrap_next = 0, False
            elif t == "\n":
                self._down()
                if self.crlf:
                    self.c = 0
                self.wrap_next = False
            elif t == "\b":
                if self.wrap_next:
                    self.wrap_next = False
                self.c = max(0, self.c - 1)
            elif t < " " or t == "\x7f":
                continue
            else:
                self._put(t)
        return self

    def _down(self):
        self.r += 1
        while len(self.lines) <= self.r:
            self.lines.append([])

    def _put(self, ch):
        w = cell_width(ch)
        if self.wrap_next or self.c + w > self.cols:
            self._down()
            self.c, self.wrap_next = 0, False
        row = self.lines[self.r]
        while len(row) < self.c:
            row.append(" ")
        if self.c < len(row):
            row[self.c] = ch
        else:
            row.append(ch)
        if w == 2:
            if self.c + 1 < len(row):
                row[self.c + 1] = ""
            else:
                row.append("")
        self.c += w
        if self.c >= self.cols:
            self.c, self.wrap_next = self.cols - 1, True

    def _csi(self, params, final):
        n = int(params) if params.isdigit() else 1
        if final == "A":
            want = self.r - n
            if want < self.top:
                self.clamped += 1
            self.r = max(self.top, want)
            self.wrap_next = False
        elif final == "B":
            self.r = min(len(self.lines) - 1, self.r + n)
        elif final == "C":
            self.c = min(self.cols - 1, self.c + n)
        elif final == "J" and params in ("", "0"):
            del self.lines[self.r][self.c:]
            del self.lines[self.r + 1:]
        elif final == "K" and params in ("", "0"):
            del self.lines[self.r][self.c:]

    def text(self):
        """Every row, scrollback included, trailing spaces dropped."""
        return ["".join(row).rstrip() for row in self.lines]

    def screen(self):
        return self.text()[self.top:]
