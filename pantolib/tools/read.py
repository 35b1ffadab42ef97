"""read: the text of a file, by lines."""
from pantolib.tools.common import CAP, ToolError, resolve

DEFAULT_LIMIT = 2000

SCHEMA = {
    "name": "read",
    "description": (
        "Read a text file. Returns its lines from `offset` (1-based, default 1), "
        f"at most `limit` lines (default {DEFAULT_LIMIT}) and at most 50 KB; a note at "
        "the end says how to read the rest."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read, relative to the working directory or absolute."},
            "offset": {"type": "integer", "description": "First line to return, 1-based (default 1)."},
            "limit": {"type": "integer", "description": f"Number of lines to return (default {DEFAULT_LIMIT})."},
        },
        "required": ["path"],
    },
}


def run(args, cwd, timeout=None):
    path = resolve(args["path"], cwd)
    offset = args.get("offset") or 1
    limit = args.get("limit") or DEFAULT_LIMIT
    if offset < 1 or limit < 1:
        raise ToolError("'offset' and 'limit' must be at least 1")
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        raise ToolError(f"'{args['path']}' is a binary file ({len(data)} bytes)")
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    if n == 0:
        return "(empty file)", False
    if offset > n:
        raise ToolError(f"'offset' {offset} is past the end of '{args['path']}' ({n} lines)")
    out, size, last = [], 0, offset - 1
    for i in range(offset - 1, min(n, offset - 1 + limit)):
        line = lines[i]
        cost = len(line.encode("utf-8")) + 1
        if size + cost > CAP and out:
            break
        if cost > CAP:  # a single huge line
            line = line.encode("utf-8")[:CAP].decode("utf-8", "ignore") + " [line cut at 50 KB]"
        out.append(line)
        size += cost
        last = i + 1
    text = "\n".join(out)
    if last < n:
        why = "50 KB cap" if last - offset + 1 < limit else "limit"
        text += f"\n[showing lines {offset}-{last} of {n} ({why}); continue with offset={last + 1}]"
    return text, False
