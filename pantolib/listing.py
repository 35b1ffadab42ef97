"""What `panto-ls` knows about a session file without parsing all of it.

A summary is read from the header line, a count of message entries taken in
large chunks of raw bytes, and the first user prompt. Summaries are cached
under $XDG_CACHE_HOME/panto/ keyed by the file's identity, size and times,
so an unchanged file is never read twice and a changed one always is.
"""
import os

import orjson

from pantolib import paths

PROMPT_MAX = 200
# panto and the seed write entries compactly, type first, with the message
# object last but for its content: a message line starts with MESSAGE and
# names its role within its first few hundred bytes. Quotes inside JSON
# strings are escaped, so no earlier string can fake ROLE. Any other line
# that mentions "message" is parsed, so hand-written entries count too.
MESSAGE = b'{"type":"message",'
ROLE = b'"message":{"role":"'
ROLE_WINDOW = 1024
CACHE_VERSION = 2


class NotASession(Exception):
    pass


def _key(st):
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _first_prompt(obj):
    content = obj.get("message", {}).get("content", ())
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            return block["text"][:PROMPT_MAX]
    return None


def _role_of(raw):
    """The role of a message entry line that is not laid out as panto writes it."""
    obj = _parse(raw)
    if obj is not None and obj.get("type") == "message" and isinstance(obj.get("message"), dict):
        return obj["message"].get("role")
    return None


def _epoch(iso):
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return None


def _parse(raw):
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict else None


def summarize(path):
    """(header, message count, first prompt) of a session file, read cheaply.

    The file is mapped, not read into lines: each line is looked at only at
    its start. Only the header and the first user entry are parsed; a torn
    last line is not counted.
    """
    import mmap

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise NotASession("not a panto session (empty file)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            end = data.find(b"\n", 0, 1 << 20)
            header = _parse(data[:end + 1]) if end >= 0 else None
            if not (header and header.get("type") == "session" and isinstance(header.get("id"), str)
                    and isinstance(header.get("cwd"), str)):
                raise NotASession("not a panto session")
            prompt, count, start = None, 0, end + 1
            find, n_message, n_role = data.find, len(MESSAGE), len(ROLE)
            while True:
                end = find(b"\n", start)
                if end < 0:
                    break  # the end, or a torn last line
                role = None
                if data[start:start + n_message] == MESSAGE:
                    i = find(ROLE, start, start + ROLE_WINDOW) + n_role
                    if n_role <= i < end:
                        if data[i:i + 5] == b'user"':
                            role = "user"
                        elif data[i:i + 10] == b'assistant"':
                            role = "assistant"
                    else:
                        role = _role_of(data[start:end])
                elif find(b'"message"', start, end) >= 0:
                    role = _role_of(data[start:end])
                if role == "user" or role == "assistant":
                    count += 1
                    if prompt is None and role == "user":
                        prompt = _first_prompt(_parse(data[start:end]) or {})
                start = end + 1
    return header, count, prompt


class Lister:
    def __init__(self, env=None, warn=None):
        self.env = env
        self.warn = warn or (lambda msg: None)
        self.cache_path = os.path.join(paths.cache_dir(env), "ls-cache.json")
        self.cache = self._load_cache()
        self.changed = False

    def _load_cache(self):
        try:
            with open(self.cache_path, "rb") as f:
                data = orjson.loads(f.read())
            if type(data) is dict and data.get("version") == CACHE_VERSION and type(data.get("files")) is dict:
                return data["files"]
        except (OSError, orjson.JSONDecodeError):
            pass
        return {}

    def save(self):
        if not self.changed:
            return
        try:
            from pantolib.session import make_dirs

            make_dirs(os.path.dirname(self.cache_path))
            tmp = f"{self.cache_path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(orjson.dumps({"version": CACHE_VERSION, "files": self.cache}))
            os.replace(tmp, self.cache_path)
        except OSError:
            pass  # a cache that cannot be written is only slower

    def sessions(self, directories, cwd=None):
        """Summaries (dicts) of the session files in these folders; cwd filters by header."""
        out, listed, seen = [], set(), set()
        for directory in directories:
            for path, st in paths.list_dir(directory):
                seen.add(path)
                key = _key(st)
                hit = self.cache.get(path)
                if hit is not None and hit[0] == key:
                    info = hit[1]
                else:
                    try:
                        header, count, prompt = summarize(path)
                    except NotASession as e:
                        self.warn(f"'{path}': {e}, skipped")
                        continue
                    except OSError as e:
                        self.warn(f"'{path}': {e.strerror or e}, skipped")
                        continue
                    created = header.get("timestamp")
                    created = created if isinstance(created, str) else None
                    info = {"id": header["id"], "cwd": header["cwd"], "created": created,
                            "createdEpoch": _epoch(created), "messages": count, "firstPrompt": prompt}
                    self.cache[path] = [key, info]
                    self.changed = True
                if cwd is not None and info["cwd"] != cwd:
                    continue
                out.append(dict(info, path=path, mtime=st.st_mtime_ns))
            listed.add(directory)
        gone = [p for p in self.cache if p not in seen and os.path.dirname(p) in listed]
        for path in gone:  # files deleted since: forget them
            del self.cache[path]
        self.changed |= bool(gone)
        out.sort(key=lambda s: (s["mtime"], s["id"]), reverse=True)
        return out


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
