"""Codex's rollouts (SPEC §12): `${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-*.jsonl`
and `archived_sessions/` (an active copy wins over an archived one).

A rollout is JSON Lines of `{"timestamp","type","payload"}`: `session_meta`
(id, cwd, model_provider, instructions; a fork's `forked_from_id`, a
sub-agent's `source.subagent.thread_spawn.parent_thread_id`), `turn_context`
(the model of the turns after it), `response_item` (the Responses API's
items: `message` of role user/developer/assistant, `reasoning`,
`function_call`/`custom_tool_call`/`local_shell_call` and their outputs),
`event_msg` (`token_count` with cumulative totals, `thread_name_updated`, and
copies of the items for the UI, left out) and `compacted` (a summary).

The model's items since the previous counted `token_count` become one
assistant entry with that event's usage; tool outputs and prompts that came
meanwhile follow it. A turn is complete when its `token_count` has come:
until then it waits for the next run. `start`/`end` are byte offsets.
"""
import os

from pantolib import entries
from pantolib.agents import common

NAME = "codex"
API = "openai_responses"
FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens",
          "cache_write_input_tokens")


def home(env):
    return env.get("CODEX_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".codex")


def find(env):
    """Every rollout, an active one before an archived copy of it (same name)."""
    base = home(env)
    found, names = [], set()
    for sub in ("sessions", "archived_sessions"):
        root = os.path.join(base, sub)
        if not os.path.isdir(root):
            continue
        for d, dirs, files in os.walk(root, onerror=_raise):
            dirs.sort()
            for n in sorted(files):
                if n.startswith("rollout-") and n.endswith(".jsonl") and n not in names:
                    names.add(n)
                    found.append(os.path.join(d, n))
    return found


def _raise(e):
    raise e


def sources(env):
    return find(env)


def sniff(head):
    for raw in head.split(b"\n")[:5]:
        obj = common.parse(raw)
        if isinstance(obj, dict) and obj.get("type") in ("session_meta", "response_item", "event_msg",
                                                          "turn_context", "compacted") and "payload" in obj:
            return True
    return False


def _counts(u):
    if type(u) is not dict:
        return None
    return [v if type(v := u.get(k)) is int and v > 0 else 0 for k in FIELDS]


def _usage(c):
    inp, cached, out, reasoning, write = c
    cached = min(cached, inp)
    write = min(write, inp - cached)
    return common.usage(inp - cached - write, out, cached, write, reasoning)


def _text(content):
    parts = []
    for c in content if isinstance(content, list) else ():
        if type(c) is dict and isinstance(c.get("text"), str):
            parts.append(c["text"])
    return parts


def _blocks(content):
    out = []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    for c in content if isinstance(content, list) else ():
        if type(c) is not dict:
            continue
        if isinstance(c.get("text"), str):
            out.append({"type": "text", "text": c["text"]})
        elif c.get("type") == "input_image" and isinstance(c.get("image_url"), str):
            url = c["image_url"]
            if url.startswith("data:") and ";base64," in url:
                media, data = url[5:].split(";base64,", 1)
                out.append(common.image(media, data))
            else:
                out.append({"type": "text", "text": f"[image: {url}]"})
    return out


def _output_text(output):
    """A tool output as text, and whether it says it failed."""
    if isinstance(output, str):
        return output, False
    if type(output) is dict:
        failed = output.get("success") is False
        inner = output.get("content")
        if inner is None:
            inner = output.get("output")
        return common.text_of(inner), failed
    return common.text_of(output), False


class Reader:
    """One rollout as panto lines (see the module's docstring)."""

    def __init__(self, source, start=0, state=None):
        self.source, self.start = source, start
        s = state or {}
        self.ids = common.Ids(s.get("taken", ()))
        self.s = {"last": None, "model": None, "provider": "openai", "totals": None, "line": 0, "ts": None,
                  "sid": None, "title": None, "meta": None, "replay": None, "headed": False,
                  "parent_path": None, "matched": 0}
        self.s.update({k: v for k, v in s.items() if k != "taken"})
        self.end = start
        self.skipped, self.bad = {}, []
        self._parents = None      # the parent's records still to compare with (a fork's replay)

    @property
    def state(self):
        return dict(self.s, taken=self.ids.taken)

    def _skip(self, kind):
        self.skipped[kind] = self.skipped.get(kind, 0) + 1

    def _ts(self, rec):
        return common.iso(rec.get("timestamp")) or self.s["ts"] or "1970-01-01T00:00:00.000Z"

    def _entry(self, key, rec, role, content, **kw):
        s = self.s
        eid = self.ids.get(key)
        ts = self._ts(rec)
        if role == "user" and s["model"]:
            kw.update(provider=s["provider"], model=s["model"], api=API)
        e = common.message(eid, s["last"], ts, role, content, **kw)
        s["last"], s["ts"] = eid, ts
        return e

    def __iter__(self):
        s = self.s
        turn = None          # the model's items of a turn whose token_count has not come: blocks, after, snapshot
        with open(self.source, "rb") as f:
            for n, start, end, raw in common.records(f, self.start):
                line = s["line"] + 1
                if not raw.strip():
                    s["line"] = line
                    if turn is None:
                        self.end = end
                    continue
                rec = common.parse(raw)
                if not isinstance(rec, dict):
                    self.bad.append((n, rec))
                    s["line"] = line
                    if turn is None:
                        self.end = end
                    continue
                t, p = rec.get("type"), rec.get("payload")
                if type(p) is not dict:
                    p = {}
                if not s["headed"]:
                    if t != "session_meta":
                        self._skip(f"{t} before session_meta")
                        s["line"] = line
                        self.end = end
                        continue
                    yield self._header(rec, p)
                    s["line"] = line
                    self.end = end
                    continue
                if self._replayed(rec, t):
                    self._skip("replay of the parent session")
                    info = p.get("info") if p.get("type") == "token_count" else None
                    if type(info) is dict and _counts(info.get("total_token_usage")) is not None:
                        s["totals"] = _counts(info.get("total_token_usage"))   # the child's go on from them
                    s["line"] = line
                    if turn is None:
                        self.end = end
                    continue
                if turn is None and t in ("response_item", "event_msg") and self._opens_turn(t, p):
                    turn = {"blocks": [], "after": [], "snapshot": dict(s), "start": start, "key": f"L{line}",
                            "ts": rec.get("timestamp")}
                s["line"] = line
                out = self._record(t, p, rec, line, turn)
                if out == "counted":
                    yield from self._close(turn, rec, p)
                    turn = None
                elif out is not None:
                    yield from out
                if turn is None:
                    self.end = end
            if turn is not None:      # the turn's token_count has not come: read it again next time
                self.s = turn["snapshot"]

    def _opens_turn(self, t, p):
        if t == "response_item":
            return p.get("type") in ("reasoning", "function_call", "custom_tool_call", "local_shell_call") or \
                (p.get("type") == "message" and p.get("role") == "assistant")
        return p.get("type") == "token_count" and self._usage_of(p) is not None

    def _header(self, rec, p):
        s = self.s
        sid_src = str(p.get("id") or os.path.basename(self.source))
        s["sid"] = common.session_uuid(NAME, sid_src)
        s["headed"] = True
        s["meta"] = common.iso(p.get("timestamp")) or common.iso(rec.get("timestamp"))
        if isinstance(p.get("model_provider"), str) and p["model_provider"]:
            s["provider"] = p["model_provider"]
        parent = relation = None
        spawn = p.get("source")
        spawn = spawn.get("subagent") if type(spawn) is dict else None
        spawn = spawn.get("thread_spawn") if type(spawn) is dict else None
        if type(spawn) is dict and isinstance(spawn.get("parent_thread_id"), str):
            parent, relation = common.session_uuid(NAME, spawn["parent_thread_id"]), "subagent"
        elif isinstance(p.get("forked_from_id"), str):
            parent, relation = common.session_uuid(NAME, p["forked_from_id"]), "fork"
        if parent is not None:
            s["replay"] = True
            s["parent_path"] = self._parent_rollout(str(spawn["parent_thread_id"]) if relation == "subagent"
                                                    else str(p["forked_from_id"]))
            s["matched"] = 0
        s["ts"] = s["meta"]
        return common.header(s["sid"], s["meta"] or "1970-01-01T00:00:00.000Z",
                             p.get("cwd") if isinstance(p.get("cwd"), str) else "/", NAME, self.source, sid_src,
                             parent, relation)

    def _parent_rollout(self, parent_id):
        """The parent's rollout, when it is at hand: beside this one, else
        anywhere under the same sessions and archived_sessions folders."""
        suffix = f"-{parent_id}.jsonl"
        here = os.path.dirname(os.path.abspath(self.source))
        try:
            for n in sorted(os.listdir(here)):
                if n.endswith(suffix):
                    return os.path.join(here, n)
        except OSError:
            pass
        d = here
        while d != os.path.dirname(d) and os.path.basename(d) not in ("sessions", "archived_sessions"):
            d = os.path.dirname(d)
        base = os.path.dirname(d)
        for sub in ("sessions", "archived_sessions"):
            for root, dirs, files in os.walk(os.path.join(base, sub)):
                dirs.sort()
                for n in sorted(files):
                    if n.endswith(suffix):
                        return os.path.join(root, n)
        return None

    def _parent_records(self):
        """The parent's records after its session_meta, from the first not yet
        matched. A parent found but not readable is not at hand: its path is
        forgotten (the replay is then told by time, _replayed)."""
        s = self.s
        try:
            f = open(s["parent_path"], "rb")
        except OSError:
            s["parent_path"] = None
            return
        with f:
            n = 0
            for _, _, _, raw in common.records(f):
                rec = common.parse(raw)
                if not isinstance(rec, dict) or rec.get("type") == "session_meta":
                    continue
                n += 1
                if n > s["matched"]:
                    yield rec

    def _replayed(self, rec, t):
        """A fork's or sub-agent's copy of its parent's history: the prefix of
        records equal to the parent rollout's (type and payload), when the
        parent is at hand; else the records written before its own
        session_meta's time."""
        s = self.s
        if not s["replay"] or t == "session_meta":
            return False
        if s.get("parent_path"):
            if self._parents is None:
                self._parents = self._parent_records()
            theirs = next(self._parents, None)
            if s.get("parent_path"):
                if theirs is not None and theirs.get("type") == t and theirs.get("payload") == rec.get("payload"):
                    s["matched"] += 1
                    return True
                s["replay"] = False
                return False
        ts = common.iso(rec.get("timestamp"))
        if ts is not None and s["meta"] is not None and ts < s["meta"]:
            return True
        if t in ("response_item", "event_msg", "compacted"):
            s["replay"] = False
        return False

    def _usage_of(self, p):
        """The usage a token_count event counts (SPEC §12), or None; updates the totals."""
        info = p.get("info")
        if type(info) is not dict:
            return None
        total, last = _counts(info.get("total_token_usage")), _counts(info.get("last_token_usage"))
        prev = self.s["totals"]
        if total is None:
            return last
        if prev is not None and total == prev:
            return None                     # a re-emit
        return last if last is not None else [max(0, a - b) for a, b in zip(total, prev or [0] * 5)]

    def _record(self, t, p, rec, line, turn):
        s = self.s
        if t == "turn_context":
            if isinstance(p.get("model"), str) and p["model"]:
                s["model"] = p["model"]
            self._skip("turn_context")
            return None
        if t == "session_meta":
            self._skip("session_meta")
            return None
        if t == "compacted":
            summary = p.get("message") if isinstance(p.get("message"), str) else ""
            e = {"type": "compaction", "id": None, "parentId": None, "timestamp": None, "summary": summary,
                 "firstKeptId": None, "provider": s["provider"], entries.UNRECORDED: True}
            if s["model"]:
                e["model"] = s["model"]
            return self._user_side(turn, ("compaction", f"L{line}", rec, e))
        if t == "event_msg":
            kind = p.get("type")
            if kind == "token_count":
                u = self._usage_of(p)
                info = p.get("info")
                total = _counts(info.get("total_token_usage")) if type(info) is dict else None
                if total is not None:
                    s["totals"] = total
                if u is None:
                    self._skip("token_count repeated or empty")
                    return None
                turn["usage"] = u
                m = info.get("model") if type(info) is dict else None
                turn["model"] = m if isinstance(m, str) and m else s["model"]
                return "counted"
            if kind == "thread_name_updated":
                name = p.get("thread_name") or p.get("name")
                if isinstance(name, str) and name.strip() and name != s["title"]:
                    return self._user_side(turn, ("title", f"L{line}", rec, name))
                self._skip("title")
                return None
            self._skip(f"event {kind}")
            return None
        if t != "response_item":
            self._skip(str(t))
            return None
        kind = p.get("type")
        if kind == "message":
            role = p.get("role")
            if role == "assistant":
                turn["blocks"].extend({"type": "text", "text": x} for x in _text(p.get("content")))
                return None
            if role in ("user", "developer", "system"):
                content = _blocks(p.get("content"))
                return self._user_side(turn, ("message", f"L{line}", rec, ("user" if role == "user" else "system",
                                                                             content)))
            self._skip(f"message {role}")
            return None
        if kind == "reasoning":
            text = "\n\n".join(x for x in _text(p.get("summary")) + _text(p.get("content")))
            block = {"type": "thinking", "thinking": text}
            if isinstance(p.get("encrypted_content"), str):
                block["signature"] = p["encrypted_content"]
            if isinstance(p.get("id"), str):
                block["itemId"] = p["id"]
            turn["blocks"].append(block)
            return None
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            if kind == "function_call":
                args = p.get("arguments")
            elif kind == "custom_tool_call":
                args = p.get("input")
            else:
                import orjson

                args = orjson.dumps(p.get("action")).decode()
            name = p.get("name") if isinstance(p.get("name"), str) else "local_shell" \
                if kind == "local_shell_call" else ""
            turn["blocks"].append({"type": "toolUse", "id": str(p.get("call_id") or p.get("id") or ""),
                                   "name": name, "input": args if isinstance(args, str) else ""})
            return None
        if kind in ("function_call_output", "custom_tool_call_output"):
            text, failed = _output_text(p.get("output"))
            block = {"type": "toolResult", "toolUseId": str(p.get("call_id", "")), "content": text}
            if failed:
                block["isError"] = True
            return self._user_side(turn, ("message", f"L{line}", rec, ("user", [block])))
        self._skip(f"item {kind}")
        return None

    def _user_side(self, turn, item):
        """An entry that is not the model's: now, or after the open turn's reply."""
        if turn is not None:
            turn["after"].append(item)
            return None
        return self._emit(item)

    def _emit(self, item):
        s = self.s
        what, key, rec, value = item
        if what == "message":
            role, content = value
            yield self._entry(key, rec, role, content)
        elif what == "title":
            eid = self.ids.get(key)
            s["title"] = value
            yield {"type": "sessionInfo", "id": eid, "parentId": s["last"], "timestamp": self._ts(rec),
                   "name": value}
            s["last"] = eid
        else:
            e = value
            e["id"], e["parentId"], e["timestamp"] = self.ids.get(key), s["last"], self._ts(rec)
            s["last"], s["ts"] = e["id"], e["timestamp"]
            yield e

    def _close(self, turn, rec, p):
        s = self.s
        model = turn.get("model")
        stop = "toolUse" if any(b["type"] == "toolUse" for b in turn["blocks"]) else "stop"
        yield self._entry(turn["key"], rec, "assistant", turn["blocks"], provider=s["provider"], model=model,
                          api=API, stop=stop, usage=_usage(turn["usage"]))
        for item in turn["after"]:
            yield from self._emit(item)
