"""Other agents' sessions (SPEC §12): one module per agent, each with the
same small interface (NAME, sources(env), sniff(head), Reader), and the
helpers they share: session ids, deterministic entry ids, and the header
and message entries in panto's form."""
import hashlib
import uuid

AGENTS = ("claude-code", "codex", "pi", "opencode")

_UUID_HEX = frozenset("0123456789abcdef")


def module(name):
    """The importer module of the agent NAME."""
    if name == "claude-code":
        from pantolib.agents import claude_code as m
    elif name == "codex":
        from pantolib.agents import codex as m
    elif name == "pi":
        from pantolib.agents import pi as m
    elif name == "opencode":
        from pantolib.agents import opencode as m
    else:
        raise ValueError(f"unknown agent {name!r}")
    return m


def _canonical_uuid(text):
    t = text.lower()
    if len(t) != 36 or [i for i, c in enumerate(t) if c == "-"] != [8, 13, 18, 23]:
        return None
    return t if set(t.replace("-", "")) <= _UUID_HEX else None


def session_uuid(agent: str, source_id: str) -> str:
    """The source's own id when it is a canonical UUID (lowercased), else
    uuid5(NAMESPACE_URL, "AGENT:SOURCE-ID") (SPEC §12)."""
    own = _canonical_uuid(source_id)
    return own if own else str(uuid.uuid5(uuid.NAMESPACE_URL, f"{agent}:{source_id}"))


class Ids:
    """Deterministic 8-hex entry ids: a key's id is a hash of the key, a
    collision rehashed with "#1", "#2"... so the same sequence of keys gives
    the same ids every run. `taken` (a list) goes into a reader's state."""

    def __init__(self, taken=()):
        self.taken = list(taken)
        self._set = set(self.taken)
        self._memo = {}

    def get(self, key: str) -> str:
        if key in self._memo:
            return self._memo[key]
        n, probe = 0, key
        while True:
            i = hashlib.sha256(probe.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            if i not in self._set:
                break
            n += 1
            probe = f"{key}#{n}"
        self._set.add(i)
        self.taken.append(i)
        self._memo[key] = i
        return i


def header(sid, timestamp, cwd, agent, path, source_id, parent=None, relation=None):
    h = {"type": "session", "version": 1, "id": sid, "timestamp": timestamp, "cwd": cwd,
         "source": {"agent": agent, "path": path, "id": source_id}}
    if parent is not None:
        h["parentSession"] = parent
    if relation is not None:
        h["relation"] = relation
    return h


def message(eid, parent, timestamp, role, content, *, provider=None, model=None, api=None,
            stop=None, usage=None, billed_in=None):
    """A message entry in SPEC §3's key order: a user entry stamped at the
    top with provider/model/api when known, an assistant entry naming them
    inside `message` with stopReason and usage."""
    e = {"type": "message", "id": eid, "parentId": parent, "timestamp": timestamp}
    if role != "assistant":
        for key, value in (("provider", provider), ("model", model), ("api", api)):
            if value is not None:
                e[key] = value
        e["message"] = {"role": role, "content": content}
        return e
    m = {"role": role, "content": content}
    for key, value in (("provider", provider), ("model", model), ("api", api), ("stopReason", stop)):
        if value is not None:
            m[key] = value
    if usage is not None:
        m["usage"] = _usage(usage)
    if billed_in is not None:
        m["billedIn"] = billed_in
    e["message"] = m
    return e


def _usage(u):
    out = {"input": u.get("input", 0), "output": u.get("output", 0)}
    for key in ("cacheRead", "cacheWrite", "cacheWrite1h", "reasoning"):
        if u.get(key):
            out[key] = u[key]
    return out


_STOPS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "stop": "stop",
          "tool_use": "toolUse", "tool_calls": "toolUse", "max_tokens": "length", "length": "length",
          "refusal": "error", "content_filter": "error",
          "model_context_window_exceeded": "contextFull"}


def stop_reason(agent_wire_value) -> str:
    """A wire stop reason in panto's words (SPEC §5); anything else: stop."""
    return _STOPS.get(agent_wire_value, "stop")
