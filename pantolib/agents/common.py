"""What every agent module writes alike (SPEC §12): session ids, entry ids,
the header, message entries, stop reasons, usage and timestamps, and the
whole-line reading of a source file."""
import sys
from array import array
from bisect import bisect_left

from pantolib import entries


def session_uuid(agent, source_id):
    """The panto session id of a source session: its own id when that is a
    canonical UUID (lowercased), else uuid5(NAMESPACE_URL, "AGENT:SOURCE-ID")."""
    import uuid

    s = str(source_id)
    try:
        u = uuid.UUID(s)
        if str(u) == s.lower():
            return str(u)
    except ValueError:
        pass
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{agent}:{s}"))


_blake2b = None


def blake2b(data, size):
    """The BLAKE2b digest of data, `size` bytes long: hashlib's, without
    importing hashlib, whose import loads OpenSSL to list algorithms panto
    does not use (~4 ms of an import run's start). hashlib.blake2b is this
    very type, CPython's _blake2 (hashlib's import, where it is missing)."""
    global _blake2b
    if _blake2b is None:
        try:
            from _blake2 import blake2b as _blake2b
        except ImportError:
            from hashlib import blake2b as _blake2b
    return _blake2b(data, digest_size=size).digest()


def key_hash(key, n=0):
    """A 64-bit hash of a key (n > 0: of the key's n-th other name, after a collision)."""
    data = (key if n == 0 else f"{key}#{n}").encode("utf-8", "surrogatepass")
    return int.from_bytes(blake2b(data, 8), "big")


class Hashes:
    """A set of 64-bit hashes whose memory stays small whatever a source's
    size: up to SMALL of them in a set (with their top 32 bits in another,
    for Ids), the others packed in one sorted array, 8 bytes each, looked up
    by bisection. A 402 MB transcript (200,000 entries) was imported in
    108 MB, 63 MB of them in sets; packed, in 64 MB. A usual session never
    fills SMALL.
    Kept between runs as strings of 16 hex digits per hash, in order, PIECE
    hashes a string (`hex`): orjson writes a string into room for eight
    times its length, and one string of them all had cost that import
    33 MB more as it saved them."""

    SMALL = 1 << 15
    PIECE = 1 << 12

    def __init__(self, kept=()):
        self.recent, self.tops = set(), set()
        self.packed = array("Q")
        try:
            kept = _unhex(kept)
        except (ValueError, TypeError):
            kept = ()
        if len(kept) > self.SMALL:
            self.packed = array("Q", sorted(kept))
        else:
            for h in kept:
                self.add(h)

    def __len__(self):
        return len(self.recent) + len(self.packed)

    def __contains__(self, h):
        return h in self.recent or self._packed_from(h) == h

    def has_top(self, top):
        """Whether a hash whose top 32 bits are `top` is here."""
        if top in self.tops:
            return True
        found = self._packed_from(top << 32)
        return found is not None and found >> 32 == top

    def _packed_from(self, h):
        """The first packed hash from h on, or None."""
        packed = self.packed
        i = bisect_left(packed, h) if packed else 0
        return packed[i] if i < len(packed) else None

    def add(self, h):
        """Put in h, which is not here yet."""
        self.recent.add(h)
        self.tops.add(h >> 32)
        if len(self.recent) >= self.SMALL:
            self.packed = self._merged()
            self.recent, self.tops = set(), set()

    def _merged(self):
        """Every hash, in order, in one array (the recent ones merged in)."""
        if not self.packed:       # (a usual session: merge would take each hash through Python)
            return array("Q", sorted(self.recent))
        from heapq import merge

        return array("Q", merge(self.packed, sorted(self.recent)))

    def hex(self):
        a = self._merged()
        if sys.byteorder == "little":
            a.byteswap()
        data, step = a.tobytes(), 8 * self.PIECE
        return [data[i:i + step].hex() for i in range(0, len(data), step)]


