"""What sessions cost: the priced entries of session files, read fast, and
their token sums by model, day and session, priced at models.toml's rates
(prices.py holds the rates and the arithmetic, models_toml.py the table)."""
import io
import os

from pantolib.entries import usage_counts
from pantolib.prices import UNKNOWN, in_force, today, utc_day

CHUNK = 4 << 20
FAST_FROM = 64 << 10            # from this much text on, the scanner searches with memmem (ctypes)
FIELDS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h",
          "reasoning", "knownPicoUsd", "unpricedTurns", "compactions")



# Token sums per key, with no dollars in them (a cache of them stays right
# when models.toml changes): (provider, model, WHEN, ABOVE, MASK) -> SUMS.
#   WHEN   the two days a turn's timestamp gives: "UTC-DAY LOCAL-DAY" for
#          what panto writes (UTC, ms; the local day is that of its quarter
#          hour, as every time zone's midnight falls on one, and is cached per
#          quarter hour), "=" and the timestamp for any other string, None for
#          none. The local day is the time zone's: a cache of sums is kept per
#          time zone (`cache.zone`).
#   ABOVE  whether the request's prompt exceeded the model's above_tokens
#          (a cache of sums is keyed by `Prices.tiers()`, which decides it).
#   MASK   which of the five priced categories had tokens (bits in RATE
#          order), -1 for an entry without usage: turns alike in it are
#          priced alike, so a sum prices exactly as its turns would one by one.
SUMS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning", "compactions")
_QUARTER = {f"{m:02d}": f"{m // 15 * 15:02d}:00Z" for m in range(60)}
_CANONICAL = []


