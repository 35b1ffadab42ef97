"""pantolib.paths on its own, on real folders: where sessions live (SPEC
§4), and how a SESSION argument (a path, an id or a unique prefix of one)
names a file, here first and then in any directory's folder."""
import os

import orjson
import pytest

from pantolib import paths
from pantolib.errors import PantoError

A = "0199aaaa-bbbb-7ccc-8ddd-000000000001"
B = "0199aaaa-bbbb-7ccc-8ddd-000000000002"


def _header(sid, cwd, ts="2026-04-25T17:40:15.990Z"):
    return orjson.dumps({"type": "session", "version": 1, "id": sid, "timestamp": ts, "cwd": cwd}) + b"\n"


def _entry(ts):
    return orjson.dumps({"type": "message", "id": "e1", "parentId": None, "timestamp": ts,
                         "message": {"role": "user", "content": []}}) + b"\n"


def _write(cwd, sid, *lines, name=None):
    d = paths.session_dir(cwd)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, (name or sid) + paths.SUFFIX)
    with open(p, "wb") as f:
        f.write(_header(sid, cwd) + b"".join(lines))
    return p


def test_where_things_live():
    env = {"HOME": "/h"}
    assert paths.sessions_root(env) == "/h/.local/share/panto/sessions"
    assert paths.sessions_root({**env, "XDG_DATA_HOME": "/d"}) == "/d/panto/sessions"
    assert paths.sessions_root({**env, "XDG_DATA_HOME": "/d", "PANTO_SESSION_DIR": "/s"}) == "/s"
    assert paths.cache_dir(env) == "/h/.cache/panto" and paths.cache_dir({**env, "XDG_CACHE_HOME": "/c"}) == "/c/panto"
    assert paths.state_dir(env) == "/h/.local/state/panto"
    assert paths.config_dir({"XDG_CONFIG_HOME": "", "HOME": "/h"}) == "/h/.config/panto"
    assert paths.encode_cwd("/Users/t/Code/p") == "--Users-t-Code-p--"
    assert paths.encode_cwd("//a\\b:c/") == "--a-b-c---"
    assert paths.session_dir("/w", {"PANTO_SESSION_DIR": "/s"}) == "/s/--w--"
    assert paths.session_dir(env={"PANTO_SESSION_DIR": "/s"}) == "/s/" + paths.encode_cwd(os.getcwd())


def test_session_path_needs_a_uuid_and_a_cwd():
    env = {"PANTO_SESSION_DIR": "/s"}
    assert paths.session_path({"id": A, "cwd": "/w"}, env) == f"/s/--w--/{A}.jsonl"
    for sid in ("../x", A.upper(), None, 5, A + "x"):
        with pytest.raises(PantoError) as e:
            paths.session_path({"id": sid, "cwd": "/w"}, env)
        assert str(e.value) == (f"the session id {repr(sid)[:80]} is not a UUID, so it cannot name a session file "
                                f"(give the session FILE to append to)")
    for cwd in (None, 3, "/w\0x"):
        with pytest.raises(PantoError, match="^the session header's 'cwd' cannot name a directory$"):
            paths.session_path({"id": A, "cwd": cwd}, env)


def test_list_dir_and_all_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("PANTO_SESSION_DIR", str(tmp_path / "root"))
    assert paths.all_dirs() == [] and paths.list_dir(str(tmp_path / "none")) == []
    d = tmp_path / "root" / "--w--"
    d.mkdir(parents=True)
    (tmp_path / "root" / ".hidden").mkdir()
    (tmp_path / "root" / "file.jsonl").write_text("")
    for name in ("a.jsonl", ".b.jsonl", "c.json"):
        (d / name).write_text("x")
    (d / "dir.jsonl").mkdir()
    os.symlink(d / "missing", d / "dangling.jsonl")
    assert [(p, st.st_size) for p, st in paths.list_dir(str(d))] == [(str(d / "a.jsonl"), 1)]
    assert paths.list_dir(str(d / "a.jsonl")) == []
    for name in ("z.jsonl", "m.jsonl", "b.jsonl", "y.jsonl"):      # made in no order: listed by name
        (d / name).write_text("x")
    assert [p for p, _ in paths.list_dir(str(d))] == [str(d / n) for n in ("a.jsonl", "b.jsonl", "m.jsonl", "y.jsonl",
                                                                            "z.jsonl")]
    assert paths.all_dirs() == [str(d)]
    (tmp_path / "root2").write_text("")
    monkeypatch.setenv("PANTO_SESSION_DIR", str(tmp_path / "root2"))
    assert paths.all_dirs() == []