def _unhex(pieces):
    """The hashes of strings of 16 hex digits each (Hashes.hex)."""
    a = array("Q")
    for text in pieces:
        if type(text) is not str or len(text) % 16:
            raise ValueError("not 16 hex digits each")
        a.frombytes(bytes.fromhex(text))
    if sys.byteorder == "little":
        a.byteswap()
    return a


class Ids(Hashes):
    """Deterministic 8-hex entry ids for the keys of one session (a source's
    own ids, or names made of them).

    A key's id is the first 8 hex digits of a hash of the key; when another
    key already holds those, of the key + "#1", "#2", ... (a collision is
    resolved the same way every run). The hashes of the ids given (8 more
    hex digits each) are the set; `taken` (Hashes.hex) tells a later run
    whether an id it meets again is this key's or another's: `get` of a key
    seen in an earlier run gives its id again. The answers for the last
    MEMO keys asked are remembered: a record names its parent, asked about
    as the record before it (a third of an import's hashing went to asking
    again). Memory: 8 bytes an id past Hashes.SMALL of them, and the MEMO
    keys; len(): the ids given, this run and before."""

    MEMO = 4096     # keys whose answer is remembered (a chain names recent records: most asks are again)

    def __init__(self, taken=()):
        super().__init__(taken)
        self.memo = {}          # key -> its id, or None while it has none (only get gives one)

    @property
    def taken(self):
        return self.hex()

    def get(self, key):
        eid = self.memo.get(key)
        if eid is None:
            c, mine = self._slot(key)
            if not mine:        # free: this key's from now on
                self.add(c)
            eid = self._remember(key, f"{c >> 32:08x}")
        return eid

    def has(self, key):
        """Whether `key` already has an id (this run or an earlier one)."""
        return self.find(key) is not None

    def find(self, key):
        """The id `key` has, or None when it has none yet (nothing is given)."""
        memo = self.memo
        if key in memo:
            return memo[key]
        c, mine = self._slot(key)
        return self._remember(key, f"{c >> 32:08x}" if mine else None)

    def _remember(self, key, eid):
        memo = self.memo
        if len(memo) >= self.MEMO:
            memo.clear()
        memo[key] = eid
        return eid

    def _slot(self, key):
        """(the hash of key's id, True) when it has one, this run or before;
        else (the hash of the first free id it would get, False)."""
        n = 0
        while True:
            c = key_hash(key, n)
            if c in self.recent or self.packed and c in self:       # (the sets first: no call)
                return c, True
            top = c >> 32
            if not (top in self.tops or self.packed and self.has_top(top)):
                return c, False
            n += 1


def header(sid, timestamp, cwd, agent, path, source_id, parent=None, relation=None):
    """The header of an imported session (SPEC §12)."""
    h = {"type": "session", "version": 1, "id": sid, "timestamp": timestamp, "cwd": cwd,
         "source": {"agent": agent, "path": path, "id": source_id}}
    if parent is not None:
        h["parentSession"] = parent
    if relation is not None:
        h["relation"] = relation
    return h


def usage(input=0, output=0, cache_read=0, cache_write=0, reasoning=0, cache_write_1h=0):
    """Usage in panto's form from a source's counts (anything not a positive
    int reads as 0), as entries.usage_dict writes it."""
    counts = (input, output, cache_read, cache_write, reasoning, cache_write_1h)
    return entries.usage_dict(*(v if type(v) is int and v > 0 else 0 for v in counts))


