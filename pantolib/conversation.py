"""A session held in memory: the path through its entry tree, the messages
on that path, the active model and the tool uses still waiting for results."""
from pantolib import stream
from pantolib.errors import SessionError


class Session:
    """The lines of one stream, indexed. Unknown entry types are kept as they are."""

    def __init__(self):
        self.header = None   # dict, or None for a headerless stream
        self.lines = []      # every Line, in stream order (header included)
        self.by_id = {}      # entry id -> entry dict
        self.leaf = None     # id of the last entry

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
        else:
            self.by_id[line.obj["id"]] = line.obj
            self.leaf = line.obj["id"]

    @property
    def ids(self):
        return self.by_id.keys()

    def path(self):
        """Entries from the root to the leaf, following parentId."""
        out, seen, cur = [], set(), self.leaf
        while cur is not None and cur in self.by_id and cur not in seen:
            seen.add(cur)
            entry = self.by_id[cur]
            out.append(entry)
            cur = entry.get("parentId")
        out.reverse()
        return out

    def message_entries(self):
        return [e for e in self.path() if e.get("type") == "message"]

    def messages(self):
        """The conversation: {role, content} per message entry on the path;
        assistant messages also carry the provider and model that wrote them."""
        out = []
        for e in self.message_entries():
            m = e["message"]
            msg = {"role": m["role"], "content": m["content"]}
            if m["role"] == "assistant":
                msg["provider"], msg["model"] = m.get("provider"), m.get("model")
            out.append(msg)
        return out

    def active_model(self):
        """(provider, model) of the last stamped user entry on the path, or None."""
        for e in reversed(self.message_entries()):
            if e["message"]["role"] == "user" and e.get("provider") and e.get("model"):
                return e["provider"], e["model"]
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
