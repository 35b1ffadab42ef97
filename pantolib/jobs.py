"""Reading many session files at once, on the machine's cores.

A first (uncached) `panto-ls` or `panto-cost` report spends its time reading
and parsing each file, which the rules require. When there is enough such
work (MIN_FILES files and MIN_BYTES bytes the cache does not cover) and more
than one CPU this process may run on, `run` forks worker processes (os.fork,
no pickling of the work: each worker inherits it) that call the same
per-file function the single path calls, and send back, item by item, its
result or the error it raised. The items are cut into batches of about
equal bytes, the largest files first, and each worker takes the next batch
when it is done with one (a pipe holds the batch numbers; a read of 4 bytes
from it takes one), so a worker that is slowed down takes fewer: all end
within about a batch of each other. The caller then takes these results in its
own order, so notes and warnings come out as they would have, and it alone
writes the caches. An item a worker did not answer (it crashed, was killed,
or its result could not be sent) is simply missing: the caller reads that
file itself, as it would have without workers.

`panto-log import --all` reads its sources with `ordered`: the same workers,
each taking the next run of consecutive sources, while the caller takes
their answers in the sources' order and writes the sessions (it bills the
copies of a response in that order) as they read on.

PANTO_JOBS=N: N workers (at most one per item, and at most MAX_PER_CPU per
CPU: more only share the same cores, each one a forked process), whatever the
amount of work; 1: never. Unset, empty or anything else: decided as above.
"""
import fcntl
import marshal
import os

from pantolib import signals
from pantolib.files import write_all

MIN_FILES = 2          # (each file is read by one worker: a first report over 4 sessions of 60 MB, 0.60 -> 0.42 s)
MIN_BYTES = 32 << 20
MAX_PER_CPU = 4


def workers(count, size, env=None, least=MIN_BYTES):
    """How many worker processes to use for `count` items of `size` bytes in
    all (<= 1: none); `least`: the bytes worth forking for (work that costs
    more per byte is worth it sooner)."""
    env = os.environ if env is None else env
    value = env.get("PANTO_JOBS", "")
    if value.isascii() and value.isdigit() and int(value) >= 1:   # digits only: no sign, no space
        return min(int(value), count, MAX_PER_CPU * _cpus())
    if count < MIN_FILES or size < least:
        return 1
    return min(_cpus(), count)


def _cpus():
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run(items, fn, sizes):
    """{index: (True, fn(item)) or (False, the exception it raised)} for the items
    (sizes: the bytes each will read), computed in worker processes; {} when
    one process is enough. fn runs in the workers only, after a fork: what it
    changes in memory stays there. Exceptions that are not Exception (Ctrl-C)
    end the worker; the parent's own KeyboardInterrupt ends every worker."""
    n = workers(len(items), sum(sizes))
    if n <= 1 or not hasattr(os, "fork"):
        return {}
    pool = _Pool(items, fn, _batches(sizes, n))
    try:
        pool.start(n)
        while pool.poll():
            pass
    finally:
        pool.close()
    return pool.done


def ordered(items, fn, sizes, most, least=MIN_BYTES):
    """(index, ok, value) for each item in the items' order, as run says
    (ok: True, or False with the exception), while the workers go on with
    the items after it: the caller works on one item as they read the next.
    ok is None for an item no worker answered (larger than `most` bytes, or
    the worker that took it is gone: each worker says which run it takes as
    it takes it): the caller does that one itself. The items are cut
    into runs of consecutive ones, taken in order, and once the answers
    that came before their turn hold more than `most` bytes, only the
    worker that owes the next one is heard: the others block on their pipes,
    so what waits in memory stays about a run and an answer per worker. The
    workers are as many as `workers` says of the items of at most `most`
    bytes (`least`: its threshold); none (or no fork): every
    item is None's. Close the generator when done with it early: that ends
    the workers."""
    taken = [s for s in sizes if s <= most]     # (the others are the caller's, workers or not)
    n = workers(len(taken), sum(taken), least=least)
    if n <= 1 or not hasattr(os, "fork"):
        for i in range(len(items)):
            yield i, None, None
        return
    batches = _runs(sizes, n, most)
    run_of = {i: k for k, batch in enumerate(batches) for i in batch}
    pool = _Pool(items, fn, batches)
    try:
        pool.start(n)
        done, alive = pool.done, True
        for i in range(len(items)):
            k = run_of.get(i)
            while alive and k is not None and i not in done and not pool.lost(k):
                # Answers that came before their turn wait in memory: past `most` bytes of them,
                # only the worker that owes this one is heard (the others wait on their pipes).
                alive = pool.poll(pool.owner.get(k) if pool.ahead > most else None)
            ok, value = done.pop(i, (None, None))
            pool.ahead -= pool.sizes.pop(i, 0)
            yield i, ok, value
    finally:
        pool.close()


