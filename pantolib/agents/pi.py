"""pi's sessions (the `pi` coding agent): one JSON Lines file per session
under `${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions/--<cwd>--/`.

The file starts with a header (`type: session`; version 1 has no `version`
key and no entry ids, 2 and 3 an entry tree by `id`/`parentId`), then
entries: `message` (roles user, assistant, toolResult, bashExecution,
custom), `compaction`, `branch_summary`, `session_info`, `custom_message`,
and bookkeeping (`model_change`, `thinking_level_change`, `label`,
`custom`) that is counted in `skipped`, not imported. pi appends whole
lines and writes a message only once it is complete, so a line without its
line feed is the one record still being written: it waits for the next run.

`start`/`end` are byte offsets.
"""
import os

from pantolib import entries
from pantolib.agents import common
from pantolib.errors import SessionError

NAME = "pi"

_APIS = {"anthropic-messages": "anthropic_messages", "openai-responses": "openai_responses",
         "openai-completions": "openai_chat"}
_STOPS = ("stop", "length", "toolUse", "error", "aborted")
_BOOKKEEPING = ("model_change", "thinking_level_change", "label", "custom")
# patterns, compiled by re where one is used (a run that reads no pi session never imports re)
_FILE_ID = r"_([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\.jsonl$"
_CHUNK = 1 << 20


def _home_path(value, env):
    if value == "~" or value.startswith("~/"):
        return env.get("HOME", os.path.expanduser("~")) + value[1:]
    return value


def sources(env):
    """Every pi session file, oldest first (pi names them by their creation
    time, so a fork comes after the session it copies)."""
    root = env.get("PI_CODING_AGENT_DIR")
    root = _home_path(root, env) if root else os.path.join(env.get("HOME", os.path.expanduser("~")), ".pi", "agent")
    top = os.path.join(root, "sessions")
    if not os.path.isdir(top):
        return []
    found, dirs = [], []
    with os.scandir(top) as it:
        for e in it:
            if e.is_dir():
                dirs.append(e.path)
            elif e.name.endswith(".jsonl") and e.is_file():
                found.append((e.name, e.path))     # a flat --session-dir
    for d in sorted(dirs):
        with os.scandir(d) as it:
            found += [(e.name, e.path) for e in it if e.name.endswith(".jsonl") and e.is_file()]
    return [p for _, p in sorted(found)]


def _is_header(h):
    if type(h) is not dict or h.get("type") != "session" or "source" in h:
        return False
    if not isinstance(h.get("id"), str) or not isinstance(h.get("cwd", ""), str):
        return False
    v = h.get("version")
    return v is None or (type(v) is int and v >= 2)


def sniff(head: bytes) -> bool:
    import orjson

    first = head.split(b"\n", 1)[0]
    try:
        return _is_header(orjson.loads(first))
    except orjson.JSONDecodeError:
        return False


_ISO_MS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def _iso(value, ms=None):
    """An entry timestamp (UTC, milliseconds) from pi's ISO text, else from ms."""
    if isinstance(value, str):
        import re

        if re.fullmatch(_ISO_MS, value):
            return value
        from datetime import datetime, timezone

        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            t = None
        if t is not None:
            if t.tzinfo is None:
                t = t.replace(tzinfo=timezone.utc)
            return entries.iso_ms(int(t.replace(microsecond=0).timestamp()) * 1000 + t.microsecond // 1000)
    if type(ms) is int and ms >= 0:
        return entries.iso_ms(ms)
    return "1970-01-01T00:00:00.000Z"


def _int(v):
    return v if type(v) is int and v > 0 else 0


def _usage(u):
    """pi's usage as written (input is the non-cached part); a usage that
    names only totalTokens gives its missing part to output, as ccusage does."""
    if type(u) is not dict:
        return None
    i, o, cr, cw = _int(u.get("input")), _int(u.get("output")), _int(u.get("cacheRead")), _int(u.get("cacheWrite"))
    missing = _int(u.get("totalTokens")) - (i + o + cr + cw)
    if missing > 0 and o == 0:
        o = missing
    return entries.usage_dict(i, o, cr, cw, _int(u.get("reasoning")), _int(u.get("cacheWrite1h")))


def _parts(content, role):
    """pi's content as panto blocks."""
    import orjson

    if isinstance(content, str):
        return [entries.text(content)]
    out = []
    for b in content if isinstance(content, list) else ():
        t = b.get("type") if type(b) is dict else None
        if t == "text" and isinstance(b.get("text"), str):
            out.append(entries.text(b["text"]))
        elif t == "image" and isinstance(b.get("data"), str):
            out.append({"type": "image", "mediaType": b.get("mimeType") or "image/png", "data": b["data"]})
        elif t == "thinking" and role == "assistant":
            sig = b.get("thinkingSignature")
            if b.get("redacted") and isinstance(sig, str):
                out.append({"type": "redactedThinking", "data": sig})
                continue
            block = {"type": "thinking", "thinking": b.get("thinking") if isinstance(b.get("thinking"), str) else ""}
            if isinstance(sig, str) and sig:
                item = _reasoning_item(sig)
                if item is None:
                    block["signature"] = sig
                elif isinstance(item.get("encrypted_content"), str):
                    block["signature"] = item["encrypted_content"]
                    if isinstance(item.get("id"), str):
                        block["itemId"] = item["id"]
            out.append(block)
        elif t == "toolCall" and role == "assistant":
            args = b.get("arguments")
            out.append({"type": "toolUse", "id": str(b.get("id", "")), "name": str(b.get("name", "")),
                        "input": orjson.dumps(args if args is not None else {}).decode()})
    return out


def _reasoning_item(sig):
    """pi keeps an OpenAI Responses reasoning item whole, as JSON text, in
    thinkingSignature; panto keeps its encrypted_content and id."""
    import orjson

    if not sig.startswith("{"):
        return None
    try:
        item = orjson.loads(sig)
    except orjson.JSONDecodeError:
        return None
    return item if type(item) is dict and item.get("type") == "reasoning" else None


def _bash_text(m):
    """A `!command` run by the person, as pi puts it before the model."""
    text = f"Ran `{m.get('command', '')}`\n"
    out = m.get("output")
    text += f"```\n{out}\n```" if out else "(no output)"
    code = m.get("exitCode")
    if m.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif type(code) is int and code != 0:
        text += f"\n\nCommand exited with code {code}"
    if m.get("truncated") and m.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {m['fullOutputPath']}]"
    return text


