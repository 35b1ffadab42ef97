"""A model's Markdown reply, rendered for a person as it streams.

Text appears as it arrives; each line is styled once it is complete and
redrawn in place. The layout never depends on colour: a quote's `> ` is
shown as `│ ` (so it cannot look like the `> ` prompt), a bullet's `-`, `*`
or `+` as `•`, a rule as a line of `─`; headings, emphasis, inline code and
fenced code keep their characters and are styled (bold, italic, colour,
with their markers dimmed). So with NO_COLOR the same text is drawn with no
escape sequence at all, and nothing needs redrawing but a rule (with a
carriage return). The marker at the start of a line is held back for the
few characters it takes to know what it is; nothing else is.

When the output is not a terminal, the text goes out as the model wrote it.
Every character of model text is passed through `terminal.visible()`.
"""
import re

from pantolib.terminal import text_width, visible

RESET, BOLD, DIM, ITALIC = "\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[3m"
CYAN, GREEN, YELLOW, MAGENTA = "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m"

# a line start that may still turn into a block marker
_MAYBE = re.compile(r" {0,3}(#{1,6}|(> ?)+|[-*+]|[-*_]( ?[-*_])*|`{1,2}|~{1,2}|\d{1,9}[.)]?)?")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r" {0,3}([-*_])( *\1){2,} *")
_HEADING = re.compile(r" {0,3}#{1,6}( |$)")
_QUOTE = re.compile(r" {0,3}((?:> ?|>)+)")
_BULLET = re.compile(r"( {0,12})([-*+]) ")
_INLINE = re.compile(r"(`+)(.+?)\1|(\*\*|__)(?=\S)(.+?)(?<=\S)\3|(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\5(?![\w*])")


