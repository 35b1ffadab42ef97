"""panto-log import: other agents' sessions as panto sessions (SPEC §12).

`one` prints the panto stream of one source session; `everything` brings
every session of the agents found into panto's sessions directory,
incrementally: each source is read on from where the last run stopped
(a record per source under $XDG_STATE_HOME/panto/import/, in a few files
by a hash of its name: its device, inode, the offset reached, a CRC-32 of
the 4 KiB before it and the reader's state), and each panto file gets its
new entries with one fdatasync (session.Batch); the remembered offset is
saved only after that.
A run in which no source changed only stats them (the identities of the
last run are kept together in one index file) and writes nothing.

A response copied into several files is paid once: the first copy imported
keeps its usage, later ones carry "billedIn" (the session that paid). Which
response was imported where is kept in a small SQLite table beside the
offsets, committed just before the records of the files synced since are
saved (every SAVE_EVERY or more: _Run.due; and at the end).
"""
import os
import time

from pantolib import agents, paths, persist
from pantolib.agents.common import blake2b
from pantolib.errors import PantoError

VERSION = 1
HEAD = 64 * 1024
TAIL = 4096


# -- what is remembered per source ------------------------------------------------


def _dir(env=None):
    return os.path.join(paths.state_dir(env), "import")


BUCKETS = 16      # files the records are kept in, by a hash of the source's name


def _bucket(source):
    return blake2b(source.encode("utf-8", "surrogateescape"), 1)[0] % BUCKETS


def _bucket_path(k, env=None):
    return os.path.join(_dir(env), f"offsets-{k:x}")


class Records:
    """Where each source was read to (its record: a dict), kept in BUCKETS
    files by a hash of the source's name, not one file per source: a run
    loads the buckets of the sources it reads, and writes back those it
    changed (creating 2,000 files had cost a first import 2-3 s of the
    system's time). A bucket that is not persist's, or not a dict, holds
    nothing."""

    def __init__(self, env=None):
        self.env = env
        self.buckets = {}       # k: {source: record}, as loaded
        self.dirty = set()

    def _of(self, source):
        k = _bucket(source)
        held = self.buckets.get(k)
        if held is None:
            data = persist.load(_bucket_path(k, self.env), _RECORD)
            held = self.buckets[k] = data if type(data) is dict else {}
        return k, held

    def get(self, source):
        rec = self._of(source)[1].get(source)
        return rec if type(rec) is dict else None

    def put(self, source, record):
        k, held = self._of(source)
        held[source] = record
        self.dirty.add(k)

    def drop(self, source):
        k, held = self._of(source)
        if held.pop(source, None) is not None:
            self.dirty.add(k)

    def save(self):
        """Write the buckets changed since the last save, atomically; the
        numbers of those that could not be (their sources' records are
        not to be counted on)."""
        failed = {k for k in sorted(self.dirty) if not persist.save(_bucket_path(k, self.env), _RECORD,
                                                                    self.buckets[k])}
        self.dirty = set()
        return failed


def _sweep_old_records(env=None):
    """The one-file-per-source records of earlier versions, removed (read by
    nobody since)."""
    d = _dir(env)
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if len(name) == 37 and name.endswith(".json"):
            try:
                int(name[:32], 16)
                os.unlink(os.path.join(d, name))
            except (ValueError, OSError):
                pass


def _index_path(env=None):
    return os.path.join(_dir(env), "index.marshal")


_INDEX, _RECORD = "import-index", "import-offsets"


def load_index(env=None):
    """{source: identity} of the last run: one file, read without orjson (a
    run where nothing changed reads it, lists and stats the sources, and
    stops). marshal's format 0 in persist's one private, checksummed format
    (keyed by the installed code); anything else reads as empty."""
    import marshal

    body = persist.read(_index_path(env), _INDEX)
    try:
        data = marshal.loads(body) if body is not None else None
    except (ValueError, EOFError, TypeError):
        return {}
    return data if type(data) is dict else {}


def save_index(index, env=None):
    import marshal

    return persist.write(_index_path(env), _INDEX, marshal.dumps(index, 0))


def _words(e, where=None):
    """An error's own words, naming its file once: an OSError by its file
    (else `where`) and its strerror; any other as it is."""
    if isinstance(e, OSError) and e.strerror:
        named = e.filename or where
        return f"{named}: {e.strerror}" if named else e.strerror
    return str(e)


def why(source, e):
    """One line on what went wrong with a source, naming it once: the
    error's words (_words) with the source in front, where they begin with
    the source or its file (a SessionError names the file) instead of it."""
    text = _words(e, source)
    for named in (f"{source}: ", f"{_file_of(source)}: "):
        if text.startswith(named):
            return f"{source}: {text[len(named):]}"
    return f"{source}: {text}"


def _file_of(source):
    """The file a source lives in (an opencode session is DATABASE#ID)."""
    if "#" in source and not os.path.exists(source):
        return source.rsplit("#", 1)[0]
    return source


def identity(st):
    return tuple(persist.ident(st))