def _parent_session(path, here):
    """The session id of the file a fork names: its file name carries it, else its header."""
    import re

    import orjson

    m = re.search(_FILE_ID, path)
    if m:
        return m.group(1).lower()
    try:
        full = path if os.path.isabs(path) else os.path.join(os.path.dirname(here), path)
        with open(full, "rb") as f:
            h = orjson.loads(f.read(1 << 16).split(b"\n", 1)[0])
        if _is_header(h):
            return common.session_uuid(NAME, h["id"])
    except (OSError, orjson.JSONDecodeError):
        pass
    return common.session_uuid(NAME, os.path.basename(path))


class Reader:
    """One pi session file as panto entries, read on from a byte offset."""

    def __init__(self, source: str, start: int = 0, state: dict | None = None):
        self.source, self.start = source, start
        s = state or {}
        self.ids = common.Ids(s.get("taken", ()))
        self.map = dict(s.get("map", {}))      # pi id (or "#n" in version 1) -> panto id
        self.last = s.get("last")               # the last entry written: file order
        self.line = s.get("line", 0)
        self.n = s.get("n", 0)                  # records parsed, header included (version 1 keys)
        self.version = s.get("version")
        self.model = s.get("model")             # [provider, model, api] of the next request
        self.end = start
        self.skipped, self.bad = {}, []

    @property
    def state(self):
        return {"taken": self.ids.taken, "map": self.map, "last": self.last, "line": self.line,
                "n": self.n, "version": self.version, "model": self.model}

    def __iter__(self):
        from pantolib import stream

        with open(self.source, "rb") as f:
            f.seek(self.start)
            offset = self.start
            for data, stop in stream.pieces(f, _CHUNK):
                if stop is None:
                    break       # a last line without its line feed: still being written
                p = 0
                while p < stop:
                    e = data.index(b"\n", p)
                    raw, p = data[p:e], e + 1
                    offset += len(raw) + 1
                    self.line += 1
                    yield from self._record(raw)
                    self.end = offset

    def _skip(self, kind):
        self.skipped[kind] = self.skipped.get(kind, 0) + 1

    def _record(self, raw):
        import orjson

        if not raw.strip():
            return
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            self.bad.append((self.line, f"not JSON ({e.msg})"))
            return
        if type(rec) is not dict:
            self.bad.append((self.line, "not a JSON object"))
            return
        self.n += 1
        if self.version is None:
            if not _is_header(rec):
                raise SessionError("not a pi session file (no session header on line 1)", file=self.source)
            yield self._header(rec)
            return
        t = rec.get("type")
        if t == "session":
            self.bad.append((self.line, "a second session header"))
            return
        yield from self._entry(rec, t)

    def _header(self, h):
        self.version = h.get("version") or 1
        if self.version == 1 and isinstance(h.get("provider"), str) and isinstance(h.get("modelId"), str):
            self.model = [h["provider"], h["modelId"], None]
        parent_path = h.get("parentSession") or h.get("branchedFrom")
        parent = _parent_session(parent_path, self.source) if isinstance(parent_path, str) and parent_path else None
        return common.header(common.session_uuid(NAME, h["id"]), _iso(h.get("timestamp")), h.get("cwd", ""), NAME,
                             os.path.abspath(self.source), h["id"], parent, "fork" if parent else None)

    def _place(self, rec):
        """(key, parent) of an entry: pi's own id and parentId from version 2
        on; version 1 (no ids): its position, and file order."""
        if self.version == 1 or not isinstance(rec.get("id"), str):
            return f"#{self.n - 1}", self.last
        key = rec["id"] if rec["id"] not in self.map else f"{rec['id']}@{self.line}"
        p = rec.get("parentId")
        if p is None and "parentId" in rec:
            return key, None
        return key, self.map.get(p, self.last) if isinstance(p, str) else self.last

    def _emit(self, key, entry):
        self.map[key] = entry["id"]
        self.last = entry["id"]
        return entry

    def _alias(self, key, parent, kind):
        """A record left out: its children hang on its parent."""
        self.map[key] = parent
        self._skip(kind)

    def _entry(self, rec, t):
        key, parent = self._place(rec)
        ts = _iso(rec.get("timestamp"))
        if t == "message":
            m = rec.get("message")
            if type(m) is not dict:
                self.bad.append((self.line, "a message entry without a message"))
                self.map[key] = parent
                return
            yield from self._message(key, parent, ts, m)
        elif t == "custom_message":
            yield self._user(key, parent, ts, _parts(rec.get("content"), "user"))
        elif t == "compaction" or t == "branch_summary":
            yield self._summary(key, parent, ts, rec, t)
        elif t == "session_info" and isinstance(rec.get("name"), str) and rec["name"]:
            yield self._emit(key, {"type": "sessionInfo", "id": self.ids.get(key), "parentId": parent,
                                   "timestamp": ts, "name": rec["name"]})
        else:
            if t == "model_change" and isinstance(rec.get("provider"), str) and isinstance(rec.get("modelId"), str):
                self.model = [rec["provider"], rec["modelId"], None]
            self._alias(key, parent, t if isinstance(t, str) else "unknown")

    def _user(self, key, parent, ts, content):
        p, m, api = self.model or (None, None, None)
        return self._emit(key, common.message(self.ids.get(key), parent, ts, "user", content,
                                              provider=p, model=m, api=api))

    def _message(self, key, parent, ts, m):
        role = m.get("role")
        if role == "user" or role == "custom" or role == "hookMessage":
            yield self._user(key, parent, ts, _parts(m.get("content"), "user"))
        elif role == "toolResult":
            block = {"type": "toolResult", "toolUseId": str(m.get("toolCallId", "")),
                     "content": "\n".join(b["text"] for b in m.get("content") or ()
                                          if type(b) is dict and isinstance(b.get("text"), str))}
            if m.get("isError") is True:
                block["isError"] = True
            images = [b for b in _parts(m.get("content"), "user") if b["type"] == "image"]
            yield self._user(key, parent, ts, [block, *images])
        elif role == "bashExecution" and not m.get("excludeFromContext"):
            yield self._user(key, parent, ts, [entries.text(_bash_text(m))])
        elif role == "assistant":
            yield self._assistant(key, parent, ts, m, self._when(m.get("timestamp"), ts))
        else:
            self._alias(key, parent, f"message:{role}" if isinstance(role, str) else "message")

    def _when(self, ms, ts):
        """What tells a response from others with the same model and counts:
        its time (a copy keeps it), else its place in this file."""
        if type(ms) is int:
            return ms
        return ts if ts != _iso(None) else f"{self.source}:{self.line}"

    def _assistant(self, key, parent, ts, m, when):
        provider = m.get("provider") if isinstance(m.get("provider"), str) else None
        model = m.get("model") if isinstance(m.get("model"), str) else None
        api = _APIS.get(m.get("api"))
        if provider and model:
            self.model = [provider, model, api]
        stop = m.get("stopReason")
        stop = stop if stop in _STOPS else common.stop_reason(stop)
        usage = _usage(m.get("usage"))
        e = common.message(self.ids.get(key), parent, ts, "assistant", _parts(m.get("content"), "assistant"),
                           provider=provider, model=model, api=api, stop=stop, usage=usage)
        if usage is not None:
            e["_billing"] = ["pi", when, provider, model, usage["input"], usage["output"],
                             usage.get("cacheRead", 0), usage.get("cacheWrite", 0)]
        return self._emit(key, e)

    def _summary(self, key, parent, ts, rec, t):
        summary = rec.get("summary") if isinstance(rec.get("summary"), str) else ""
        e = {"type": "compaction" if t == "compaction" else "branchSummary", "id": self.ids.get(key),
             "parentId": parent, "timestamp": ts, "summary": summary}
        if t == "compaction":
            first = rec.get("firstKeptEntryId")
            if first is None and type(rec.get("firstKeptEntryIndex")) is int:
                first = f"#{rec['firstKeptEntryIndex']}"
            e["firstKeptId"] = self.map.get(first) if isinstance(first, str) else None
        else:
            e["fromId"] = self.map.get(rec.get("fromId")) if isinstance(rec.get("fromId"), str) else None
        if self.model:
            e["provider"], e["model"] = self.model[0], self.model[1]
        usage = _usage(rec.get("usage"))
        if usage is not None:
            e["usage"] = usage
            e["_billing"] = ["pi", t, self._when(None, ts), summary[:64]]
        else:
            e[entries.UNRECORDED] = True
        return self._emit(key, e)
