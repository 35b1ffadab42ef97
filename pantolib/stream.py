"""The panto stream: JSON Lines framed on b"\\n" only, validated, echoed byte for byte.

A line is a header (`"type":"session"`), an entry (an object with a string
`id`) or a bare entry (no `id`: completed by the command that owns it).
Lines are kept as the bytes that arrived, so a filter can echo them exactly.

This module is the one definition of the format's rules, which every reader
applies: `loads` (a complete JSON object or None), `torn` / `why_torn` (what a
crash can leave, and why a line looks so: session.scan's recovery asks it
of every line but the common one), `classify` (the kind of a line, or a
ValueError saying what is wrong with it),
`is_header`, `header_of` (a first line read cheaply), `is_assistant`,
`is_compaction`, `is_branch_summary`, `is_partial` / `omitted_ids` (a stream that is not the
complete session says so in its header), and for the fast byte scanners
`ASSISTANT_MARK` / `may_be_assistant`, `COMPACTION_MARK` and
`BRANCH_SUMMARY_MARK`.

Nesting: panto reads a line nested up to READ_DEPTH levels (orjson's reader
stops there) and writes one nested up to WRITE_DEPTH (orjson's writer stops
there). A complete object nested deeper than READ_DEPTH is no crash
artifact: it breaks the schema (`DEEP`), reported FILE:LINE wherever it is,
never cut as a torn tail (`too_deep`). A valid line deeper than WRITE_DEPTH
is kept byte for byte like any other; only a bare entry, which is written
anew when it is completed, must be writable (`parse_line` says so at its
line). Nothing here recurses, so no depth reaches Python's recursion limit.
"""
import re

import orjson

from pantolib.errors import SessionError

HEADER, ENTRY, BARE = "header", "entry", "bare"
ROLES = ("system", "user", "assistant")
VERSION = 1

# Known content blocks: the fields each must carry as strings. Unknown block
# types are kept (a later format may add some) and skipped by providers.
_BLOCK_FIELDS = {
    "text": ("text",),
    "thinking": ("thinking",),
    "redactedThinking": ("data",),
    "toolUse": ("id", "name", "input"),
    "toolResult": ("toolUseId", "content"),
}
_OPTIONAL_STR = {"thinking": ("signature",)}


class Line:
    """One line of a stream: its bytes (ending in b"\\n"), parsed object, kind."""

    __slots__ = ("raw", "obj", "kind", "lineno")

    def __init__(self, raw, obj, kind, lineno=0):
        self.raw, self.obj, self.kind, self.lineno = raw, obj, kind, lineno


READ_DEPTH = 1024      # the deepest nesting orjson reads
WRITE_DEPTH = 254      # ... and writes
DEEP = f"nested more than {READ_DEPTH} levels deep (panto reads JSON nested at most {READ_DEPTH} levels)"
UNWRITABLE = (f"a bare entry nested more than {WRITE_DEPTH} levels deep cannot be completed "
              f"(panto writes JSON nested at most {WRITE_DEPTH} levels)")


def dumps(obj):
    """Compact JSON plus the line feed: how panto writes every line."""
    try:
        return orjson.dumps(obj) + b"\n"
    except orjson.JSONEncodeError as e:   # nesting past orjson's writing depth
        raise SessionError(f"an entry that cannot be written ({e})") from None


# -- the predicates every reader shares -----------------------------------------------

# Every assistant entry holds these bytes: its role value (JSON escapes
# quotes inside strings, so only a key or value can end in `"`). A scanner
# may skip a line without them; one that has them must still be parsed.
ASSISTANT_MARK = b'"assistant"'
# Likewise the type value of every compaction entry, and of every branchSummary.
COMPACTION_MARK = b'"compaction"'
BRANCH_SUMMARY_MARK = b'"branchSummary"'


def write_joined(out, pieces, size=1 << 16):
    """Write byte strings to the binary stream `out`, joined into writes of
    about `size` bytes (one write per line would cost a system call each)."""
    buf, have = [], 0
    for data in pieces:
        buf.append(data)
        have += len(data)
        if have >= size:
            out.write(b"".join(buf))
            buf, have = [], 0
    out.write(b"".join(buf))


def may_be_assistant(raw):
    """False only for a line that cannot be an assistant entry (bytes level)."""
    return ASSISTANT_MARK in raw


