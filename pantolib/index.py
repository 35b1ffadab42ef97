"""What a session file holds, kept between runs: the entry tree by byte offset.

`panto-log append` needs the ids already in the file and the leaf; `panto-log
replay --context` needs, besides, each entry's parent, its place in the file
and whether it is a system message, a stamped user entry or a compaction.
Reading a long session from the top for that on every turn would make a turn
cost the size of the file, so both keep it in a cache (persist.py):
$XDG_CACHE_HOME/panto/index/<hash of the file's absolute path>.

A cache entry covers the file up to a byte offset (where its valid lines
ended), with the CRC-32 of every byte before it, the file's identity when it
was looked at and the time it was. It is used while that identity still
holds and is not racy (persist.fresh; an identity taken after the file's
last change on a filesystem that stamps every later change anew is never
racy: persist.settles), else only while the file is the same
one (device and inode), not shorter than the offset and with the same CRC
of the whole covered range (persist.covers): a file that grew is read on
from the offset (append only ever adds); one cut, replaced or rewritten
anywhere before it is read again from the top. The header's bytes and the
leaf's line are checked against the file before the entry is used, and
append reads the line of an id it is about to skip (session.py): a forged
or stale entry costs a reread, never a line. The cache holds ids, offsets
and the header, no message text; it is private (0600 in a 0700 folder).
"""
import os

from pantolib import persist

NAME = "index"
LIMIT = 32 << 20    # a larger index is not read (nor written): the file is read from the top

# A node of the tree, per entry id: [parentId, start, end, kind, firstKeptId]
PARENT, START, END, KIND, KEPT = range(5)
SYSTEM, STAMPED, COMPACTION = "s", "u", "c"


def node(obj, start, end):
    """The node of a valid entry (parsed) whose line is bytes start..end."""
    t = obj.get("type")
    if t == "message":
        m = obj["message"]
        role = m["role"]
        if role == "system":
            return [obj.get("parentId"), start, end, SYSTEM, None]
        if role == "user" and obj.get("provider") and obj.get("model"):
            return [obj.get("parentId"), start, end, STAMPED, None]
    elif t == "compaction":
        from pantolib import compaction

        if compaction.honoured(obj):
            return [obj.get("parentId"), start, end, COMPACTION, obj.get("firstKeptId")]
    return [obj.get("parentId"), start, end, None, None]


def cache_path(path, env=None):
    import zlib

    raw = os.fsencode(os.path.abspath(path))    # the file names its path: a collision only costs a miss
    return persist.path(os.path.join("index", "%08x%08x" % (zlib.crc32(raw), zlib.adler32(raw))), env)


def line_of(fd, n, eid, end):
    """Is node n the line of entry `eid` in the file open as fd (within its first
    `end` bytes): a whole line, after a line feed, whose entry has that id?"""
    import orjson

    if (type(n) is not list or len(n) != 5 or type(n[START]) is not int or type(n[END]) is not int
            or not 0 < n[START] < n[END] <= end):
        return False
    data = os.pread(fd, n[END] - n[START] + 1, n[START] - 1)
    if len(data) != n[END] - n[START] + 1 or data[:1] != b"\n" or data[-1:] != b"\n":
        return False
    try:
        obj = orjson.loads(data[1:])
    except orjson.JSONDecodeError:
        return False
    return type(obj) is dict and obj.get("id") == eid


