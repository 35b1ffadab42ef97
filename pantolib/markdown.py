"""A model's Markdown reply, rendered for a person as it streams.

Text appears as it arrives; each line is styled once it is complete and
redrawn in place. The layout never depends on colour: a quote's `> ` is
shown as `│ ` (so it cannot look like the `> ` prompt), a bullet's `-`, `*`
or `+` as `•`, a rule as a line of `─`; headings, emphasis, inline code and
fenced code keep their characters and are styled (bold, italic, colour,
with their markers dimmed; a fence's lines as written, in one code style).
So with NO_COLOR the same text is drawn with no escape sequence at all, and
nothing needs redrawing but a rule (with a carriage return). The marker at
the start of a line is held back for the few characters it takes to know
what it is; nothing else is.

Lines are wrapped by the renderer itself, at word boundaries, to the
terminal's width less one column (so the cursor never waits in the
terminal's own pending wrap, and a row is always reached by counting):
restyling a completed line moves up over its rows, and never past the top
of the screen (the rows scrolled away stay as drawn). A table (`| a | b |`
rows with a `|---|` delimiter) is redrawn as aligned columns once it ends,
when it is all still on screen; with NO_COLOR, where nothing is redrawn, its
rows are held until it ends. Thinking is dim; with NO_COLOR it starts with
`thinking: ` and is followed by a blank line.

When the output is not a terminal, the text goes out as the model wrote it.
Every character of model text is passed through `terminal.visible()`.
"""
import re

from pantolib.terminal import BOLD, CYAN, DIM, GREEN, ITALIC, MAGENTA, RESET, cell_width, text_width, visible

# a line start that may still turn into a block marker
_MAYBE = re.compile(r" {0,3}(#{1,6}|(> ?)+|[-*+]|[-*_]( ?[-*_])*|`{1,2}|~{1,2}|\d{1,9}[.)]?)?")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r" {0,3}([-*_])( *\1){2,} *")
_HEADING = re.compile(r" {0,3}#{1,6}( |$)")
_QUOTE = re.compile(r" {0,3}((?:> ?|>)+)")
_BULLET = re.compile(r"( {0,12})([-*+]) ")
_TABLE_ROW = re.compile(r" {0,3}\|.*\|[ \t]*")
_TABLE_START = re.compile(r" {0,3}\|")
_TABLE_SEP = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
_SGR_OR_CHAR = re.compile("\x1b\\[[0-9;]*m|.", re.S)
_INLINE = re.compile(r"(`+)(.+?)\1|(\*\*|__)(?=\S)(.+?)(?<=\S)\3|(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\5(?![\w*])")


