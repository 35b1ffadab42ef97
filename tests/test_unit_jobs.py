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
