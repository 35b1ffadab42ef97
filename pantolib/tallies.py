"""The token sums of session files, read once and then only where they grew.

panto's session files are append-only, so a report need not read again what
it read before: for each file, cost-cache.json (persist.py) keeps the
token sums of its priced entries (pricing.Tokens: counts by provider, model,
time and price tier, never dollars, so a changed models.toml prices them
afresh), the offset of the end of the last whole line they cover, the
CRC-32 of every byte before that offset, and what says that the file is
still the one that was read:

- its identity (device, inode, size, mtime, ctime) alike, and not racy
  (persist.fresh: not changed within the timestamp tick of the entry's
  stamp, or settled: the entry was made by the file's writer, panto-log
  import --all, from a look after its last change on a filesystem that
  stamps every later change anew; `made`): nothing is read at all;
- else, for a file of 1 MiB or more (CRC_FROM), the same device and inode,
  not shorter, and the same CRC-32 of the whole covered range
  (persist.covers): only the bytes after it are read;
- anything else (replaced, cut, rewritten anywhere before the offset, even
  with the same size and mtime) is read again from its first byte.

A cache never changes a figure. It is dropped whole when the price table's
long-context thresholds or the time zone change (they decide which sum a
turn falls in), and with the code that computed it (persist.code).
"""
import os

from pantolib import persist, pricing
from pantolib.errors import SessionError

NAME = "cost-cache.json"
# an entry: [ident, covered, crc, started, header id, created, last, bad, torn, rows, refused, stamp,
#            lineage, settled]
# (lineage: the header's [agent, parentSession, relation], stream.lineage; None before it is read;
#  settled: persist.fresh's, True only for an entry its writer made (`made`))
_LEN = 14
# A file shorter than this keeps no covered range: when it changes it is read
# again whole (a few ms), which costs less than the CRC of its bytes and their
# second read would cost every first report (a tenth of one over 10,000 files).
CRC_FROM = 1 << 20
_UNKNOWN = False   # `last` not looked for yet


def _key(name):
    """A file's cache key: its absolute path. A path that is already absolute and
    plain (what --all lists) is its own, without the cost of os.path.abspath."""
    if name[:1] == "/" and "//" not in name and "/." not in name:
        return name
    return os.path.abspath(name)


class File:
    """What a report needs of one file: its group, token sums, notes, times,
    and its lineage (agent, parentSession, relation: stream.lineage)."""

    __slots__ = ("header_id", "sums", "bad", "torn", "created", "last", "lineage")

    def __init__(self, header_id, sums, bad, torn, created, last, lineage=None):
        self.header_id, self.sums, self.bad, self.torn = header_id, sums, bad, torn
        self.created, self.last = created, last
        self.lineage = ("panto", None, None) if lineage is None else tuple(lineage)

    def notes(self, name):
        out = [f"{name}:{n}: {why}; not counted" for n, why in self.bad]
        if self.torn is not None:
            out.append(f"{name}:{self.torn}: the last line has no line feed (a torn write); ignored")
        return out