def _crc_before(path, end):
    """The CRC-32 of the TAIL bytes before `end` (fewer at the top), None when
    the file is shorter: persist.crc through a descriptor, no buffered file
    object (per source of a run: 2,000 of them took 66 ms through open(),
    25 ms so)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        return persist.crc(fd, end, max(0, end - TAIL))
    finally:
        os.close(fd)


def resume_point(source, rec, st):
    """(start, state) to read a source on from: the remembered end when the
    file is the same one and only grew (device, inode, not shorter, the same
    bytes before the offset); else (0, None): read again from the top."""
    if rec is None or type(rec.get("end")) is not int:
        return 0, None
    if [rec.get("dev"), rec.get("ino")] != [st.st_dev, st.st_ino]:
        return 0, None
    file = _file_of(source)
    if file == source:
        if st.st_size < rec["end"]:
            return 0, None
        try:
            if _crc_before(file, rec["end"]) != rec.get("crc"):
                return 0, None
        except OSError:
            return 0, None
    return rec["end"], rec.get("state")


# -- which agent --------------------------------------------------------------------


def available(names=agents.AGENTS):
    """(name, module) of each agent whose importer is installed."""
    out = []
    for name in names:
        try:
            out.append((name, agents.module(name)))
        except ImportError:
            continue
    return out


def detect(path, agent=None):
    """The module of the agent whose session file `path` is (named, or sniffed)."""
    if agent is not None:
        if agent not in agents.AGENTS:
            raise PantoError(f"unknown agent '{agent}' (one of {', '.join(agents.AGENTS)})")
        found = available([agent])
        if not found:
            raise PantoError(f"no importer for '{agent}' is installed")
        return found[0][1]
    with open(path, "rb") as f:
        head = f.read(HEAD)
    for _, mod in available():
        if mod.sniff(head):
            return mod
    raise PantoError(f"{path}: not a session file of claude-code, codex, pi or opencode")


# -- one source to stdout ----------------------------------------------------------


def one(path, agent, session_id, out, warn, verbose):
    """Print the panto stream of the session in `path`."""
    import stat

    from pantolib import stream

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PantoError(f"'{path}': no such file") from None
    if stat.S_ISDIR(st.st_mode):
        raise PantoError(f"'{path}' is a directory, not a session file")
    mod = detect(path, agent)
    path = os.path.abspath(path)
    source = path if session_id is None else f"{path}#{session_id}"
    reader = mod.Reader(source)

    def lines():
        for obj in reader:
            obj.pop("_billing", None)
            yield stream.dumps(obj)

    stream.write_joined(out, lines())
    _report_bad(path, reader, warn, verbose)


def _report_bad(path, reader, warn, verbose):
    if not reader.bad:
        return
    if verbose:
        for n, why in reader.bad:
            warn(f"{path}:{n}: {why}; skipped")
    else:
        n = len(reader.bad)
        warn(f"{path}: {n} malformed line{'s' if n != 1 else ''} skipped (-v names them)")


# -- who paid for a response ---------------------------------------------------------


class BillingError(PantoError):
    """The table of who paid failed: the run stops (no source is to blame)."""


WHOLE = "whole"      # Billing: a response known by its whole billing list


def _key(name):
    return int.from_bytes(blake2b(name.encode("utf-8", "surrogatepass"), 8), "big") >> 1


def ask(billing, eid):
    """The keys a response is known by (Billing), of its "_billing" list:
    (sidechain, message id's, its sidechain copy's, with the request id's)
    for Claude Code's [message id, request id, sidechain]; (WHOLE, the
    list's, the entry's id, None) for any other agent's. Hashed where the
    source is read (in a worker, when there are workers)."""
    if len(billing) != 3 or type(billing[2]) is not bool:   # (repr: any value, huge numbers included)
        return WHOLE, _key("k:" + repr(list(billing))), eid, None
    mid, rid, side = billing
    return side, _key(f"m:{mid}"), _key(f"s:{mid}"), None if side else _key(f"p:{mid}\0{rid}")


class Billing:
    """Which session paid for each API response imported (SQLite, opened on
    first use): the first session a response is imported into keeps its
    usage; a copy elsewhere is written with billedIn. A Claude Code
    response ([message id, request id, sidechain]) is known by (message id,
    request id), and by message id alone when a copy is in a sidechain (its
    reader bills a copy within one file); any other agent's names the agent
    first and is known by the whole list (pi: its time, model and tokens;
    opencode: its times, model and tokens, or its session and message id),
    a copy in the same session included (pi's rewritten version 1 files):
    the table keeps the entry that paid with its session, so that the same
    entry read again (after a kill, before its session was synced) still
    pays.
    Keys are 63-bit hashes of those names (an integer primary key: one
    B-tree lookup each).

    The keys met since the last commit wait in memory (`new`, the first
    session named for a key kept, as the table's INSERT OR IGNORE keeps
    it) and are written in key order at `commit`, with the records of the
    sessions synced meanwhile: one pass down the B-tree, not a write per
    source. The table is asked only for keys it may hold: every key when
    it held some as it was opened, else only those this run wrote (a Bloom
    filter of them says which may be: a first import asks about the copies
    it meets, and a few others)."""

    PENDING = 1 << 16    # keys held in memory at most (a huge source): past this, written at once
    SHIFT = 23           # a key's two bits in the filter: its low SHIFT bits, and the SHIFT bits above them
    BLOOM = 1 << SHIFT   # the filter's bits (1 MiB: about 2% of keys asked in vain after 600,000 written)
    ROWS = 250           # rows an INSERT writes (500 parameters: under SQLite's 999 before 3.32). 600,000 keys
                         # in 10 batches: 0.41 s, where a statement a row took 0.94-0.96 s

    def __init__(self, env=None):
        self.env, self.db = env, None
        self.new = {}
        self.asked = False      # the table held keys when opened: ask it about every key
        self.written = None     # the filter of the keys this run wrote (a bytearray once one is)

    def _connect(self, path):
        import sqlite3

        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA mmap_size=268435456")
        # KiB. Keys are written sorted, a pass down the B-tree a commit, and pages are read through the
        # mapping: a first import of 10,000 sessions (600,000 keys) took as long with 8 MiB as with 64,
        # in 28 MB less memory, and one of a 700 MB transcript in 7 MB less (the cache grew with the table).
        db.execute("PRAGMA cache_size=-8192")
        db.execute("CREATE TABLE IF NOT EXISTS paid2 (key INTEGER PRIMARY KEY, session TEXT NOT NULL)")
        return db

    def _open(self):
        import sqlite3

        from pantolib import files

        d = _dir(self.env)
        files.make_dirs(d)
        os.chmod(d, 0o700)
        path = os.path.join(d, "billing.sqlite")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.close(fd)
        try:
            self.db = self._connect(path)
        except sqlite3.DatabaseError:
            # unreadable: start it again (what it knew is lost, not what the sessions hold)
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.unlink(path + suffix)
                except OSError:
                    pass
            self.db = self._connect(path)
        self.db.execute("BEGIN")
        self.asked = self.db.execute("SELECT 1 FROM paid2 LIMIT 1").fetchone() is not None

    def payers(self, asks, sid):
        """The session that paid for each response asked of (`ask`): None
        where this is the first copy, which pays. Looked up together: one
        query for the lot, when the table may hold any."""
        import sqlite3

        try:
            return self._payers(asks, sid)
        except sqlite3.Error as e:
            raise self._failed(e) from None

    def _failed(self, e):
        """SQLite's error (a full disk, an unwritable folder, ...) as the run's, naming the file."""
        where = os.path.join(_dir(self.env), "billing.sqlite")
        return BillingError(f"'{where}': could not keep which session paid for each response ({e}); "
                          f"the sessions written are whole: run the import again")

    def _payers(self, asks, sid):
        if self.db is None:
            self._open()
        known = {}      # the table's answers, then this call's own first copies
        if self.asked or self.written is not None:
            wanted = list({k for side, m, s, p in asks for k in ((m,) if side else (p, s))})
            if not self.asked:
                wanted = self._maybe(wanted)
            for i in range(0, len(wanted), 500):
                part = wanted[i:i + 500]
                known.update(self.db.execute(f"SELECT key, session FROM paid2 WHERE key IN "
                                             f"({','.join('?' * len(part))})", part).fetchall())
        new = self.new

        def look(k):
            found = known.get(k)
            return new.get(k) if found is None else found

        out = []
        for side, m, s, p in asks:
            if side == WHOLE:      # known as "SESSION ENTRY-ID": the same entry read again pays still
                found, mine = look(m), f"{sid} {s}"
                if found is None:
                    new.setdefault(m, mine)
                    known[m] = mine
                out.append(None if found is None or found == mine else found.split(" ", 1)[0])
                continue
            found = look(m) if side else look(p)
            if found is None and not side:
                found = look(s)
            if found is None:
                pairs = ((m, sid), (s, sid)) if side else ((p, sid), (m, sid))
                for k, v in pairs:
                    new.setdefault(k, v)
                known.update(pairs)
            out.append(None if found == sid else found)
        if len(new) > self.PENDING:      # a huge file: memory stays bounded
            self._write()
        return out

    def _maybe(self, keys):
        """The keys this run may have written (the others it did not): those
        whose two bits are both set (a key's bits: its low SHIFT bits, and
        the SHIFT bits above them)."""
        bits, m, s = self.written, self.BLOOM - 1, self.SHIFT
        return [k for k in keys if bits[(k & m) >> 3] >> (k & 7) & 1 and bits[(k >> s & m) >> 3] >> (k >> s & 7) & 1]

    def _write(self):
        new = self.new
        if new:
            keys = sorted(new)      # (ints: sorting the (key, session) pairs took three times as long)
            self._insert(keys, list(map(new.__getitem__, keys)))
            if not self.asked:
                if self.written is None:
                    self.written = bytearray(self.BLOOM >> 3)
                bits, m, s = self.written, self.BLOOM - 1, self.SHIFT
                for k in keys:
                    bits[(k & m) >> 3] |= 1 << (k & 7)
                    bits[(k >> s & m) >> 3] |= 1 << (k >> s & 7)
            self.new = {}

    def _insert(self, keys, sessions):
        """Each key with its session, in order, unless the table has the key:
        ROWS rows a statement, not one."""
        flat = [None] * (2 * len(keys))
        flat[0::2], flat[1::2] = keys, sessions
        size = 2 * self.ROWS
        whole = len(flat) // size * size
        if whole:
            self.db.executemany(_inserting(self.ROWS), (flat[i:i + size] for i in range(0, whole, size)))
        if whole < len(flat):
            self.db.execute(_inserting((len(flat) - whole) // 2), flat[whole:])

    def commit(self):
        if self.db is not None:
            self._commit(again=True)

    def close(self):
        """Commit what is left and close; the table is closed even when that fails."""
        if self.db is not None:
            try:
                self._commit(again=False)
            finally:
                self.db.close()
                self.db = None

    def _commit(self, again):
        """The keys waiting written and committed (again: a new transaction begun)."""
        import sqlite3

        try:
            self._write()
            if self.db.in_transaction:      # (SQLite ends it itself on some errors)
                self.db.execute("COMMIT")
            if again:
                self.db.execute("BEGIN")
        except sqlite3.Error as e:
            raise self._failed(e) from None


def _inserting(n):
    """The statement that writes n (key, session) rows into the table of who
    paid, a key it has already kept as it is (the first session named)."""
    return "INSERT OR IGNORE INTO paid2 VALUES " + ",".join(["(?,?)"] * n)


# -- every source into session files -------------------------------------------------


class Summary:
    def __init__(self):
        self.new = self.grown = self.unchanged = self.entries = 0
        self.skipped = {}
        self.bad = 0
        self.failed = 0

    def line(self, dry_run):
        sessions = self.new + self.grown + self.unchanged
        verb = "would add" if dry_run else "added"
        s = (f"{sessions} session{'s' if sessions != 1 else ''} ({self.new} new, {self.grown} grown, "
             f"{self.unchanged} unchanged), {verb} {self.entries} entr{'ies' if self.entries != 1 else 'y'}")
        if self.skipped:
            parts = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items(), key=lambda kv: (-kv[1], kv[0])))
            s += f"; skipped: {parts}"
        if self.bad:
            s += f"; {self.bad} malformed line{'s' if self.bad != 1 else ''}"
        if self.failed:
            s += f"; {self.failed} source{'s' if self.failed != 1 else ''} failed"
        return s


IN_FLIGHT = 8      # sessions whose sync runs while the next sources are read
SAVE_EVERY = 2.0   # s: who paid is committed and the records kept are saved at most this often (and at the end)
SAVE_SHARE = 20    # and no sooner than this many times what the last save took: a commit rewrites the pages its
                   # keys fell on (all of them, once keys are many) and records are saved whole, so saves every
                   # 2 s wrote with the square of the history (10,000 Claude Code sessions, traced: 0.81 GB of
                   # SQLite and 0.35 GB of records for 0.57 GB of sessions; 0.11 and 0.05 GB with this)
FEW = 2            # an agent with no more sources changed than this syncs them without the pool
SWITCH = 0.001     # s: a thread of the pool gives the others (this one, back from a system call) their turn this
                   # soon, not after Python's 5 ms (a first import of 2,000 sessions: 4.3 -> 3.9 s, medians of 8)
AHEAD_FROM = 8 << 20  # workers read ahead (jobs.workers) from this many bytes of sources (100 sessions, 8.5 MB:
                      # 0.43 -> 0.35 s, medians of 8 side by side)
HELD = 16 << 20    # bytes of sessions made whole at their sync (a worker's answer each) waiting for it, at most
AHEAD = 16 << 20   # a file read ahead by a worker is at most this big (a bigger one is read here, as it goes:
                   # memory stays flat). A worker holds its answer whole, about three times the file; 50 Codex
                   # rollouts of 7.8 MB took 5.3-6.0 s in this process alone, 3.3-3.8 s read ahead


def everything(names, dry_run, verbose, warn, env=None, progress=None):
    """Import every source of the named agents (all when empty); the summary.
    progress(done, total): called as the run goes on (total None while the
    sources are looked for; done again for the same source as a large one is
    read), to show how far it is.

    Sources are taken one after the other (in each agent's order: copies are
    billed in it); when there are many, worker processes read them ahead
    (jobs.ordered: _take), else each is read as it is taken. Each session
    file's single sync runs in a small pool of threads while the next
    sources are taken, so that the disk's waits overlap. A source's record
    is kept once its file is synced, and saved (Records) every SAVE_EVERY
    or more (_Run.due) and at the end; the directories of new files are
    synced once each at the end (a record whose file did not survive a
    power loss finds it missing and reads the source again from the top).
    One run at a time (_lock); a dry run writes nothing and takes no lock."""
    env = os.environ if env is None else env
    for name in names:
        if name not in agents.AGENTS:
            raise PantoError(f"unknown agent '{name}' (one of {', '.join(agents.AGENTS)})")
    lock = None if dry_run else _lock(env, warn)
    try:
        return _everything(names, dry_run, verbose, warn, env, progress)
    finally:
        if lock is not None:
            os.close(lock)


def _lock(env, warn):
    """The import's lock, held for a whole run (its descriptor: closing it lets
    go). Two runs at once would write the same sessions, records and table
    of payers, and SQLite refuses the second's writes: the second waits for
    the first to end, saying so, then finds what it left."""
    import fcntl

    from pantolib import files

    d = _dir(env)
    files.make_dirs(d)
    os.chmod(d, 0o700)
    fd = os.open(os.path.join(d, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            warn("another 'panto-log import --all' is running: waiting for it to end")
            fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _everything(names, dry_run, verbose, warn, env, progress=None):
    from pantolib import files

    if progress is not None:
        progress(0, None)
    ended = False
    summary = Summary()
    old = load_index(env)
    index = {}
    billing = Billing(env)
    records = Records(env)
    run = _Run(env, summary, index, warn, billing, records)
    try:
        todo = []       # (mod, source, stat, few): the sources changed, agent by agent, each in its order
        for name, mod in available(names or agents.AGENTS):
            try:
                found = mod.find(env) if hasattr(mod, "find") else mod.sources(env)
            except OSError as e:
                warn(f"{name}: {_words(e)}; its sessions were left out")
                summary.failed += 1
                continue
            changed = []
            stat, get, same = os.stat, old.get, 0        # the loop of a run where nothing changed
            for source in found:
                try:
                    st = stat(source if "#" not in source else _file_of(source))
                except OSError:
                    continue
                if files.waits(st.st_mode):      # (a folder is let through: it fails as it is read)
                    warn(f"{source}: not a regular file (a FIFO's open would wait for a writer); left out")
                    summary.failed += 1
                    continue
                ident = identity(st)
                if get(source) == ident:
                    index[source] = ident
                    same += 1
                else:
                    changed.append((source, st))
            summary.unchanged += same
            if hasattr(mod, "order") and len(changed) > 1:
                stats = dict(changed)
                changed = [(s, stats[s]) for s in mod.order(list(stats))]
            few = len(changed) <= FEW
            todo += [(mod, source, st, few) for source, st in changed]
        if todo:
            _take_all(todo, run, dry_run, verbose, warn, summary, billing, records, env, progress)
        run.wait()
        ended = True
    finally:
        run.close()
        if not dry_run:
            try:
                billing.close()
            except PantoError:
                if ended:       # else the error that stopped the run is the one to say
                    raise
            if index != old:
                _forget_gone(old, index, records, env)
                save_index(index, env)
    return summary


def _forget_gone(old, index, records, env):
    """The records of the sources of the last run that are gone (Claude Code
    deletes old transcripts) dropped; on a first run (or the first of new
    code), the records of earlier versions swept."""
    if not old:
        _sweep_old_records(env)
    for source in old:
        if source not in index and not os.path.lexists(_file_of(source)):
            records.drop(source)
    records.save()


def _take_all(todo, run, dry_run, verbose, warn, summary, billing, records, env, progress=None):
    """Import the sources of `todo` in order, each one's sync submitted to the
    run. When there are many, worker processes read them ahead (forked here,
    before the pool has a thread), this process taking each one's entries
    in order."""
    from functools import partial

    from pantolib import jobs

    # an opencode database's session (DATABASE#ID) is read here: over AHEAD, whatever its file's size
    sizes = [st.st_size if "#" not in source else AHEAD + 1 for _, source, st, _ in todo]
    for _, source, _, _ in todo:    # their buckets loaded before the workers start: they have them
        records.get(source)
    prices = run.prices = None if dry_run else _prices(env)
    ahead = jobs.ordered(todo, lambda item: _take(item[0], item[1], item[2], records, prices), sizes, AHEAD,
                         AHEAD_FROM)
    there = _There()
    total = len(todo)
    try:
        for i, ok, value in ahead:
            mod, source, st, few = todo[i]
            tick = None if progress is None else partial(progress, i, total)
            if tick is not None:
                tick()
            try:
                if ok is False:
                    raise value
                job = _read_source(mod, source, st, dry_run, verbose, warn, summary, billing, records, env,
                                   value, prices, there, tick)
            except BillingError:
                raise
            except (PantoError, OSError) as e:
                warn(why(source, e))
                summary.failed += 1
                continue
            if job is not None:
                run.submit(source, st, job, few=few)
        if progress is not None:
            progress(total, total)
    finally:
        ahead.close()


class _Run:
    """The syncs in flight, and what follows each: the source's record."""

    def __init__(self, env, summary, index, warn, billing, records):
        self.env, self.summary, self.index, self.warn, self.billing, self.records = \
            env, summary, index, warn, billing, records
        self.pool = None
        self.jobs = []            # (source, stat, job, future of its sync, bytes its batch holds until then)
        self.unsaved = []         # (source, stat): records kept, not saved yet
        self.saved_at = time.monotonic()
        self.save_took = 0.0      # s: what the last save took
        self.dirs = set()
        self.prices = None        # the price table the sessions' token sums were counted with
        self.tallies = {}         # panto-cost's cache entries of the files made (tallies.made), by key

    def submit(self, source, st, job, few=False):
        """Sync a source's session in the pool; few (and no pool yet): here and
        now. The oldest syncs are waited for once 2 * IN_FLIGHT are in flight,
        and once the sessions waiting to be made hold more than HELD bytes."""
        if self.pool is None and not few:
            import sys
            from concurrent.futures import ThreadPoolExecutor

            sys.setswitchinterval(SWITCH)
            self.pool = ThreadPoolExecutor(IN_FLIGHT)
        batch = job.batch      # (what a file not made yet holds, read before its sync lets it go)
        held = batch.pending_size if batch is not None and batch.file is None else 0
        self.jobs.append((source, st, job, self._call(job.finish), held))
        if len(self.jobs) >= 2 * IN_FLIGHT:
            self._settle(IN_FLIGHT)
        while len(self.jobs) > 1 and sum(j[4] for j in self.jobs) > HELD:
            self._settle(1)

    def _call(self, fn, *args):
        """fn(*args) in the pool (a future), or without one, done now (_Done)."""
        return _Done(fn, *args) if self.pool is None else self.pool.submit(fn, *args)

    def _settle(self, n):
        """The oldest n jobs: their syncs done, their records kept."""
        group, self.jobs = self.jobs[:n], self.jobs[n:]
        for source, st, job, future, _ in group:
            try:
                future.result()
            except (PantoError, OSError) as e:
                self.warn(why(source, e))
                self.summary.failed += 1
                continue
            if job.new_dir is not None:
                self.dirs.add(job.new_dir)
            if job.tally is not None:
                self.tallies[job.target] = job.tally
            self.records.put(source, job.record())
            self.unsaved.append((source, st))
        if self.due(time.monotonic()):
            self._save()

    def due(self, now):
        """Whether a save is due: SAVE_EVERY since the last one, and SAVE_SHARE
        times what that one took (saves take a share of the run, however large
        the table of who paid grows)."""
        return now - self.saved_at >= max(SAVE_EVERY, SAVE_SHARE * self.save_took)

    def _save(self):
        """Who paid for the synced sessions' responses committed (once for
        many: each commit rewrites the pages its keys fell on), then their
        records saved (a kill loses those kept since the last save: their
        sources are read again, nothing is written twice); the sources whose
        records are, in the index."""
        began = time.monotonic()
        self.billing.commit()
        failed = self.records.save()
        for source, st in self.unsaved:
            if not failed or _bucket(source) not in failed:
                self.index[source] = identity(st)
        self.unsaved = []
        self.saved_at = time.monotonic()
        self.save_took = self.saved_at - began

    def wait(self):
        self._settle(len(self.jobs))
        self._save()
        from pantolib import files

        for d in sorted(self.dirs):
            files.remove_stale(d)
            try:
                files.fsync_dir(d)
            except OSError:
                pass
        if self.tallies:
            from pantolib import tallies

            tallies.keep(self.prices, self.tallies, self.env)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)


