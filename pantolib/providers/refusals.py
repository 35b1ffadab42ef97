"""What servers refused, remembered for a day (SPEC 5.1, Negotiation).

A server that refuses an optional field (negotiate() drops it and the retry
is answered) refuses it next time too: the next turn, in the next process,
leaves it out from the start, with no extra round trip and no note. The
memory is one small cache in the state directory,
$XDG_STATE_HOME/panto/refused.json (persist.py's format: a first line with
its checksum and the code's fingerprint, then this JSON; 0600 in a 0700
directory):

    {"version": 1, "servers": [{"api": "openai_chat",
      "baseUrl": "http://127.0.0.1:8080/v1", "model": "tiny",
      "refused": {"reasoning_effort": 1764547200, ...}}, ...]}

keyed by wire API, base URL (as shown: never its user info, query or
fragment, where credentials go) and model; each field with the Unix time it
was refused, forgotten REMEMBER seconds later, so that a server upgraded
since is asked again. Removing the file forgets everything. A file that
cannot be read, or is not one of these, counts as empty (never an error);
writes replace it whole (persist.write), under a lock on the directory, so
that two panto-sends lose nothing and a reader never sees half of one.
"""
import os

from pantolib import files, paths, persist, secrets

NAME = "refused.json"
VERSION = 1
REMEMBER = 24 * 3600        # seconds a refusal is remembered
MAX_SERVERS = 200           # entries kept, the most recent first
MAX_BYTES = 1 << 20         # a larger file is not ours
KIND = "refused"            # persist.py's name of this cache


def path(env=None):
    return os.path.join(paths.state_dir(env), NAME)


def _key(api, base_url, model):
    return api, secrets.shown_url(base_url), model


def recall(api, base_url, model, env=None, now=None):
    """The fields refused by this server and model in the last day (a set of str)."""
    import time

    now = time.time() if now is None else now
    want = _key(api, base_url, model)
    for entry in _read(path(env)):
        if (entry["api"], entry["baseUrl"], entry["model"]) == want:
            return {f for f, at in entry["refused"].items() if now - REMEMBER < at <= now + 60}
    return set()


def remember(api, base_url, model, fields, env=None, now=None):
    """Add `fields` to what this server and model refused; failures are ignored
    (the next turn then negotiates again)."""
    import time

    if not fields:
        return
    now = int(time.time() if now is None else now)
    file = path(env)
    want = _key(api, base_url, model)
    with _locked(os.path.dirname(file)):     # read, add, replace: two panto-sends lose nothing
        kept, mine = [], None
        for entry in _read(file):
            live = {f: at for f, at in entry["refused"].items() if now - REMEMBER < at <= now + 60}
            if (entry["api"], entry["baseUrl"], entry["model"]) == want:
                mine = live
            elif live:
                kept.append(dict(entry, refused=live))
        mine = mine or {}
        mine.update({f: now for f in fields})
        entry = {"api": want[0], "baseUrl": want[1], "model": want[2], "refused": dict(sorted(mine.items()))}
        _write(file, {"version": VERSION, "servers": [entry, *kept][:MAX_SERVERS]})


class _locked:
    """An exclusive flock on the directory for a read-modify-write of the file
    in it (no lock file is left behind); without one (the directory cannot be
    made or opened), the write goes ahead unlocked: a cache only saves time."""

    def __init__(self, directory):
        self.directory, self.fd = directory, None

    def __enter__(self):
        import fcntl

        try:
            files.make_dirs(self.directory)
            self.fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)       # the lock goes with it


def _read(file):
    """The valid entries of the file; [] when it is missing, unreadable or not ours."""
    doc = persist.load(file, KIND, MAX_BYTES)
    servers = doc.get("servers") if isinstance(doc, dict) and doc.get("version") == VERSION else None
    out = []
    for e in servers if isinstance(servers, list) else ():
        if not (isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("api", "baseUrl", "model"))
                and isinstance(e.get("refused"), dict)):
            continue
        refused = {f: at for f, at in e["refused"].items()
                   if isinstance(f, str) and len(f) <= 64 and type(at) in (int, float)}
        out.append({"api": e["api"], "baseUrl": e["baseUrl"], "model": e["model"], "refused": refused})
    return out


def _write(file, doc):
    persist.save(file, KIND, doc)
