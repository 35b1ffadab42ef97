"""importing.Billing, who paid for each response imported, against a model
of its rule written out plainly: the first session a response is imported
into pays for it (None), and a later one names that session. A Claude Code
response is known by message id and request id, and by message id alone
for a copy in a sidechain; another agent's (pi, opencode) by its whole
billing list, a second copy in the same session included (the same entry
asked again, as after a kill, still pays).
Whatever the moment the keys are written (at each commit, or at once when
more than PENDING wait), whether the table is asked or not (a first import:
empty), and across runs (closed and opened again), the answers are the
model's. A real SQLite file in the test's state folder."""
import os
import random
import sqlite3

import pytest

from pantolib import importing


def _eid(i):
    """The id of the entry at place i of a file."""
    return f"{i:08x}"


def _asks(billings):
    """Each billing asked as the entry of that place in its file."""
    return [importing.ask(b, _eid(i)) for i, b in enumerate(billings)]


def _model(calls):
    """The rule, as the table would hold it were each call's first copies
    written at once: (the answers, the table)."""
    table, answers = {}, []
    for billings, sid in calls:
        known = {k: v for k, v in table.items()}
        got, first = [], []
        for i, b in enumerate(billings):
            if b[0] in ("pi", "opencode"):      # known with the entry that paid
                k, mine = ("k",) + tuple(b), (sid, i)
                found = known.get(k)
                if found is None:
                    first.append((k, mine))
                    known[k] = mine
                got.append(None if found in (None, mine) else found[0])
                continue
            mid, rid, side = b
            m, s, p = ("m", mid), ("s", mid), ("p", mid, rid)
            found = known.get(m) if side else known.get(p, known.get(s))
            if found is None:
                pairs = [(m, sid), (s, sid)] if side else [(p, sid), (m, sid)]
                first += pairs
                known.update(pairs)
            got.append(None if found in (None, sid) else found)
        for k, v in first:
            table.setdefault(k, v)
        answers.append(got)
    return answers, table


def _stored(table):
    """The model's table as billing.sqlite holds it: each key as importing.ask
    names it, and its session (another agent's: with the entry that paid)."""
    out = {}
    for k, v in table.items():
        if k[0] == "k":
            out[importing.ask(list(k[1:]), None)[1]] = f"{v[0]} {_eid(v[1])}"
        else:       # ask's (sidechain, m, s, p) of a Claude Code billing
            _, m, s, p = importing.ask([k[1], k[2] if k[0] == "p" else None, k[0] != "p"], None)
            out[p if k[0] == "p" else m if k[0] == "m" else s] = v
    return out


def _calls(rng, n):
    """n files' billings: responses drawn from a small pool, so that many are
    copies; a Claude Code response comes once within a file (its reader
    sees to it), pi's and opencode's may come twice."""
    out, once = [], rng.randrange(n)
    for i in range(n):
        mids = rng.sample(range(40), rng.randint(1, 12))
        billings = [(f"msg_{m}", f"req_{m % 7 if rng.random() < 0.9 else rng.randint(7, 9)}",
                     rng.random() < 0.25) for m in mids]
        for _ in range(rng.randint(0, 6)):
            t = rng.randrange(12)
            billings.insert(rng.randrange(len(billings) + 1),
                            ["pi", f"2026-01-02T10:00:{t:02d}.000Z", "anthropic", "claude-sonnet-4-5", t, 5, 0, 0]
                            if t % 2 else ["opencode", 1767348000000 + t, None, "anthropic", "m", t, 2])
        if i == once:                   # one response twice in one session, none before it
            billings += [["pi", f"once in {i}", "anthropic", "claude-sonnet-4-5", 1, 1, 0, 0]] * 2
        out.append((billings, f"session-{i}"))
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pending", [1, 5, importing.Billing.PENDING])
@pytest.mark.parametrize("rows", [2, importing.Billing.ROWS])
def test_the_payers_are_the_rules_whenever_the_keys_are_written(isolated, monkeypatch, seed, pending, rows):
    """Whatever the moment the keys are written and however many rows an
    INSERT takes (2: whole statements and a rest, every time), the answers
    are the model's, and so is the table left."""
    monkeypatch.setattr(importing.Billing, "PENDING", pending)
    monkeypatch.setattr(importing.Billing, "ROWS", rows)
    rng = random.Random(seed)
    calls = _calls(rng, 30)
    want, table = _model(calls)
    got, billing = [], importing.Billing()
    for i, (billings, sid) in enumerate(calls):
        got.append(billing.payers(_asks(billings), sid))
        r = rng.random()
        if r < 0.2:
            billing.commit()
        elif r < 0.3:               # the run ends; the next one opens the table again
            billing.close()
            billing = importing.Billing()
    billing.close()
    assert got == want
    db = sqlite3.connect(os.path.join(importing._dir(), "billing.sqlite"))
    try:
        assert dict(db.execute("SELECT key, session FROM paid2")) == _stored(table)
    finally:
        db.close()
    assert any(a not in (None, sid) for answers, (_, sid) in zip(want, calls) for a in answers)  # copies met
    assert any(a == sid for answers, (_, sid) in zip(want, calls) for a in answers)   # within a session too


