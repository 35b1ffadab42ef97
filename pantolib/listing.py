"""What `panto-ls` knows about a session file without parsing all of it.

A summary (header, message count, first prompt, last name, last activity)
comes from the byte scanner (scan.py). Summaries are cached in
$XDG_CACHE_HOME/panto/ls-cache.json (persist.py: checksummed, private, keyed by
the code's fingerprint), each with the file's identity (device, inode,
size, mtime, ctime) and the time it was taken: an unchanged file is never
read twice, and a changed one always is, including one rewritten within
the same timestamp tick (persist.racy: then it is read again).
"""
import os

from pantolib import paths, persist, scan

CACHE_NAME = "ls-cache.json"
_FIELDS = {"id": str, "cwd": str, "messages": int, "agent": str}
_OPTIONAL = {"created": str, "firstPrompt": str, "name": str, "last": str, "parentSession": str}

NotASession = scan.NotASession


def _valid(info):
    if type(info) is not dict:
        return False
    for k, t in _FIELDS.items():
        if type(info.get(k)) is not t:
            return False
    return all(info.get(k) is None or type(info[k]) is t for k, t in _OPTIONAL.items())


def summarize(path, needle=None):
    """(the cacheable summary (a dict) of one session file, the match of needle)."""
    from pantolib import stream

    s = scan.summarize(path, needle)
    created = s.header.get("timestamp")
    agent, parent, _ = stream.lineage(s.header)
    return ({"id": s.header["id"], "cwd": s.header["cwd"], "created": created if isinstance(created, str) else None,
             "messages": s.messages, "firstPrompt": s.prompt, "name": s.name, "last": s.last,
             "agent": agent, "parentSession": parent}, s.match)


class Lister:
    """Summaries of session files through the cache, stamped `stamp` (persist.now,
    taken before the files were stat'ed; by default now); `use=False`: the
    cache is neither read nor written."""

    def __init__(self, stamp=None, env=None, warn=None, use=True):
        self.env, self.use, self.stamp = env, use, persist.now() if stamp is None else stamp
        self.warn = warn or (lambda msg: None)
        self.cache_path = persist.path(CACHE_NAME, env)
        self.cache = self._load_cache() if self.use else {}
        self.changed = False

    def _load_cache(self):
        files = persist.load(self.cache_path, CACHE_NAME)
        return files if type(files) is dict else {}

    def _cached(self, path, st):
        hit = self.cache.get(path)
        if type(hit) is list and len(hit) == 3 and persist.fresh(hit[0], hit[1], st) and _valid(hit[2]):
            return hit[2]
        return None

    def save(self):
        """Write the cache back if it changed (persist.save)."""
        if not (self.changed and self.use):
            return
        persist.save(self.cache_path, CACHE_NAME, self.cache)

    def _read_ahead(self, directories, needle):
        """{path: jobs.run's answer} for the files the cache does not hold, summarized
        in worker processes when there are enough of them (jobs.py); else {}."""
        todo, sizes, taken = [], [], set()
        for _, files in directories:
            for path, st in files:
                if path not in taken and self._cached(path, st) is None:
                    taken.add(path)
                    todo.append(path)
                    sizes.append(st.st_size)
        from pantolib import jobs

        if jobs.workers(len(todo), sum(sizes)) <= 1:
            return {}
        done = jobs.run(todo, lambda path: summarize(path, needle), sizes)
        return {todo[i]: got for i, got in done.items()}

    def sessions(self, directories, cwd=None, needle=None):
        """Summaries (dicts) of the session files in these folders (or of
        (folder, paths.list_dir(folder)) pairs), most recently active first;
        cwd keeps only the sessions of that directory. With a scan.Needle
        each also has a "match": its first matching snippet, or None (a file
        is read once, for both, when not cached)."""
        out, listed, seen = [], set(), set()
        directories = [d if isinstance(d, tuple) else (d, paths.list_dir(d)) for d in directories]
        ready = self._read_ahead(directories, needle)
        for directory, files in directories:
            for path, st in files:
                seen.add(path)
                info = self._cached(path, st)
                match, searched = None, info is None
                if info is None:
                    try:
                        got = ready.pop(path, None)
                        if got is None:
                            info, match = summarize(path, needle)
                        elif got[0]:
                            info, match = got[1]
                        else:
                            raise got[1]
                    except NotASession as e:
                        self.warn(f"'{path}': {e}, skipped")
                        continue
                    except OSError as e:
                        self.warn(f"'{path}': {e.strerror or e}, skipped")
                        continue
                    if self.use:
                        self.cache[path] = [persist.ident(st), self.stamp, info]
                        self.changed = True
                if not paths.is_session_id(info["id"]):
                    self.warn(f"'{path}': the session id in its header is not a UUID, skipped")
                    continue
                if cwd is not None and info["cwd"] != cwd:
                    continue
                s = dict(info, path=path, mtime=st.st_mtime_ns, active=scan.activity(info["last"], st.st_mtime_ns))
                if needle is not None:
                    if not searched:
                        try:
                            match = scan.grep(path, needle)
                        except (OSError, NotASession) as e:
                            self.warn(f"'{path}': {getattr(e, 'strerror', None) or e}, skipped")
                            continue
                    s["match"] = match
                out.append(s)
            listed.add(directory)
        gone = [p for p in self.cache if p not in seen and os.path.dirname(p) in listed]
        for path in gone:  # files deleted since: forget them
            del self.cache[path]
        self.changed |= bool(gone)
        out.sort(key=lambda s: (s["active"], s["id"]), reverse=True)
        return out


def local_time(epoch):
    """`YYYY-MM-DD HH:MM` in local time, `?` when unknown."""
    import time

    if epoch is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def title(s):
    """What a listing calls a session: its last name, else its first prompt;
    after `↳ ` when it has a parent session (a fork, a sub-agent), and after
    its agent in brackets when another agent wrote it (`[codex] fix the
    refresh bug`); None when there is nothing to call it."""
    text = s["name"] if s.get("name") is not None else s.get("firstPrompt")
    agent = s.get("agent")
    if agent is not None and agent != "panto":
        text = f"[{agent}]" if not text else f"[{agent}] {text}"
    if s.get("parentSession") is not None:
        text = "↳" if not text else f"↳ {text}"
    return text


def unique_prefixes(ids, least=8):
    """The shortest prefix of each id, at least `least` chars, that no other id shares."""
    order = sorted(set(ids))
    out = {}
    for i, x in enumerate(order):
        need = least
        for j in (i - 1, i + 1):
            if 0 <= j < len(order):
                y = order[j]
                if x[:least] != y[:least]:
                    continue  # the common case: they differ within the least prefix
                n = least
                while n < len(x) and n < len(y) and x[n] == y[n]:
                    n += 1
                need = max(need, n + 1)
        out[x] = x[:need]
    return out