def loads(raw):
    """The JSON object a line holds, or None (not JSON, or not an object)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict else None


def torn(raw):
    """Could this line be a write cut short by a crash? A line without its
    line feed, or one that is not a complete JSON object. (Only at the end of
    a file is it torn; with valid lines after it, it is a bad line.) A
    complete object nested too deeply to read is not torn (`too_deep`)."""
    return why_torn(raw) is not None


# What a reader that parsed a line itself passes `why_torn` when orjson refused it.
NOT_JSON = object()
_UNREAD = object()


def why_torn(raw, parsed=_UNREAD):
    """What makes a line look `torn`, or None when it does not. `parsed`:
    what orjson.loads gave for the line (NOT_JSON when it raised), for a
    reader that parsed it already."""
    if raw[-1:] != b"\n":
        return "the last line has no line feed"
    if parsed is _UNREAD:
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = NOT_JSON
    if parsed is NOT_JSON:
        return None if too_deep(raw) else "not valid JSON"
    return None if type(parsed) is dict else "not a JSON object"


# A JSON string: its quotes and everything between (escapes taken whole).
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"', re.S)


def _depth(structure):
    """Opening minus closing brackets of JSON text without its strings."""
    return structure.count("[") + structure.count("{") - structure.count("]") - structure.count("}")


def too_deep(raw):
    """A line that is a complete JSON object which orjson refused only for
    its nesting (deeper than READ_DEPTH): a schema problem (DEEP), not a
    torn write. Linear in the line, at C speed; a line orjson reads is never
    too deep. A cut-short line is not complete (its brackets do not close),
    so it stays torn."""
    raw = bytes(raw).strip()
    if raw[:1] != b"{" or raw[-1:] != b"}" or raw.count(b"[") + raw.count(b"{") <= READ_DEPTH:
        return False
    try:
        orjson.loads(raw)
        return False
    except orjson.JSONDecodeError as e:
        pos = e.pos                                    # in characters, not bytes
    text = raw.decode("utf-8", "surrogateescape")
    head = text[:pos].rstrip()
    # refused just after an opening bracket more than READ_DEPTH levels down, or for something else
    if head[-1:] not in ("[", "{") or _depth(_STRING.sub("", head)) <= READ_DEPTH:
        return False
    rest = _STRING.sub("", text)
    return '"' not in rest and _depth(rest) == 0


def is_header(obj):
    """A valid session header of a version this panto reads."""
    if type(obj) is not dict or obj.get("type") != "session":
        return False
    try:
        check_header(obj)
    except ValueError:
        return False
    return True


def header_of(first):
    """The header a file's first line holds (bytes), or None if it is not one."""
    obj = loads(first)
    return obj if obj is not None and is_header(obj) else None


# A stream that is not the complete session (`panto-log replay --context`)
# says so in its header: {"type":"session",...,"partial":{"omitted":[ID,...]}},
# the ids of the file's entries it leaves out. Such a header never reaches a
# file; every reader that sums or lists a session (panto-cost, panto-ls) must
# not take the stream for the whole session.
PARTIAL = "partial"


def is_partial(header):
    """Is this header (parsed) that of a stream that leaves entries out?"""
    return type(header) is dict and header.get(PARTIAL) is not None


def omitted_ids(header):
    """The ids a partial stream's header says were left out (none for a
    complete stream): new ids must not take them."""
    part = header.get(PARTIAL) if type(header) is dict else None
    ids = part.get("omitted") if type(part) is dict else None
    return [i for i in ids if type(i) is str] if type(ids) is list else []


def partial_header(header, omitted):
    """The header line of a stream that leaves the entries `omitted` out."""
    return dumps({**header, PARTIAL: {"omitted": list(omitted)}})


AGENTS = ("panto", "claude-code", "codex", "pi", "opencode")


def lineage(header):
    """(agent, parentSession, relation) of a parsed header (SPEC 12): the
    agent that wrote the session (`source.agent`; "panto" for panto's own),
    the session it was forked from or is a sub-agent of, and which of the
    two (`relation`: "subagent" or "fork"; None when the header names none).
    A value of the wrong type reads as absent."""
    if type(header) is not dict:
        return "panto", None, None
    source = header.get("source")
    agent = source.get("agent") if type(source) is dict else None
    parent, relation = header.get("parentSession"), header.get("relation")
    return (agent if type(agent) is str and agent else "panto",
            parent if type(parent) is str and parent else None,
            relation if type(relation) is str and relation else None)


def is_assistant(obj):
    """An assistant message entry (a parsed line)."""
    if type(obj) is not dict or obj.get("type") != "message":
        return False
    m = obj.get("message")
    return type(m) is dict and m.get("role") == "assistant"


def is_compaction(obj):
    """A compaction entry (a parsed line)."""
    return type(obj) is dict and obj.get("type") == "compaction"


def is_branch_summary(obj):
    """A branchSummary entry (a parsed line): a summary of an abandoned
    branch, priced like a compaction, never part of a conversation."""
    return type(obj) is dict and obj.get("type") == "branchSummary"


def _quoted(value, limit=40):
    """A value from the input, as an error message may quote it: a short
    string in quotes, anything else by its type (never a recursive repr)."""
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[:limit] + "…")
    return f"of type {type(value).__name__}"


