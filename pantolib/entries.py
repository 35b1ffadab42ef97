"""Ids, timestamps and the entries panto writes (format version 1)."""
import os
import time

ID_TRIES = 100


def uuid7():
    """A UUIDv7 string: 48 bits of Unix milliseconds, then randomness."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def now_iso():
    """UTC ISO 8601 with milliseconds: 2026-04-25T17:40:15.990Z."""
    return iso_ms(time.time_ns() // 1_000_000)


def iso_ms(ms):
    """The timestamp format of entries (UTC, milliseconds) for ms since the epoch."""
    secs, ms = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"


def new_id(taken):
    """8 random lowercase hex chars not in `taken` (a set or a dict, which it then joins)."""
    for _ in range(ID_TRIES):
        i = os.urandom(4).hex()
        if i not in taken:
            break
    else:  # a hundred collisions: take a longer id rather than loop forever
        while (i := os.urandom(16).hex()) in taken:
            pass
    if isinstance(taken, dict):
        taken[i] = None
    else:
        taken.add(i)
    return i


def make_header(cwd=None):
    return {
        "type": "session",
        "version": 1,
        "id": uuid7(),
        "timestamp": now_iso(),
        "cwd": os.getcwd() if cwd is None else cwd,
    }


def make_message(role, content, parent, taken, provider=None, model=None, api=None):
    """A message entry, keys in the format's order; user entries get stamped
    (provider, model, and the wire API when known)."""
    entry = {"type": "message", "id": new_id(taken), "parentId": parent, "timestamp": now_iso()}
    if provider is not None:
        entry["provider"] = provider
    if model is not None:
        entry["model"] = model
    if api is not None:
        entry["api"] = api
    entry["message"] = {"role": role, "content": content}
    return entry


def complete(bare, parent, taken):
    """Give a bare entry an id, its parent and a timestamp; other keys keep their order."""
    entry = {"type": bare["type"], "id": new_id(taken), "parentId": parent, "timestamp": now_iso()}
    for key, value in bare.items():
        if key not in entry:
            entry[key] = value
    return entry


def stamp(entry, provider, model, api=None):
    """Stamp a user entry, in place, with the provider/model (and wire API)
    it is sent to, placed before "message", as the format orders keys."""
    items = [(k, v) for k, v in entry.items() if k not in ("provider", "model", "api")]
    entry.clear()
    for key, value in items:
        if key == "message":
            entry["provider"], entry["model"] = provider, model
            if api is not None:
                entry["api"] = api
        entry[key] = value
    return entry


def text(s):
    return {"type": "text", "text": s}


def texts_of(entry):
    """The texts a person reads in a valid entry, as (block, text) in order:
    a message's text blocks, tool calls (the text is the input; the name is
    block["name"]) and tool results, not its thinking nor its images; a
    compaction's or a branch summary's summary or a session's name (block
    None). Tree, show and search read
    an entry's text through it."""
    t = entry.get("type")
    if t == "message":
        for block in entry["message"]["content"]:
            bt = block.get("type")
            if bt == "text":
                yield block, block["text"]
            elif bt == "toolUse":
                yield block, block["input"]
            elif bt == "toolResult":
                yield block, block["content"]
        return
    value = entry.get("summary") if t in ("compaction", "branchSummary") else \
        entry.get("name") if t == "sessionInfo" else None
    if isinstance(value, str):
        yield None, value


def image_of(block):
    """(media type, base64 data) of a valid image block, else None. An image
    block (SPEC 12, an extension) is {"type":"image","mediaType":S,"data":BASE64};
    one that lacks either string is kept in the file but never sent."""
    if type(block) is not dict or block.get("type") != "image":
        return None
    media, data = block.get("mediaType"), block.get("data")
    if type(media) is not str or not media or type(data) is not str or not data:
        return None
    return media, data


def image_text(block):
    """An image block for people: `[image: image/png, 123 KB]` (the size of
    the decoded data; KB and MB of 1024)."""
    got = image_of(block)
    if got is None:
        return "[image: not readable]"
    media, data = got
    size = len(data) // 4 * 3 + (len(data) % 4 * 3 // 4) - data[-2:].count("=")
    if size < 1024:
        amount = f"{size} byte{'s' if size != 1 else ''}"
    elif size < 1024 * 1024:
        amount = f"{round(size / 1024)} KB"
    else:
        amount = f"{size / (1024 * 1024):.1f} MB"
    return f"[image: {media}, {amount}]"


USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "reasoning", "cacheWrite1h")


def usage_counts(u):
    """A raw `usage` value as six ints in USAGE_KEYS order, or None when it is
    not an object (unknown). Missing, non-integer and negative fields read as
    0 (SPEC §3). The one definition of that rule; it runs once per priced
    entry, so it is written out without calls."""
    if type(u) is not dict:
        return None
    g = u.get
    a, b, c, d, e, f = g("input"), g("output"), g("cacheRead"), g("cacheWrite"), g("reasoning"), g("cacheWrite1h")
    return (a if type(a) is int and a > 0 else 0, b if type(b) is int and b > 0 else 0,
            c if type(c) is int and c > 0 else 0, d if type(d) is int and d > 0 else 0,
            e if type(e) is int and e > 0 else 0, f if type(f) is int and f > 0 else 0)


def billed_in(entry):
    """The session an entry's response was paid in, when the entry is a copy
    of it (`billedIn`: a /fork, an imported copy), else None. Such an entry
    counts as a turn that cost nothing here (SPEC 8: each response is paid
    once); a usage it carries anyway is not counted. The one definition of
    that rule."""
    b = entry.get("billedIn") if type(entry) is dict else None
    return b if type(b) is str and b else None


UNRECORDED = "usageNotRecorded"


def not_a_turn(entry):
    """Whether a compaction or branch summary is not a turn: imported from an
    agent that recorded no usage for the request that wrote it (SPEC §12),
    marked `"usageNotRecorded": true` (**extension**) by the importer and
    carrying no usage. panto's own entries never carry the mark: a reply or
    summary of panto's without usage is a turn of unknown cost. The one
    definition of that rule."""
    return entry.get(UNRECORDED) is True and "usage" not in entry


def usage_of(msg):
    """The usage of an assistant message as a dict of ints (USAGE_KEYS), or None when unknown."""
    n = usage_counts(msg.get("usage"))
    return None if n is None else dict(zip(USAGE_KEYS, n))


def usage_dict(input=0, output=0, cache_read=0, cache_write=0, reasoning=0, cache_write_1h=0):
    """Usage as written: input and output always, the others only when not 0."""
    u = {"input": input, "output": output}
    for key, v in (("cacheRead", cache_read), ("cacheWrite", cache_write),
                   ("reasoning", reasoning), ("cacheWrite1h", cache_write_1h)):
        if v:
            u[key] = v
    return u