class Renderer:
    """Feed it text (and thinking) as it streams; end() when the reply is done.

    out: a text stream; tty: whether out is a terminal; color: whether escape
    sequences may be written; width, height: callables giving the terminal's
    columns and rows."""

    def __init__(self, out, tty, color, width=lambda: 80, height=lambda: 24):
        self.out, self.tty, self.color, self.width, self.height = out, tty, color and tty, width, height
        self.mode = None        # "text" or "thinking"
        self.line = ""          # the raw characters of the current line
        self.rows = None        # the rows drawn of it (None: its marker is still held)
        self.fence = None       # the open fence's marker, inside a code block
        self.at_start = True    # nothing of the reply drawn yet
        self.table = []         # [(line, rows drawn)] of the table being read
        self.marked = False     # NO_COLOR: the `thinking: ` marker is drawn

    # -- input ---------------------------------------------------------------
    def text(self, s):
        self._switch("text")
        self._feed(s)

    def thinking(self, s):
        self._switch("thinking")
        self._feed(s)

    def _feed(self, s):
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

    def end(self):
        """The reply is over: finish the line it ended on."""
        if self.tty:
            if self.line or self.rows:
                self._complete()
            self._end_table()
            self._leave_thinking()
        elif self.mode and not self.at_start and not self._ends_nl:
            self._put("\n")
        self.mode = None
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
            if self.tty:
                if self.line or self.rows:
                    self._complete()
                self._end_table()
                self._leave_thinking()
            elif not self._ends_nl:
                self._put("\n")
        self.mode = mode
        self.marked = False

    def _leave_thinking(self):
        if self.mode == "thinking" and not self.color and self.marked:
            self._put("\n")        # a blank line after the thinking
        self.marked = False

    def _cols(self):
        return max(self.width() - 1, 10)

    def _stream(self):
        """Draw what can be drawn of the current (incomplete) line."""
        if self.rows is None:
            if self.mode == "text" and self.fence is None and _MAYBE.fullmatch(self.line):
                return      # still could be a marker: hold these few characters
            if self.mode == "text" and self.fence is None and _TABLE_START.match(self.line):
                if not self.color:
                    return  # a table row, maybe: held until the table ends (nothing is redrawn)
            else:
                self._end_table()
            self.rows = []
        target = self._layout(self.line, final=False)
        new = [target[a:b] for a, b in wrap(target, self._cols())]
        old = self.rows
        i = 0
        while i < len(old) - 1 and i < len(new) and old[i] == new[i]:
            i += 1
        if i < len(old) - 1:
            return          # an earlier row would change: left to the line's end
        drawn = old[i] if old else ""
        now = new[i] if i < len(new) else ""
        p = 0
        while p < len(drawn) and p < len(now) and drawn[p] == now[p]:
            p += 1
        out = ""
        if p < len(drawn):      # the end of the row changes (a word moves down): spaces over it
            w = text_width(drawn[p:])
            out += "\b" * w + " " * w + "\b" * w
        out += now[p:] + "".join("\n" + r for r in new[i + 1:])
        if out:
            self._put(self._dim(out))
        self.rows = new

    def _dim(self, text):
        return DIM + text + RESET if self.color and self.mode == "thinking" and text.strip() else text

    def _complete(self):
        line, old = self.line, self.rows or []
        table = self.mode == "text" and self.fence is None and _TABLE_ROW.fullmatch(line)
        if not table and self.table and self._end_table(below=len(old)):
            old = []            # the line was drawn under the table, and erased with it
        if self.mode == "thinking":
            styled = plain = self._layout(line, final=True)
            if self.color:
                styled = DIM + plain + RESET if plain else plain
        else:
            styled, plain = self._style(line)
        spans = wrap(plain, self._cols())
        new = [plain[a:b] for a, b in spans]
        if table and not self.color:
            self.table.append((line, 0))        # held: drawn when the table ends
        elif self.color and self.mode == "text":
            up = max(len(old) - 1, 0)
            reach = min(up, max(self.height() - 2, 0))     # never above the top of the screen
            rows = split_styled(styled, spans)
            if len(new) == len(old) or up == reach:
                first = len(rows) - 1 - reach if len(new) == len(old) else 0
                self._put("\r" + (f"\x1b[{reach}A" if reach else "") + "\x1b[J" + "\n".join(rows[first:]) + "\n")
            else:
                self._put("\n")
        elif new != old:
            # only a rule or a held marker differs from what is drawn; a
            # carriage return reaches back over one row
            if len(old) <= 1:
                blank = " " * text_width(old[0]) + "\r" if old else ""
                self._put("\r" + blank + "\n".join(new) + "\n")
            else:
                self._put("\n")
        else:
            self._put("\n")
        if table and self.color:
            self.table.append((line, max(len(new), 1)))
        if self.mode == "thinking" and plain:
            self.marked = self.marked or not self.color
        self.line, self.rows = "", None

    def _end_table(self, below=0):
        """The table read so far has ended: draw it aligned (or, not a table,
        as it is). below: rows of the line after it drawn already (the cursor
        on the last of them); True when they were erased."""
        if not self.table:
            return False
        lines, self.table = self.table, []
        drawn = sum(n for _, n in lines)
        aligned = table_rows([ln for ln, _ in lines], self._cols(), self._inline if self.color else None)
        if not self.color:      # held until now
            if aligned is None:
                for ln, _ in lines:
                    plain = self._layout(ln, final=True)
                    self._put("\n".join(plain[a:b] for a, b in wrap(plain, self._cols())) + "\n")
            else:
                self._put("\n".join(aligned) + "\n")
            return False
        up = drawn + max(below - 1, 0)
        if aligned is not None and up <= self.height() - 2:
            self._put("\r" + f"\x1b[{up}A" + "\x1b[J" + "\n".join(aligned) + "\n")
            return below > 0
        return False

    # -- what a line looks like ----------------------------------------------
    def _layout(self, line, final):
        """The characters a line is drawn with (no styling)."""
        if self.mode == "thinking":
            shown = _expand(visible(line))
            if not self.color and not self.marked and shown:
                self.marked = final     # the marker is part of the first line of thinking
                return "thinking: " + shown
            return shown
        if self.fence is not None:
            return _expand(visible(line))
        if final and _RULE.fullmatch(line):
            return "─" * min(max(self._cols(), 3), 40)
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
            return m.group(1) + "• " + _expand(visible(line[m.end():]))
        return _expand(visible(line))
    def _style(self, line):
        """(styled, plain) drawing of a complete line."""
        fence = _FENCE.match(line)
        if self.fence is not None:
            plain = _expand(visible(line))
            if fence and fence.group(1)[0] == self.fence[0] and len(fence.group(1)) >= len(self.fence) \
                    and not line[fence.end():].strip():
                self.fence = None
                return self._c(DIM, plain), plain
            return self._c(GREEN, plain), plain
        if fence:
            self.fence = fence.group(1)
            plain = _expand(visible(line))
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


