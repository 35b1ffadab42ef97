"""The fast byte scanners of session files, reading raw bytes in large chunks
with one set of knobs (CHUNK, FAST_FROM): what `panto-ls` lists, what
`panto-ls --grep` finds, and the entries `panto-cost` prices
(`PricedEntries`).

Per-line Python work is what costs on files of many small lines, so a file
is looked at with a few C-speed passes over its bytes (a regular expression
with a literal prefix, `bytes.lower`, `bytes.find`) and only the lines that
matter are parsed: the header, the first user prompt, the last entry, the
last `sessionInfo`, the lines a search may match, and the lines that may be
a priced turn.

The byte patterns lean on how panto writes entries (compact JSON, `type`
first, the message object's `role` first, SPEC §3). Inside a JSON string a
quote is always escaped, so no text can fake `{"type":"message"` or
`"message":{"role":"`. A file laid out otherwise (written by another tool,
kept byte for byte by panto-log append) is read line by line instead, so
the counts are the same either way; what a line *is* is decided by
`stream.classify`.
"""
import functools
import io
import os
import re

import orjson

from pantolib import stream

CHUNK = 1 << 23          # what one read asks for (never much more than a file holds)
FAST_FROM = 16 << 10     # from this much on, search with the C library's memmem
PROMPT_MAX = 200
TAIL_LINES = 64
# One pass, anchored on the rare `{"` so the regular expression engine can
# skip quickly, captures one character per object that matters:
#   {"type":"message",           -> ","   a message line (panto writes type first)
#   "message":{"role":"user"     -> "u"   its role ("a", "s" for the others)
#   {"type":"sessionInfo"        -> "o"   a name
#   {"type": "... (spaced JSON)  -> other: the file is read line by line instead
# A compaction's summary object has a role too, but is not a "message" key.
# (Each branch starts with a different letter, so a miss costs one compare.)
_MESSAGE = rb'\{"(?:r(?<="message":\{"r)ole":"|t(?:ype"(?::(?:"(?:message"|sessionInf)|\s)|\s)))(.)'
# Lines of many kilobytes are walked one by one instead (the C library's
# memchr finds their ends far faster than the pattern above crosses their
# text), each matched from its start as panto writes it: a message's
# envelope (type, id, parentId, timestamp, string stamps) up to its role,
# a name, or any other entry type. A line laid out otherwise sends the file
# to the careful reading.
_LINE = (rb'\{"type":"(?:message","id":"[^"\\]*","parentId":(?:null|"[^"\\]*"),"timestamp":"[^"\\]*",'
         rb'(?:"[A-Za-z]+":"[^"\\]*",)*"message":\{"role":"(user|assistant|system)"'
         rb'|(sessionInfo)"|(?!message")[^"\\]*")')
LONG_LINE = 4096           # from this mean length on, lines are walked


@functools.cache
def _pattern(which=_MESSAGE):
    return re.compile(which)    # on first use: a cached listing never needs it


def _counts(buf, end):
    """(users, assistants, systems, names, other) found in the whole lines buf[:end]
    (other > 0: some line is not laid out as panto writes it)."""
    counts = _walk(buf, end)   # it hands the buffer back when its first lines are short
    if counts is not None:
        return counts
    found = b"".join(_pattern().findall(buf, 0, end))
    starts, infos = found.count(b","), found.count(b"o")
    u, a, sy = found.count(b"u"), found.count(b"a"), found.count(b"s")
    roles = u + a + sy
    return u, a, sy, infos, starts != roles or starts + infos + roles != len(found)


def line_role(raw):
    """The byte rule of a walked line (no line feed): "user", "assistant" or
    "system" for a message entry of that role, "" for any other entry type or
    a name, None for a line not laid out as panto writes (read carefully).
    On every line the stream accepts (stream.classify) it agrees with
    `role_of` (a test checks it on random and hostile lines); a line it
    refuses (which panto-log replay reports) is taken by its envelope."""
    m = _pattern(_LINE).match(raw)
    if m is None:
        return None
    return m.group(1).decode() if m.group(1) is not None else ""


