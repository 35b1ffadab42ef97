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
])
def test_order_key(tmp_path, data, first, last):
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    assert claude_code.order_key(str(p)) == (first, last, str(p))


def test_order_key_of_a_file_gone_sorts_last(tmp_path):
    assert claude_code.order_key(str(tmp_path / "gone.jsonl"))[:2] == ("~", "~")