class _Pool:
    """The worker processes of one run and the answers they sent (`done`)."""

    def __init__(self, items, fn, batches):
        self.items, self.fn, self.batches = items, fn, batches
        self.pids, self.pipes, self.done = [], {}, {}
        self.sizes, self.ahead = {}, 0        # the bytes of each answer in `done`, and of them all
        self.owner, self.ended = {}, set()    # batch -> the pipe of the worker that took it; pipes at their end
        self.todo = self.selector = None
        self.chunk = bytearray(1 << 20)

    def start(self, n):
        import selectors
        import sys

        for stream in (sys.stdout, sys.stderr):   # nothing buffered is written twice
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        self.todo = _todo(len(self.batches))
        for _ in range(n):
            # No signal between the fork and the worker counted: one that comes
            # meanwhile is taken once the parent knows its worker (and the child
            # has set its own handlers: the parent's would unwind it as a parent).
            with signals.held():
                r, w = os.pipe()
                _widen(w)
                try:
                    pid = os.fork()
                except OSError:
                    os.close(r)
                    os.close(w)
                    break     # fewer workers: the parent reads what no worker answers
                if pid == 0:
                    _worker(w, self.todo, [r, *self.pipes], self.batches, self.items, self.fn)
                self.pids.append(pid)
                os.close(w)
                self.pipes[r] = bytearray()
        os.close(self.todo)
        self.todo = None
        self.selector = selectors.DefaultSelector()
        for r in self.pipes:
            self.selector.register(r, selectors.EVENT_READ)

    def poll(self, only=None):
        """Wait for answers and take those that came; False once every worker is
        done. only: the pipe of the one worker to hear (while it is open)."""
        if not self.selector.get_map():
            return False
        if only is not None and only not in self.ended:
            self._read(only)
            return True
        for key, _ in self.selector.select():
            self._read(key.fd)
        return True

    def _read(self, r):
        """What came on pipe r (waiting for it), and the answers it completes."""
        n = os.readv(r, [self.chunk])     # into one buffer: no new 1 MiB object per read
        if not n:
            self.selector.unregister(r)
            self.ended.add(r)
            return
        buf = self.pipes[r]
        with memoryview(self.chunk) as chunk:
            buf += chunk[:n]
        at = 0
        view = memoryview(buf)     # each answer read where it lies, not copied out first
        try:
            while len(buf) - at >= 8:
                size = int.from_bytes(view[at:at + 8], "little")
                if len(buf) - at - 8 < size:
                    break
                try:
                    i, ok, value = _unpack(view[at + 8:at + 8 + size])
                    if i < 0:
                        self.owner[-1 - i] = r
                    else:
                        self.done[i] = (ok, value)
                        self.sizes[i] = size
                        self.ahead += size
                except Exception:
                    pass   # not understood: the parent does that item itself
                at += 8 + size
        finally:
            view.release()
        del buf[:at]

    def lost(self, k):
        """Whether batch k's worker has ended: what it did not answer never will be."""
        r = self.owner.get(k)
        return r is not None and r in self.ended

    def close(self):
        if self.selector is not None:
            self.selector.close()
        if self.todo is not None:
            os.close(self.todo)
        for r in self.pipes:
            os.close(r)
        self.pipes = {}
        for pid in self.pids:
            try:
                os.kill(pid, signals.TERM)   # already gone, unless the parent is interrupted
            except OSError:
                pass
        for pid in self.pids:
            try:
                os.waitpid(pid, 0)
            except (OSError, ChildProcessError):
                pass
        self.pids = []


BATCHES_PER_WORKER = 32
MAX_BATCHES = 1024   # their numbers (4 bytes each) fit in any pipe's buffer
SEND = 1 << 16       # a worker's answers are written in pieces of about this much
RUN = 4 << 20        # ordered: the bytes of a run of items, at most (unless there are very many)


