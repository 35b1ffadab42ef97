"""Undo: the content a file had before `write` or `edit` changed it, and
what /rewind needs to put it back.

Before-contents are kept content-addressed in $XDG_DATA_HOME/panto/undo/,
one file per SHA-256 digest (0600 in 0700 folders, written whole or not at
all, never over another: the same content is kept once). The tool result
records the change (panto-session(5)):

    "change": {"path": ABSOLUTE PATH, "before": SHA256 | null, "after": SHA256}

`before` null: the file did not exist. A file larger than MAX is not kept
(its digest is recorded, and /rewind says it cannot be put back).
"""
import os

MAX = 64 << 20      # bytes: a larger before-content is not kept


def store_dir(env=None):
    from pantolib import paths

    return os.path.join(paths.data_dir(env), "undo")


def digest(data):
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _stored(sha, env=None):
    return os.path.join(store_dir(env), sha)


def keep(data, env=None):
    """Keep data under its digest (once); the digest. PantoError when it cannot be kept."""
    from pantolib import files

    sha = digest(data)
    path = _stored(sha, env)
    if not os.path.exists(path):
        files.create(path, data, "cannot keep the content for undo")
    return sha


def kept(sha, env=None):
    """The content kept under sha, or None when the store does not have it."""
    try:
        with open(_stored(sha, env), "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if digest(data) == sha else None


def file_digest(path):
    """The digest of the regular file at path, None when there is none (or it cannot be read)."""
    import hashlib
    import stat

    h = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file"
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return h.hexdigest()


def before(path, env=None):
    """Keep the content of the file at path as it is now, before a tool
    changes it: (its real path, its digest or None when it does not exist).
    PantoError when it cannot be kept."""
    import stat

    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        return real, None
    if not stat.S_ISREG(st.st_mode):    # a FIFO, a device: never opened (the tool refuses it)
        return real, None
    if st.st_size > MAX:
        return real, file_digest(real)
    with open(real, "rb") as f:
        data = f.read(MAX + 1)
    if len(data) > MAX:
        return real, digest(data)
    return real, keep(data, env)


def change(real, sha, data):
    """The toolResult's `change` field: the file at real went from sha to data."""
    return {"change": {"path": real, "before": sha, "after": digest(data)}}


class File:
    """One file changed after a point: its path, the content to put back
    (before: None when it did not exist) and what it should be now (after)."""

    def __init__(self, path, before, after):
        self.path, self.before, self.after = path, before, after

    def changed_since(self):
        return file_digest(self.path) != self.after


def changes(entries):
    """(files, commands) the message entries record: each file changed (in
    order of its first change; before from its first change, after from its
    last) and the bash commands that ran (their command lines)."""
    import orjson

    found, commands, uses = {}, [], {}
    for e in entries:
        for b in e.get("message", {}).get("content", ()):
            t = b.get("type")
            if t == "toolUse":
                uses[b.get("id")] = b
            elif t == "toolResult":
                c = b.get("change")
                if isinstance(c, dict) and isinstance(c.get("path"), str) and isinstance(c.get("after"), str):
                    f = found.get(c["path"])
                    if f is None:
                        found[c["path"]] = File(c["path"], c.get("before"), c["after"])
                    else:
                        f.after = c["after"]
                use = uses.get(b.get("toolUseId"))
                if use is not None and use.get("name") == "bash" and not _not_run(b):
                    try:
                        cmd = orjson.loads(use.get("input") or "{}").get("command")
                    except (orjson.JSONDecodeError, AttributeError):
                        cmd = None
                    if isinstance(cmd, str):
                        commands.append(cmd)
    return list(found.values()), commands


def _not_run(result):
    text = result.get("content")
    return result.get("isError") is True and isinstance(text, str) and text.startswith(("not run", "declined"))


def restore(f, env=None):
    """Put the file back as it was before its first change: None when done,
    else why not."""
    from pantolib.tools.common import ToolError, replace_file

    if f.before is None:
        try:
            os.unlink(f.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            return f"cannot remove it: {e.strerror or e}"
        return None
    data = kept(f.before, env)
    if data is None:
        return "its earlier content was not kept (too large, or the undo store was cleared)"
    try:
        replace_file(f.path, data, f.path)
    except ToolError as e:
        return str(e)
    return None


def _shown(path):
    cwd = os.getcwd()
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


def _yes(answer):
    return answer.strip().lower() in ("y", "yes")


def offer(entries, say, ask, visible, env=None):
    """/rewind's offer to put back the files changed in `entries` (the path
    from the chosen prompt on): it lists them and the commands that ran,
    asks once for the files as they were left, and once more, naming them,
    for the files changed since (by a person or a command). `say(text,
    dim)`, `ask(question) -> line`, `visible(text) -> text` safe to show."""
    found, commands = changes(entries)
    if not found and not commands:
        return
    safe = [f for f in found if not f.changed_since()]
    since = [f for f in found if f not in safe]
    if found:
        say("files changed since that prompt:", False)
    for f in safe:
        what = "remove (it did not exist before)" if f.before is None else "put back as it was"
        say(f"  {visible(_shown(f.path))}  ({what})", False)
    for f in since:
        say(f"  {visible(_shown(f.path))}  (changed since, by you or a command: left alone unless you say so)",
            False)
    if commands:
        say("what these commands did cannot be undone:", True)
        for c in commands:
            say(f"  $ {visible(c.split(chr(10))[0])[:200]}", True)
    chosen = []
    if safe and _yes(ask(f"put {'it' if len(safe) == 1 else f'the {len(safe)} files'} back as "
                         f"{'it was' if len(safe) == 1 else 'they were'}? [y/n]: ")):
        chosen += safe
    if since and (chosen or not safe):
        names = ", ".join(visible(_shown(f.path)) for f in since)
        if _yes(ask(f"also put back {names}, changed since (those later changes are lost)? [y/n]: ")):
            chosen += since
    if not chosen:
        if found:
            say("no file was put back", True)
        return
    for f in chosen:
        why = restore(f, env)
        if why is None:
            say(f"put back {visible(_shown(f.path))}", True)
        else:
            say(f"{visible(_shown(f.path))} was not put back: {visible(why)}", False)