class _Done:
    """What a pool's future says of a call made here and now: a run that
    syncs a few sessions needs no threads (importing and starting a pool
    cost more than the syncs)."""

    def __init__(self, fn, *args):
        try:
            self.value, self.error = fn(*args), None
        except Exception as e:      # as a future keeps it, for result()
            self.value, self.error = None, e

    def result(self):
        if self.error is not None:
            raise self.error
        return self.value


class _Job:
    """One source read: its session's batch to finish (the sync), then its record."""

    def __init__(self, batch, reader, st, source, target, sid, crc, rows=None):
        self.batch, self.reader, self.st, self.source, self.target, self.sid, self.crc = \
            batch, reader, st, source, target, sid, crc
        self.deferred = False
        self.new_dir = None
        self.rows = rows        # the token sums of the file's priced lines, when this batch makes it whole
        self.tally = None       # then, once made: its entry in panto-cost's cache (tallies.made)

    def finish(self):
        try:
            if self.batch is not None:
                self.deferred = self.batch.finish() is None
                if self.batch.lean:     # made by this batch, at its finish or before (a large one): its folder
                                        # synced at the end of the run
                    self.new_dir = os.path.dirname(self.target)
                if self.batch.made is not None and self.rows is not None:
                    self._tally(*self.batch.made)
        finally:
            if self.batch is not None:
                self.batch.close()

    def _tally(self, stamp, st, data):
        """Its entry in panto-cost's cache: a first report then reads nothing of it."""
        from pantolib import tallies

        self.batch.made = None
        self.tally = tallies.made(self.batch.header, self.rows, stamp, st, persist.settles(self.target, st.st_dev),
                                  data)

    def record(self):
        st = self.st
        if self.deferred:
            # no assistant entry yet: nothing written; read it again from the top once it changes
            return {"dev": st.st_dev, "ino": st.st_ino, "end": 0, "crc": 0, "state": None, "session": None,
                    "sid": None}
        return {"dev": st.st_dev, "ino": st.st_ino, "end": self.reader.end, "crc": self.crc,
                "state": self.reader.state, "session": self.target, "sid": self.sid}