def _walk(buf, end):
    """_counts of a buffer of long lines, one line at a time (line_role's rule);
    None when its first 16 lines are shorter than LONG_LINE on average (and
    the whole-buffer pattern is faster)."""
    match, find = _pattern(_LINE).match, buf.find
    u = a = sy = infos = 0
    pos, lines = 0, 0
    while pos < end:
        lines += 1
        if lines == 16 and pos < 16 * LONG_LINE:
            return None
        nl = find(b"\n", pos, end)
        if nl > pos:
            m = match(buf, pos, nl)
            if m is None:
                return u, a, sy, infos, 1
            role = m.group(1)
            if role is not None:
                if role == b"user":
                    u += 1
                elif role == b"assistant":
                    a += 1
                else:
                    sy += 1
            elif m.group(2) is not None:
                infos += 1
        pos = nl + 1
    return u, a, sy, infos, 0


_INFO = b'"sessionInfo"'


class NotASession(Exception):
    pass


class Summary:
    """What the listing shows of one session file."""

    __slots__ = ("header", "messages", "prompt", "name", "last", "match")

    def __init__(self, header):
        self.header = header
        self.messages = 0     # user + assistant entries
        self.prompt = None    # the first user entry's first text
        self.name = None      # the last sessionInfo name
        self.last = None      # the last entry's timestamp (ISO string), if valid
        self.match = None     # with a Needle: the first matching snippet


def kind(obj):
    """stream.classify without the exception: HEADER, ENTRY, BARE or None."""
    if obj is None:
        return None
    try:
        return stream.classify(obj)
    except ValueError:
        return None


def epoch(iso):
    """Seconds since the epoch of an ISO 8601 timestamp, or None if it is not one."""
    from datetime import datetime, timezone

    if not isinstance(iso, str) or len(iso) < 10:
        return None
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def role_of(obj):
    """The role of a message entry, or None for anything else."""
    if kind(obj) == stream.ENTRY and obj.get("type") == "message":
        return obj["message"]["role"]
    return None


# Text a user message carries that the person did not type: a file attached
# with @PATH (panto's mentions), and the context another agent injects as a
# user message (Codex's environment, its AGENTS.md and user instructions).
# Such text is never a session's title (SPEC §12).
NOT_TYPED = ("[file @", "<environment_context>", "<user_instructions>", "# AGENTS.md instructions for ")


def first_text(obj):
    """The first text of a user message that the person typed (not NOT_TYPED), cut
    at PROMPT_MAX; None when it has none."""
    for block in obj["message"]["content"]:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            if not text.lstrip().startswith(NOT_TYPED):
                return text[:PROMPT_MAX]
    return None


def chunks(f, size=CHUNK, first=b""):
    """(buffer, end) pieces of a file, cut after a line feed: buffer[:end] is
    whole lines. `first` is what was already read from f. A last line without
    its line feed (torn) is never in buffer[:end]."""
    carry = first
    left = os.fstat(f.fileno()).st_size - f.tell()
    while True:
        # never ask for much more than is there: a big read buffer costs page faults
        data = f.read(min(size, left + 1)) if left > 0 else b""
        left -= len(data)
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n")
        if not data:
            if cut >= 0:
                yield buf, cut + 1
            return
        if cut < 0:
            carry = buf
            continue
        yield buf, cut + 1
        carry = buf[cut:]


def _header(f):
    """(header, the first bytes of the file, header line included) of an open
    session file. The header line matches none of the patterns searched for."""
    size = os.fstat(f.fileno()).st_size
    data = f.read(min(size, CHUNK) + 1)
    nl = data.find(b"\n", 0, 1 << 20)
    obj = stream.loads(data[:nl + 1]) if nl >= 0 else None
    if kind(obj) != stream.HEADER:
        raise NotASession("not a panto session" if data else "not a panto session (empty file)")
    if stream.is_partial(obj):
        raise NotASession("a partial stream (panto-log replay --context), not a whole session")
    return obj, data


