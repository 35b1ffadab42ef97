"""Undo of what write and edit changed: the content a file had before a tool
changed it is kept content-addressed (sha256) under panto's data directory
(0600 files in 0700 directories); the tool result records the file's path
and the before/after digests (its `undo` field, an extension), so a session
says what can be put back, and `/rewind` puts it back.

    {"path": "/abs/file", "before": "sha256:…" | null (there was no file), "after": "sha256:…"}
"""
import hashlib
import os

from pantolib import files, paths

PREFIX = "sha256:"


def digest(data):
    return PREFIX + hashlib.sha256(data).hexdigest()


def _where(name, env=None):
    hexa = name[len(PREFIX):]
    if not name.startswith(PREFIX) or len(hexa) != 64 or any(c not in "0123456789abcdef" for c in hexa):
        raise ValueError(f"not a content digest: {name!r}")
    return os.path.join(paths.data_dir(env), "before", hexa[:2], hexa)


def keep(data, env=None):
    """Keep data (once per content); its digest."""
    name = digest(data)
    path = _where(name, env)
    if not os.path.exists(path):
        files.create(path, data, "the content kept for undo")
    return name


def load(name, env=None):
    """The bytes kept under a digest (OSError when they are gone)."""
    with open(_where(name, env), "rb") as f:
        data = f.read()
    if digest(data) != name:
        raise OSError(f"the content kept for undo under {name} is damaged")
    return data


def record(path, before, after, env=None):
    """The `undo` field of a result that changed path from before (bytes,
    None: no file) to after; the before-content kept."""
    return {"path": os.path.realpath(path), "before": None if before is None else keep(before, env),
            "after": digest(after)}


def record_safely(path, before, after, env=None):
    """record(), or None when the content cannot be kept (the change is then
    made all the same, without an undo)."""
    from pantolib.errors import PantoError

    try:
        return record(path, before, after, env)
    except (OSError, PantoError):
        return None


def current(path):
    """The digest of the file at path now, or None when there is none."""
    try:
        with open(path, "rb") as f:
            return digest(f.read())
    except FileNotFoundError:
        return None


def changes(entries):
    """{path: (before, after)} of what the tool results among entries changed
    (in order): the earliest before and the latest after of each file."""
    out = {}
    for e in entries:
        m = e.get("message") if e.get("type") == "message" else None
        if not m or m.get("role") != "user":
            continue
        for b in m.get("content", ()):
            u = b.get("undo") if isinstance(b, dict) and b.get("type") == "toolResult" else None
            if not isinstance(u, dict) or not isinstance(u.get("path"), str):
                continue
            first = out.get(u["path"], (u.get("before"), None))[0]
            out[u["path"]] = (first, u.get("after"))
    return out


def commands(entries):
    """The bash command lines that ran among entries (their results say they were not declined)."""
    ran = {}
    for e in entries:
        m = e.get("message") if e.get("type") == "message" else None
        if not m:
            continue
        for b in m.get("content", ()):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "toolUse" and b.get("name") == "bash":
                ran[b.get("id")] = b.get("input")
            elif b.get("type") == "toolResult" and b.get("toolUseId") in ran:
                text = str(b.get("content", ""))
                if text.startswith(("not run", "declined by the user")):
                    ran.pop(b["toolUseId"])
    out = []
    for raw in ran.values():
        import orjson

        try:
            out.append(str(orjson.loads(raw).get("command", "")))
        except (orjson.JSONDecodeError, AttributeError, TypeError):
            continue
    return out


def put_back(path, before, env=None):
    """Give path the content kept under before (None: remove the file)."""
    if before is None:
        os.unlink(path)
        return
    from pantolib.tools.common import replace_file

    replace_file(path, load(before, env), path)