def _str(obj, key, what):
    v = obj.get(key)
    if not isinstance(v, str):
        state = "missing" if key not in obj else f"not a string ({type(v).__name__})"
        raise ValueError(f"{what} '{key}' is {state}")
    return v


def check_header(obj):
    v = obj.get("version")
    if type(v) is not int:
        raise ValueError("session header 'version' must be an integer")
    if v > VERSION:
        raise ValueError(f"session format version {v} is newer than this panto reads ({VERSION})")
    for key in ("id", "timestamp", "cwd"):
        _str(obj, key, "session header")


def check_message(msg):
    if not isinstance(msg, dict):
        raise ValueError("'message' is not an object")
    role = msg.get("role")
    if role not in ROLES:
        raise ValueError("message 'role' is missing" if role is None else f"unknown message role {_quoted(role)}")
    content = msg.get("content")
    if not isinstance(content, list):
        raise ValueError("message 'content' is not a list")
    for block in content:
        if not isinstance(block, dict):
            raise ValueError("a content block is not an object")
        btype = block.get("type")
        if not isinstance(btype, str):
            raise ValueError("a content block has no 'type'")
        for key in _BLOCK_FIELDS.get(btype, ()):
            _str(block, key, f"{btype} block")
        for key in _OPTIONAL_STR.get(btype, ()):
            if block.get(key) is not None and not isinstance(block[key], str):
                raise ValueError(f"{btype} block '{key}' is not a string")
    for key in ("provider", "model", "stopReason"):
        if msg.get(key) is not None and not isinstance(msg[key], str):
            raise ValueError(f"message '{key}' is not a string")