def test_read_header(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(_header(A, "/w") + _entry("2026-04-25T17:40:16.000Z"))
    assert paths.read_header(str(p))["id"] == A
    p.write_bytes(_entry("2026-04-25T17:40:16.000Z"))
    assert paths.read_header(str(p)) is None
    assert paths.read_header(str(tmp_path / "missing")) is None
    assert paths.read_header(str(tmp_path)) is None


def test_last_session_is_the_latest_activity(isolated):
    cwd = str(isolated)
    assert paths.last_session() is None
    older = _write(cwd, A, _entry("2026-04-25T10:00:00.000Z"))
    newer = _write(cwd, B, _entry("2026-04-25T11:00:00.000Z"))
    os.utime(newer, (0, 0))   # the mtime does not decide when an entry has a time
    assert paths.last_session() == newer
    assert paths.last_session(cwd) == newer
    _write("/elsewhere", "0199aaaa-bbbb-7ccc-8ddd-000000000003", _entry("2027-01-01T00:00:00.000Z"),
           name="0199aaaa-bbbb-7ccc-8ddd-000000000003")
    # a file in this folder whose header names another directory, or a bad id, is not this directory's
    with open(os.path.join(paths.session_dir(cwd), "x.jsonl"), "wb") as f:
        f.write(_header("0199aaaa-bbbb-7ccc-8ddd-000000000004", "/elsewhere") + _entry("2028-01-01T00:00:00.000Z"))
    with open(os.path.join(paths.session_dir(cwd), "y.jsonl"), "wb") as f:
        f.write(_header("not-a-uuid", cwd) + _entry("2028-01-01T00:00:00.000Z"))
    assert paths.last_session(cwd) == newer
    os.unlink(newer)
    assert paths.last_session(cwd) == older


def test_resolve_a_path_an_id_or_a_prefix(isolated, tmp_path):
    cwd = str(isolated)
    a = _write(cwd, A)
    assert paths.resolve(a) == a
    assert paths.resolve(A) == a
    assert paths.resolve("0199aaaa") == a
    b = _write(cwd, B)
    assert paths.resolve(B) == b
    with pytest.raises(PantoError) as e:
        paths.resolve("0199")
    assert str(e.value) == (f"session id '0199' is ambiguous: {A} ({a}), {B} ({b}) (give more of it)")
    other = _write("/elsewhere", "0199bbbb-bbbb-7ccc-8ddd-000000000009")
    assert paths.resolve("0199bbbb") == other            # not here: any directory's
    assert paths.resolve("0199bbbb", cwd="/elsewhere") == other
    with pytest.raises(PantoError) as e:   # from another directory: ambiguous among every directory's
        paths.resolve("0199aaaa-bbbb-7ccc-8ddd-00000000000", cwd="/elsewhere")
    assert str(e.value) == (f"session id '0199aaaa-bbbb-7ccc-8ddd-00000000000' is ambiguous: "
                            f"{A} ({a}), {B} ({b}) (give more of it)")
    assert paths.resolve(A, cwd="/elsewhere") == a


@pytest.mark.parametrize("arg, error", [
    ("a/b", "'a/b': no such session file"), ("..x", "'..x': no such session file"),
    ("x.jsonl", "'x.jsonl': no such session file"), ("a\0b", "'a\0b': no such session file"),
    ("", "empty session id"),
])
def test_resolve_refuses(arg, error):
    with pytest.raises(PantoError) as e:
        paths.resolve(arg)
    assert str(e.value) == error


def test_resolve_a_directory_or_nothing(isolated):
    with pytest.raises(PantoError) as e:
        paths.resolve(str(isolated))
    assert str(e.value) == f"'{isolated}' is a directory, not a session file"
    with pytest.raises(PantoError) as e:
        paths.resolve("0199")
    assert str(e.value) == (f"no session '0199' in {paths.session_dir(str(isolated))} or any other directory's "
                            f"sessions (see panto-ls --all)")


def test_a_file_named_by_one_id_holding_another_is_not_found(isolated):
    cwd = str(isolated)
    _write(cwd, B, name=A)          # named A, its header says B
    with pytest.raises(PantoError, match="^no session"):
        paths.resolve(A)


def test_many_ambiguous_sessions_are_named_ten_at_most(isolated):
    cwd = str(isolated)
    ids = [f"0199aaaa-bbbb-7ccc-8ddd-0000000000{i:02d}" for i in range(12)]
    made = [_write(cwd, i) for i in ids]
    with pytest.raises(PantoError) as e:
        paths.resolve("0199aaaa")
    shown = ", ".join(f"{i} ({p})" for i, p in list(zip(ids, made))[:10])
    assert str(e.value) == f"session id '0199aaaa' is ambiguous: {shown} and 2 more (give more of it)"