class Files:
    """Session files read through the cache, its entries stamped `stamp`
    (persist.now, taken before the files were stat'ed; by default now);
    `use=False`: read whole, cache untouched. `fast=False`: the byte search
    never loads the C library's (scan.memmem): for a few small files, its
    import costs more than it saves."""

    def __init__(self, prices, stamp=None, use=True, env=None, fast=True):
        self.prices, self.use, self.stamp, self.fast = prices, use, persist.now() if stamp is None else stamp, fast
        self.file = persist.path(NAME, env)
        self.tiers, self.zone = prices.tiers(), persist.zone()
        self._quarters = {}   # for pricing.when_key
        self.entries, self.changed, self.seen = {}, False, set()
        self._ready = {}    # key: what a worker process found (read_ahead)
        self._ahead, self._waiting = None, {}    # read_ahead's answers to come, and the keys they are for
        if self.use:
            data = persist.load(self.file, NAME)
            if (type(data) is dict and data.get("tiers") == self.tiers and data.get("zone") == self.zone
                    and type(data.get("files")) is dict):
                self.entries = data["files"]

    def save(self, sweep=True):
        """Write the cache back when it changed; sweep: the entries of files
        neither read this run nor there any more are dropped first."""
        if not (self.use and self.changed):
            return
        gone = [p for p in self.entries if p not in self.seen and not os.path.exists(p)] if sweep else ()
        for p in gone:
            del self.entries[p]
        persist.save(self.file, NAME, {"tiers": self.tiers, "zone": self.zone, "files": self.entries})

    def _entry(self, key):
        """The cache's entry for the file, if it has the shape of one, else None."""
        old = self.entries.get(key) if self.use else None
        if (type(old) is not list or len(old) != _LEN or type(old[0]) is not list or not _lineage_ok(old[12])
                or type(old[13]) is not bool):
            return None
        return old

    def read_ahead(self, todo, span=None):
        """Read the files of `todo` ((name, os.stat) pairs, in the order read() will
        be asked for them) that the cache cannot answer in worker processes, when
        there are enough of them (jobs.ordered); read() then hands out what each
        found as it comes, errors included, and stores its cache entry as it
        would have itself. close() ends the workers."""
        work, sizes, taken = [], [], set()
        for name, st in todo:
            key = _key(name)
            if key in taken:
                continue
            taken.add(key)
            size = self._uncovered(key, st, span)
            if size is not None:
                work.append((name, st, key))
                sizes.append(size)
        if not work:
            return
        from pantolib import jobs

        if jobs.workers(len(work), sum(sizes)) <= 1:
            return
        # in order, as they come: the caller counts each file while the workers read the next ones
        answers = jobs.ordered(work, lambda item: self._job(item, span), sizes, max(sizes))
        self._ahead, self._waiting = (answers, work, span), {key: i for i, (_, _, key) in enumerate(work)}

    def _take(self, key):
        """The workers' answers up to the one for `key` (one nobody answered:
        read() reads that file itself)."""
        answers, work, span = self._ahead
        for i, ok, value in answers:
            _, st, k = work[i]
            self._waiting.pop(k, None)
            if ok is not None:
                self._ready[k] = (st, span, ok, value)
            if k == key:
                return

    def close(self):
        """The workers ended, whatever they had still to answer."""
        if self._ahead is not None:
            self._ahead[0].close()
            self._ahead, self._waiting = None, {}

    def _uncovered(self, key, st, span):
        """The bytes read() would read of the file (an estimate), or None when the cache answers."""
        old = self._entry(key)
        if old is not None and persist.fresh(old[0], old[11], st, old[13]):
            return None if span is None or old[6] is not _UNKNOWN else 0    # else its header and last line
        if old is not None and old[0][:2] == [st.st_dev, st.st_ino] and type(old[1]) is int and 0 < old[1] <= st.st_size:
            return st.st_size - old[1]
        return st.st_size

    def _job(self, item, span):
        """In a worker: read() one file; (its File's fields or the error, and its new cache entry if any)."""
        name, st, key = item
        self.changed = False
        self._ahead, self._waiting = None, {}    # (this worker's copy) it reads every file itself
        try:
            got, error = self.read(name, st, span), None
        except (SessionError, OSError) as e:
            got, error = None, e
        fields = None if got is None else tuple(getattr(got, k) for k in File.__slots__)
        return fields, error, self.entries.get(key) if self.changed else None

    def read(self, name, st, span=None):
        """The File of the session file at `name` (`st`: its os.stat), or None when
        `span` (since, until: local days) shows that none of its entries can lie
        in it: created after `until`, or last active before `since` (entries are
        written in time order). The file is opened only when the cache cannot say."""
        key = _key(name)
        self.seen.add(key)
        if key in self._waiting:
            self._take(key)
        ready = self._ready.pop(key, None)
        if ready is not None and ready[0] is st and ready[1] == span and ready[2]:
            fields, error, entry = ready[3]
            if entry is not None:
                self.entries[key] = entry
                self.changed = True
            if error is not None:
                raise error
            return None if fields is None else File(*fields)
        old = self._entry(key)
        if old is not None and persist.fresh(old[0], old[11], st, old[13]) and (span is None or old[6] is not _UNKNOWN):
            if old[10] is not None:
                raise SessionError(old[10][0], name, old[10][1])
            if span is not None and _outside(span, old[5], old[6]):
                return None
            if old[9] is not None:
                return File(old[4], old[9], old[7], old[8], old[5], old[6], old[12])
        with open(name, "rb", buffering=0) as f:
            return self._read(f, name, key, old, span)

    def _read(self, f, name, key, old, span):
        st = os.fstat(f.fileno())
        ident = persist.ident(st)
        same = old is not None and persist.fresh(old[0], old[11], st, old[13])   # what it says of the file holds
        if span is not None:
            if same and old[6] is not _UNKNOWN:
                created, last = old[5], old[6]
            else:
                created, last = _created(f), _last(f)
            if _outside(span, created, last):
                if same:
                    old[6] = last
                    self.changed = True
                else:
                    self._store(key, [ident, 0, 0, False, None, created, last, [], None, None, None, self.stamp, None,
                                      False])
                return None
        if same and old[9] is not None:
            if span is not None:
                old[6] = last
                self.changed = True
            return File(old[4], old[9], old[7], old[8], old[5], old[6], old[12])
        start, sums, value = 0, {}, 0
        if (old is not None and old[3] is True and old[9] is not None and type(old[1]) is int and old[1] > 0
                and persist.covers(f.fileno(), st, old[0], old[1], old[2])):
            try:
                sums, start, value = pricing.Tokens.read(old[9]), old[1], old[2]
            except ValueError:
                pass
        from pantolib.scan import PricedEntries  # what a cached report never needs

        f.seek(start)
        scan = PricedEntries(f, name, start=start, started=start > 0, fast=self.fast)
        tokens = pricing.Tokens(self.prices, sums, self._quarters)
        add = tokens.add
        try:
            for entry in scan:
                add(entry)
        except SessionError as e:
            self._store(key, [ident, 0, 0, False, None, None, _UNKNOWN, [], None, None, [e.message, e.line],
                              self.stamp, None, False])
            raise
        if start:
            header_id, created, bad = old[4], old[5], old[7] + [list(b) for b in scan.bad]
            lineage = old[12]
        else:
            header_id, created, lineage = _of_header(scan.header)
            bad = [list(b) for b in scan.bad]
        last = _last(f) if span is not None else _UNKNOWN
        rows = tokens.rows()
        if self.use and not tokens.today_dependent:
            covered = _covered(scan.covered)
            value = persist.crc(f.fileno(), covered, start, value) if covered else 0   # of every byte covered
            if value is not None:
                self._store(key, [ident, covered, value, scan.started, header_id,
                                  created, last, bad, scan.torn, rows, None, self.stamp, lineage, False])
        return File(header_id, rows, bad, scan.torn, created, last, lineage)

    def _store(self, key, entry):
        if self.use:
            self.entries[key] = entry
            self.changed = True


