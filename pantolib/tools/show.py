"""How a tool call and its result look to the person (never to the model).

Every piece of model or tool text goes through terminal.visible() (or
visible_line() for one-line summaries): a call cannot move the cursor,
clear a line or hide part of itself. Colour only where the caller says so
(terminal.styled: a terminal and no NO_COLOR).
"""
from pantolib.terminal import BOLD, CYAN, DIM, GREEN, RED, RESET, visible, visible_line  # noqa: F401 (BOLD: confirm.py)

WIDTH = 160          # characters of a one-line summary
TAIL = 10            # lines of bash output shown (the last ones: errors are there)
LINE = 300           # characters of one shown output line
DIFF = 60            # lines of an edit's diff shown
PREVIEW = 10         # lines of a write's content shown in its question


class Style:
    def __init__(self, on):
        self.on = on

    def __call__(self, code, text):
        return f"{code}{text}{RESET}" if self.on and text else text


def cut(text, width):
    return text if len(text) <= width else text[:width - 1] + "…"


def lines_of(text):
    """The lines of a text, without the empty one after a final newline."""
    parts = text.split("\n")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def summary(name, args, input_text="", width=WIDTH):
    """What a call does, on one line (for the live display and listings)."""
    if args is None:
        return cut(visible_line(str(input_text or "")), width)
    if name == "bash":
        text = str(args.get("command", ""))
    elif name == "read":
        text = str(args.get("path", ""))
        offset, limit = args.get("offset"), args.get("limit")
        if offset or limit:
            first = offset or 1
            text += f" (lines {first}-{first + limit - 1})" if limit else f" (from line {first})"
    elif name == "write":
        content = str(args.get("content", ""))
        n = len(lines_of(content)) if content else 0
        text = f"{args.get('path', '')} ({len(content.encode('utf-8', 'replace'))} bytes, {n} line{'s' * (n != 1)})"
    elif name == "edit":
        text = str(args.get("path", ""))
    else:
        text = str(input_text or "")
    return cut(visible_line(text), width)


def header(name, text, style):
    return f"{style(CYAN, '⏺ ' + visible_line(name))} {text}".rstrip()


def call(use, args, style, cwd=None, whole=False):
    """The lines showing a call: its header, and for edit its diff. whole=True
    (the confirmation) shows a bash command whole, escapes made visible, and
    a preview of what write puts in the file."""
    name = use.get("name", "")
    if args is None or name not in ("bash", "edit", "write") or (name == "bash" and not whole):
        return [header(name, summary(name, args, use.get("input")), style)]
    if name == "bash":
        command = visible(str(args.get("command", "")))
        rows = lines_of(command)
        if len(rows) == 1 and len(command) <= WIDTH:
            return [header(name, command, style)]
        return [header(name, "", style)] + ["  " + r for r in rows]
    before = existing(args, cwd) if name == "write" else None
    out = [header(name, summary(name, args) + (" — replaces an existing file" if before is not None else ""), style)]
    if name == "edit":
        out += diff(args, cwd, style)
    elif before is not None:
        out += write_diff(before, str(args.get("content", "")), style)
    elif whole:
        content = lines_of(str(args.get("content", "")))
        out += [style(DIM, "  " + cut(visible(r), LINE)) for r in content[:PREVIEW]]
        if len(content) > PREVIEW:
            out.append(style(DIM, f"  … ({len(content) - PREVIEW} more lines)"))
    return out


def _whole_lines(args, cwd):
    """(old, new, first line number) widened to whole lines of the file, or
    the texts as given and None when the file or the text is not found."""
    old, new = str(args.get("old_text", "")), str(args.get("new_text", ""))
    if cwd is None or not old:
        return old, new, None
    from pantolib.tools.common import ToolError, read_regular, resolve
    from pantolib.tools.edit import MAX_FILE

    try:
        text = read_regular(resolve(str(args.get("path", "")), cwd), "", MAX_FILE).decode("utf-8", "replace")
    except (OSError, ValueError, ToolError):
        return old, new, None
    at = text.find(old)
    if at < 0 or text.find(old, at + 1) >= 0:
        return old, new, None
    begin = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at + len(old))
    if old.endswith("\n"):
        end = at + len(old)
    elif end < 0:
        end = len(text)
    before, after = text[begin:at], text[at + len(old):end]
    return before + old + after, before + new + after, text.count("\n", 0, begin) + 1