def _line_at(buf, i, end):
    start = buf.rfind(b"\n", 0, i) + 1
    stop = buf.find(b"\n", i, end)
    return buf[start:stop if stop >= 0 else end], stop


def summarize(path, needle=None):
    """The Summary of a session file; NotASession if its first line is no header.
    With a Needle, the file is searched too, in the same read."""
    with open(path, "rb", buffering=0) as f:
        header, rest = _header(f)
        s = Summary(header)
        users = assistants = 0
        info = False
        for buf, end in chunks(f, first=rest):
            u, a, _, infos, other = _counts(buf, end)
            if other:
                # not every line is laid out as panto writes it: count line by line
                f.seek(0)
                s = _summarize_lines(f, Summary(header))
                s.match = None if needle is None else grep(path, needle)
                return s
            if needle is not None and s.match is None:
                s.match = _search(buf, end, needle)
            users += u
            assistants += a
            if s.prompt is None and users:
                s.prompt = _first_prompt(buf, end)
            info = info or infos > 0
        s.messages = users + assistants
        if info:
            f.seek(0)
            s.name = _last_name(f)
        found, s.last = _last_in(buf, end)
        if not found:
            s.last = _last_timestamp(f)
    return s


def _last_in(buf, end):
    """(decided, timestamp) from the last lines of a buffer: decided is False
    when the buffer ran out before an entry with a valid timestamp or the header."""
    hi = end - 1
    for _ in range(TAIL_LINES):
        if hi <= 0:
            return False, None
        lo = buf.rfind(b"\n", 0, hi) + 1
        obj = stream.loads(buf[lo:hi])
        k = kind(obj)
        if k == stream.HEADER:
            return True, None
        if k == stream.ENTRY and epoch(obj["timestamp"]) is not None:
            return True, obj["timestamp"]
        if lo == 0:
            return False, None
        hi = lo - 1
    return True, None


def _first_prompt(buf, end):
    i = 0
    pattern = b'"message":{"role":"user"'
    while (i := buf.find(pattern, i, end)) >= 0:
        raw, stop = _line_at(buf, i, end)
        obj = stream.loads(raw)
        if role_of(obj) == "user" and first_text(obj) is not None:
            return first_text(obj)
        i = stop + 1 if stop >= 0 else end
    return None


def _last_name(f):
    name = None
    for buf, end in chunks(f):
        i = 0
        while (i := buf.find(_INFO, i, end)) >= 0:
            raw, stop = _line_at(buf, i, end)
            obj = stream.loads(raw)
            if kind(obj) == stream.ENTRY and obj.get("type") == "sessionInfo" and isinstance(obj.get("name"), str):
                name = obj["name"]
            i = stop + 1 if stop >= 0 else end
    return name


def last_timestamp(path, kept=None):
    """The timestamp of a session's last entry that has a valid one, or None.
    With `kept` (a list), the line that decided is added to it as (its offset,
    its bytes without the line feed, what it parsed to): a reader of the same
    file that comes to those bytes at that offset need not parse them again."""
    with open(path, "rb") as f:
        return _last_timestamp(f, kept)


def activity(last, mtime_ns):
    """When a session was last active, as epoch seconds: its last entry's
    timestamp, the file's mtime only when no entry has a valid one (SPEC §4.2)."""
    t = epoch(last)
    return mtime_ns / 1e9 if t is None else t


def tail_timestamp(f):
    """last_timestamp of an open file (its position is left at the end)."""
    return _last_timestamp(f)