def load(path, fd, st, env=None):
    """What the cache knows of the file open as fd (st: its fstat), as a dict
    (header, header_raw, ids, leaf, end, end_line: a session.FileState's fields up
    to the offset the cache covers; sum: (that offset, the CRC-32 before it);
    checked: whether its content had to be compared), or None when no cache
    entry may be used."""
    import orjson

    c = persist.load(cache_path(path, env), NAME, LIMIT)
    try:
        if type(c) is not dict or c.get("path") != os.path.abspath(path):
            return None
        end, header_raw, nodes, leaf, value = c["end"], c["header"].encode("utf-8"), c["nodes"], c["leaf"], c["crc"]
        if (type(end) is not int or type(nodes) is not dict or type(c["lines"]) is not int
                or not len(header_raw) <= end <= st.st_size):
            return None
        checked = not persist.fresh(c["ident"], c["stamp"], st, c.get("settled"))
        if checked and not persist.covers(fd, st, c["ident"], end, value):
            return None
        if os.pread(fd, len(header_raw), 0) != header_raw:
            return None
        if leaf is not None and not line_of(fd, nodes.get(leaf), leaf, end):
            return None
        return {"header": orjson.loads(header_raw), "header_raw": header_raw, "ids": nodes, "leaf": leaf,
                "end": end, "end_line": c["lines"], "sum": (end, value), "checked": checked}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeError):
        return None


def save(path, fd, r, env=None):
    """Keep what r (a session.FileState with nodes, covering the file open as fd up
    to r.end) found, for the next run. r.seen: (the time, the identity) the file
    was last looked at; r.sum: (an offset, the CRC-32 before it) known true of it
    (then only the bytes after it are read for the CRC). Never fails: a cache
    only saves time."""
    import orjson

    start, value = r.sum if r.sum is not None and r.sum[0] <= r.end else (0, 0)
    try:
        value = persist.crc(fd, r.end, start, value)
        st = os.fstat(fd)
        stamp, seen = r.seen if r.seen is not None else (None, None)
        settled = False
        if persist.ident(st) != seen:
            stamp = None    # changed since it was looked at: compared by content next time
        elif persist.racy(seen, stamp):    # (this fstat came after the last change: see persist.settles)
            settled = persist.settles(path, st.st_dev)
        data = orjson.dumps({
            "path": os.path.abspath(path), "ident": persist.ident(st), "stamp": stamp, "settled": settled,
            "end": r.end,
            "lines": r.end_line, "crc": value, "header": r.header_raw.decode("utf-8"),
            "leaf": r.leaf, "nodes": {k: v for k, v in r.ids.items() if v is not None}})
    except (OSError, ValueError, TypeError, orjson.JSONEncodeError):
        return
    if value is not None and len(data) <= LIMIT:
        persist.write(cache_path(path, env), NAME, data)


# -- what the next request needs -------------------------------------------------------

def ranges(nodes, ids):
    """The byte ranges [start, end] of the lines of `ids`, in that order,
    adjacent lines joined into one range."""
    out = []
    for eid in ids:
        n = nodes[eid]
        if out and out[-1][1] == n[START]:
            out[-1][1] = n[END]
        else:
            out.append([n[START], n[END]])
    return out


def context(nodes, target):
    """Which entries of the path from the root to `target` the next request
    needs (SPEC 3, compaction): (the path's ids, the ids to keep, in path
    order). Kept: every system message on the path, the last compaction and
    everything on the path from its firstKeptId on (from the compaction on,
    when that id is not on the path before it), and, when nothing kept
    carries a provider/model stamp, the last stamped user entry (the active
    model). Without a compaction, the whole path."""
    path, seen, cur = [], set(), target
    while cur is not None and cur in nodes and cur not in seen:
        seen.add(cur)
        path.append(cur)
        cur = nodes[cur][PARENT]
    path.reverse()
    at = None
    for i in range(len(path) - 1, -1, -1):
        if nodes[path[i]][KIND] == COMPACTION:
            at = i
            break
    if at is None:
        return path, path
    start, first = at + 1, nodes[path[at]][KEPT]
    if first is not None:
        for i in range(at):
            if path[i] == first:
                start = i
                break
    start = min(start, at)      # the compaction entry itself is always kept
    keep = [i for i in range(start) if nodes[path[i]][KIND] == SYSTEM]
    if not any(nodes[path[i]][KIND] == STAMPED for i in range(start, len(path))):
        stamped = [i for i in range(start) if nodes[path[i]][KIND] == STAMPED]
        if stamped:
            keep = sorted(set(keep) | {stamped[-1]})
    return path, [path[i] for i in keep] + path[start:]
