"""pantolib.jobs on its own: how many workers, and that what forked workers
answer comes back item by item, errors included; what cannot be sent back
is left out for the caller to do itself."""
import os

import pytest

from pantolib import jobs


@pytest.mark.parametrize("value, count, size, want", [
    ("3", 10, 0, 3), ("3", 2, 0, 2), ("1", 100, 1 << 40, 1), ("0", 1, 0, 1), ("", 1, 0, 1),
    ("-2", 1, 0, 1), (" 2", 1, 0, 1), ("２", 1, 0, 1), ("x", 1, 0, 1),
    ("", jobs.MIN_FILES - 1, 1 << 40, 1), ("", 1000, jobs.MIN_BYTES - 1, 1),
])
def test_workers(value, count, size, want):
    assert jobs.workers(count, size, {"PANTO_JOBS": value}) == want


def test_panto_jobs_is_capped_by_the_cpus():
    """PANTO_JOBS=10000 over 20000 files does not fork one worker per file."""
    cpus = len(os.sched_getaffinity(0))
    assert jobs.workers(20000, 1 << 40, {"PANTO_JOBS": "10000"}) == jobs.MAX_PER_CPU * cpus < 10000


def test_work_that_costs_more_per_byte_is_worth_workers_sooner():
    cpus = len(os.sched_getaffinity(0))
    assert jobs.workers(100, 9 << 20, {}) == 1
    assert jobs.workers(100, 9 << 20, {}, least=8 << 20) == min(cpus, 100)
    assert jobs.workers(100, 7 << 20, {}, least=8 << 20) == 1


def test_two_large_files_are_worth_a_worker_each():
    """A file is read whole by one worker: two are enough to share, one is not."""
    cpus = len(os.sched_getaffinity(0))
    assert jobs.workers(2, 1 << 40, {}) == min(cpus, 2)
    assert jobs.workers(1, 1 << 40, {}) == 1
    assert jobs.workers(2, (8 << 20) - 1, {}, least=8 << 20) == 1


def test_workers_for_enough_work_follow_the_cpus():
    cpus = len(os.sched_getaffinity(0))
    assert jobs.workers(jobs.MIN_FILES, jobs.MIN_BYTES, {}) == min(cpus, jobs.MIN_FILES)
    assert jobs.workers(1000, 1 << 40, {}) == min(cpus, 1000)


def _fn(item):
    if item == "boom":
        raise ValueError("boom")
    if item == "unsendable":
        return lambda: None      # cannot be pickled: the caller does this one itself
    return item * 2


def test_run_answers_item_by_item(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "3")
    items = ["a", "boom", "c", "unsendable", "e", "f", "g"]
    done = jobs.run(items, _fn, [10, 1, 5, 1, 7, 3, 100])
    assert set(done) == {0, 1, 2, 4, 5, 6}
    assert [done[i] for i in (0, 2, 4, 5, 6)] == [(True, "aa"), (True, "cc"), (True, "ee"), (True, "ff"), (True, "gg")]
    ok, error = done[1]
    assert ok is False and isinstance(error, ValueError) and str(error) == "boom"


def test_run_in_one_process_does_nothing(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "1")
    seen = []
    assert jobs.run(["a", "b"], seen.append, [1, 1]) == {}
    assert seen == []


def test_run_with_large_answers(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "2")
    done = jobs.run([1, 2, 3], lambda n: b"x" * (n << 20), [1, 1, 1])   # more than a pipe holds, in pieces
    assert {i: (ok, len(v)) for i, (ok, v) in done.items()} == {0: (True, 1 << 20), 1: (True, 2 << 20), 2: (True, 3 << 20)}