def check_entry(obj, bare):
    """Validate an entry's envelope and, for messages, the message itself."""
    if not bare:
        parent = obj.get("parentId")
        if parent is not None and not isinstance(parent, str):
            raise ValueError("'parentId' is not a string or null")
        _str(obj, "timestamp", "entry")
    for key in ("provider", "model"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise ValueError(f"entry '{key}' is not a string")
    if obj["type"] == "message":
        check_message(obj.get("message"))


def classify(obj):
    """Return the kind of a parsed line, or raise ValueError saying why not."""
    # The common line, a complete message entry, checked in one pass with no
    # calls (replay validates every line of a file: this is its hot path).
    # Anything it does not accept goes through the checks that say why.
    if type(obj) is dict and obj.get("type") == "message":
        i, p, m = obj.get("id"), obj.get("parentId"), obj.get("message")
        if (type(i) is str and i and (p is None or type(p) is str) and type(obj.get("timestamp")) is str
                and type(m) is dict and m.get("role") in ROLES and type(m.get("content")) is list):
            for block in m["content"]:
                if type(block) is not dict:
                    break
                bt = block.get("type")
                if type(bt) is not str:
                    break
                fields = _BLOCK_FIELDS.get(bt)
                if fields is None:            # a block type of a later format: kept
                    continue
                for key in fields:
                    if type(block.get(key)) is not str:
                        break
                else:
                    if bt != "thinking" or block.get("signature") is None or type(block["signature"]) is str:
                        continue
                break
            else:
                if ((m.get("stopReason") is None or type(m["stopReason"]) is str)
                        and _plain_stamps(obj) and _plain_stamps(m)):
                    return ENTRY
    return _classify(obj)


def _plain_stamps(d):
    p, m = d.get("provider"), d.get("model")
    return (p is None or type(p) is str) and (m is None or type(m) is str)


def _classify(obj):
    if type(obj) is not dict:
        raise ValueError("not a JSON object")
    t = obj.get("type")
    if not isinstance(t, str):
        raise ValueError("no string 'type'")
    if t == "session":
        check_header(obj)
        return HEADER
    if "id" in obj:
        if not isinstance(obj["id"], str) or not obj["id"]:
            raise ValueError("entry 'id' is not a non-empty string")
        check_entry(obj, bare=False)
        return ENTRY
    if "parentId" in obj or "timestamp" in obj:
        raise ValueError("entry has 'parentId' or 'timestamp' but no 'id'")
    check_entry(obj, bare=True)
    return BARE


def parse_line(raw, name="<stdin>", lineno=0):
    """Parse and validate one line (bytes ending in b"\\n")."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        why = DEEP if too_deep(raw) else f"not valid JSON ({e.args[0].split(':')[0]})"
        raise SessionError(why, name, lineno) from None
    try:
        kind = classify(obj)
    except ValueError as e:
        raise SessionError(str(e), name, lineno) from None
    if kind == BARE and not writable(obj):
        raise SessionError(UNWRITABLE, name, lineno)
    return Line(raw, obj, kind, lineno)


def same(a, b):
    """a == b for parsed JSON at any depth (Python's == recurses, and raises
    RecursionError about 1000 levels down)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is dict:
            if type(y) is not dict or x.keys() != y.keys():
                return False
            stack.extend((v, y[k]) for k, v in x.items())
        elif type(x) is list:
            if type(y) is not list or len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif type(y) in (dict, list) or x != y:
            return False
    return True


def writable(obj, inside=0):
    """Can panto write this object (not nested deeper than WRITE_DEPTH), even
    `inside` levels down in a larger document (a request body)?"""
    for _ in range(inside):
        obj = [obj]
    try:
        orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return False
    return True


def read(f, name="<stdin>"):
    """Yield the Lines of a binary file object; blank lines are skipped.

    A last line without its line feed is accepted (a stream cut by `head -c`
    or typed by hand); the line feed is added to its bytes.
    """
    for batch in read_batches(f, name, _lines=iter(f)):
        yield from batch


def read_batches(f, name="<stdin>", _lines=None, first=b"", lineno=0, started=False):
    """Yield lists of the Lines of a binary file object, each list holding
    the complete lines that were available at once (one read of the file):
    a writer can take each list under one lock. The same rules as read().
    `first`: bytes already read from f, to be read before it; `lineno` lines
    were taken before them, the first line among them when `started`."""
    header_seen = entries_seen = started
    for raws in (([raw] for raw in _lines) if _lines is not None else _chunks(f, first)):
        batch = []
        for raw in raws:
            lineno += 1
            if not raw.strip():
                continue
            if raw[-1:] != b"\n":
                raw += b"\n"
            try:
                line = parse_line(raw, name, lineno)
                if line.kind == HEADER and (header_seen or entries_seen):
                    raise SessionError("a session header after the first line", name, lineno)
            except SessionError:
                if batch:       # the lines before a bad one are taken first
                    yield batch
                raise
            if line.kind == HEADER:
                header_seen = True
            else:
                entries_seen = True
            batch.append(line)
        if batch:
            yield batch


def read_ahead(batches, depth=4):
    """Yield the items of an iterator (read_batches), taken from it by a
    thread while the caller works on the ones before: panto-log append has
    the next lines read and parsed while the last ones' fdatasync waits on
    the disk (the wait lets go of the interpreter). The same items in the
    same order; what the iterator raises is raised here, after every item
    before it. The thread holds `depth` items at most, so it is mostly
    waiting for room, not holding the interpreter when the caller is back
    from the disk. It never takes a signal (only the main thread does).

    The first item is taken in the caller's thread, and the thread (with
    its imports) starts only when a second is asked for: a stream that
    comes in one read pays nothing for it, and a later one pays while it
    waits for its input anyway."""
    batches = iter(batches)
    for item in batches:
        yield item
        break
    else:
        return
    import queue
    import threading

    q = queue.Queue(depth)

    def run():
        try:
            for item in batches:
                q.put((True, item))
        except BaseException as e:   # noqa: BLE001 - raised in the caller's thread
            q.put((False, e))
            return
        q.put((False, None))

    threading.Thread(target=run, name="read ahead", daemon=True).start()
    while True:
        more, item = q.get()
        if more:
            yield item
        elif item is None:
            return
        else:
            raise item


def _chunks(f, first=b""):
    """Lists of the complete lines of each read of f (a line longer than a
    read is gathered first), after those of `first`; the last line may lack
    its line feed."""
    for data, stop in pieces(f, 1 << 16, getattr(f, "read1", f.read), first):
        if stop is None:
            yield [data]
            continue
        if stop < len(data):
            data = data[:stop]
        # bytes.splitlines breaks at b"\n", b"\r" and b"\r\n" only: without a b"\r" it is a split on b"\n"
        yield data.splitlines(keepends=True) if b"\r" not in data else _split(data)


def pieces(f, size, read=None, first=b""):
    """f's bytes from where it stands, read `size` at a time (by `read`,
    else f.read), after `first` (bytes read from it already), as (data,
    stop): data[:stop] is whole lines (a line longer than a read is gathered
    first); last, what follows the last line feed, when anything does, with
    stop None."""
    read, carry = read or f.read, []
    while True:
        chunk, first = (first, b"") if first else (read(size), b"")
        if not chunk:
            if carry:
                yield b"".join(carry), None
            return
        stop = chunk.rfind(b"\n") + 1
        if not stop:
            carry.append(chunk)
            continue
        if carry:
            carry.append(chunk)
            chunk = b"".join(carry)
            stop += len(chunk) - len(carry[-1])
        yield chunk, stop
        carry = [chunk[stop:]] if stop < len(chunk) else []


def _split(data):
    """Lines of data split on b"\\n" only."""
    out, p = [], 0
    while p < len(data):
        e = data.index(b"\n", p) + 1
        out.append(data[p:e])
        p = e
    return out