def rows_of(prices, entries, quarters=None):
    """The token sums (Tokens.rows) of a session's entries as its writer holds
    them, parsed (panto-log import, before it writes their lines): each that
    `scan.priced` names counted as a report counts its line. None where a
    report would not keep them: an entry it would not count (not a valid
    one), or a tier decided by today's rates."""
    rows = Rows(prices, quarters)
    for entry in entries:
        rows.add(entry)
    return rows.rows()


def moved(prices, rows, was, now):
    """The token sums `rows` (rows_of) of a session whose entries `was` are
    now `now` (the same number, priced ones: an import's copies billed in
    another session), as rows_of of the entries as they are now would count
    them, in another order; None where it would give None. The other
    entries are not parsed again (a first import of 10,000 sessions, a tenth
    of them resumed copies: a twelfth of its main thread)."""
    gone = rows_of(prices, was)
    if gone is None:
        return None
    sums = pricing.Tokens.read(rows)
    for key, counts in pricing.Tokens.read(gone).items():
        left = [a - b for a, b in zip(sums[key], counts)]
        if left[0]:         # turns of that key still counted
            sums[key] = left
        else:
            del sums[key]
    out = Rows(prices, sums=sums)
    for entry in now:
        out.add(entry)
    return out.rows()


class Rows:
    """rows_of, the entries given one by one (none is kept); `sums`: counted
    on from these (pricing.Tokens.read)."""

    def __init__(self, prices, quarters=None, sums=None):
        from pantolib.scan import priced

        self.priced, self.tokens, self.valid = priced, pricing.Tokens(prices, sums, quarters), True

    def add(self, entry):
        if self.valid:
            try:
                if self.priced(entry):
                    self.tokens.add(entry)
            except ValueError:
                self.valid = False

    def rows(self):
        return self.tokens.rows() if self.valid and not self.tokens.today_dependent else None


