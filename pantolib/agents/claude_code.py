"""Claude Code's transcripts (SPEC §12): `projects/<encoded cwd>/<session>.jsonl`
under each configuration directory, sub-agents beside them
(`<session>/subagents/agent-*.jsonl`, older `agent-*.jsonl`).

A transcript is JSON Lines of records: `user`, `assistant`, `system` (with a
`subtype`: `compact_boundary` starts a compaction), `summary` and `ai-title`
(generated titles), `custom-title` (a person's), and bookkeeping
(`file-history-snapshot`, `queue-operation`, `progress`, ...). Conversation
records carry `uuid`, `parentUuid` (the chain), `sessionId`, `cwd`,
`timestamp`, `isSidechain`, `agentId` (a sub-agent's), `requestId`.

One API response is written as several `assistant` lines (one content block
each, the same `message.id`): they become one entry, the blocks in order, the
usage of the line with the largest total. A reply is complete once a later
record follows it or its last line's `stop_reason` is not null; until then
it waits for the next run. `start`/`end` are byte offsets.
"""
import os

from pantolib import entries
from pantolib.agents import common

NAME = "claude-code"
PROVIDER, API = "anthropic", "anthropic_messages"
CONVERSATION = ("user", "assistant", "system")
GENERATED_TITLES = {"summary": "summary", "ai-title": "aiTitle"}
ALIASES = 2000          # skipped records remembered as parents (the chain's most recent ones)


def config_dirs(env):
    listed = env.get("CLAUDE_CONFIG_DIR")
    if listed:
        return [d.strip() for d in listed.split(",") if d.strip()]
    home = env.get("HOME") or os.path.expanduser("~")
    return [os.path.join(home, ".claude"), os.path.join(home, ".config", "claude")]


def find(env):
    """Every transcript under the configuration directories, unordered (a
    directory listing only: no file is opened)."""
    found = []
    for base in config_dirs(env):
        root = os.path.join(base, "projects")
        try:
            projects = os.scandir(root)
        except FileNotFoundError:
            continue
        with projects:
            for p in projects:
                if not p.is_dir():
                    continue
                with os.scandir(p.path) as items:
                    for item in items:
                        if item.name.endswith(".jsonl") and item.is_file():
                            found.append(item.path)
                        elif item.is_dir():
                            sub = os.path.join(item.path, "subagents")
                            try:
                                names = os.listdir(sub)
                            except (FileNotFoundError, NotADirectoryError):
                                continue
                            found.extend(os.path.join(sub, n) for n in names
                                         if n.startswith("agent-") and n.endswith(".jsonl"))
    return found


def _stamp(raw):
    obj = common.parse(raw)
    if isinstance(obj, dict):
        return common.iso(obj.get("timestamp")) or ""
    return ""


def order_key(path):
    """(first record's timestamp, last record's, path): the order copies are billed in.

    Read from the top until a record has a time, and from the last 64 KiB
    back (_first_time, _last_time)."""
    return (_first_time(path), _last_time(path), path)


HEAD_READ = 8192    # bytes read first at each end of a transcript for its first and last times; more is read
                    # only where they hold none (the answer is the same)


def _first_time(path):
    """The time of a transcript's first complete record that has one ("~": none).

    Its complete lines in the first HEAD_READ bytes, then (no time among them)
    line by line from the top: over 10,000 transcripts in the page cache,
    0.10 s, where their lines read through a buffered file took 0.12 s."""
    return _reading(path, _first_in)


def _first_in(fd):
    import io

    head = os.pread(fd, HEAD_READ, 0)
    first = _first_stamp(raw for _, _, _, raw in common.records(io.BytesIO(head)))
    if first or len(head) < HEAD_READ:      # (all of a short file read: no complete record with a time)
        return first
    with open(fd, "rb", closefd=False) as f:
        return _first_stamp(raw for _, _, _, raw in common.records(f))


def _last_time(path):
    """The time of a transcript's last record that has one, within its last 64 KiB ("~": none).

    The complete lines of the last HEAD_READ bytes are looked at first (the
    same lines a read of 64 KiB looks at first): over 10,000 transcripts in
    the page cache, 0.13 s instead of 0.33 to 0.40 s."""
    return _reading(path, _last_in)


