"""A session held in memory: the path through its entry tree, the messages
on that path, the active model and the tool uses still waiting for results."""
from pantolib import stream
from pantolib.errors import PantoError, SessionError


def chain(parent_of, entry_id):
    """Ids from the root to entry_id, following parent_of (id -> parentId).
    A parent that is not there (or a loop) ends the chain at that entry."""
    out, seen, cur = [], set(), entry_id
    while cur is not None and cur in parent_of and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = parent_of[cur]
    out.reverse()
    return out


def walk(parent_of):
    """(id, depth) of every entry in tree order: depth first, children in
    the order given (file order). Depth counts forks, not ancestors: the
    first child keeps its parent's depth, each later child is one deeper.
    An entry whose parent is missing (or in a loop) starts a tree of its own."""
    children, roots = {}, []
    for eid, parent in parent_of.items():
        if parent in parent_of and parent != eid:
            children.setdefault(parent, []).append(eid)
        else:
            roots.append(eid)
    seen = set()
    for start in roots + list(parent_of):
        stack = [(start, 0)]
        while stack:
            eid, depth = stack.pop()
            if eid in seen:
                continue
            seen.add(eid)
            yield eid, depth
            kids = children.get(eid, ())
            for i in range(len(kids) - 1, -1, -1):
                stack.append((kids[i], depth + (1 if i else 0)))


def parents(lines):
    """(header, id -> parentId, leaf) of a stream's Lines."""
    header, parent_of, leaf = None, {}, None
    for line in lines:
        if line.kind == stream.HEADER:
            header = line.obj
        elif line.kind == stream.ENTRY:
            parent_of[line.obj["id"]] = line.obj.get("parentId")
            leaf = line.obj["id"]
    return header, parent_of, leaf


def tree(entries):
    """The entries of a stream as a tree, from (id, parentId, where) of each
    in file order (an id seen again keeps its first line): (id, where,
    depth, on the active path) in tree order (`walk`). The active path is
    the one to the last entry. Only the tree is held, not the entries."""
    parent_of, where, leaf = {}, {}, None
    for eid, parent, at in entries:
        if eid in where:
            continue
        parent_of[eid], where[eid] = parent, at
        leaf = eid
    active = set(chain(parent_of, leaf)) if leaf else set()
    for eid, depth in walk(parent_of):
        yield eid, where[eid], depth, eid in active


def find_entry(ids, prefix, name="the session"):
    """The id among ids that is prefix or the only one starting with it;
    an unknown or ambiguous prefix is an error naming the candidates."""
    if prefix in ids:
        return prefix
    found = sorted(i for i in ids if isinstance(i, str) and i.startswith(prefix)) if prefix else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise PantoError(f"no entry '{prefix}' in {name} (see panto-log tree)")
    more = "" if len(found) <= 10 else f" and {len(found) - 10} more"
    raise PantoError(f"entry id '{prefix}' is ambiguous in {name}: {', '.join(found[:10])}{more}")