def _of_header(h):
    """What an entry keeps of a file's parsed header (None: it has none): its
    id, its timestamp (a string, else None) and its lineage (stream.lineage)."""
    from pantolib import stream

    lineage = list(stream.lineage(h))
    if h is None:
        return None, None, lineage
    created = h.get("timestamp")
    return h["id"], created if type(created) is str else None, lineage


def _covered(end):
    """The covered range an entry keeps of a file whose whole lines end at
    `end`: all of it from CRC_FROM on, else none (0: read again whole once it
    changes)."""
    return end if end >= CRC_FROM else 0


def made(header, rows, stamp, st, settled, data):
    """The cache entry of a session file its writer has just made whole, of
    the bytes `data` (its header's line first, `header` parsed): what
    Files.read would store after reading it, with token sums `rows` (rows_of)
    and the writer's look after its last change (stamp, st: files.create's
    `look`); settled: persist.settles of its filesystem (then the entry is
    believed on identity however soon after the write the next report comes)."""
    import zlib

    covered = _covered(len(data))
    header_id, created, lineage = _of_header(header)
    return [persist.ident(st), covered, zlib.crc32(data) if covered else 0, True, header_id, created, _UNKNOWN,
            [], None, rows, None, stamp, lineage, settled is True]


def keep(prices, entries, env=None):
    """Entries of files their writer made ({path: `made`}) added to the cache,
    which is saved; its other entries stay as they were (those of files gone
    are dropped by the next report that saves it)."""
    files = Files(prices, env=env)
    for name, entry in entries.items():
        files.entries[_key(name)] = entry
    files.changed = True
    files.save(sweep=False)


def _lineage_ok(v):
    """Whether a cache entry's lineage makes sense: None, or [agent, parent, relation]
    with a string agent and each other a string or None."""
    return v is None or (type(v) is list and len(v) == 3 and type(v[0]) is str
                         and all(x is None or type(x) is str for x in v[1:]))


def _created(f):
    """The header's timestamp, read from the first line alone (None: no header, or none in it)."""
    from pantolib import stream

    first = os.pread(f.fileno(), 1 << 16, 0)
    nl = first.find(b"\n")
    obj = stream.header_of(first[:nl + 1]) if nl >= 0 else None
    return obj["timestamp"] if obj is not None else None


def _last(f):
    """The timestamp of the file's last entry that has a valid one (scan.py's rule), or None."""
    from pantolib import scan

    here = f.tell()
    try:
        return scan.tail_timestamp(f)
    finally:
        f.seek(here)


def _outside(span, created, last):
    since, until = span
    if since is not None and last is not None:
        day = pricing.local_day(last)
        if day != "unknown" and day < since:
            return True
    if until is not None and created is not None:
        day = pricing.local_day(created)
        if day != "unknown" and day > until:
            return True
    return False