def _expand(text):
    """Tabs as spaces: the renderer counts every column it draws."""
    return text.expandtabs(4) if "\t" in text else text


def wrap(text, cols):
    """[(start, end)] of the rows a line of drawn text takes at cols columns:
    broken after the last space that fits (the space that would overflow a
    row is where it breaks, not drawn), a word longer than a row cut where
    the row ends. Greedy, so a row never changes once the text is past it."""
    spans, start, w, brk = [], 0, 0, -1
    for i, ch in enumerate(text):
        cw = cell_width(ch)
        if w + cw > cols and i > start:
            if ch == " ":
                spans.append((start, i))
                start, w, brk = i + 1, 0, -1
                continue
            if brk > start:
                spans.append((start, brk))
                start = brk
                w = text_width(text[start:i])
            else:
                spans.append((start, i))
                start, w = i, 0
            brk = -1
        w += cw
        if ch == " ":
            brk = i + 1
    spans.append((start, len(text)))
    return spans


def split_styled(styled, spans):
    """The styled line cut into the rows `spans` gives for its plain text,
    each row starting with the styles in force there."""
    rows, cur, active, pi, si = [], None, [], 0, 0
    for m in _SGR_OR_CHAR.finditer(styled):
        t = m.group()
        if len(t) > 1:
            active = [] if t == RESET else active + [t]
            if cur is not None:
                cur.append(t)
            continue
        while si < len(spans) and pi >= spans[si][1] and (spans[si][1] > spans[si][0] or pi > spans[si][0]):
            if cur is not None:
                rows.append("".join(cur) + (RESET if active else ""))
                cur = None
            si += 1
        if si < len(spans) and pi >= spans[si][0]:
            if cur is None:
                cur = ["".join(active)]
            cur.append(t)
        pi += 1
    if cur is not None:
        rows.append("".join(cur))
    while len(rows) < len(spans):
        rows.append("")
    return rows


def _cells(line):
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def table_rows(lines, cols, style=None):
    """A Markdown table's lines as aligned rows (header, a rule, the body),
    or None when they are not a table or it would not fit in cols."""
    if len(lines) < 2 or not _TABLE_SEP.fullmatch(lines[1]):
        return None
    head, seps, body = _cells(lines[0]), _cells(lines[1]), [_cells(x) for x in lines[2:]]
    n = len(head)
    if len(seps) != n:
        return None
    aligns = [">" if s.endswith(":") and not s.startswith(":") else "^" if s.startswith(":") and s.endswith(":")
              else "<" for s in seps]
    grid = [[visible(c).replace("\t", " ") for c in (r + [""] * n)[:n]] for r in [head] + body]
    widths = [max(max(text_width(r[i]) for r in grid), 1) for i in range(n)]
    if sum(widths) + 3 * (n - 1) > cols:
        return None

    def cell(text, i, bold):
        pad = widths[i] - text_width(text)
        left = {"<": 0, ">": pad, "^": pad // 2}[aligns[i]]
        shown = text if style is None else (BOLD + text + RESET if bold else style(text))
        return " " * left + shown + " " * (pad - left)

    sep = DIM + " │ " + RESET if style is not None else " │ "
    out = [sep.join(cell(c, i, k == 0) for i, c in enumerate(r)).rstrip() for k, r in enumerate(grid)]
    rule = "─┼─".join("─" * w for w in widths)
    out.insert(1, DIM + rule + RESET if style is not None else rule)
    return out