def _last_in(fd):
    size = os.fstat(fd).st_size
    if size > HEAD_READ:
        tail = os.pread(fd, HEAD_READ, size - HEAD_READ)
        cut = tail.find(b"\n")     # (what is before it may be the end of a line)
        last = _last_stamp(tail[cut + 1:]) if cut >= 0 else ""
        if last:
            return last
    return _last_stamp(os.pread(fd, 65536, max(0, size - 65536)))


def _reading(path, read):
    """read(descriptor of the transcript) or "~" (none found, or it cannot be
    read). Opened without waiting: a FIFO put there since it was listed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return "~"
    try:
        return read(fd) or "~"
    except OSError:
        return "~"
    finally:
        os.close(fd)


def _last_stamp(tail, few=16):
    """The time of the last record in `tail` that has one, its lines read from
    the end (the last `few` first: nearly always enough; the rest split only
    when they are not), or ""."""
    pieces = tail.rsplit(b"\n", few)
    if len(pieces) <= few:
        return _first_stamp(reversed(pieces))
    return _first_stamp(reversed(pieces[1:])) or _first_stamp(reversed(pieces[0].split(b"\n")))


def _first_stamp(lines):
    """The time of the first of `lines` that has one, or ""."""
    return next((stamp for raw in lines if raw.strip() and (stamp := _stamp(raw))), "")


def order(paths):
    """sorted(paths, key=order_key), a file's last time read only where its
    first time is another file's too (a resumed session's copy of its start):
    10,000 transcripts in the page cache ordered in 0.13 s instead of 0.37
    to 0.45 s, work done before their import starts (from disk, where one
    read-ahead brings a whole small file, the two took about as long)."""
    firsts = {p: _first_time(p) for p in paths}
    out = sorted(paths, key=lambda p: (firsts[p], p))
    i = 0
    while i < len(out):
        first, j = firsts[out[i]], i + 1
        while j < len(out) and firsts[out[j]] == first:
            j += 1
        if j - i > 1:
            out[i:j] = sorted(out[i:j], key=lambda p: (_last_time(p), p))
        i = j
    return out


def sources(env):
    return order(find(env))


def sniff(head):
    for raw in head.split(b"\n")[:20]:
        obj = common.parse(raw)
        if not isinstance(obj, dict):
            continue
        t = obj.get("type")
        if t in CONVERSATION and ("sessionId" in obj or "parentUuid" in obj):
            return True
        if t in ("summary", "file-history-snapshot", "custom-title", "ai-title", "queue-operation") \
                and "payload" not in obj:
            return True
    return False


_COUNTED = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _total(u):
    if type(u) is not dict:
        return -1
    total = 0
    for k in _COUNTED:
        v = u.get(k)
        if type(v) is int:
            total += v
    return total


def _usage(u, model):
    if model == "<synthetic>":
        return {"input": 0, "output": 0}
    if type(u) is not dict:
        return None
    cc = u.get("cache_creation")
    one_h = cc.get("ephemeral_1h_input_tokens", 0) if type(cc) is dict else 0
    return common.usage(u.get("input_tokens", 0), u.get("output_tokens", 0), u.get("cache_read_input_tokens", 0),
                        u.get("cache_creation_input_tokens", 0), 0, one_h)


def _image(source):
    if type(source) is dict and source.get("type") == "base64" and isinstance(source.get("data"), str):
        return common.image(source.get("media_type") or "application/octet-stream", source["data"])
    return None


def _json_text(value):
    import orjson

    return orjson.dumps(value).decode() if not isinstance(value, str) else value


def _assistant_blocks(content, out, skipped):
    if isinstance(content, str):
        if content:
            out.append({"type": "text", "text": content})
        return
    for b in content if isinstance(content, list) else ():
        t = b.get("type") if type(b) is dict else None
        if t == "text" and isinstance(b.get("text"), str):
            out.append({"type": "text", "text": b["text"]})
        elif t == "thinking" and isinstance(b.get("thinking"), str):
            block = {"type": "thinking", "thinking": b["thinking"]}
            if isinstance(b.get("signature"), str) and b["signature"]:
                block["signature"] = b["signature"]
            out.append(block)
        elif t == "redacted_thinking" and isinstance(b.get("data"), str):
            out.append({"type": "redactedThinking", "data": b["data"]})
        elif t == "tool_use":
            out.append({"type": "toolUse", "id": str(b.get("id", "")), "name": str(b.get("name", "")),
                        "input": _json_text(b.get("input", {}))})
        else:
            skipped[f"block {t}"] = skipped.get(f"block {t}", 0) + 1


def _user_blocks(content, skipped):
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for b in content if isinstance(content, list) else ():
        t = b.get("type") if type(b) is dict else None
        if t == "text" and isinstance(b.get("text"), str):
            out.append({"type": "text", "text": b["text"]})
        elif t == "image" and (img := _image(b.get("source"))) is not None:
            out.append(img)
        elif t == "tool_result":
            inner = b.get("content")
            images = []
            if isinstance(inner, list):
                images = [i for p in inner if type(p) is dict and p.get("type") == "image"
                          and (i := _image(p.get("source"))) is not None]
                inner = [p for p in inner if not (type(p) is dict and p.get("type") == "image")]
            block = {"type": "toolResult", "toolUseId": str(b.get("tool_use_id", "")),
                     "content": common.text_of(inner)}
            if b.get("is_error") is True:
                block["isError"] = True
            out.append(block)
            out.extend(images)
        else:
            skipped[f"block {t}"] = skipped.get(f"block {t}", 0) + 1
    return out


class Reader:
    """One transcript as panto lines (see the module's docstring)."""

    def __init__(self, source, start=0, state=None):
        self.source, self.start = source, start
        s = state or {}
        self.ids = common.Ids(s.get("taken", ()))
        self.last = s.get("last")             # the id of the last entry yielded
        self.model = s.get("model")           # the model of the last reply (stamps prompts)
        self.alias = dict(s.get("alias", {}))  # uuid of a record left out -> the id standing for it
        self.titled = s.get("titled", False)  # a person's title was imported
        self.title = s.get("title")           # the last title imported
        self.seen = common.Hashes(s.get("seen", ""))    # of the message ids of responses imported here
        self.sid = s.get("sid")
        self.headed = s.get("headed", False)
        self.ts = s.get("ts")                 # the time of the last entry
        self.waiting = dict(s.get("waiting", {}))   # leaf uuid -> titles that name it, not yet placed
        self.boundary = None
        self.end = start
        self.skipped, self.bad = {}, []

    @property
    def state(self):
        return {"taken": self.ids.taken, "last": self.last, "model": self.model, "alias": self.alias,
                "titled": self.titled, "title": self.title, "seen": self.seen.hex(), "sid": self.sid,
                "headed": self.headed, "ts": self.ts,
                "waiting": self.waiting}

    def _skip(self, kind, n=1):
        self.skipped[kind] = self.skipped.get(kind, 0) + n

    def _parent(self, uuid):
        if uuid is None:
            return None
        found = self.ids.find(uuid)
        if found is not None:
            return found
        if uuid in self.alias:
            return self.alias[uuid]
        return self.last

    def _left_out(self, rec, kind):
        """A record that is not imported; a chained one stands for its parent."""
        self._skip(kind)
        u = rec.get("uuid")
        if isinstance(u, str) and not self.ids.has(u):
            self._alias(u, self._parent(rec.get("parentUuid")))

    def _alias(self, uuid, eid):
        """A record left out (or merged) stands for `eid` as a parent; only the
        most recent ALIASES are kept (a chain names a recent record)."""
        self.alias[uuid] = eid
        while len(self.alias) > ALIASES:
            del self.alias[next(iter(self.alias))]

    def _header(self, rec):
        base = os.path.basename(self.source)[:-len(".jsonl")] if self.source.endswith(".jsonl") \
            else os.path.basename(self.source)
        parent = relation = None
        if base.startswith("agent-") or (rec.get("isSidechain") is True and isinstance(rec.get("agentId"), str)
                                         and os.path.basename(os.path.dirname(self.source)) == "subagents"):
            source_id = rec.get("agentId") if isinstance(rec.get("agentId"), str) else base[len("agent-"):]
            parent = rec.get("sessionId") if isinstance(rec.get("sessionId"), str) else None
            if parent is not None:
                parent = common.session_uuid(NAME, parent)
            relation = "subagent"
        else:
            source_id = base if _is_uuid(base) else str(rec.get("sessionId") or base)
        self.sid = common.session_uuid(NAME, source_id)
        self.headed = True
        return common.header(self.sid, common.iso(rec.get("timestamp")) or "1970-01-01T00:00:00.000Z",
                             rec["cwd"], NAME, self.source, source_id, parent, relation)

    def __iter__(self):
        pending = []       # the assistant lines of one response not yet complete: (start, rec)
        early = []         # records before the first one that gives the header its cwd
        with open(self.source, "rb") as f:
            for n, start, end, raw in common.records(f, self.start):
                if not raw.strip():
                    self.end = end
                    continue
                rec = common.parse(raw)
                if not isinstance(rec, dict):
                    self.bad.append((n, rec))
                    if not pending:
                        self.end = end
                    continue
                t = rec.get("type")
                msg = rec.get("message")
                if pending:
                    mid = msg.get("id") if type(msg) is dict else None
                    if t == "assistant" and mid is not None and mid == pending[0][1]["message"].get("id"):
                        pending.append((start, rec))
                        continue
                    yield from self._reply(pending)
                    pending = []
                    self.end = start
                if not self.headed:
                    if not (t in CONVERSATION and isinstance(rec.get("cwd"), str)):
                        early.append((t, rec))    # read again next time if no header comes
                        continue
                    yield self._header(rec)
                    for et, erec in early:
                        yield from self._record(et, erec, erec.get("message"), None)
                    early = []
                if t == "assistant" and type(msg) is dict:
                    if self.boundary is not None:
                        yield self._flush_boundary()
                    pending = [(start, rec)]
                    continue
                yield from self._record(t, rec, msg, start)
                self.end = end
            if pending:
                last = pending[-1][1]["message"]
                if "stop_reason" not in last or last.get("stop_reason") is not None:
                    yield from self._reply(pending)
                    self.end = end
                # else: still streaming; it is read again next time from its first line
            if self.boundary is not None and not pending:
                self.end = self.boundary[0]     # its summary has not come yet
                self.boundary = None

    def _record(self, t, rec, msg, start):
        if t == "user" and type(msg) is dict:
            if self.boundary is not None and rec.get("isCompactSummary") is True:
                yield self._compaction(self.boundary[1], common.text_of(msg.get("content")), rec)
                self.boundary = None
                return
            if self.boundary is not None:
                yield self._flush_boundary()
            content = _user_blocks(msg.get("content"), self.skipped)
            eid = self.ids.get(rec["uuid"]) if isinstance(rec.get("uuid"), str) else self.ids.get(f"user@{self.last}")
            ts = common.iso(rec.get("timestamp")) or "1970-01-01T00:00:00.000Z"
            model = self.model
            e = common.message(eid, self._parent(rec.get("parentUuid")), ts, "user", content,
                               provider=PROVIDER if model else None, model=model, api=API if model else None)
            self.last, self.ts = eid, ts
            yield e
            if self.waiting and isinstance(rec.get("uuid"), str):
                yield from self._placed(rec["uuid"], eid)
            return
        if self.boundary is not None:
            yield self._flush_boundary()
        if t == "system" and rec.get("subtype") == "compact_boundary":
            self.boundary = (start, rec)
            return
        if t in GENERATED_TITLES or t == "custom-title":
            yield from self._title(t, rec)
            return
        self._left_out(rec, t if t != "system" else f"system {rec.get('subtype')}")

    def _flush_boundary(self):
        """The compaction of the boundary waiting (there is one) whose summary never came."""
        b, self.boundary = self.boundary, None
        return self._compaction(b[1], "", None)

    def _compaction(self, b, summary, summary_rec):
        eid = self.ids.get(b["uuid"]) if isinstance(b.get("uuid"), str) else self.ids.get(f"compact@{self.last}")
        parent = self._parent(b.get("logicalParentUuid") or b.get("parentUuid"))
        e = {"type": "compaction", "id": eid, "parentId": parent,
             "timestamp": common.iso(b.get("timestamp")) or "1970-01-01T00:00:00.000Z",
             "summary": summary, "firstKeptId": None, "provider": PROVIDER, "model": self.model,
             entries.UNRECORDED: True}
        if self.model is None:
            del e["model"]
        if summary_rec is not None and isinstance(summary_rec.get("uuid"), str):
            self._alias(summary_rec["uuid"], eid)
        self.last, self.ts = eid, e["timestamp"]
        return e

    def _title(self, t, rec):
        name = rec.get("customTitle") if t == "custom-title" else rec.get(GENERATED_TITLES[t])
        if not isinstance(name, str) or not name.strip():
            self._skip("title")
            return
        leaf = rec.get("leafUuid")
        if isinstance(leaf, str) and not self.ids.has(leaf) and leaf not in self.alias:
            self.waiting.setdefault(leaf, []).append([t, name])   # placed when its leaf comes
            return
        parent = self._parent(leaf) if isinstance(leaf, str) else self.last
        yield from self._place(t, name, parent)

    def _place(self, t, name, parent):
        if (self.titled and t != "custom-title") or name == self.title:
            self._skip("title")
            return
        self.titled = self.titled or t == "custom-title"
        self.title = name
        eid = self.ids.get(f"title@{len(self.ids)}")
        yield {"type": "sessionInfo", "id": eid, "parentId": parent, "timestamp": self._time_of_last(),
               "name": name}
        if parent == self.last:
            self.last = eid

    def _placed(self, uuid, eid):
        """Titles that named the record just imported as their leaf."""
        for t, name in self.waiting.pop(uuid, ()):
            yield from self._place(t, name, eid)

    def _time_of_last(self):
        return self.ts or "1970-01-01T00:00:00.000Z"

    def _reply(self, lines):
        recs = [r for _, r in lines]
        first, msg = recs[0], recs[0]["message"]
        content = []
        best, usage_raw, stop = -2, None, None
        for r in recs:
            m = r["message"]
            _assistant_blocks(m.get("content"), content, self.skipped)
            total = _total(m.get("usage"))
            if total > best:
                best, usage_raw = total, m.get("usage")
            if isinstance(m.get("stop_reason"), str):
                stop = m["stop_reason"]
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        if len(recs) > 1:
            self._skip("split line", len(recs) - 1)
        eid = self.ids.get(first["uuid"]) if isinstance(first.get("uuid"), str) \
            else self.ids.get(f"reply@{self.last}")
        parent = self._parent(first.get("parentUuid"))
        for r in recs[1:]:
            if isinstance(r.get("uuid"), str) and not self.ids.has(r["uuid"]):
                self._alias(r["uuid"], eid)
        if stop is None:
            stop_value = "toolUse" if any(b["type"] == "toolUse" for b in content) else "stop"
        else:
            stop_value = common.stop_reason(stop)
        mid, rid = msg.get("id"), first.get("requestId")
        usage = _usage(usage_raw, model)
        billed = None
        if isinstance(mid, str):
            h = common.key_hash("msg:" + mid, 0)
            if h in self.seen:          # the same response again in this file: paid once
                billed, usage = self.sid, None
            else:
                self.seen.add(h)
        ts = common.iso(first.get("timestamp")) or "1970-01-01T00:00:00.000Z"
        self.ts = ts
        e = common.message(eid, parent, ts, "assistant", content, provider=PROVIDER, model=model, api=API,
                           stop=stop_value, usage=usage, billed_in=billed)
        if isinstance(mid, str) and model != "<synthetic>" and billed is None:
            e["_billing"] = [mid, rid if isinstance(rid, str) else None, first.get("isSidechain") is True]
        if model is not None and model != "<synthetic>":
            self.model = model
        self.last = eid
        yield e
        if self.waiting:
            for r in recs:
                if isinstance(r.get("uuid"), str):
                    yield from self._placed(r["uuid"], eid)


def _is_uuid(s):
    import uuid

    try:
        return str(uuid.UUID(s)) == s.lower()
    except ValueError:
        return False