def existing(args, cwd):
    """The text of the file a write would replace, or None (no such file, not
    a regular file, too large, or no working directory to resolve it in)."""
    if cwd is None:
        return None
    from pantolib.tools.common import ToolError, read_regular, resolve
    from pantolib.tools.edit import MAX_FILE

    try:
        return read_regular(resolve(str(args.get("path", "")), cwd), "", MAX_FILE).decode("utf-8", "replace")
    except (OSError, ValueError, ToolError):
        return None


def write_diff(old, new, style, limit=DIFF, width=LINE, context=3):
    """What a write changes in an existing file: the changed lines with
    `context` lines around them, numbered as in the file (old numbers for
    removed lines, new ones for the others), `⋮` between distant changes."""
    import difflib

    a, b = lines_of(old) if old else [], lines_of(new) if new else []
    rows = []
    for n, group in enumerate(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context)):
        if n:
            rows.append(("⋮", None, ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [(" ", j1 + k, b[j1 + k]) for k in range(i2 - i1)]
                continue
            rows += [("-", i, a[i]) for i in range(i1, i2)]
            rows += [("+", j, b[j]) for j in range(j1, j2)]
    return _numbered(rows, 1, max(len(a), len(b)), style, limit, width)


def _numbered(rows, first, count, style, limit, width):
    """Diff rows (mark, index, text) as lines: numbered from first, coloured,
    at most `limit` of them (None: all), each cut at `width` characters."""
    if not rows:
        return [style(DIM, "  (no change)")]
    out = []
    digits = len(str((first or 1) + count))
    for mark, index, text in (rows[:limit] if limit else rows):
        if mark == "⋮":
            out.append(style(DIM, f"  {' ' * digits} ⋮"))
            continue
        number = f"{first + index:>{digits}}" if first else " " * digits
        line = f"  {number} {mark} {cut(visible(text), width) if width else visible(text)}".rstrip()
        out.append(style({"-": RED, "+": GREEN, " ": DIM}[mark], line))
    if limit and len(rows) > limit:
        out.append(style(DIM, f"  … ({len(rows) - limit} more lines of the diff)"))
    return out


def diff(args, cwd, style, limit=DIFF, width=LINE):
    """An edit as a diff of whole lines, numbered as in the file (old numbers
    for removed lines, new ones for added and unchanged lines): at most
    `limit` rows of at most `width` characters (None: all of it)."""
    import difflib

    old, new, first = _whole_lines(args, cwd)
    a, b = lines_of(old) if old else [], lines_of(new) if new else []
    rows = []
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            rows += [(" ", j1 + k, b[j1 + k]) for k in range(i2 - i1)]
            continue
        rows += [("-", i, a[i]) for i in range(i1, i2)]
        rows += [("+", j, b[j]) for j in range(j1, j2)]
    return _numbered(rows, first, max(len(a), len(b)), style, limit, width)


def result(name, content, is_error, style):
    """The lines showing a result: the last TAIL lines of bash output (with a
    count of those not shown), one line for the other tools."""
    rows = [cut(visible(r), LINE) for r in lines_of(content.rstrip("\n") or "")] or [""]
    color = RED if is_error else DIM
    if name != "bash" and not is_error:
        return [style(color, "  " + rows[0] + (f" … ({len(rows)} lines)" if len(rows) > 1 else ""))]
    out = []
    if len(rows) > TAIL:
        out.append(style(DIM, f"  … ({len(rows) - TAIL} earlier lines not shown)"))
        rows = rows[-TAIL:]
    return out + [style(color, "  " + r) for r in rows]


def read_outcome(content, is_error, style):
    """What a read found, in a few words: (120 lines), (lines 1-2000 of 5000), or the error."""
    if is_error:
        return style(RED, "— " + cut(visible_line(content), WIDTH))
    rows = lines_of(content)
    if rows and rows[-1].startswith("[showing lines "):
        what = rows[-1][len("[showing "):].split(" (")[0]
    elif content == "(empty file)":
        what = "empty"
    else:
        what = f"{len(rows)} line{'s' * (len(rows) != 1)}"
    return style(DIM, f"({what})")


def read_line(args, content, is_error, style, input_text=""):
    """A read call and its outcome on one line."""
    return header("read", summary("read", args, input_text), style) + " " + read_outcome(content, is_error, style)
