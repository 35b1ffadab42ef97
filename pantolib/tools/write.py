"""write: create or replace a file with the given content.

Missing parent directories are created (like `mkdir -p`). The file is
replaced atomically (common.replace_file): a crash or a full disk leaves
the old content, never a truncated file; its mode is kept, and a symlink
keeps pointing where it did (the file it points to gets the content).
"""
import os

from pantolib.tools.common import ToolError, replace_file, resolve

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
    shown = args["path"]
    path = resolve(shown, cwd)
    data = args["content"].encode("utf-8", "surrogatepass")
    parent = os.path.dirname(os.path.realpath(path))
    made = not os.path.isdir(parent)
    if made:
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise ToolError(f"cannot create the directory of '{shown}': {e.strerror or e}") from None
    existed = replace_file(path, data, shown)
    what = "replaced" if existed else "created"
    extra = f" (and its directory '{os.path.dirname(shown)}')" if made and os.path.dirname(shown) else ""
    return f"{what} '{shown}'{extra}: {len(data)} bytes", False