def _last_timestamp(f, kept=None):
    """The rule: of the file's complete lines (each ended by a line feed; what
    follows the last one is torn or empty), the last TAIL_LINES, newest first,
    until the header (None) or an entry with a valid timestamp. The line
    feeds are found reading back from the end in growing steps into one
    buffer; each line is then read once, whole: a line of 100 MB costs two
    reads and a parse, not a re-split of the tail at each step."""
    fd, pos = f.fileno(), f.seek(0, os.SEEK_END)
    raw = bytearray(min(pos, 1 << 20))
    view = memoryview(raw)
    want, end, lines = 1 << 12, None, 0    # end: the line feed ending the line looked for
    while pos > 0:
        step = min(pos, want, len(raw))
        want *= 2
        pos -= step
        if os.preadv(fd, [view[:step]], pos) != step:
            return None         # cut shorter meanwhile: nothing to tell
        hi = step
        while (nl := raw.rfind(b"\n", 0, hi)) >= 0:
            if end is not None:
                line = bytes(view[nl + 1:end - pos]) if end - pos <= step else \
                    os.pread(fd, end - pos - nl - 1, pos + nl + 1)
                decided, ts, obj = _decides(line)
                if decided:
                    if kept is not None:
                        kept.append((pos + nl + 1, line, obj))
                    return ts
                lines += 1
                if lines >= TAIL_LINES:
                    return None
            end, hi = pos + nl, nl
    return _decides(os.pread(fd, end, 0))[1] if end is not None else None


def _decides(raw):
    """(decided, timestamp, the parsed line) of one line read back from the
    end: decided by the header (no timestamp) or an entry with a valid one."""
    obj = stream.loads(raw)
    k = kind(obj)
    if k == stream.HEADER:
        return True, None, obj
    if k == stream.ENTRY and epoch(obj["timestamp"]) is not None:
        return True, obj["timestamp"], obj
    return False, None, obj


def _summarize_lines(f, s):
    """The careful way, for files not laid out as panto writes them."""
    for buf, end in chunks(f):
        for raw in buf[:end].split(b"\n"):
            if not raw.strip():
                continue
            obj = stream.loads(raw)
            k = kind(obj)
            if k != stream.ENTRY:
                continue
            t = obj.get("type")
            if t == "message":
                role = obj["message"]["role"]
                if role in ("user", "assistant"):
                    s.messages += 1
                if role == "user" and s.prompt is None:
                    s.prompt = first_text(obj)
            elif t == "sessionInfo" and isinstance(obj.get("name"), str):
                s.name = obj["name"]
            if epoch(obj["timestamp"]) is not None:
                s.last = obj["timestamp"]
    return s


# -- searching ----------------------------------------------------------------

_MEMMEM = []


def memmem():
    """The C library's memmem, or None where there is none.

    Finding a few bytes is most of a scan's work, and bytes.find runs at
    about 1.5 GB/s on JSON text (its skip heuristic stumbles on quotes and
    common letters) where glibc's memmem runs three times as fast; so the
    scanners (panto-cost's marks, panto-ls --grep) call it through ctypes
    (standard library) when they can. A call costs about a microsecond:
    use it on large buffers.
    """
    if not _MEMMEM:
        try:
            import ctypes

            f = ctypes.CDLL(None).memmem
            f.restype = ctypes.c_void_p
            f.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
            _MEMMEM.append((f, ctypes))
        except (ImportError, OSError, AttributeError, TypeError):
            _MEMMEM.append(None)
    return _MEMMEM[0]


def searcher(memmem, buf, end):
    """find(needle, start, stop) -> index or -1, like buf.find, through memmem."""
    f, ctypes = memmem
    keep = ctypes.c_char_p(buf)  # points into buf itself (no copy) and holds a reference to it
    base = ctypes.cast(keep, ctypes.c_void_p).value

    def find(needle, start, stop):
        if start >= stop or stop > end:
            return -1 if start >= stop else buf.find(needle, start, stop)
        hit = f(base + start, stop - start, needle, len(needle))
        return -1 if hit is None else hit - base

    find.keep = keep
    return find



MAX_VARIANTS = 8