class Renderer:
    """Feed it text (and thinking) as it streams; end() when the reply is done.

    out: a text stream; tty: whether out is a terminal; color: whether escape
    sequences may be written; width: a callable giving the terminal's columns."""

    def __init__(self, out, tty, color, width=lambda: 80):
        self.out, self.tty, self.color, self.width = out, tty, color and tty, width
        self.mode = None        # "text" or "thinking"
        self.line = ""          # the raw characters of the current line
        self.shown = None       # what has been drawn of it (None: its marker is still held)
        self.cols = 0           # columns drawn on the current line
        self.fence = None       # the open fence's marker, inside a code block
        self.at_start = True    # nothing of the reply drawn yet

    # -- input ---------------------------------------------------------------
    def text(self, s):
        self._switch("text")
        if not self.tty:
            self._put(s)
            return
        while s:
            nl = s.find("\n")
            piece, s = (s, "") if nl < 0 else (s[:nl], s[nl + 1:])
            self.line += piece
            self._stream()
            if nl >= 0:
                self._complete()
        self._flush()

    def thinking(self, s):
        self._switch("thinking")
        if not self.tty:
            self._put(s)
            return
        shown = visible(s)
        self._put(DIM + shown + RESET if self.color else shown)
        last = shown.rfind("\n")
        self.cols = text_width(shown[last + 1:]) + (self.cols if last < 0 else 0)
        self._flush()

    def end(self):
        """The reply is over: finish the line it ended on."""
        if self.mode == "text" and self.tty and (self.line or self.shown):
            self._complete()
        elif self.cols:
            self._put("\n")
        elif not self.tty and self.mode and not self.at_start and not self._ends_nl:
            self._put("\n")
        self.cols, self.mode = 0, None
        self._flush()

    # -- drawing -------------------------------------------------------------
    _ends_nl = True

    def _put(self, s):
        if s:
            self.out.write(s)
            self.at_start = False
            self._ends_nl = s.endswith("\n")

    def _flush(self):
        try:
            self.out.flush()
        except (OSError, ValueError):
            pass

    def _switch(self, mode):
        if mode == self.mode:
            return
        if self.mode is not None:   # thinking and text are kept apart
            if self.mode == "text" and self.tty and (self.line or self.shown):
                self._complete()
            elif self.cols or (not self.tty and not self._ends_nl):
                self._put("\n")
            self.cols = 0
        self.mode = mode

    def _stream(self):
        """Draw what can be drawn of the current (incomplete) line."""
        if self.shown is None:
            if self.fence is None and _MAYBE.fullmatch(self.line):
                return      # still could be a marker: hold these few characters
            self.shown = ""
        target = self._layout(self.line, final=False)
        new = target[len(self.shown):] if target.startswith(self.shown) else None
        if new is None:
            return
        self._put(new)
        self.cols += text_width(new)
        self.shown = target

    def _complete(self):
        line, drawn = self.line, self.shown or ""
        styled, plain = self._style(line)
        if self.color:
            rows_up = max(0, self.cols - 1) // max(self.width(), 1) if self.cols else 0
            self._put("\r" + (f"\x1b[{rows_up}A" if rows_up else "") + "\x1b[J" + styled + "\n")
        elif plain != drawn:
            # only a rule or a held marker differs from what is drawn; a
            # carriage return reaches back over one row
            self._put(("\r" + plain if "\n" not in drawn and self.cols < self.width() else plain[len(drawn):]
                       if plain.startswith(drawn) else "\n" + plain) + "\n")
        else:
            self._put("\n")
        self.line, self.shown, self.cols = "", None, 0

    # -- what a line looks like ----------------------------------------------
    def _layout(self, line, final):
        """The characters a line is drawn with (no styling)."""
        if self.fence is not None:
            return visible(line)
        if final and _RULE.fullmatch(line):
            return "─" * min(max(self.width() - 1, 3), 40)
        m = _QUOTE.match(line)
        if m:
            bars, rest = m.group(1).replace(">", "│"), line[m.end():]
            if rest and not bars.endswith(" "):
                bars += " "
            return bars + self._layout_inner(rest)
        return self._layout_inner(line)

    def _layout_inner(self, line):
        m = _BULLET.match(line)
        if m and not _RULE.fullmatch(line):
            return m.group(1) + "• " + visible(line[m.end():])
        return visible(line)

    def _style(self, line):
        """(styled, plain) drawing of a complete line."""
        fence = _FENCE.match(line)
        if self.fence is not None:
            plain = visible(line)
            if fence and fence.group(1)[0] == self.fence[0] and len(fence.group(1)) >= len(self.fence) \
                    and not line[fence.end():].strip():
                self.fence = None
                return self._c(DIM, plain), plain
            return self._c(GREEN, plain), plain
        if fence:
            self.fence = fence.group(1)
            plain = visible(line)
            return self._c(DIM, plain), plain
        plain = self._layout(line, final=True)
        if not self.color:
            return plain, plain
        if _RULE.fullmatch(line):
            return self._c(DIM, plain), plain
        if _HEADING.match(line):
            return BOLD + MAGENTA + plain + RESET, plain
        m = _QUOTE.match(line)
        if m:
            bars_len = len(plain) - len(self._layout_inner(line[m.end():]))
            return (DIM + plain[:bars_len] + RESET + ITALIC + self._inline(plain[bars_len:]) + RESET), plain
        b = _BULLET.match(line)
        if b:
            n = len(b.group(1))
            return plain[:n] + CYAN + "•" + RESET + " " + self._inline(plain[n + 2:]), plain
        return self._inline(plain), plain

    def _inline(self, text):
        """Inline code, bold and italic styled; their markers kept and dimmed."""
        def repl(m):
            if m.group(1):
                return DIM + m.group(1) + RESET + CYAN + m.group(2) + RESET + DIM + m.group(1) + RESET
            if m.group(3):
                return DIM + m.group(3) + RESET + BOLD + m.group(4) + RESET + DIM + m.group(3) + RESET
            return DIM + m.group(5) + RESET + ITALIC + m.group(6) + RESET + DIM + m.group(5) + RESET
        return _INLINE.sub(repl, text)

    def _c(self, code, text):
        return code + text + RESET if self.color else text
