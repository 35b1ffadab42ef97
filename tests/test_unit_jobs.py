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