def _begin(mod, source, st, records):
    """Where a source is read on from: (start, its session file or None, its
    session id or None, the reader)."""
    rec = records.get(source)
    start, state = resume_point(source, rec, st)
    target = rec.get("session") if rec and start else None
    if start and not (isinstance(target, str) and os.path.lexists(target)):
        start, state, target = 0, None, None      # the panto file is gone: make it again
    sid = rec.get("sid") if rec and start else None
    return start, target, sid, mod.Reader(source, start, state)


def _lines(reader):
    """A reader's entries as _read_source takes them: (line or None, entry or
    None, id (None: the session header), whether an assistant message (when
    there is no entry), who may have paid for it (`ask` of its _billing) or None)."""
    for obj in reader:
        if obj.get("type") == "session":
            yield None, obj, None, False, None
        else:
            b = obj.pop("_billing", None)
            yield None, obj, obj["id"], False, None if b is None else ask(b, obj["id"])


_ENTRY, _ASSISTANT, _HEADER, _TURN = 0, 1, 2, 3     # the kinds of the lines of a _Lines
# (_TURN: a compaction or branchSummary entry; it and an assistant message are priced: tallies.rows_of)


class _Lines:
    """A source's lines as a worker sends them (_take): few objects, however
    many lines (the parent unpacks each answer while the workers run). The
    lines joined in one bytes object, their lengths, their ids (None: the
    session header), their kinds, and (index, `ask` of its _billing) of
    those that may have been paid for elsewhere."""

    def __init__(self, data, sizes, eids, kinds, billed, rows=None):
        self.data, self.sizes, self.eids, self.kinds, self.billed = data, sizes, eids, kinds, billed
        self.rows = rows        # the token sums of the priced lines (tallies.rows_of), or None

    def fresh(self):
        """Whether the lines are a session whole, from its header on (one, first)."""
        return self.kinds[:1] == bytes((_HEADER,)) and self.kinds.count(_HEADER) == 1

    def raws(self):
        out, at, data = [], 0, self.data
        for size in self.sizes:
            out.append(data[at:at + size])
            at += size
        return out

    def __iter__(self):
        """As _lines gives them."""
        billed = dict(self.billed)
        for i, (raw, eid, kind) in enumerate(zip(self.raws(), self.eids, self.kinds)):
            yield raw, None, eid, kind == _ASSISTANT, billed.get(i)


