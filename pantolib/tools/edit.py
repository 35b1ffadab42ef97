"""edit: replace one exact, unique piece of text in a file.

The file is replaced atomically like write's (common.replace_file), and
the result names the lines the new text occupies afterwards.
"""
from pantolib.tools.common import ToolError, read_regular, replace_file, resolve

MAX_FILE = 64 << 20     # bytes: larger files are not edited in memory

SCHEMA = {
    "name": "edit",
    "description": (
        "Replace `old_text` with `new_text` in a file. `old_text` must match the "
        "file exactly (whitespace and indentation included) and occur exactly "
        "once; include enough surrounding lines to make it unique."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to edit, relative to the working directory or absolute."},
            "old_text": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
            "new_text": {"type": "string", "description": "The text to put in its place."},
        },
        "required": ["path", "old_text", "new_text"],
    },
}


def line_of(text, index):
    return text.count("\n", 0, index) + 1


def span(start, new):
    """The last line the new text occupies when it starts on line `start`
    (a final newline ends its last line, it does not start another)."""
    lines = new.count("\n") - (1 if new.endswith("\n") else 0)
    return start + max(lines, 0)


def run(args, cwd, timeout=None, record=None):
    """record: a dict given the result's `undo` field (pantolib.undo)."""
    name, old, new = args["path"], args["old_text"], args["new_text"]
    if not old:
        raise ToolError("'old_text' is empty (use the write tool to create a file)")
    path = resolve(name, cwd)
    raw = read_regular(path, name, MAX_FILE)
    text = raw.decode("utf-8", "surrogateescape")
    first = text.find(old)
    if first < 0:
        hint = ""
        if old.strip() and old.strip() in text:
            hint = " (it does occur with different leading or trailing whitespace)"
        raise ToolError(f"'old_text' was not found in '{name}'{hint}; it must match exactly, "
                        "whitespace and indentation included (read the file first)")
    count = text.count(old)
    if count > 1:
        at, i = [], first
        while i >= 0 and len(at) < 10:
            at.append(str(line_of(text, i)))
            i = text.find(old, i + 1)
        raise ToolError(f"'old_text' occurs {count} times in '{name}' (at lines {', '.join(at)}); "
                        "include more surrounding text so that it matches exactly once")
    result = text[:first] + new + text[first + len(old):]
    data = result.encode("utf-8", "surrogateescape")
    kept = None
    if record is not None:
        from pantolib import undo

        kept = undo.record_safely(path, raw, data)     # before the file changes
    replace_file(path, data, name)
    if kept:
        record.update(kept)
    start = line_of(text, first)
    if not new:
        return f"edited '{name}': removed the text at line {start}", False
    end = span(start, new)
    where = f"line {start}" if end == start else f"lines {start}-{end}"
    return f"edited '{name}': replaced 1 occurrence at line {start} (the new text is now {where})", False
