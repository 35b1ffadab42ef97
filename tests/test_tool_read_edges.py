"""panto-tool's read at its edges: offsets past the end, an empty file,
offsets and limits below 1, a skip across many megabytes, and a file that
fills the 50 KB cap to its last byte with no final newline."""
import pytest

from tool_term import results, stream_with, tool


def read(**args):
    data = stream_with(("read", args))
    [block] = results(tool(data, "--yes"), data)
    assert block["toolUseId"] == "call_0"
    return block["content"], block.get("isError", False)


@pytest.mark.parametrize("offset", [3, 5, 1000])
def test_an_offset_past_the_end_says_how_many_lines_there_are(isolated, offset):
    (isolated / "f.txt").write_text("one\ntwo\n")
    assert read(path="f.txt", offset=offset) == (f"'offset' {offset} is past the end of 'f.txt' (2 lines)", True)


def test_the_last_line_without_a_newline_counts(isolated):
    (isolated / "f.txt").write_text("one\ntwo")
    assert read(path="f.txt", offset=2) == ("two", False)
    assert read(path="f.txt", offset=3) == ("'offset' 3 is past the end of 'f.txt' (2 lines)", True)


def test_an_empty_file(isolated):
    (isolated / "e.txt").write_bytes(b"")
    assert read(path="e.txt") == ("(empty file)", False)
    assert read(path="e.txt", offset=2) == ("'offset' 2 is past the end of 'e.txt' (0 lines)", True)


@pytest.mark.parametrize("args", [{"offset": -1}, {"limit": -5}, {"offset": -2, "limit": 3}])
def test_offset_and_limit_below_1_are_refused(isolated, args):
    (isolated / "f.txt").write_text("one\n")
    assert read(path="f.txt", **args) == ("'offset' and 'limit' must be at least 1", True)


def test_zero_means_the_default(isolated):
    (isolated / "f.txt").write_text("one\ntwo\n")
    assert read(path="f.txt", offset=0, limit=0) == ("one\ntwo", False)


def test_an_offset_megabytes_into_the_file(isolated):
    """Lines are skipped a megabyte at a time: the line asked for is the one shown,
    before, at and after a chunk's end."""
    lines = [f"{i:09d}".ljust(99, "x") + "\n" for i in range(1, 30001)]     # 3 MB, 100 bytes a line
    (isolated / "big.txt").write_text("".join(lines))
    for n in (10485, 10486, 10487, 25000):           # 1 MiB is 10485.76 lines
        out, err = read(path="big.txt", offset=n, limit=2)
        assert not err
        assert out == (lines[n - 1] + lines[n]).rstrip("\n") + \
            f"\n[showing lines {n}-{n + 1} of 30000 (limit); continue with offset={n + 2}]"
    assert read(path="big.txt", offset=30001) == ("'offset' 30001 is past the end of 'big.txt' (30000 lines)", True)


def test_a_file_that_ends_exactly_at_the_cap_without_a_newline(isolated):
    """51,200 bytes, no final newline: its last line would take the read one
    byte over the cap, so it is left for the next read, which the note names."""
    body = "".join(f"{i:03d}".ljust(99, ".") + "\n" for i in range(1, 512)) + "L" * 100
    assert len(body) == 50 * 1024
    (isolated / "edge.txt").write_text(body)
    out, err = read(path="edge.txt")
    assert not err
    assert out.endswith("\n511" + "." * 96 + "\n[showing lines 1-511 of 512 (50 KB cap); continue with offset=512]")
    assert read(path="edge.txt", offset=512) == ("L" * 100, False)