def _take(mod, source, st, records, prices=None):
    """In a worker: one source read whole, its entries written as lines
    (plain values only: _read_source takes them as _Lines); read from its
    top, with their token sums when there are prices (tallies.rows_of)."""
    from pantolib import stream, tallies

    start, target, sid, reader = _begin(mod, source, st, records)
    data, sizes, eids, kinds, billed = bytearray(), [], [], bytearray(), []    # (the lines: one copy of them)
    count = tallies.Rows(prices, _QUARTERS) if prices is not None and start == 0 else None
    for _, obj, eid, _, b in _lines(reader):
        if b is not None:
            billed.append((len(sizes), b))
        raw = stream.dumps(obj)
        data += raw
        sizes.append(len(raw))
        eids.append(eid)
        kind = (_HEADER if eid is None else _ASSISTANT if stream.is_assistant(obj)
                else _TURN if stream.is_compaction(obj) or stream.is_branch_summary(obj) else _ENTRY)
        kinds.append(kind)
        if count is not None and (kind == _ASSISTANT or kind == _TURN):
            count.add(obj)
    rows = count.rows() if count is not None else None
    return (start, target, sid, (data, sizes, eids, bytes(kinds), billed, rows), reader.end,
            reader.state, reader.skipped, reader.bad, _crc_of(source, reader.end))