def test_the_workers_answer_through_pipes_that_hold_a_mebibyte(monkeypatch):
    """Each worker's answers pass through a pipe of jobs.PIPE bytes, not
    Linux's 64 KiB: an import's lines go in a sixteenth of the wake-ups."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("no F_GETPIPE_SZ: pipes stay as the system makes them")
    with open("/proc/sys/fs/pipe-max-size") as f:
        if int(f.read()) < jobs.PIPE:
            pytest.skip("pipes may not be made this large here")
    widen, held = jobs._widen, []

    def spy(fd):
        widen(fd)
        held.append(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))

    monkeypatch.setattr(jobs, "_widen", spy)
    monkeypatch.setenv("PANTO_JOBS", "2")
    done = jobs.run([1, 2, 3], lambda n: b"y" * (n << 20), [1, 1, 1])
    assert held == [jobs.PIPE, jobs.PIPE]
    assert {i: len(v) for i, (_, v) in done.items()} == {0: 1 << 20, 1: 2 << 20, 2: 3 << 20}


@pytest.mark.parametrize("sizes, n", [
    ([10, 1, 5, 1, 7, 3, 100], 3), ([0] * 5000, 2), ([1 << 30] * 3, 8), (list(range(20000)), 64),
    ([5 << 20] * 10 + [10] * 10000, 2), ([], 2),
])
def test_batches_take_every_item_once_the_largest_first(sizes, n):
    batches = jobs._batches(sizes, n)
    taken = [i for b in batches for i in b]
    assert sorted(taken) == list(range(len(sizes)))
    assert len(batches) <= jobs.MAX_BATCHES and all(batches)
    assert [sizes[i] for i in taken] == sorted(sizes, reverse=True)


def test_batches_are_of_about_equal_bytes():
    sizes = [(i * 7919) % 100_000 for i in range(10_000)]
    batches = jobs._batches(sizes, 2)
    cost = [sum(sizes[i] + 4096 for i in b) for b in batches]
    assert len(batches) == pytest.approx(2 * jobs.BATCHES_PER_WORKER, abs=1)
    assert max(cost[:-1]) < 1.1 * min(cost[:-1])


def test_a_slow_worker_takes_fewer_batches(monkeypatch, tmp_path):
    """The first batch holds up one worker until the other has answered every
    other item: with shares fixed in advance that could never happen."""
    monkeypatch.setenv("PANTO_JOBS", "2")
    log = str(tmp_path / "answered")
    open(log, "wb").close()
    count = 200

    def fn(i):
        if i == 0:   # the largest: in the first batch
            import select

            deadline = 200
            while os.path.getsize(log) < count - 1 and deadline:
                select.select([], [], [], 0.05)
                deadline -= 1
            return os.getpid(), os.path.getsize(log)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b".")
        os.close(fd)
        return os.getpid(), None

    sizes = [100 << 20] + [1 << 20] * (count - 1)
    done = jobs.run(list(range(count)), fn, sizes)
    assert len(done) == count and all(ok for ok, _ in done.values())
    slow = done[0][1][0]
    assert done[0][1][1] == count - 1
    assert all(pid != slow for _, (pid, _) in (done[i] for i in range(1, count)))


def test_answers_of_plain_values_and_of_objects_come_back_alike(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "2")
    import datetime

    values = [{"a": [1, 2.5, None, True, b"x", ("t",)]}, ValueError("no"), datetime.date(2026, 12, 2), {1}]
    done = jobs.run(list(range(len(values))), lambda i: values[i], [1] * len(values))
    assert {i: got for i, got in done.items() if i != 1} == {i: (True, v) for i, v in enumerate(values) if i != 1}
    assert done[1][0] and isinstance(done[1][1], ValueError) and str(done[1][1]) == "no"


def _answers(gen):
    try:
        return list(gen)
    finally:
        gen.close()


def test_ordered_answers_in_the_items_order_and_leaves_what_it_cannot_to_the_caller(monkeypatch):
    """Items over `most` bytes, and what cannot be sent back, come as None's:
    the caller does them; the rest come in order, errors included."""
    monkeypatch.setenv("PANTO_JOBS", "2")
    items = ["a", "boom", "big", "unsendable", "e"] + [f"i{n}" for n in range(300)]
    sizes = [10, 1, 1000, 1, 7] + [n % 17 for n in range(300)]
    got = _answers(jobs.ordered(items, _fn, sizes, most=100))
    assert [i for i, _, _ in got] == list(range(len(items)))
    assert got[0] == (0, True, "aa") and got[4] == (4, True, "ee")
    assert got[1][1] is False and str(got[1][2]) == "boom"
    assert got[2] == (2, None, None) and got[3] == (3, None, None)
    assert [v for _, _, v in got[5:]] == [f"i{n}" * 2 for n in range(300)]


def test_ordered_answers_larger_than_most_come_whole_and_in_order(monkeypatch):
    """Answers each larger than `most`: once one waits before its turn, only
    the worker that owes the next is heard (the other blocks on its pipe);
    every answer still comes, in order, and a worker that dies meanwhile
    leaves its items to the caller."""
    monkeypatch.setenv("PANTO_JOBS", "2")
    count = 60

    def fn(i):
        if i == 41:
            os._exit(9)
        if i % 20 == 0:     # long work: the other worker answers the next items meanwhile
            import hashlib

            hashlib.sha256(bytes(64 << 20)).digest()
        return i.to_bytes(4, "little") * (300_000 + i)

    gen, got, waiting = jobs.ordered(list(range(count)), fn, [1] * count, most=1), [], []
    try:
        for answer in gen:
            got.append(answer)
            pool = gen.gi_frame.f_locals["pool"]
            waiting.append(pool.ahead)
            assert pool.ahead == sum(pool.sizes.values())      # what is counted is what waits
    finally:
        gen.close()
    assert [i for i, _, _ in got] == list(range(count))
    assert all(v == i.to_bytes(4, "little") * (300_000 + i) for i, ok, v in got if ok)
    lost = {i for i, ok, _ in got if ok is None}
    assert 41 in lost and len(lost) < count // 2
    assert max(waiting) <= jobs.PIPE + 2 * 4 * (300_000 + count)     # a pipe's worth, and an answer or two


def test_ordered_in_one_process_leaves_every_item_to_the_caller(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "1")
    seen = []
    assert _answers(jobs.ordered(["a", "b"], seen.append, [1, 1], most=10)) == [(0, None, None), (1, None, None)]
    assert seen == []


def test_ordered_after_a_worker_dies_the_caller_does_its_batch(monkeypatch):
    """A worker gone mid-batch (killed, crashed): the items it took and did not
    answer come as None's, in their place, and the others are still answered."""
    monkeypatch.setenv("PANTO_JOBS", "2")
    count = 400

    def fn(i):
        if i == 123:
            os._exit(9)
        return i

    got = _answers(jobs.ordered(list(range(count)), fn, [1] * count, most=10))
    assert [i for i, _, _ in got] == list(range(count))
    lost = [i for i, ok, _ in got if ok is None]
    assert 123 in lost
    assert all(v == i for i, ok, v in got if ok)
    batch = next(b for b in jobs._runs([1] * count, 2, 10) if 123 in b)
    assert set(lost) <= set(range(batch[0], count)) and set(range(123, batch[-1] + 1)) <= set(lost)


