"""opencode's sessions: the SQLite database
`${OPENCODE_DATA_DIR:-~/.local/share/opencode}/opencode.db` (tables
`session`, `message`, `part`; opened read-only), else the legacy JSON files
of `storage/` (`session/<project>/<id>.json`, `message/<session>/<id>.json`,
`part/<message>/<id>.json`).

A source is `DATABASE#SESSION-ID` or the path of a legacy session file. A
database is not an append-only file: `start`/`end` count the messages
already read, and `state` names the last of them (its creation time and
id), so the next run reads the messages that come after it in time order.

One `session` row is one session; a `parentID` makes it a sub-agent's
(`relation: "subagent"`; opencode records no link from a fork to the
session it copied). Messages in time order; an answer's `parentID` names
its prompt, not the previous step, so entries chain in that order. A
message still being written (the session's last message: an answer with
no `time.completed` and no error, or with a tool still running, or a
message with no parts yet) waits for the next run. Malformed rows or files are skipped and counted in `bad`,
named by their id (or file name) where a file would give a line number.
"""
import os

from pantolib import entries
from pantolib.agents import common
from pantolib.errors import SessionError

NAME = "opencode"

# (compiled where they are used, through re's own cache: a run that finds no
# opencode store does not import re, ~10 ms of `import --all`'s start-up)
_CHANNEL_DB = r"opencode-[A-Za-z0-9_-]+\.db"
_DEFAULT_TITLE = r"(New session|Child session) - \d{4}-\d\d-\d\dT"
_FINISH = {"stop": "stop", "length": "length", "tool-calls": "toolUse", "content-filter": "error",
           "error": "error"}
_SKIPPED_PARTS = ("step-start", "step-finish", "snapshot", "patch", "retry", "agent", "subtask")


def _data_dir(env):
    d = env.get("OPENCODE_DATA_DIR")
    if d:
        return env.get("HOME", os.path.expanduser("~")) + d[1:] if d == "~" or d.startswith("~/") else d
    return os.path.join(env.get("HOME", os.path.expanduser("~")), ".local", "share", "opencode")


def database(data_dir):
    """The database of an opencode data folder: opencode.db, else the first
    channel database (opencode-NAME.db), else None."""
    main = os.path.join(data_dir, "opencode.db")
    if os.path.isfile(main):
        return main
    try:
        found = os.listdir(data_dir)
    except FileNotFoundError:
        return None
    import re

    channel = re.compile(_CHANNEL_DB)
    names = sorted(n for n in found if channel.fullmatch(n))
    return os.path.join(data_dir, names[0]) if names else None


def connect(path):
    """The database opened read-only (it may be in use: WAL readers see the last commit).
    Not a FIFO or a device named so: SQLite's open of a FIFO would wait for a writer."""
    import sqlite3
    from urllib.parse import quote

    from pantolib import files

    try:
        special = files.waits(os.stat(path).st_mode)      # (a folder: SQLite says it cannot open it)
    except OSError:
        special = False       # (SQLite says why)
    if special:
        raise OSError(f"{path}: cannot read the opencode database (not a regular file)")
    try:
        db = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, timeout=10,
                             isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("BEGIN")    # one snapshot for everything read
        return db
    except sqlite3.Error as e:
        raise OSError(f"{path}: cannot read the opencode database ({e})") from None