def test_a_first_import_asks_the_table_only_of_keys_it_wrote_and_a_later_run_of_all(isolated):
    billing = importing.Billing()
    assert billing.payers(_asks([("msg_1", "req_1", False)]), "a") == [None]
    assert billing.asked is False and billing.written is None     # empty when opened, nothing written yet
    billing.commit()
    key = importing._key
    assert billing._maybe([key("p:msg_1\0req_1"), key("m:msg_1")]) == [key("p:msg_1\0req_1"), key("m:msg_1")]
    assert len(billing._maybe([key(f"p:msg_{i}\0req_{i}") for i in range(2, 1002)])) <= 5    # a few in vain
    assert billing.payers(_asks([("msg_1", "req_1", False), ("msg_2", "req_2", False)]), "b") == ["a", None]
    billing.close()
    again = importing.Billing()
    assert again.payers(_asks([("msg_1", "req_1", False), ("msg_3", "req_3", False)]), "c") == ["a", None]
    assert again.asked is True
    again.close()


def test_two_pi_or_opencode_responses_are_two_and_the_same_one_twice_is_one(isolated):
    """Another agent's responses were once all known by their first field
    (the agent's name): every pi response after the first was billed in the
    first session imported."""
    billing = importing.Billing()
    one = ["pi", "2026-01-02T10:00:02.000Z", "anthropic", "claude-sonnet-4-5", 10, 5, 0, 0]
    two = ["pi", "2026-01-02T10:00:09.000Z", "anthropic", "claude-sonnet-4-5", 11, 6, 0, 0]
    oc = ["opencode", 1767348000000, 1767348001000, "anthropic", "claude-sonnet-4-5", 1, 2, 0, 0, 0]
    assert billing.payers(_asks([one]), "a") == [None]
    assert billing.payers(_asks([two, oc]), "b") == [None, None]
    assert billing.payers(_asks([one, two, oc, oc]), "c") == ["a", "b", "b", "b"]
    assert billing.payers(_asks([["opencode", 1767348000001] + oc[2:]]), "c") == [None]
    billing.close()


def test_the_entry_that_paid_asked_again_still_pays_and_another_in_its_session_is_a_copy(isolated):
    """A kill can lose a session whose responses' keys were committed: read
    again, the same entries still pay; pi's rewritten version 1 file gives
    the same responses under new entry ids: copies, billed in their own
    session."""
    billing = importing.Billing()
    one = ["pi", "2026-01-02T10:00:02.000Z", "anthropic", "claude-sonnet-4-5", 10, 5, 0, 0]
    assert billing.payers([importing.ask(one, "aaaa0001")], "a") == [None]
    billing.close()
    billing = importing.Billing()
    assert billing.payers([importing.ask(one, "aaaa0001")], "a") == [None]
    assert billing.payers([importing.ask(one, "bbbb0002")], "a") == ["a"]
    assert billing.payers([importing.ask(one, "aaaa0001")], "b") == ["a"]
    billing.close()


def test_any_value_of_another_agents_billing_makes_a_key(isolated):
    """opencode's tokens are whatever its database holds: a huge number, a
    list, a float. The same values make the same key; others another."""
    odd = ["opencode", 1767348000000, None, "anthropic", "m", 10 ** 30, [1, {"x": 2}], 1.5, None, "7"]
    assert importing.ask(odd, "e1")[1] == importing.ask(list(odd), "e2")[1]
    assert importing.ask(odd, "e1")[1] != importing.ask(odd[:-1] + [7], "e1")[1]
    billing = importing.Billing()
    assert billing.payers([importing.ask(odd, "e1")], "a") == [None]
    assert billing.payers([importing.ask(odd, "e2")], "b") == ["a"]
    billing.close()


def test_saves_come_every_two_seconds_or_twenty_times_what_the_last_one_took():
    """A commit rewrites the table's pages where its keys fell, all of them
    once it is large: saves every 2 s had a first import of 10,000
    sessions write 0.81 GB into billing.sqlite (traced)."""
    run = importing._Run({}, importing.Summary(), {}, None, None, None)
    then = run.saved_at
    assert not run.due(then + 1.99) and run.due(then + 2.01)      # quick saves: every SAVE_EVERY
    run.save_took = 0.5
    assert not run.due(then + 9.99) and run.due(then + 10.01)     # a slow one: SAVE_SHARE times it