def test_ordered_closed_early_ends_its_workers(monkeypatch):
    monkeypatch.setenv("PANTO_JOBS", "2")
    gen = jobs.ordered(list(range(100)), lambda i: b"x" * (1 << 20), [1] * 100, most=10)
    assert next(gen)[1] is True
    pool_pids = gen.gi_frame.f_locals["pool"].pids
    assert len(pool_pids) == 2
    gen.close()
    for pid in pool_pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)      # reaped: no worker is left behind


@pytest.mark.parametrize("sizes, n, most", [
    ([10, 1, 5, 1, 7, 3, 100], 3, 50), ([0] * 5000, 2, 10), ([1 << 30] * 3, 8, 1 << 31),
    ([5 << 20] * 10 + [10] * 10000, 2, 4 << 20), ([], 2, 1), (list(range(20000)), 64, 1 << 40),
])
def test_runs_are_consecutive_items_of_at_most_most_bytes(sizes, n, most):
    batches = jobs._runs(sizes, n, most)
    taken = [i for b in batches for i in b]
    assert taken == [i for i, s in enumerate(sizes) if s <= most]
    assert len(batches) <= jobs.MAX_BATCHES and all(batches)
    total = sum(s + 4096 for s in sizes if s <= most)
    most_held = max(jobs.RUN, -(-total // (jobs.MAX_BATCHES - 1)))      # what a run holds at most
    assert all(sum(sizes[i] + 4096 for i in b[:-1]) < most_held for b in batches)
