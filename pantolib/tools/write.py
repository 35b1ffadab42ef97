"""write: create or replace a file with the given content.

Missing parent directories are created (like `mkdir -p`); an existing file
is replaced in place, keeping its permissions.
"""
import os

from pantolib.tools.common import resolve

SCHEMA = {
    "name": "write",
    "description": (
        "Write `content` to a file, replacing it if it exists and creating any "
        "missing parent directories."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to write, relative to the working directory or absolute."},
            "content": {"type": "string", "description": "The whole new content of the file."},
        },
        "required": ["path", "content"],
    },
}


def run(args, cwd, timeout=None):
    path = resolve(args["path"], cwd)
    data = args["content"].encode("utf-8", "surrogatepass")
    parent = os.path.dirname(path)
    made = parent and not os.path.isdir(parent)
    if made:
        os.makedirs(parent, exist_ok=True)
    existed = os.path.exists(path)
    with open(path, "wb") as f:
        f.write(data)
    what = "replaced" if existed else "created"
    extra = f" (and its directory '{os.path.dirname(args['path'])}')" if made else ""
    return f"{what} '{args['path']}'{extra}: {len(data)} bytes", False