def _batches(sizes, n):
    """The items' indices in batches of about equal bytes, the largest items
    first (so the last batches, taken when the others are nearly done, are of
    small files), about BATCHES_PER_WORKER for each of n workers."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    cost = [size + 4096 for size in sizes]   # a file costs an open and a read however small it is
    return _cut(order, cost, max(1, -(-sum(cost) // min(n * BATCHES_PER_WORKER, MAX_BATCHES - 1))))


def _runs(sizes, n, most):
    """The indices of the items of at most `most` bytes, in order, cut into runs
    of consecutive items of about equal bytes: about BATCHES_PER_WORKER for
    each of n workers, none much more than RUN bytes (what waits in memory)."""
    taken = [i for i, size in enumerate(sizes) if size <= most]
    cost = [size + 4096 for size in sizes]
    total = sum(cost[i] for i in taken)
    return _cut(taken, cost, max(1, -(-total // (MAX_BATCHES - 1)), min(-(-total // (n * BATCHES_PER_WORKER)), RUN)))


def _cut(order, cost, want):
    """The indices of `order`, in that order, cut into batches of at least
    `want` bytes of `cost` each (the last one: what is left)."""
    batches, batch, size = [], [], 0
    for i in order:
        batch.append(i)
        size += cost[i]
        if size >= want:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


PIPE = 1 << 20      # the answers' pipe holds this much (Linux's most for anyone, by default), not 64 KiB


def _widen(fd):
    """Make the pipe of fd hold PIPE bytes, where it can: a worker's answers
    (an import's: the lines of whole sessions, a gigabyte for 10,000) pass
    in a sixteenth of the writes, reads and wake-ups. Where it cannot (not
    Linux, or the user's pipes hold their most already), it stays as it is."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE)
    except (AttributeError, OSError):      # (no F_SETPIPE_SZ: not Linux)
        pass


def _todo(count):
    """The read end of a pipe that holds the batch numbers 0..count-1 (4 bytes
    each, count <= MAX_BATCHES) and nothing more: its write end is closed."""
    r, w = os.pipe()
    try:
        write_all(w, b"".join(i.to_bytes(4, "little") for i in range(count)))
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    return r


def _pack(message):
    """A message's bytes: marshal's when it holds only plain values (several times
    faster to read back than pickle's, which the parent does while the workers
    run), else pickle's (an exception, an object: rare, so imported then)."""
    try:
        return b"m" + marshal.dumps(message)
    except ValueError:
        import pickle

        return b"p" + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _unpack(data):
    """The message of _pack's bytes (or a memoryview of them)."""
    if data[:1] == b"m":
        return marshal.loads(data[1:])
    import pickle

    return pickle.loads(data[1:])


def _worker(w, todo, others, batches, items, fn):
    """A worker's life (forked with its signals blocked): take batches from
    `todo` until none is left, answer each of their items on `w`, then end
    (never returns)."""
    status = 0
    try:
        signals.worker()    # Ctrl-C, SIGTERM, SIGHUP and a closed pipe end it, silently
        for fd in others:
            os.close(fd)
        out = bytearray()   # the answers, sent a batch (or SEND bytes) at a time: fewer wake-ups
        while True:
            token = os.read(todo, 4)   # one read takes one whole number: the pipe holds nothing else
            if len(token) < 4:
                break
            k = int.from_bytes(token, "little")
            data = _pack((-1 - k, None, None))     # "batch k is mine", said at once: if this worker
            write_all(w, len(data).to_bytes(8, "little") + data)   # dies, its parent knows what is lost
            for i in batches[k]:
                try:
                    message = (i, True, fn(items[i]))
                except Exception as e:
                    message = (i, False, e)
                try:
                    data = _pack(message)
                except Exception:
                    continue   # left to the parent
                out += len(data).to_bytes(8, "little")
                if len(data) >= SEND:       # a large answer goes as it is, not copied into out first
                    write_all(w, out)
                    out.clear()
                    write_all(w, data)
                    continue
                out += data
                if len(out) >= SEND:
                    write_all(w, out)
                    out.clear()
            write_all(w, out)
            out.clear()
    except BaseException:
        status = 1
    finally:
        os._exit(status)