def _forms(ch):
    """The JSON bytes of a character and of its other cases, lowercased as
    bytes.lower() lowers ASCII (non-ASCII letters are left as they are)."""
    out = []
    for c in {ch, ch.lower(), ch.upper(), ch.title(), ch.casefold()}:
        if len(c) == 1 and c.lower() == ch.lower():
            b = orjson.dumps(c)[1:-1].lower()
            if b not in out:
                out.append(b)
    return sorted(out)


def _not_utf8(text):
    """--grep TEXT that is not UTF-8 (bytes the shell passed as they were):
    session text is UTF-8, so nothing could match; a usage error that shows
    the bytes."""
    from pantolib.errors import UsageError

    raw = os.fsencode(text)
    shown = "".join(chr(b) if 0x20 <= b < 0x7f and b != 0x5c else f"\\x{b:02x}" for b in raw[:40])
    more = "…" if len(raw) > 40 else ""
    return UsageError(f"--grep TEXT is not valid UTF-8 ('{shown}{more}'): session text is UTF-8, "
                      f"so it could match nothing (check the shell's quoting or the terminal's encoding)")


class Needle:
    """TEXT as panto writes it in a session file, for a case-insensitive search.

    The raw bytes are lowered (ASCII) and searched for every spelling of the
    text's non-ASCII letters in their cases (`CAFÉ` is looked for as `café`
    and `cafÉ`); a hit only makes its line a candidate, which is parsed and
    checked (`matches`) on the message's text itself.
    """

    def __init__(self, text):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _not_utf8(text) from None
        self.text = text
        self.folded = text.lower()
        forms = [_forms(ch) for ch in text]
        # The piece of the text with the most bytes whose spellings are few:
        # a window [i, j) slid along the text, each end moving forwards only
        # (linear in the text's length, however long).
        best, best_len = (0, 0), -1
        j, n, size = 0, 1, 0        # the window [i, j): its spellings and bytes
        for i in range(len(forms)):
            if j < i:
                j, n, size = i, 1, 0
            while j < len(forms) and n * len(forms[j]) <= MAX_VARIANTS:
                n *= len(forms[j])
                size += len(forms[j][0])
                j += 1
            if size > best_len:
                best, best_len = (i, j), size
            if j > i:                # forms[i] leaves the window
                n //= len(forms[i])
                size -= len(forms[i][0])
        variants = [b""]
        for f in forms[best[0]:best[1]]:
            variants = [v + x for v in variants for x in f]
        self.literals = variants

    def find(self, find, start, end):
        """The first position of a candidate, or -1; find(needle, start, stop)
        searches lowered bytes (bytes.find, or a searcher)."""
        best = -1
        for lit in self.literals:
            i = find(lit, start, end if best < 0 else min(end, best + len(lit)))
            if i >= 0 and (best < 0 or i < best):
                best = i
        return best

    def matches(self, text):
        return self.folded in text.lower()


def searchable(obj):
    """The texts of a message entry a search looks in: text blocks, tool
    names and inputs, tool results (thinking and signatures are not)."""
    if kind(obj) != stream.ENTRY or obj.get("type") != "message":
        return
    from pantolib import entries

    for block, text in entries.texts_of(obj):
        if block["type"] == "toolUse":
            yield block["name"]
        yield text


