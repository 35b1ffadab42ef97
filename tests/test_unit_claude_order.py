"""The order Claude Code's transcripts are imported (and their copies billed)
in: each file's first record with a time, then its last one, then its path."""
import pytest

from pantolib.agents import claude_code

A, B, C = "2025-01-01T00:00:00.000Z", "2025-01-02T00:00:00.000Z", "2025-01-03T00:00:00.000Z"


def stamped(ts, **more):
    import orjson

    return orjson.dumps({"timestamp": ts, **more}) + b"\n"


@pytest.mark.parametrize("data, first, last", [
    (b"", "~", "~"),
    (b'{"type":"summary"}\n' + stamped(A) + b'{"x":1}\n' + stamped(B), A, B),
    (b"\n\n" + stamped(A) + b"\n\n", A, A),                               # blank lines around
    (stamped(A) + stamped(B)[:-1], A, B),                                 # the last line still being written
    (stamped(A)[:-1], "~", A),                                            # nothing complete yet
    (b"{not json\n" + stamped(A) + b'{"x":1}\n' * 40, A, A),             # the last time 40 lines back
    (stamped(A, t="x" * 100_000) + stamped(B) + b'{"y":2}\n' * 30, A, B),
    (stamped(A) + stamped(C, t="x" * 100_000), A, "~"),                   # a last line longer than the tail read
    (stamped(A) + b"garbage\n" * 20 + stamped(B) + b"garbage\n" * 20, A, B),
    (b'{"x":1}\n' * 2000 + stamped(A) + stamped(B), A, B),                # the first time past the first read
    (stamped(A) + stamped(B, t="x" * 20_000) + b"x" * 9000, A, B),       # the last time past the last read
    (stamped(A) + stamped(B) + b"x" * 9000 + b"\n" + stamped(C)[:-1], A, C),
])
def test_order_key(tmp_path, data, first, last):
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    assert claude_code.order_key(str(p)) == (first, last, str(p))


def test_order_key_of_a_file_gone_sorts_last(tmp_path):
    assert claude_code.order_key(str(tmp_path / "gone.jsonl"))[:2] == ("~", "~")


def test_order_is_the_order_of_order_key(tmp_path):
    """order reads a file's last time only among files whose first times are
    alike: the order is still that of order_key, ties, files without times
    and a file gone included."""
    import random

    rng = random.Random(7)
    times = [A, B, C]
    paths = [str(tmp_path / "gone.jsonl")]
    for i in range(60):
        p = tmp_path / f"{rng.randrange(1000):03d}-{i}.jsonl"
        kind = rng.randrange(4)
        if kind == 0:
            data = b'{"type":"summary"}\n'                                   # no time at all
        else:
            data = stamped(rng.choice(times)) + b'{"x":1}\n' * rng.randrange(3)
            if kind > 1:
                data += stamped(rng.choice(times))
        p.write_bytes(data)
        paths.append(str(p))
    rng.shuffle(paths)
    assert claude_code.order(paths) == sorted(paths, key=claude_code.order_key)
    assert claude_code.order(list(reversed(paths))) == sorted(paths, key=claude_code.order_key)
