"""What a session file holds, kept between runs: the entry tree by byte offset.

`panto-log append` needs the ids already in the file and the leaf; `panto-log
replay --context` needs, besides, each entry's parent, its place in the file
and whether it is a system message, a stamped user entry or a compaction.
Reading a long session from the top for that on every turn would make a turn
cost the size of the file, so both keep it in a cache:
$XDG_CACHE_HOME/panto/index/<hash of the file's absolute path>.json.

A cache entry covers the file up to a byte offset (where its valid lines
ended). It is used only while the file is the same one (device and inode),
not shorter than that offset, with the same header bytes and the same
checksum of the last bytes before the offset, and (when no byte was added
since) the same mtime. A file that grew is read on from the offset (append
only ever adds); one cut, replaced or rewritten is read again from the top.
The cache holds ids, offsets and the header, no message text; it is private
(0600 in a 0700 folder), and one that cannot be read or makes no sense is
ignored and rebuilt: a cache only ever costs or saves time, never a line.
"""
import os

from pantolib import paths

VERSION = 1
TAIL = 4096     # bytes before the covered offset whose checksum is kept

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
    import _blake2

    digest = _blake2.blake2b(os.fsencode(os.path.abspath(path)), digest_size=16).hexdigest()
    return os.path.join(paths.cache_dir(env), "index", digest + ".json")


def _tail_sum(fd, end):
    import zlib

    n = min(TAIL, end)
    return zlib.crc32(os.pread(fd, n, end - n)) if n else 0


def load(path, fd, st, env=None):
    """What the cache knows of the file open as fd (st: its fstat), as a dict
    (header, header_raw, ids, leaf, end, end_line: a session.FileState's fields up
    to the offset the cache covers), or None when no cache entry may be used."""
    import orjson

    try:
        with open(cache_path(path, env), "rb") as f:
            c = orjson.loads(f.read())
        if (type(c) is not dict or c.get("v") != VERSION or c.get("path") != os.path.abspath(path)
                or c.get("dev") != st.st_dev or c.get("ino") != st.st_ino):
            return None
        end, header_raw = c["end"], c["header"].encode("utf-8")
        if type(end) is not int or not len(header_raw) <= end <= st.st_size:
            return None
        if end == st.st_size and c.get("mtime") != st.st_mtime_ns:
            return None     # rewritten in place, or touched: read it again
        if os.pread(fd, len(header_raw), 0) != header_raw or _tail_sum(fd, end) != c["tail"]:
            return None
        nodes, leaf = c["nodes"], c["leaf"]
        if type(nodes) is not dict or (leaf is not None and leaf not in nodes):
            return None
        return {"header": orjson.loads(header_raw), "header_raw": header_raw, "ids": nodes, "leaf": leaf,
                "end": end, "end_line": c["lines"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeError):
        return None


def save(path, fd, r, env=None):
    """Keep what r (a session.FileState with nodes, covering the file open as fd up
    to r.end) found, for the next run. Never fails: a cache only saves time."""
    import orjson

    target = cache_path(path, env)
    try:
        st = os.fstat(fd)
        data = orjson.dumps({
            "v": VERSION, "path": os.path.abspath(path), "dev": st.st_dev, "ino": st.st_ino,
            "end": r.end, "lines": r.end_line, "mtime": st.st_mtime_ns if st.st_size == r.end else None,
            "tail": _tail_sum(fd, r.end), "header": r.header_raw.decode("utf-8"),
            "leaf": r.leaf, "nodes": {k: v for k, v in r.ids.items() if v is not None}})
    except (OSError, ValueError, TypeError, orjson.JSONEncodeError):
        return
    from pantolib import cache

    cache.write_private(target, data)


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