def sources(env):
    """Every opencode session: the database's, then the legacy files' that
    the database does not hold, all by creation time (a parent before its
    sub-agents)."""
    data = _data_dir(env)
    if not os.path.isdir(data):
        return []
    found, known = [], set()
    db_path = database(data)
    if db_path:
        import sqlite3

        db = connect(db_path)
        try:
            for row in db.execute("SELECT id, time_created FROM session"):
                known.add(row["id"])
                found.append((_int(row["time_created"]), row["id"], f"{db_path}#{row['id']}"))
        except sqlite3.Error as e:
            raise OSError(f"{db_path}: cannot read the opencode database ({e})") from None
        finally:
            db.close()
    top = os.path.join(data, "storage", "session")
    if os.path.isdir(top):
        with os.scandir(top) as it:
            projects = sorted(e.path for e in it if e.is_dir())
        for d in projects:
            with os.scandir(d) as it:
                files = sorted(e.path for e in it if e.name.endswith(".json") and e.is_file())
            for p in files:
                sid = os.path.basename(p)[:-5]
                if sid in known:
                    continue
                info = _load(p) or {}
                t = info.get("time")
                found.append((_int(t.get("created")) if type(t) is dict else 0, sid, p))
    return [s for _, _, s in sorted(found)]


def sniff(head: bytes) -> bool:
    import orjson

    if head.startswith(b"SQLite format 3\x00"):
        return True
    try:
        obj = orjson.loads(head)
    except orjson.JSONDecodeError:
        return False
    return (type(obj) is dict and isinstance(obj.get("id"), str) and obj["id"].startswith("ses")
            and type(obj.get("time")) is dict and ("directory" in obj or "projectID" in obj))


def _int(v):
    return v if type(v) is int and v > 0 else 0


def _load(path):
    """The JSON object a legacy file holds, or None (not one, not readable, or
    not a regular file: a FIFO is opened without waiting for a writer, and
    left)."""
    import orjson

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_mode & 0o170000 != 0o100000:
                return None
            obj = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return obj if type(obj) is dict else None


def _obj(text):
    import orjson

    try:
        obj = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return None
    return obj if type(obj) is dict else None


def usage(tokens):
    """opencode's tokens in panto's form. Output includes reasoning (§3):
    where opencode stored reasoning apart from output (its `total` counts
    both; without a total, reasoning larger than output cannot be inside
    it), output is their sum. A message with only a total gives it to
    output, as ccusage does."""
    if type(tokens) is not dict:
        return None
    cache = tokens.get("cache") if type(tokens.get("cache")) is dict else {}
    i, o, r = _int(tokens.get("input")), _int(tokens.get("output")), _int(tokens.get("reasoning"))
    cr, cw, total = _int(cache.get("read")), _int(cache.get("write")), _int(tokens.get("total"))
    if r and (total >= i + o + r + cr + cw if total else r > o):
        o += r
    if not (i or o or cr or cw) and total:
        o = total
    return entries.usage_dict(i, o, cr, cw, min(r, o))


def _model_of(msg):
    """(provider, model) a message names: modelID/providerID at its top, or in
    its `model` object (a prompt's; an answer's in later versions, id or modelID)."""
    m = msg.get("model") if type(msg.get("model")) is dict else {}
    provider = msg.get("providerID") if isinstance(msg.get("providerID"), str) else m.get("providerID")
    model = msg.get("modelID") if isinstance(msg.get("modelID"), str) else m.get("modelID", m.get("id"))
    return (provider if isinstance(provider, str) else None), (model if isinstance(model, str) else None)


def _image(mime, url):
    if isinstance(mime, str) and mime.startswith("image/") and isinstance(url, str) and url.startswith("data:"):
        head, _, data = url.partition(",")
        if data and head.endswith(";base64"):
            return {"type": "image", "mediaType": mime, "data": data}
    return None


def _thinking(part):
    block = {"type": "thinking", "thinking": part.get("text") if isinstance(part.get("text"), str) else ""}
    meta = part.get("metadata") if type(part.get("metadata")) is dict else {}
    anthropic = meta.get("anthropic") if type(meta.get("anthropic")) is dict else {}
    openai = meta.get("openai") if type(meta.get("openai")) is dict else {}
    if isinstance(anthropic.get("signature"), str):
        block["signature"] = anthropic["signature"]
    elif isinstance(openai.get("reasoningEncryptedContent"), str):
        block["signature"] = openai["reasoningEncryptedContent"]
        if isinstance(openai.get("itemId"), str):
            block["itemId"] = openai["itemId"]
    return block