_QUARTERS = {}      # a worker's memo for tallies.rows_of (pricing.when_key)


def _fresh(lines, billing, env, warn, prices, there):
    """A source's lines (_Lines) that are a session whole, taken all at once,
    not line by line: into a Batch for its file when there is none (`there`:
    _There; a first import), or nothing at all when its file begins with
    them byte for byte (_holds: the same session imported before, by other
    code, which left no record this code reads on from: an upgrade). (batch
    or None, entries added, session id, file, the token sums of its priced
    lines or None), or None (its file holds something else: its lines are
    taken one by one, those it has left out)."""
    from pantolib import session

    head, obj, target = _session_of(lines, env)
    sid, exists = obj["id"], there(target)
    body, rows = _paid(lines, billing, sid, prices)
    if exists:
        return (None, 0, sid, target, None) if _holds(target, head, body) else None
    there.made(target)
    # (one made from now on is found as this one is made, and given what it lacks: Batch._create)
    batch = session.Batch(target, obj, head, env=env, warn=warn, sync_dir=False, exists=False)
    try:
        batch.add_lines(body, len(lines.sizes) - 1, _ASSISTANT in lines.kinds)
        batch.look = rows is not None
    except BaseException:
        batch.close()
        raise
    return batch, len(lines.sizes) - 1, sid, target, rows