def when_key(ts, quarters):
    """WHEN of a timestamp (see above); `quarters` is a dict that remembers
    the WHEN of each quarter hour (for one time zone)."""
    if type(ts) is not str:
        return None
    if len(ts) == 24 and ts[23] == "Z":
        if not _CANONICAL:
            import re

            _CANONICAL.append(re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z").fullmatch)
        if _CANONICAL[0](ts):
            q = ts[:14] + _QUARTER[ts[14:16]]
            when = quarters.get(q)
            if when is None:
                when = quarters[q] = f"{q[:10]} {local_day(q)}"
            return when
    return "=" + ts


def days_of(when):
    """(UTC day or None, local day or 'unknown') of a WHEN."""
    if when is None:
        return None, "unknown"
    if when[0] == "=":
        return utc_day(when[1:]), local_day(when[1:])
    return when[:10], when[11:]


class Tokens:
    """The token sums of priced entries (see SUMS above), e.g. of one file."""

    def __init__(self, prices, sums=None, quarters=None):
        self.prices = prices
        self.sums = {} if sums is None else sums
        self._tiers = {}
        self._quarters = {} if quarters is None else quarters
        self.today_dependent = False  # a tier was decided by today's rates (an entry without a time)

    def add(self, entry):
        """Count one priced entry (a parsed line that `Scan` yields)."""
        if entry.get("type") == "compaction":
            src, compaction = entry, 1
            provider, model = entry.get("provider"), entry.get("model")
        else:
            src, compaction = entry["message"], 0
            provider, model = src.get("provider"), src.get("model")
            if provider is None:
                provider = entry.get("provider")
            if model is None:
                model = entry.get("model")
        if type(provider) is not str:
            provider = None
        if type(model) is not str:
            model = None
        ts = entry.get("timestamp")
        when = when_key(ts, self._quarters)
        n = usage_counts(src.get("usage"))
        above = False
        if n is None:
            mask, inp, out, cr, cw, cw1h, reasoning = -1, 0, 0, 0, 0, 0, 0
        else:
            inp, out, cr, cw, reasoning, cw1h = n
            if cw1h > cw:
                cw1h = cw
            mask = (inp > 0) | (out > 0) << 1 | (cr > 0) << 2 | (cw > cw1h) << 3 | (cw1h > 0) << 4
            pm = (provider, model)
            tiers = self._tiers.get(pm, self)
            if tiers is self:
                periods = self.prices.periods(provider, model)
                tiers = self._tiers[pm] = periods if periods and any(
                    p.above_tokens is not None for _, p in periods) else None
            if tiers is not None:
                if len(tiers) == 1:
                    price = tiers[0][1]
                else:
                    day = utc_day(ts)
                    if day is None:
                        day, self.today_dependent = today(), True
                    price = in_force(tiers, day)
                above = price.above_tokens is not None and inp + cr + cw > price.above_tokens
        key = (provider, model, when, above, mask)
        row = self.sums.get(key)
        if row is None:
            self.sums[key] = [1, inp, out, cr, cw, cw1h, reasoning, compaction]
        else:
            row[0] += 1
            row[1] += inp
            row[2] += out
            row[3] += cr
            row[4] += cw
            row[5] += cw1h
            row[6] += reasoning
            row[7] += compaction

    def rows(self):
        """The sums as lists for a cache: [provider, model, when, above, mask, *SUMS]."""
        return [[*k, *v] for k, v in self.sums.items()]

    @staticmethod
    def read(rows):
        """The sums of `rows()` read back (ValueError if they make no sense)."""
        out = {}
        for r in rows:
            if type(r) is not list or len(r) != 5 + len(SUMS):
                raise ValueError("not a row of token sums")
            p, m, w, above, mask = r[:5]
            v = r[5:]
            if not ((p is None or type(p) is str) and (m is None or type(m) is str)
                    and (w is None or type(w) is str) and type(above) is bool and type(mask) is int
                    and all(type(x) is int and x >= 0 for x in v)):
                raise ValueError("not a row of token sums")
            key = (p, m, w, above, mask)
            if key in out:
                raise ValueError("a row twice")
            out[key] = v
        return out


class Tally:
    """Exact sums of turns, tokens and picodollars per (group, provider, model).

    A turn is an assistant message or a compaction entry (whose usage,
    provider and model sit at the entry's top level). Each is priced at the
    rates in force on its timestamp's UTC day; an entry without a timestamp
    that reads (a bare entry not yet stamped) at today's. Tokens are summed
    first (`Tokens`) and priced when the rows are asked for, so sums read
    from a cache price exactly as the entries would. `since`/`until`
    ('YYYY-MM-DD', local days, inclusive) keep only the turns of those days.
    """

    def __init__(self, prices, by=None, since=None, until=None):
        self.prices, self.by, self.since, self.until = prices, by, since, until
        self.parts = []   # (group, Tokens.sums) of the entries added one by one, priced when asked
        self._sums = {}   # group -> its Tokens.sums in parts
        self._merged = {}  # the rows of the sums merged, priced already
        self._rates_memo, self._days_memo = {}, {}
        self._tokens = Tokens(prices)
        self._rows = self._rollups = None

    def add(self, entry, group=None):
        """Count one priced entry (a parsed line that `Scan` yields)."""
        t = self._sums.get(group)
        if t is None:
            t = self._sums[group] = {}
            self.parts.append((group, t))
        self._tokens.sums = t
        self._tokens.add(entry)
        self._rows = self._rollups = None

    def merge(self, group, sums):
        """Add token sums: a Tokens.sums dict or a list of Tokens rows (e.g. one
        file's), priced at once (nothing of them is kept)."""
        self._price(((group, sums),), self._merged)
        self._rows = self._rollups = None

    @property
    def rows(self):
        """(group, provider, model) -> FIELDS, priced now."""
        if self._rows is None:
            rows = {k: list(v) for k, v in self._merged.items()}
            self._rows = self._price(self.parts, rows)
        return self._rows

    def _price(self, parts, rows):
        """Price parts ((group, sums), ...) into rows; returns rows."""
        rates, days = self._rates_memo, self._days_memo
        by_day, ranged = self.by == "day", self.since is not None or self.until is not None
        since, until = self.since or "", self.until or "\uffff"
        width = len(FIELDS)
        for group, sums in parts:
            items = sums.items() if type(sums) is dict else ((tuple(r[:5]), r[5:]) for r in sums)
            for key, v in items:
                if by_day or ranged:
                    when = key[2]
                    day = days.get(when)
                    if day is None:
                        day = days[when] = days_of(when)[1]
                    if ranged and (day == "unknown" or not since <= day <= until):
                        continue
                    if by_day:
                        group = day
                r = rates.get(key, self)
                if r is self:   # the rates of a period, tier and categories: the same over many keys
                    w = key[2]
                    pk = (key[0], key[1], w if w is None or w[0] == "=" else w[:10], key[3], key[4])
                    r = rates.get(pk, self)
                    if r is self:
                        r = rates[pk] = self._rates(*key)
                    rates[key] = r
                rk = (group, key[0], key[1])
                row = rows.get(rk)
                if row is None:
                    row = rows[rk] = [0] * width
                turns, inp, out, cr, cw, cw1h, reasoning, compactions = v
                row[0] += turns
                row[1] += inp
                row[2] += out
                row[3] += cr
                row[4] += cw
                row[5] += cw1h
                row[6] += reasoning
                row[9] += compactions
                if r is None:
                    row[8] += turns
                else:
                    row[7] += inp * r[0] + out * r[1] + cr * r[2] + (cw - cw1h) * r[3] + cw1h * r[4]
        return rows

    def _rates(self, provider, model, when, above, mask):
        """The five rates a sum is priced at (0 where it has no tokens), or None: unpriced."""
        if mask < 0:
            return None
        periods = self.prices.periods(provider, model)
        if periods is None:
            price = UNKNOWN
        elif len(periods) == 1:
            price = periods[0][1]
        else:
            price = in_force(periods, days_of(when)[0] or today())
        out = []
        for bit, rate in enumerate(price.above if above else price.base):
            if mask >> bit & 1:
                if rate is None:
                    return None
                out.append(rate)
            else:
                out.append(0)
        return out

    def rollup(self, part):
        """Rows summed by 'model' ((provider, model)), 'group', or 'total' (one row); computed once."""
        if self._rollups is None:
            from operator import add

            model, group = {}, {}
            for (g, provider, m), row in self.rows.items():
                acc = model.get((provider, m))
                model[(provider, m)] = row if acc is None else list(map(add, acc, row))
                acc = group.get(g)
                group[g] = row if acc is None else list(map(add, acc, row))
            total = [0] * len(FIELDS)
            for row in model.values():
                total = list(map(add, total, row))
            self._rollups = {"model": model, "group": group, "total": total}
        return self._rollups[part]   # to read, not to change


def as_dict(row):
    """A summed row as the JSON report's keys: picoUsd is None when any turn is unpriced."""
    d = dict(zip(FIELDS, row))
    d["picoUsd"] = None if d["unpricedTurns"] else d["knownPicoUsd"]
    return d


def local_day(ts):
    """The local calendar day of a UTC ISO timestamp, or 'unknown'."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d")
    except (TypeError, ValueError, OverflowError, OSError):
        return "unknown"


_STREAM = []


def priced(obj):
    """Whether a parsed line is a turn to price: an assistant message or a compaction entry.

    The verdict on the line is the stream's (`stream.classify`): a line that
    is not a valid header, entry or bare entry raises ValueError saying why,
    whatever it holds.
    """
    if not _STREAM:
        from pantolib import stream  # orjson comes with it: imported only by what reads streams

        _STREAM.extend((stream.classify, stream.HEADER, stream.is_assistant, stream.is_compaction))
    classify, header, is_assistant, is_compaction = _STREAM
    if classify(obj) == header:
        return False
    return is_assistant(obj) or is_compaction(obj)


class Scan:
    """The priced entries of one stream, read without parsing the other lines.

    A line is parsed only when it contains the bytes `"assistant"` or
    `"compaction"` (`stream.ASSISTANT_MARK`, `stream.COMPACTION_MARK`): the
    role value of every assistant message and the type of every compaction
    entry, whatever the key spacing, as long as they are not
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
        import orjson

        from pantolib.stream import ASSISTANT_MARK, COMPACTION_MARK

        loads, find = orjson.loads, buf.find
        mark = find
        if self._fast and end >= FAST_FROM and _memmem() is not None:
            mark = _searcher(_memmem(), buf, end)
        a_mark, c_mark = ASSISTANT_MARK, COMPACTION_MARK
        pos = 0
        if self._first:
            pos = self._first_line(buf, end)
            if pos is None:
                return
            if pos < 0:  # the first line was a priced entry
                pos = -pos
                yield self._first_entry
        a, c = mark(a_mark, pos, end), mark(c_mark, pos, end)
        while True:  # the next of either mark; each search runs once per match
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

    def _first_line(self, buf, end):
        """Check the first non-blank line; the offset after it (negative: yield it), or None."""
        import orjson

        from pantolib.stream import HEADER, classify

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
            kind = classify(obj)
        except (orjson.JSONDecodeError, ValueError) as e:
            why = "not valid JSON" if isinstance(e, orjson.JSONDecodeError) else str(e)
            from pantolib.errors import SessionError

            raise SessionError(f"not a panto session or stream ({why})", self.name,
                               self._lineno(buf, pos)) from None
        if kind == HEADER:
            self.header = obj
            return e
        if priced(obj):
            self._first_entry = obj
            return -e
        return e

    def _bad(self, buf, start, why):
        self.bad.append((self._lineno(buf, start), why))


def _memmem():
    from pantolib import scan

    return scan.memmem()


def _searcher(memmem, buf, end):
    from pantolib import scan

    return scan.searcher(memmem, buf, end)