def _result(part):
    """A tool part's outcome as a toolResult block and the images it returned."""
    state = part.get("state") if type(part.get("state")) is dict else {}
    status = state.get("status")
    block = {"type": "toolResult", "toolUseId": str(part.get("callID", ""))}
    images = []
    if status == "completed":
        block["content"] = state.get("output") if isinstance(state.get("output"), str) else ""
        for a in state.get("attachments") or ():
            img = _image(a.get("mime"), a.get("url")) if type(a) is dict else None
            if img:
                images.append(img)
    elif status == "error":
        block["content"] = state.get("error") if isinstance(state.get("error"), str) else ""
        block["isError"] = True
    else:
        block["content"] = "[Tool execution was interrupted]"
        block["isError"] = True
    return block, images


class Reader:
    """One opencode session as panto entries, read on after the messages already read."""

    def __init__(self, source: str, start: int = 0, state: dict | None = None):
        self.source, self.start = source, start
        s = state or {}
        self.ids = common.Ids(s.get("taken", ()))
        self.seen = dict(s.get("seen", {}))     # opencode message id -> panto id
        self.last = s.get("last")
        self.after = s.get("after")             # [time_created, id] of the last message read
        self.title = s.get("title")
        self.model = s.get("model")
        self.tail = s.get("tail")               # a compaction request's first kept message
        self.end = start
        self.skipped, self.bad = {}, []

    @property
    def state(self):
        return {"taken": self.ids.taken, "seen": self.seen, "last": self.last, "after": self.after,
                "title": self.title, "model": self.model, "tail": self.tail}

    def __iter__(self):
        path, _, sid = self.source.rpartition("#")
        if path and "/" not in sid and os.path.isfile(path):
            yield from self._database(path, sid)
        else:
            yield from self._legacy(self.source)

    # -- the two stores -------------------------------------------------------

    def _database(self, path, sid):
        import sqlite3

        db = connect(path)
        try:
            row = db.execute("SELECT * FROM session WHERE id = ?", (sid,)).fetchone()
            if row is None:
                raise SessionError(f"no session {sid!r} in the opencode database", file=path)
            keys = row.keys()
            info = {"id": sid, "parentID": row["parent_id"] if "parent_id" in keys else None,
                    "directory": row["directory"] if "directory" in keys else "",
                    "title": row["title"] if "title" in keys else None,
                    "time": {"created": row["time_created"],
                             "updated": row["time_updated"] if "time_updated" in keys else None}}
            after = self.after or [-1, ""]
            rows = db.execute("SELECT id, time_created, data FROM message WHERE session_id = ? AND "
                              "(time_created > ? OR (time_created = ? AND id > ?)) ORDER BY time_created, id",
                              (sid, after[0], after[0], after[1]))

            def messages():
                for r in rows:
                    msg = _obj(r["data"])
                    if msg is None:
                        self.bad.append((r["id"], "message data is not a JSON object"))
                        yield None, [], (r["time_created"], r["id"])
                        continue
                    msg["id"] = r["id"]
                    parts = []
                    for p in db.execute("SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (r["id"],)):
                        part = _obj(p["data"])
                        if part is None:
                            self.bad.append((p["id"], "part data is not a JSON object"))
                        else:
                            part["id"] = p["id"]
                            parts.append(part)
                    yield msg, parts, (r["time_created"], r["id"])

            yield from self._session(os.path.abspath(path), info, messages())
        except sqlite3.Error as e:
            raise SessionError(f"cannot read the opencode database ({e})", file=path) from None
        finally:
            db.close()

    def _legacy(self, path):
        info = _load(path)
        if info is None:
            raise SessionError("not an opencode session file", file=path)
        sid = os.path.basename(path)[:-5] if path.endswith(".json") else info.get("id")
        info["id"] = sid
        storage = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        mdir = os.path.join(storage, "message", sid)
        found = []
        if os.path.isdir(mdir):
            for name in sorted(os.listdir(mdir)):
                if not name.endswith(".json"):
                    continue
                msg = _load(os.path.join(mdir, name))
                if msg is None:
                    self.bad.append((name, "not a JSON object"))
                    continue
                msg["id"] = name[:-5]
                t = msg.get("time")
                key = (_int(t.get("created")) if type(t) is dict else 0, msg["id"])
                if self.after is None or list(key) > list(self.after):
                    found.append((key, msg))
        found.sort(key=lambda x: x[0])

        def messages():
            for key, msg in found:
                pdir = os.path.join(storage, "part", msg["id"])
                parts = []
                if os.path.isdir(pdir):
                    for name in sorted(os.listdir(pdir)):
                        part = _load(os.path.join(pdir, name)) if name.endswith(".json") else None
                        if part is None:
                            self.bad.append((name, "not a JSON object"))
                        else:
                            parts.append(part)
                yield msg, parts, key

        yield from self._session(os.path.abspath(path), info, messages())

    # -- the mapping ------------------------------------------------------------

    def _session(self, path, info, messages):
        sid = info["id"]
        t = info.get("time") if type(info.get("time")) is dict else {}
        if self.start == 0 and self.after is None:
            parent = info.get("parentID")
            created = entries.iso_ms(_int(t.get("created")))
            where = info.get("location") if type(info.get("location")) is dict else {}
            cwd = info.get("directory") or where.get("directory") or ""
            yield common.header(common.session_uuid(NAME, sid), created, cwd if isinstance(cwd, str) else "", NAME,
                                path, sid, common.session_uuid(NAME, parent) if parent else None,
                                "subagent" if parent else None)
            yield from self._title(info.get("title"), created)
        count = self.start
        pending = next(messages, None)
        while pending is not None:
            msg, parts, key = pending
            pending = next(messages, None)
            if msg is not None and pending is None and not self._complete(msg, parts):
                break       # still being written: the next run reads it again
            if msg is not None:
                yield from self._message(msg, parts)
            self.after = list(key)
            count += 1
            self.end = count
        self.end = count
        # a title set after the session began: where this run stopped
        yield from self._title(info.get("title"), entries.iso_ms(_int(t.get("updated")) or _int(t.get("created"))))

    @staticmethod
    def _complete(msg, parts):
        if not parts:
            return False
        if msg.get("role") != "assistant":
            return True
        if msg.get("error") is not None:
            return True
        t = msg.get("time") if type(msg.get("time")) is dict else {}
        running = any(p.get("type") == "tool" and type(p.get("state")) is dict
                      and p["state"].get("status") in ("pending", "running") for p in parts)
        return type(t.get("completed")) is int and not running

    def _title(self, title, ts):
        """The session's title, when it is not opencode's default and not the one written already."""
        import re

        if not isinstance(title, str) or not title or re.match(_DEFAULT_TITLE, title) or title == self.title:
            return
        self.title = title
        key = f"title:{len(self.ids)}"
        e = {"type": "sessionInfo", "id": self.ids.get(key), "parentId": self.last, "timestamp": ts, "name": title}
        self.last = e["id"]
        yield e

    def _skip(self, kind, n=1):
        self.skipped[kind] = self.skipped.get(kind, 0) + n

    def _emit(self, key, e):
        self.seen[key] = e["id"]
        self.last = e["id"]
        return e

    def _message(self, msg, parts):
        t = msg.get("time") if type(msg.get("time")) is dict else {}
        self._now = entries.iso_ms(_int(t.get("created")))
        role = msg.get("role")
        if role == "user":
            yield from self._user(msg, parts)
        elif role == "assistant":
            yield from self._assistant(msg, parts)
        else:
            self._skip(f"message:{role}" if isinstance(role, str) else "message")

    def _user(self, msg, parts):
        for part in parts:
            if part.get("type") == "compaction":
                self.tail = part.get("tail_start_id") if isinstance(part.get("tail_start_id"), str) else None
                self._skip("compaction request")
                return
        content = []
        for part in parts:
            pt = part.get("type")
            if pt == "text" and isinstance(part.get("text"), str) and not part.get("ignored"):
                content.append(entries.text(part["text"]))
            elif pt == "file" and (img := _image(part.get("mime"), part.get("url"))):
                content.append(img)
            else:
                self._skip(f"part:{pt}")
        if not content:
            self._skip("empty message")
            return
        provider, model = _model_of(msg)
        if provider and model:
            self.model = [provider, model]
        p, mo = self.model or (None, None)
        yield self._emit(msg["id"], common.message(self.ids.get(msg["id"]), self.last, self._now, "user", content,
                                                   provider=p, model=mo))

    def _assistant(self, msg, parts):
        import orjson

        provider, model = _model_of(msg)
        if provider and model:
            self.model = [provider, model]
        content, results, images = [], [], []
        for part in parts:
            pt = part.get("type")
            if pt == "text" and isinstance(part.get("text"), str):
                content.append(entries.text(part["text"]))
            elif pt == "reasoning":
                content.append(_thinking(part))
            elif pt == "tool":
                state = part.get("state") if type(part.get("state")) is dict else {}
                args = state.get("input")
                content.append({"type": "toolUse", "id": str(part.get("callID", "")), "name": str(part.get("tool", "")),
                                "input": orjson.dumps(args if args is not None else {}).decode()})
                block, imgs = _result(part)
                results.append(block)
                images += imgs
            else:
                self._skip(f"part:{pt}")
        u = usage(msg.get("tokens"))
        if msg.get("summary") is True:
            yield self._compaction(msg, content, provider, model, u)
            return
        if not content and not (u and any(u.values())):
            self._skip("empty message")
            return
        e = common.message(self.ids.get(msg["id"]), self.last, self._now, "assistant", content,
                           provider=provider, model=model, stop=self._stop(msg), usage=u)
        if u is not None:
            e["_billing"] = self._billing(msg, provider, model)
        yield self._emit(msg["id"], e)
        if results:
            key = msg["id"] + ":results"
            yield self._emit(key, common.message(self.ids.get(key), self.last, self._now, "user",
                                                 results + images, provider=provider, model=model))

    def _compaction(self, msg, content, provider, model, u):
        summary = "\n\n".join(b["text"] for b in content if b["type"] == "text")
        e = {"type": "compaction", "id": self.ids.get(msg["id"]), "parentId": self.last, "timestamp": self._now,
             "summary": summary, "firstKeptId": self.seen.get(self.tail) if self.tail else None}
        self.tail = None
        if provider and model:
            e["provider"], e["model"] = provider, model
        if u is not None:
            e["usage"] = u
            e["_billing"] = self._billing(msg, provider, model)
        else:
            e[entries.UNRECORDED] = True
        return self._emit(msg["id"], e)

    @staticmethod
    def _stop(msg):
        err = msg.get("error")
        if type(err) is dict:
            name = err.get("name")
            return "aborted" if name == "MessageAbortedError" else "contextFull" if name == "ContextOverflowError" else "error"
        return _FINISH.get(msg.get("finish"), "stop")

    @staticmethod
    def _billing(msg, provider, model):
        """What a response is known by across copies: a fork copies a message
        whole (times and tokens) under a new id."""
        t = msg.get("time") if type(msg.get("time")) is dict else {}
        if t.get("created") is None:
            return ["opencode", msg.get("sessionID"), msg["id"]]
        tok = msg.get("tokens") if type(msg.get("tokens")) is dict else {}
        cache = tok.get("cache") if type(tok.get("cache")) is dict else {}
        return ["opencode", t.get("created"), t.get("completed"), provider, model, tok.get("input"),
                tok.get("output"), tok.get("reasoning"), cache.get("read"), cache.get("write")]