def message(eid, parent, timestamp, role, content, *, provider=None, model=None, api=None,
            stop=None, usage=None, billed_in=None):
    """A message entry with SPEC §3's key order: a user entry stamped at the top
    level with provider/model/api when known; an assistant entry with
    provider, model, api, stopReason and usage inside `message`; a response
    paid in another session has no usage and, at the top level of the entry,
    billedIn (SPEC §8). usage: in panto's form already (entries.usage_dict,
    as `usage` above writes it)."""
    e = {"type": "message", "id": eid, "parentId": parent, "timestamp": timestamp}
    if role == "user":
        if provider is not None:
            e["provider"] = provider
        if model is not None:
            e["model"] = model
        if api is not None:
            e["api"] = api
    m = {"role": role, "content": content}
    if role == "assistant":
        if provider is not None:
            m["provider"] = provider
        if model is not None:
            m["model"] = model
        if api is not None:
            m["api"] = api
        if stop is not None:
            m["stopReason"] = stop
        if billed_in is None and usage is not None:
            m["usage"] = usage
    e["message"] = m
    if role == "assistant" and billed_in is not None:
        e["billedIn"] = billed_in
    return e


_STOPS = {"end_turn": "stop", "stop": "stop", "stop_sequence": "stop", "pause_turn": "stop",
          "completed": "stop", "max_tokens": "length", "length": "length", "incomplete": "length",
          "tool_use": "toolUse", "tool_calls": "toolUse", "toolUse": "toolUse", "function_call": "toolUse",
          "model_context_window_exceeded": "contextFull", "refusal": "error", "error": "error",
          "content_filter": "error", "failed": "error", "aborted": "aborted", "cancelled": "aborted"}


def stop_reason(value):
    """An agent's stop reason (its API's wire value) as panto's (§5): end_turn ->
    stop, tool_use -> toolUse, max_tokens -> length, ...; anything else -> stop."""
    return _STOPS.get(value, "stop") if isinstance(value, str) else "stop"


def image(media_type, data):
    """An image block (SPEC §12, extension): base64 data and its media type."""
    return {"type": "image", "mediaType": media_type, "data": data}


LAST_MS = 253402300800000      # 10000-01-01T00:00:00Z: the stamp has four digits of year


def iso(value):
    """A source's time stamp (an ISO 8601 string, or Unix seconds or milliseconds
    as a number) as panto's (UTC, milliseconds, Z); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        ms = int(value if value > 1e11 else value * 1000)
    elif isinstance(value, str) and value:
        s = value.strip()
        if len(s) == 24 and s[10] == "T" and s[19] == "." and s[23] == "Z":
            return s                   # already panto's form (the common case)
        import datetime

        try:
            d = datetime.datetime.fromisoformat(s[:-1] + "+00:00" if s[-1:] in "Zz" else s)
        except ValueError:
            return None
        if d.tzinfo is None:
            d = d.replace(tzinfo=datetime.timezone.utc)
        ms = int(d.timestamp()) * 1000 + d.microsecond // 1000
    else:
        return None
    if not 0 <= ms < LAST_MS:
        return None
    try:
        return entries.iso_ms(ms)
    except (OverflowError, OSError, ValueError):
        return None


def text_of(content):
    """A tool result's or message's content as text: a string as is, a list of
    parts joined with newlines (text parts' text; other parts as compact JSON)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif part is not None:
                import orjson

                out.append(orjson.dumps(part).decode())
        return "\n".join(out)
    import orjson

    return orjson.dumps(content).decode()


CHUNK = 1 << 20


def records(f, start=0):
    """The complete lines of a binary file from byte `start`, streamed:
    (line number from `start`, offset of the line, offset after it, the line
    without its line feed). A last line without a line feed is still being
    written: it is not yielded. Memory is one chunk and one line."""
    f.seek(start)
    offset, n, rest = start, 0, b""
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return
        data = rest + chunk if rest else chunk
        p = 0
        find = data.find
        while True:
            e = find(b"\n", p)
            if e < 0:
                break
            n += 1
            yield n, offset + p, offset + e + 1, data[p:e]
            p = e + 1
        offset += p
        rest = data[p:]


def parse(raw):
    """A record line as a dict, or the reason it is not one (a str)."""
    import orjson

    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        return f"not valid JSON ({str(e).split(':')[0]})"
    if type(obj) is not dict:
        return "not a JSON object"
    return obj
