"""edit: replace one exact, unique piece of text in a file."""
from pantolib.tools.common import ToolError, resolve

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


def _line_of(text, index):
    return text.count("\n", 0, index) + 1


def run(args, cwd, timeout=None):
    name, old, new = args["path"], args["old_text"], args["new_text"]
    if not old:
        raise ToolError("'old_text' is empty (use the write tool to create a file)")
    path = resolve(name, cwd)
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
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
            at.append(str(_line_of(text, i)))
            i = text.find(old, i + 1)
        raise ToolError(f"'old_text' occurs {count} times in '{name}' (at lines {', '.join(at)}); "
                        "include more surrounding text so that it matches exactly once")
    result = text[:first] + new + text[first + len(old):]
    with open(path, "wb") as f:
        f.write(result.encode("utf-8", "surrogateescape"))
    start = _line_of(text, first)
    end = start + new.count("\n")
    return f"edited '{name}': replaced 1 occurrence at line {start} (now lines {start}-{end})", False
