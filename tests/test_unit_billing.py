"""importing.Billing, who paid for each response imported, against a model
of its rule written out plainly: the first session a response is imported
into pays for it (known by message id and request id, and by message id
alone for a copy in a sidechain), and a later one names that session.
Whatever the moment the keys are written (at each commit, or at once when
more than PENDING wait), whether the table is asked or not (a first import:
empty), and across runs (closed and opened again), the answers are the
model's. A real SQLite file in the test's state folder."""
import random

import pytest

from pantolib import importing


def _model(calls):
    """The rule, as the table would hold it were each call's first copies written at once."""
    table, answers = {}, []
    for billings, sid in calls:
        known = {k: v for k, v in table.items()}
        got, first = [], []
        for mid, rid, side in billings:
            m, s, p = ("m", mid), ("s", mid), ("p", mid, rid)
            found = known.get(m) if side else known.get(p, known.get(s))
            if found is None:
                pairs = [(m, sid), (s, sid)] if side else [(p, sid), (m, sid)]
                first += pairs
                known.update(pairs)
                found = sid
            got.append(found)
        for k, v in first:
            table.setdefault(k, v)
        answers.append(got)
    return answers


def _calls(rng, n):
    """n files' billings: responses drawn from a small pool, so that many are copies."""
    out = []
    for i in range(n):
        mids = rng.sample(range(40), rng.randint(1, 12))     # a response comes once within a file
        out.append(([(f"msg_{m}", f"req_{m % 7 if rng.random() < 0.9 else rng.randint(7, 9)}",
                      rng.random() < 0.25) for m in mids], f"session-{i}"))
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pending", [1, 5, importing.Billing.PENDING])
def test_the_payers_are_the_rules_whenever_the_keys_are_written(isolated, monkeypatch, seed, pending):
    monkeypatch.setattr(importing.Billing, "PENDING", pending)
    rng = random.Random(seed)
    calls = _calls(rng, 30)
    want = _model(calls)
    got, billing = [], importing.Billing()
    for i, (billings, sid) in enumerate(calls):
        got.append(billing.payers(billings, sid))
        r = rng.random()
        if r < 0.2:
            billing.commit()
        elif r < 0.3:               # the run ends; the next one opens the table again
            billing.close()
            billing = importing.Billing()
    billing.close()
    assert got == want
    assert any(a != sid for answers, (_, sid) in zip(want, calls) for a in answers)   # copies were met


def test_a_first_import_asks_the_table_only_of_keys_it_wrote_and_a_later_run_of_all(isolated):
    billing = importing.Billing()
    assert billing.payers([("msg_1", "req_1", False)], "a") == ["a"]
    assert billing.asked is False and billing.written is None     # empty when opened, nothing written yet
    billing.commit()
    key = billing._key
    assert billing._wrote(key("p:msg_1\0req_1")) and billing._wrote(key("m:msg_1"))
    assert sum(billing._wrote(key(f"p:msg_{i}\0req_{i}")) for i in range(2, 1002)) <= 5    # a few in vain
    assert billing.payers([("msg_1", "req_1", False), ("msg_2", "req_2", False)], "b") == ["a", "b"]
    billing.close()
    again = importing.Billing()
    assert again.payers([("msg_1", "req_1", False), ("msg_3", "req_3", False)], "c") == ["a", "c"]
    assert again.asked is True
    again.close()
