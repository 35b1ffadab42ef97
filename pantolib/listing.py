"""What `panto-ls` knows about a session file without parsing all of it.

A summary is read from the header line, a count of message entries taken in
large chunks of raw bytes, and the first user prompt. Summaries are cached
under $XDG_CACHE_HOME/panto/ keyed by the file's identity, size and times,
so an unchanged file is never read twice and a changed one always is.
"""
import os

import orjson

from pantolib import paths

PROMPT_MAX = 500
# panto and the seed write entries compactly, type first, with the message
# object last but for its content: a message line starts with MESSAGE and
# names its role within its first few hundred bytes. Quotes inside JSON
# strings are escaped, so no earlier string can fake ROLE. Any other line
# that mentions "message" is parsed, so hand-written entries count too.
MESSAGE = b'{"type":"message",'
ROLE = b'"message":{"role":"'
ROLE_WINDOW = 1024
CACHE_VERSION = 1


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


def _message_role(raw):
    """The role of a message entry line, cheaply; None for any other line."""
    if raw.startswith(MESSAGE):
        i = raw.find(ROLE, 0, ROLE_WINDOW)
        if i >= 0:
            i += len(ROLE)
            j = raw.find(b'"', i, i + 16)
            if j > 0:
                return raw[i:j].decode("ascii", "replace")
    elif b'"message"' not in raw:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is dict and obj.get("type") == "message" and isinstance(obj.get("message"), dict):
        return obj["message"].get("role")
    return None


def summarize(path):
    """(header, message count, first prompt) of a session file, read cheaply.

    Only the header and the first user entry are parsed; the other lines are
    told apart by their bytes. A torn last line is not counted.
    """
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
        for raw in f:
            if raw[-1:] != b"\n":
                break
            role = _message_role(raw)
            if role == "user" or role == "assistant":
                count += 1
                if prompt is None and role == "user":
                    try:
                        prompt = _first_prompt(orjson.loads(raw))
                    except (orjson.JSONDecodeError, AttributeError):
                        pass
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
