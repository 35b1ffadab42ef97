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

PANTO_JOBS=N: N workers (at most one per item, and at most MAX_PER_CPU per
CPU: more only share the same cores, each one a forked process), whatever the
amount of work; 1: never. Unset, empty or anything else: decided as above.
"""
import marshal
import os

from pantolib import signals
from pantolib.files import write_all

MIN_FILES = 32
MIN_BYTES = 32 << 20
MAX_PER_CPU = 4


def workers(count, size, env=None):
    """How many worker processes to use for `count` items of `size` bytes in all (<= 1: none)."""
    env = os.environ if env is None else env
    value = env.get("PANTO_JOBS", "")
    if value.isascii() and value.isdigit() and int(value) >= 1:   # digits only: no sign, no space
        return min(int(value), count, MAX_PER_CPU * _cpus())
    if count < MIN_FILES or size < MIN_BYTES:
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
    batches = _batches(sizes, n)
    import selectors
    import sys

    for stream in (sys.stdout, sys.stderr):   # nothing buffered is written twice
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    pids, pipes, done = [], {}, {}
    todo = _todo(len(batches))
    try:
        for _ in range(n):
            # No signal between the fork and the worker counted: one that comes
            # meanwhile is taken once the parent knows its worker (and the child
            # has set its own handlers: the parent's would unwind it as a parent).
            with signals.held():
                r, w = os.pipe()
                try:
                    pid = os.fork()
                except OSError:
                    os.close(r)
                    os.close(w)
                    break     # fewer workers: the parent reads what no worker answers
                if pid == 0:
                    _worker(w, todo, [r, *pipes], batches, items, fn)
                pids.append(pid)
                os.close(w)
                pipes[r] = bytearray()
        os.close(todo)
        todo = None
        selector = selectors.DefaultSelector()
        for r in pipes:
            selector.register(r, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                r = key.fd
                chunk = os.read(r, 1 << 20)
                if not chunk:
                    selector.unregister(r)
                    continue
                buf = pipes[r]
                buf += chunk
                at = 0
                while len(buf) - at >= 8:
                    size = int.from_bytes(buf[at:at + 8], "little")
                    if len(buf) - at - 8 < size:
                        break
                    try:
                        i, ok, value = _unpack(buf[at + 8:at + 8 + size])
                        done[i] = (ok, value)
                    except Exception:
                        pass   # not understood: the parent reads that file itself
                    at += 8 + size
                del buf[:at]
        selector.close()
    finally:
        if todo is not None:
            os.close(todo)
        for r in pipes:
            os.close(r)
        for pid in pids:
            try:
                os.kill(pid, signals.TERM)   # already gone, unless the parent is interrupted
            except OSError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except (OSError, ChildProcessError):
                pass
    return done


BATCHES_PER_WORKER = 32
MAX_BATCHES = 1024   # their numbers (4 bytes each) fit in any pipe's buffer
SEND = 1 << 16       # a worker's answers are written in pieces of about this much


def _batches(sizes, n):
    """The items' indices in batches of about equal bytes, the largest items
    first (so the last batches, taken when the others are nearly done, are of
    small files), about BATCHES_PER_WORKER for each of n workers."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    cost = [size + 4096 for size in sizes]   # a file costs an open and a read however small it is
    want = max(1, -(-sum(cost) // min(n * BATCHES_PER_WORKER, MAX_BATCHES - 1)))
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
            for i in batches[int.from_bytes(token, "little")]:
                try:
                    message = (i, True, fn(items[i]))
                except Exception as e:
                    message = (i, False, e)
                try:
                    data = _pack(message)
                except Exception:
                    continue   # left to the parent
                out += len(data).to_bytes(8, "little")
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