def _session_of(lines, env):
    """A whole session's lines (_Lines): its header's bytes, the header, and its session file's path."""
    import orjson

    head = lines.data[:lines.sizes[0]]
    obj = orjson.loads(head)
    return head, obj, paths.session_path(obj, env)


def _paid(lines, billing, sid, prices):
    """The lines of a session whole (_Lines) after its header, as they are
    written: a response another session paid for without its usage, naming
    that session (_billed_in); and the token sums of the priced ones
    (lines.rows, moved where an entry changed), or None."""
    import orjson

    from pantolib import stream, tallies

    body, rows = memoryview(lines.data)[lines.sizes[0]:], lines.rows   # (not a copy: an answer may be megabytes)
    if lines.billed:
        payers = billing.payers([b for _, b in lines.billed], sid)
        elsewhere = {k: payer for (k, _), payer in zip(lines.billed, payers) if payer is not None}
        if elsewhere:
            raws = lines.raws()
            was, now = [], []       # the entries changed, as read and as written
            for k, payer in elsewhere.items():
                was.append(orjson.loads(raws[k]))
                now.append(_billed_in(orjson.loads(raws[k]), payer))
                raws[k] = stream.dumps(now[-1])
            body = b"".join(raws[1:])
            if rows is not None:        # counted as written: those entries' sums moved
                rows = tallies.moved(prices, rows, was, now)
    return body, rows


def _holds(path, head, body):
    """Whether the file at path begins with head and body, byte for byte: it
    holds each of these entries, as these very lines (a session file only
    grows: what a REPL added to it after them stays)."""
    size = len(head) + len(body)
    got = _top(path, size)      # (startswith is one memcmp; == of memoryviews goes item by item: 92 KB, 160 -> 2 us)
    return got is not None and len(got) == size and got.startswith(head) and got.startswith(body, len(head))


def _top(path, size):
    """At most `size` bytes from the top of the file at path, or None (_reading)."""
    return _reading(path, lambda fd: os.pread(fd, size, 0))


