"""pantolib.tools.common on its own, on real files under tmp_path: keys
hidden (also a piece left at a cut), paths inside and outside the working
directory, refusing what is not a regular file, replacing a file
atomically, and capping output."""
import os
import socket
import stat

import pytest

from pantolib.secrets import env_keys
from pantolib.tools import common
from pantolib.tools.common import ToolError

KEY = "sk-proj-ABCDEFGHIJ0123456789klmnop"


def test_an_environment_without_secrets():
    env = {"OPENAI_API_KEY": KEY, "ACME_AUTH_TOKEN": "tok-0123456789abcdefgh", "PATH": "/bin",
           "PANTO_ALLOW_FILE": "/x/rules"}
    got = env_keys(env)        # the one rule tools use (pantolib.secrets)
    assert got[0] == KEY and "tok-0123456789abcdefgh" in got and "/bin" not in got
    assert [len(k) for k in got] == sorted((len(k) for k in got), reverse=True)
    assert common.without_keys(env) == {"PATH": "/bin"}
    assert "PANTO_ALLOW_FILE" in env


def test_redact_hides_keys_and_the_pieces_a_cut_leaves():
    assert common.redact("no keys here", []) == "no keys here"
    assert common.redact(f"key={KEY}.", [KEY]) == "key=[redacted]."
    cut = common.cap_bytes(b"a" * 30 + KEY[:20].encode(), KEY[20:].encode() + b"b" * 30, 200, cap=100)
    assert "bytes kept]" in cut and KEY[:20] in cut
    hidden = common.redact(cut, [KEY])
    assert KEY[:20] not in hidden and KEY[20:] not in hidden and "bytes kept]" in hidden
    line_cut = "x " + KEY[:12] + " [line cut at 50 KB]" + KEY[12:] + " y"
    assert KEY[:12] not in common.redact(line_cut, [KEY])


def test_resolve(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert common.resolve("a/b", "/w") == "/w/a/b"
    assert common.resolve("/etc/x", "/w") == "/etc/x"
    assert common.resolve("~/notes", "/w") == str(tmp_path / "home" / "notes")
    with pytest.raises(ToolError) as e:
        common.resolve("", "/w")
    assert str(e.value) == "'path' is empty"


def test_outside_the_working_directory_once_symlinks_are_resolved(tmp_path, monkeypatch):
    home = tmp_path / "home"
    work = home / "work"
    (work / "src").mkdir(parents=True)
    (home / ".ssh").mkdir()
    monkeypatch.setenv("HOME", str(home))
    (work / "out").symlink_to(tmp_path)
    (work / "keys").symlink_to(home / ".ssh")
    assert common.outside(str(work / "src" / "a.py"), str(work)) is False
    assert common.outside(str(work / "new.txt"), str(work)) is False
    assert common.outside(str(work / ".." / "x"), str(work)) is True
    assert common.outside(str(work / "out" / "x"), str(work)) is True
    assert common.outside(str(home / ".ssh" / "id_rsa"), str(home)) is True      # private, though inside
    assert common.outside(str(home / ".ssh"), str(home)) is True
    assert common.outside(str(home / ".sshx"), str(home)) is False
    assert common.outside(str(home / "work" / "keys" / "id_rsa"), str(home)) is True


# -- regular files ---------------------------------------------------------------------------

def test_open_regular_refuses_what_is_not_a_regular_file_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), (tmp_path, "a directory"), ("/dev/null", "a character device")):
        with pytest.raises(ToolError) as e:
            common.open_regular(str(path), "shown")
        assert str(e.value) == f"'shown' is not a regular file ({what}): it was not opened"
    f = tmp_path / "f"
    f.write_bytes(b"data")
    fd = common.open_regular(str(f), "f")
    try:
        assert os.get_blocking(fd) and os.read(fd, 10) == b"data"
    finally:
        os.close(fd)


