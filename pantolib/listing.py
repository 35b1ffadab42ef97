"""What `panto-ls` knows about a session file without parsing all of it.

A summary is read from the header line, a count of message entries taken in
large chunks of raw bytes, and the first user prompt. Summaries are cached
under $XDG_CACHE_HOME/panto/ keyed by the file's identity, size and times,
so an unchanged file is never read twice and a changed one always is.
"""
import os

import orjson

from pantolib import paths

CHUNK = 1 << 20
PROMPT_MAX = 500
# Every message entry has exactly one "role" key, written compactly by panto
# and by the seed. Inside a JSON string a quote is escaped, so these bytes
# cannot occur in text: counting them counts message entries.
ROLE_KEYS = (b'"role":"user"', b'"role":"assistant"')
CACHE_VERSION = 1


class NotASession(Exception):
    pass


def _key(st):
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _first_prompt(obj):
    for block in obj.get("message", {}).get("content", ()):
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            return block["text"][:PROMPT_MAX]
    return None


def summarize(path):
    """(header, message count, first prompt) of a session file, read cheaply."""
    with open(path, "rb") as f:
        first = f.readline(1 << 20)
        try:
            header = orjson.loads(first)
        except orjson.JSONDecodeError:
            raise NotASession("not a panto session") from None
        if not (type(header) is dict and header.get("type") == "session"
                and isinstance(header.get("id"), str) and isinstance(header.get("cwd"), str)):
            raise NotASession("not a panto session")
        prompt = None
        count = 0
        tail = b""
        # The first user prompt is near the top: look at whole lines first.
        while prompt is None:
            raw = f.readline()
            if not raw.endswith(b"\n"):
                tail = raw  # a torn last line, or the end
                break
            n = sum(raw.count(k) for k in ROLE_KEYS)
            count += n
            if n and b'"role":"user"' in raw:
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    break
                if type(obj) is dict and obj.get("type") == "message":
                    prompt = _first_prompt(obj)
        # The rest: count in large chunks, ignoring a torn last line.
        overlap = b""
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            data = overlap + chunk
            cut = data.rfind(b"\n") + 1
            count += sum(data[:cut].count(k) for k in ROLE_KEYS)
            overlap = data[cut:]
            if len(overlap) > 4 * CHUNK:  # one huge line: count the settled part
                keep = len(max(ROLE_KEYS, key=len))
                count += sum(overlap[:-keep].count(k) for k in ROLE_KEYS)
                overlap = overlap[-keep:]
        del tail
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

    def save(self, listed_dirs):
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
        out = []
        for directory in directories:
            present = set()
            for path, st in paths.list_dir(directory):
                present.add(path)
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
                    info = {"id": header["id"], "cwd": header["cwd"],
                            "created": header.get("timestamp") if isinstance(header.get("timestamp"), str) else None,
                            "messages": count, "firstPrompt": prompt}
                    self.cache[path] = [key, info]
                    self.changed = True
                if cwd is not None and info["cwd"] != cwd:
                    continue
                out.append(dict(info, path=path, mtime=st.st_mtime_ns))
            for path in [p for p in self.cache if os.path.dirname(p) == directory and p not in present]:
                del self.cache[path]
                self.changed = True
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
                n = 0
                while n < len(x) and n < len(y) and x[n] == y[n]:
                    n += 1
                need = max(need, n + 1)
        out[x] = x[:need]
    return out