def _reading(path, read, none=None):
    """read(a descriptor of the file at path), opened to be read only: never
    locked or written, and not waited on (a FIFO there); `none` when it is
    not a regular file, or cannot be opened or read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return none
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o100000:     # (stat.S_ISREG, without importing stat)
            return none
        return read(fd)
    except (PantoError, OSError):
        return none
    finally:
        os.close(fd)


def _dry(lines, env, there):
    """For a dry run, a source's lines (_Lines) that are a session whole whose
    file is there: (session id, file, how many of its entries the file
    lacks), or None (no file, or one that does not begin with them: each
    entry is counted as it comes)."""
    _, obj, target = _session_of(lines, env)
    if not there(target):
        return None
    held = _held(target, lines)
    return None if held is None else (obj["id"], target, len(lines.sizes) - 1 - held)


def _held(path, lines):
    """How many of a session's entries (_Lines, its header first) the file at
    path begins with, in order, or None when it begins with anything else:
    each line the same bytes, or, for a response that may have been paid
    elsewhere, a line of the same id (a real run writes it with billedIn
    then: a dry run asks nobody who paid, _paid)."""
    import orjson

    data, sizes, eids, billed = lines.data, lines.sizes, lines.eids, {k for k, _ in lines.billed}
    got = _top(path, 2 * len(data) + (1 << 20))     # (a line with billedIn is about as long as without)
    if got is None:
        return None
    at = pos = 0
    for i, size in enumerate(sizes):
        end = got.find(b"\n", pos) + 1
        if not end:
            return i - 1 if i else None     # (the file ends here: the entries from i on are not in it)
        if not (end - pos == size and got.startswith(memoryview(data)[at:at + size], pos)):
            if i not in billed:
                return None
            try:
                obj = orjson.loads(got[pos:end])
            except orjson.JSONDecodeError:
                return None
            if type(obj) is not dict or obj.get("id") != eids[i]:
                return None
        at, pos = at + size, end
    return len(sizes) - 1


def _ids_of(path):
    """The ids of the entries of the session file at path, read as any reader
    reads it (session.read_indexed, its torn tail left as it is, nothing
    written); none when it cannot be read (_reading)."""
    from pantolib import session

    return _reading(path, lambda fd: session.read_indexed(path, fd, fix=False).ids, ())


def _billed_in(obj, payer):
    """An entry whose response another session paid for: without its usage, naming that session."""
    obj.pop("usage", None)
    if type(obj.get("message")) is dict:
        obj["message"].pop("usage", None)
    obj["billedIn"] = payer
    return obj


def _prices(env):
    """The price table a report reads (models.toml), to count the token sums
    of each file made with (tallies.rows_of); None when it cannot be read
    (the report reads those files then, and says why)."""
    from pantolib import models_toml

    try:
        return models_toml.load(None, env, cache=True)
    except (PantoError, OSError):
        return None


def _crc_of(source, end):
    """What a source's record keeps of the bytes before `end` (_crc_before),
    taken as soon as it is read: of what was read, not of what the file
    holds by the time its session is synced (and a source gone meanwhile
    fails now, as the source's own error, not the record's)."""
    file = _file_of(source)
    return _crc_before(file, end) if file == source else 0


class _There:
    """Whether a session file is there, as os.path.lexists says, from one
    listing of each session folder (taken the first time the run asks
    about it) and the files the run has made since. One lstat a session had
    taken a tenth of a first import of 10,000 (1.6 s: the folder's lock is
    held while the syncs link files into it). A file another process makes
    meanwhile is found as this run's is made (session.Batch), as one made
    after an lstat was."""

    def __init__(self):
        self.names = {}     # folder -> the names in it

    def __call__(self, path):
        folder, name = os.path.split(path)
        names = self.names.get(folder)
        if names is None:
            try:
                names = set(os.listdir(folder))
            except (FileNotFoundError, NotADirectoryError):
                names = set()
            except OSError:
                return os.path.lexists(path)
            self.names[folder] = names
        return name in names

    def made(self, path):
        """The run makes a session file at path (asked about before)."""
        folder, name = os.path.split(path)
        names = self.names.get(folder)
        if names is not None:
            names.add(name)


class _Taken:
    """What the reader of a source a worker read (_take) ended with."""

    def __init__(self, end, state, skipped, bad, crc):
        self.end, self.state, self.skipped, self.bad, self.crc = end, state, skipped, bad, crc


def _read_source(mod, source, st, dry_run, verbose, warn, summary, billing, records, env, taken, prices,
                 there, tick=None):
    """Read one source on from its remembered offset into a Batch (nothing
    synced yet); the _Job that finishes it, or None (a dry run). taken: what
    a worker read of it (_take), else (None) it is read here. prices: the table
    the token sums a worker counted were counted with (tallies.rows_of).
    there: whether a session file is there (_There). tick: called as its
    entries are taken (the run's progress), or None."""
    import orjson

    from pantolib import session, stream

    if taken is None:
        start, target, sid, reader = _begin(mod, source, st, records)
        lines = _lines(reader)
    else:
        start, target, sid, packed, *rest = taken
        lines = _Lines(*packed)
        reader = _Taken(*rest)
    batch = None
    added = 0
    existed = start > 0
    rows = None
    if taken is not None and not dry_run and lines.fresh():
        made = _fresh(lines, billing, env, warn, prices, there)
        if made is not None:
            batch, added, sid, target, rows = made
            lines = ()
    elif taken is not None and lines.fresh():
        seen = _dry(lines, env, there)
        if seen is not None:
            sid, target, added = seen
            existed, lines = True, ()
    held, billed = [], []       # entries waiting for who paid for their responses (asked together)
    has = ()                    # a dry run's: the ids of the entries the session file has

    def let_go():
        nonlocal added
        payers = billing.payers([b for _, b in billed], sid) if billed else ()
        for (k, _), payer in zip(billed, payers):
            if payer is not None:
                entry = held[k]
                obj = _billed_in(entry[1] if entry[1] is not None else orjson.loads(entry[0]), payer)
                entry[0], entry[1] = None, obj
        for raw, obj, eid, assistant in held:
            if batch.add(raw if raw is not None else stream.dumps(obj), obj, eid, assistant):
                added += 1
        held.clear()
        billed.clear()

    try:
        for raw, obj, eid, assistant, b in lines:
            if tick is not None:            # (a large source read here takes seconds)
                tick()
            if eid is None:                 # the session header
                if obj is None:
                    obj = orjson.loads(raw)
                sid = obj["id"]
                target = paths.session_path(obj, env)
                existed = there(target)
                if dry_run and existed:     # (read from its top: what the file has is not counted)
                    has = _ids_of(target)
                if not dry_run:
                    there.made(target)
                    batch = session.Batch(target, obj, raw if raw is not None else stream.dumps(obj), env=env,
                                          warn=warn, sync_dir=False)
                continue
            if batch is None and not dry_run:
                if target is None:
                    raise PantoError("the source gave entries before its session header")
                batch = session.Batch(target, None, None, env=env, warn=warn, sync_dir=False)
            if dry_run:
                added += eid not in has
                continue
            held.append([raw, obj, eid, assistant])
            if b is not None and sid is not None:
                billed.append((len(held) - 1, b))
                if len(billed) >= 256:
                    let_go()
            elif not billed:
                let_go()
        if held:
            let_go()
        crc = reader.crc if taken is not None else None if dry_run else _crc_of(source, reader.end)
    except BaseException:
        if batch is not None:
            batch.close()
        raise
    for k, v in reader.skipped.items():
        summary.skipped[k] = summary.skipped.get(k, 0) + v
    summary.bad += len(reader.bad)
    if reader.bad:
        _report_bad(source, reader, warn, verbose)
    if batch is not None and batch.file is None and not batch.assistant:
        added = 0                                   # deferred: nothing will be written
    summary.entries += added
    if added and not existed:
        summary.new += 1
    elif added:
        summary.grown += 1
    else:
        summary.unchanged += 1
    if dry_run:
        return None
    return _Job(batch, reader, st, source, target, sid, crc, rows)