def test_read_regular(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert common.read_regular(str(f), "f", 100) == b"x" * 100
    with pytest.raises(ToolError) as e:
        common.read_regular(str(f), "f", 99)
    assert str(e.value) == "'f' is too large (100 bytes; at most 99)"
    with pytest.raises(FileNotFoundError):
        common.read_regular(str(tmp_path / "missing"), "missing", 10)


def test_a_file_longer_than_its_size_says_is_cut_off_at_the_cap():
    # /proc files say they are empty and then hold more
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(ToolError) as e:
        common.read_regular("/proc/self/status", "status", 10)
    assert str(e.value) == "'status' grew past 10 bytes while it was read"


# -- replacing files ---------------------------------------------------------------------------

def leftovers(d):
    return [n for n in os.listdir(d) if n.endswith(".panto-tmp")]


def test_replace_file_creates_with_the_umask_and_keeps_an_old_mode(tmp_path):
    f = tmp_path / "new.txt"
    old = os.umask(0o027)
    try:
        assert common.replace_file(str(f), b"one", "new.txt") is False
    finally:
        os.umask(old)
    assert f.read_bytes() == b"one" and stat.S_IMODE(f.stat().st_mode) == 0o640
    f.chmod(0o751)
    assert common.replace_file(str(f), b"two", "new.txt") is True
    assert f.read_bytes() == b"two" and stat.S_IMODE(f.stat().st_mode) == 0o751
    assert leftovers(tmp_path) == []


def test_replace_file_through_a_symlink_replaces_its_target(tmp_path):
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to("real")
    assert common.replace_file(str(tmp_path / "link"), b"new", "link") is True
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "new"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_replace_file_keeps_the_owner(tmp_path):
    f = tmp_path / "theirs"
    f.write_text("old")
    os.chown(f, 1234, 5678)
    common.replace_file(str(f), b"new", "theirs")
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (1234, 5678) and f.read_text() == "new"


def test_replace_file_leaves_alone_what_it_cannot_replace(tmp_path):
    with pytest.raises(ToolError) as e:
        common.replace_file(str(tmp_path), b"x", "dir")
    assert str(e.value) == "'dir' is not a regular file (a directory): it was left alone"
    with pytest.raises(ToolError) as e:
        common.replace_file(str(tmp_path / "no" / "such" / "f"), b"x", "no/such/f")
    assert str(e.value) == ("cannot write 'no/such/f': no temporary file can be made in its directory "
                            "(No such file or directory); the file was left as it was")


def test_replace_file_failing_leaves_the_old_file_and_no_temporary(tmp_path):
    import resource
    import signal

    f = tmp_path / "f"
    f.write_text("old")
    with pytest.raises(TypeError):                  # not an OSError: raised as it is
        common.replace_file(str(f), "text, not bytes", "f")
    assert f.read_text() == "old" and leftovers(tmp_path) == []
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10, limits[1]))     # a write past 10 bytes: EFBIG
    try:
        with pytest.raises(ToolError) as e:
            common.replace_file(str(f), b"x" * 100, "f")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert str(e.value) == "cannot write 'f': File too large; the file was left as it was"
    assert f.read_text() == "old" and leftovers(tmp_path) == []


def test_replace_file_on_a_socket_is_refused(tmp_path):
    path = str(tmp_path / "sock")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
        with pytest.raises(ToolError) as e:
            common.replace_file(path, b"x", "sock")
        assert str(e.value) == "'sock' is not a regular file (a socket): it was left alone"
    finally:
        s.close()


# -- caps -------------------------------------------------------------------------------------

def test_cap_bytes_keeps_head_and_tail_with_a_note():
    assert common.cap_bytes(b"ab", b"cd", 4, cap=4) == "abcd"
    out = common.cap_bytes(b"h" * 10, b"t" * 10, 100, cap=8)
    assert out == "hhhh\n[… 1 line, 100 bytes: the first 4 and last 4 bytes kept]\ntttt"
    out = common.cap_bytes(b"h" * 10, b"", 100, cap=8)
    assert out.endswith("the first 4 and last 0 bytes kept]\n")
    lines = "".join(f"{i}\n" for i in range(18000)).encode()      # cut on line ends, counted in lines
    out = common.cap_bytes(lines[:60], lines[-60:], len(lines), cap=100, lines=18000)
    assert out == ("0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19"
                   "\n[… 18,000 lines, 96.9 KB: the first 20 and last 8 lines kept]\n"
                   "17992\n17993\n17994\n17995\n17996\n17997\n17998\n17999\n")


def test_cap_text():
    assert common.cap_text("short", cap=10) == "short"
    out = common.cap_text("é" * 10, cap=8)      # 20 bytes
    assert out == "éé\n[… 1 line, 20 bytes: the first 4 and last 4 bytes kept]\néé"