class Session:
    """The lines of one stream, indexed. Unknown entry types are kept as they are."""

    def __init__(self):
        self.header = None   # dict, or None for a headerless stream
        self.lines = []      # every Line, in stream order (header included)
        self.by_id = {}      # entry id -> entry dict
        self.leaf = None     # id of the last entry
        # A partial stream (stream.is_partial: replay --context) holds only
        # entries of one path, in path order: an entry whose parent it left
        # out continues the path at the entry before it in the stream.
        self.omitted = None  # the ids its header says were left out
        self.bridge = {}     # entry id -> the entry before it, for those
        # The stream's first bytes (a prefix.FileBytes), when they were the
        # session file's own lines and only those the request needs were
        # taken in.
        self.unread = None

    @classmethod
    def read(cls, f, name="<stdin>", skip_bare=False):
        """The Session of a stream. A bare entry is an error (it must be
        completed first), or is left out with skip_bare."""
        s = cls()
        for line in stream.read(f, name):
            if line.kind == stream.BARE:
                if skip_bare:
                    continue
                raise SessionError("bare entry in the stream (complete it first with panto-log append)",
                                   name, line.lineno)
            s.add(line)
        return s

    def add(self, line):
        self.lines.append(line)
        if line.kind == stream.HEADER:
            self.header = line.obj
            self.omitted = set(stream.omitted_ids(line.obj)) if stream.is_partial(line.obj) else None
        else:
            if self.omitted is not None:
                parent = line.obj.get("parentId")
                if parent is not None and parent not in self.by_id and parent in self.omitted:
                    self.bridge[line.obj["id"]] = self.leaf
            self.by_id[line.obj["id"]] = line.obj
            self.leaf = line.obj["id"]

    @property
    def ids(self):
        """Every id the session has, those a partial stream left out included."""
        return self.by_id.keys() if self.omitted is None else self.by_id.keys() | self.omitted

    def path(self):
        """Entries from the root to the leaf, following parentId."""
        return self.path_to(self.leaf)

    def path_to(self, entry_id):
        """Entries from the root to entry_id (a branch point, say), following parentId."""
        parents = _Parents(self.by_id, self.bridge)
        return [self.by_id[i] for i in chain(parents, entry_id)]

    def message_entries(self):
        return [e for e in self.path() if e.get("type") == "message"]

    def context(self):
        """What the next request is built from: (the system message entries on
        the path, the last compaction entry on it or None, the other message
        entries that count: after a compaction, those from its firstKeptId
        on, SPEC 3; without one, all of them)."""
        return _context(self.path())

    def messages(self):
        """The conversation: {role, content} per message entry on the path, or,
        after a compaction, the system messages, the summary as one user
        message and the messages kept (SPEC 3); assistant messages also carry
        the provider and model that wrote them."""
        from pantolib import compaction

        path = self.path()
        notes = no_reply_notes(path)
        systems, summary, kept = _context(path)
        if summary is None:
            return [_message(e, notes) for e in path if e.get("type") == "message"]
        return [_message(e) for e in systems] + [compaction.summary_message(summary)] \
            + [_message(e, notes) for e in kept]

    def active_model(self):
        """(provider, model, api) of the last stamped user entry on the path, or
        None. `api` is the wire API that entry names; when it names none (a
        tool result stamped by an older panto-tool, say), the api of the
        latest entry on the path of the same provider and model that records
        one (its reply, or an earlier prompt); None when no entry does (files
        written before the stamp had it: the default API then applies)."""
        entries = self.message_entries()
        for i in range(len(entries) - 1, -1, -1):
            e = entries[i]
            if e["message"]["role"] == "user" and e.get("provider") and e.get("model"):
                provider, model = e["provider"], e["model"]
                return provider, model, _api_of(entries, i, provider, model)
        return None

    def leaf_message(self):
        entries = self.message_entries()
        return entries[-1] if entries else None

    def unanswered_tool_uses(self):
        """Tool uses of the leaf assistant message that have no result after them."""
        leaf = self.leaf_message()
        if leaf is None or leaf["message"]["role"] != "assistant":
            return []
        return [b for b in leaf["message"]["content"] if b.get("type") == "toolUse"]


class _Parents:
    """id -> parentId over a by_id map, without building a second dict
    (bridge: where a partial stream's path goes on past a left-out parent)."""

    __slots__ = ("by_id", "bridge")

    def __init__(self, by_id, bridge):
        self.by_id, self.bridge = by_id, bridge

    def __contains__(self, entry_id):
        return entry_id in self.by_id

    def __getitem__(self, entry_id):
        if entry_id in self.bridge:
            return self.bridge[entry_id]
        return self.by_id[entry_id].get("parentId")


def _api_of(entries, at, provider, model):
    """The wire API recorded by entries[at] or, failing that, by the latest
    message entry on the path of that provider and model that records one."""
    api = entries[at].get("api")
    if isinstance(api, str) and api:
        return api
    for e in reversed(entries):
        m = e["message"]
        if m["role"] == "assistant":
            who, api = (m.get("provider"), m.get("model")), m.get("api")
        else:
            who, api = (e.get("provider"), e.get("model")), e.get("api")
        if who == (provider, model) and isinstance(api, str) and api:
            return api
    return None


NO_REPLY = "noReply"     # an entry saying why the prompt before it got no reply (SPEC 3, extension)
NO_REPLY_NOTES = {"cancelled": "[no reply: cancelled by the user]", "failed": "[no reply: the request failed]"}


def no_reply_notes(path):
    """id -> note, for each prompt on the path that got no reply and was
    followed by another prompt: the model is told, so that it does not act
    on a prompt the person abandoned as if it were new. The reason is the
    last noReply entry after that prompt (`[no reply]` when none says)."""
    notes, prompt, reason = {}, None, None
    for e in path:
        kind = e.get("type")
        if kind == NO_REPLY and prompt is not None:
            reason = e.get("reason")
        if kind != "message":
            continue
        m = e["message"]
        if m["role"] == "user" and any(type(b) is dict and b.get("type") == "text" for b in m["content"]):
            if prompt is not None:
                notes[prompt] = NO_REPLY_NOTES.get(reason, "[no reply]")
            prompt, reason = e["id"], None
        else:
            prompt = None
    return notes


def _message(entry, notes=None):
    m = entry["message"]
    note = notes.get(entry["id"]) if notes else None
    msg = {"role": m["role"], "content": m["content"] + [{"type": "text", "text": note}] if note else m["content"]}
    if m["role"] == "assistant":
        msg["provider"], msg["model"] = m.get("provider"), m.get("model")
    return msg


def _context(path):
    from pantolib import compaction

    at = None
    for i, e in enumerate(path):
        if compaction.honoured(e):
            at = i
    start = 0 if at is None else compaction.kept_from(path, at)
    systems, kept = [], []
    for i, e in enumerate(path):
        if e.get("type") != "message":
            continue
        if e["message"]["role"] == "system":
            systems.append(e)
        elif i >= start:
            kept.append(e)
    return systems, (None if at is None else path[at]), kept