def snippet(text, needle, width=80):
    """One line of at most `width` characters around the first match."""
    from pantolib import terminal

    i = max(0, text.lower().find(needle.folded))
    before = max(0, i - max(0, width - len(needle.text)) // 3)
    piece = text[before:before + width * 2]
    line = " ".join(terminal.visible_line(piece).split())
    if before > 0:
        line = "…" + line
    if len(line) > width:
        line = line[:width - 1] + "…"
    return line


def grep(path, needle):
    """The first snippet of the file's message text that matches, or None."""
    with open(path, "rb", buffering=0) as f:
        _, rest = _header(f)
        for buf, end in chunks(f, first=rest):
            found = _search(buf, end, needle)
            if found is not None:
                return found
    return None


def _search(buf, end, needle):
    """The first matching snippet in the whole lines buf[:end], or None."""
    low = buf.lower()
    find = low.find
    if end >= FAST_FROM and memmem() is not None:
        find = searcher(memmem(), low, end)
    i = 0
    while i < end and (i := needle.find(find, i, end)) >= 0:
        raw, stop = _line_at(buf, i, end)
        for text in searchable(stream.loads(raw)):
            if needle.matches(text):
                return snippet(text, needle)
        i = stop + 1 if stop >= 0 else end
    return None


# -- priced entries (panto-cost) ------------------------------------------------

def priced(obj):
    """Whether a parsed line is a turn to price: an assistant message, a
    compaction entry or a branchSummary entry.

    The verdict on the line is the stream's (`stream.classify`): a line that
    is not a valid header, entry or bare entry raises ValueError saying why,
    whatever it holds.
    """
    if stream.classify(obj) == stream.HEADER:
        return False
    return stream.is_assistant(obj) or stream.is_compaction(obj) or stream.is_branch_summary(obj)


class PricedEntries:
    """The priced entries of one stream, read without parsing the other lines.

    A line is parsed only when it contains the bytes `"assistant"`,
    `"compaction"` or `"branchSummary"` (`stream.ASSISTANT_MARK`,
    `stream.COMPACTION_MARK`, `stream.BRANCH_SUMMARY_MARK`): the role value
    of every assistant message and the type of every compaction and branch
    summary entry, whatever the key spacing, as long as they are not
    written with \\u escapes. Inside JSON strings quotes are escaped, so
    message text rarely matches; a match is judged by the stream's rules
    (`priced`), and one that is not a turn is dropped. Other lines are not
    validated (panto-log replay does that). The first non-blank line must be
    a session header or an entry (a stream without header); its header, if
    any, is `.header`.

    A matching line that is not valid JSON, or not a valid entry, is not
    counted and is named in `.notes` (FILE:LINE: why); the lines after it
    still count. In a file, a last line without its line feed is a torn write
    and ignored; on a stream (`stream=True`) it counts if it parses. The file
    is only read; memory stays within a chunk and the longest line.

    `start` resumes a file read before up to that offset (the end of a
    line; f is positioned there), whose first line was checked then
    (`started`). After the scan, `covered` is the offset of the end of the
    last whole line read, `bad` the (line, why) of the lines not counted and
    `torn` the line number of a torn last line (or None).
    """

    def __init__(self, f, name, stream=False, chunk=CHUNK, fast=True, start=0, started=False):
        self.f, self.name, self.stream, self.chunk = f, name, stream, chunk
        self.header, self.bad, self.torn = None, [], None
        self._first = not started
        self._fast = fast
        self.covered = self._start = start

    @property
    def notes(self):
        """FILE:LINE: what is wrong, for each line not counted (and a torn tail)."""
        out = [f"{self.name}:{n}: {why}; not counted" for n, why in self.bad]
        if self.torn is not None:
            out.append(f"{self.name}:{self.torn}: the last line has no line feed (a torn write); ignored")
        return out

    @property
    def started(self):
        """Whether the first non-blank line has been read (and checked)."""
        return not self._first

    def __iter__(self):
        read, size = self.f.read, self.chunk
        try:  # line numbers are only needed for notes: count them then, if the file can seek
            self._count = not self.f.seekable()
        except (AttributeError, ValueError, OSError):
            self._count = True
        pending, self._before, self._offset = [], 0, self._start
        left = None
        if not self._count:   # a file: never ask for much more than is there (a big buffer costs page faults)
            try:
                left = os.fstat(self.f.fileno()).st_size - self.f.tell()
            except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
                left = None
        while True:
            if left is None:
                chunk = read(size)
            else:
                chunk = read(min(size, left + 1)) if left >= 0 else b""
                left -= len(chunk)
            if chunk:
                if chunk.rfind(b"\n") < 0:  # a line longer than a chunk: gather it
                    pending.append(chunk)
                    continue
                buf = b"".join(pending) + chunk if pending else chunk
            else:
                buf = b"".join(pending)
                if not buf.strip():
                    return
                if not self.stream:
                    self.torn = self._lineno(buf, 0)
                    return
                buf += b"\n"  # a stream's unterminated last line counts if it parses
            end = buf.rfind(b"\n") + 1
            yield from self._scan(buf, end)
            if not chunk:
                return
            if self._count:
                self._before += buf.count(b"\n", 0, end)
            self._offset += end
            self.covered = self._offset
            pending = [buf[end:]] if end < len(buf) else []

    def _lineno(self, buf, pos):
        """The line number of offset pos in buf (the current window of the stream)."""
        if self._count:
            return self._before + buf.count(b"\n", 0, pos) + 1
        here = self.f.tell()
        try:
            self.f.seek(0)
            n, left = 0, self._offset + pos
            while left > 0:
                block = self.f.read(min(left, CHUNK))
                if not block:
                    break
                n += block.count(b"\n")
                left -= len(block)
            return n + 1
        finally:
            self.f.seek(here)

    def _scan(self, buf, end):
        loads, find = orjson.loads, buf.find
        mark = find
        if self._fast and end >= FAST_FROM and memmem() is not None:
            mark = searcher(memmem(), buf, end)
        a_mark, c_mark, b_mark = stream.ASSISTANT_MARK, stream.COMPACTION_MARK, stream.BRANCH_SUMMARY_MARK
        pos = 0
        if self._first:
            pos = self._first_line(buf, end)
            if pos is None:
                return
            if pos < 0:  # the first line was a priced entry
                pos = -pos
                yield self._first_entry
        a, c, b = mark(a_mark, pos, end), mark(c_mark, pos, end), mark(b_mark, pos, end)
        while True:  # the next of any mark; each search runs once per match
            if c < 0 or 0 <= b < c:   # compactions and branch summaries are rare: one "other" mark
                c, b = b, c
                c_mark, b_mark = b_mark, c_mark
            if a < 0 and c < 0:
                return
            i = c if a < 0 or 0 <= c < a else a
            s = buf.rfind(b"\n", 0, i) + 1
            e = find(b"\n", i) + 1
            try:
                obj = loads(buf[s:e])
                if priced(obj):
                    yield obj
                elif obj["type"] == "session":
                    self._bad(buf, s, "a session header after the first line")
            except orjson.JSONDecodeError:
                self._bad(buf, s, "not valid JSON")
            except ValueError as why:
                self._bad(buf, s, str(why))
            if a >= 0 and a < e:
                a = mark(a_mark, e, end)
            if c >= 0 and c < e:
                c = mark(c_mark, e, end)
            if b >= 0 and b < e:
                b = mark(b_mark, e, end)

    def _first_line(self, buf, end):
        """Check the first non-blank line; the offset after it (negative: yield it), or None."""
        pos = 0
        while pos < end:
            e = buf.find(b"\n", pos) + 1
            raw = buf[pos:e]
            if raw.strip():
                break
            pos = e
        else:
            return None
        self._first = False
        try:
            obj = orjson.loads(raw)
            kind = stream.classify(obj)
        except (orjson.JSONDecodeError, ValueError) as e:
            why = "not valid JSON" if isinstance(e, orjson.JSONDecodeError) else str(e)
            from pantolib.errors import SessionError

            raise SessionError(f"not a panto session or stream ({why})", self.name,
                               self._lineno(buf, pos)) from None
        if kind == stream.HEADER:
            self.header = obj
            return e
        if priced(obj):
            self._first_entry = obj
            return -e
        return e

    def _bad(self, buf, start, why):
        self.bad.append((self._lineno(buf, start), why))
