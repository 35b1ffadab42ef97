"""write: create or replace a file with the given content.

Missing parent directories are created (like `mkdir -p`). The file is
replaced atomically (common.replace_file): a crash or a full disk leaves
the old content, never a truncated file; its mode is kept, and a symlink
keeps pointing where it did (the file it points to gets the content).
"""
import os

from pantolib.tools.common import ToolError, read_regular, replace_file, resolve

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


def run(args, cwd, timeout=None, record=None):
    """record: a dict given the result's `undo` field (pantolib.undo)."""
    shown = args["path"]
    path = resolve(shown, cwd)
    data = args["content"].encode("utf-8", "surrogatepass")
    before = _before(path, shown) if record is not None else False
    parent = os.path.dirname(os.path.realpath(path))
    made = not os.path.isdir(parent)
    if made:
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise ToolError(f"cannot create the directory of '{shown}': {e.strerror or e}") from None
    kept = None
    if before is not False:
        from pantolib import undo

        kept = undo.record_safely(path, before, data)     # before the file changes
    existed = replace_file(path, data, shown)
    if kept:
        record.update(kept)
    what = "replaced" if existed else "created"
    extra = f" (and its directory '{os.path.dirname(shown)}')" if made and os.path.dirname(shown) else ""
    return f"{what} '{shown}'{extra}: {len(data)} bytes", False


def _before(path, shown):
    """The bytes the file has now (None: there is none; False: not kept, too large or not a file)."""
    from pantolib.tools.edit import MAX_FILE

    if not os.path.lexists(path):
        return None
    try:
        return read_regular(path, shown, MAX_FILE)
    except (ToolError, OSError):
        return False
