"""pantolib.providers.refusals on its own, its file under tmp_path: what a
server refused is remembered for a day, per wire API, shown base URL and
model; a file that is not ours counts as empty; writes replace the file
whole, 0600 in a 0700 directory."""
import os
import stat

import orjson
import pytest

from pantolib import persist
from pantolib.providers import refusals

NOW = 1_800_000_000
URL = "http://127.0.0.1:8080/v1"


@pytest.fixture
def env(tmp_path):
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}


def doc(env):
    return persist.load(refusals.path(env), refusals.KIND)


def write(env, data):
    """Bytes as they are, else a document in the cache format (persist.save)."""
    os.makedirs(os.path.dirname(refusals.path(env)), exist_ok=True)
    if not isinstance(data, bytes):
        assert persist.save(refusals.path(env), refusals.KIND, data)
        return
    with open(refusals.path(env), "wb") as f:
        f.write(data)


def test_remember_then_recall_for_a_day(env):
    assert refusals.path(env) == os.path.join(env["XDG_STATE_HOME"], "panto", "refused.json")
    refusals.remember("openai_chat", URL, "tiny", ["reasoning_effort"], env=env, now=NOW)
    assert refusals.recall("openai_chat", URL, "tiny", env=env, now=NOW) == {"reasoning_effort"}
    assert refusals.recall("openai_chat", URL, "tiny", env=env, now=NOW + refusals.REMEMBER - 1) == {"reasoning_effort"}
    assert refusals.recall("openai_chat", URL, "tiny", env=env, now=NOW + refusals.REMEMBER) == set()
    assert refusals.recall("openai_chat", URL, "tiny", env=env, now=NOW - 61) == set()     # from the future
    assert refusals.recall("openai_chat", URL, "other", env=env, now=NOW) == set()
    assert refusals.recall("anthropic", URL, "tiny", env=env, now=NOW) == set()
    d = os.path.dirname(refusals.path(env))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(refusals.path(env)).st_mode) == 0o600
    assert [n for n in os.listdir(d)] == ["refused.json"]


def test_the_key_is_the_url_as_shown_never_its_credentials(env):
    secret_url = "http://user:hunter2hunter2@127.0.0.1:8080/v1?key=sk-0123456789abcdefgh#frag"
    refusals.remember("openai_chat", secret_url, "tiny", ["store"], env=env, now=NOW)
    raw = open(refusals.path(env), "rb").read()
    assert b"hunter2" not in raw and b"sk-0123" not in raw and b"frag" not in raw
    assert doc(env)["servers"][0]["baseUrl"] == URL
    assert refusals.recall("openai_chat", URL, "tiny", env=env, now=NOW) == {"store"}


def test_remember_adds_keeps_others_and_forgets_the_old(env):
    refusals.remember("openai_chat", URL, "a", ["x"], env=env, now=NOW - refusals.REMEMBER - 5)
    refusals.remember("openai_chat", URL, "b", ["y"], env=env, now=NOW - 100)
    refusals.remember("openai_chat", URL, "c", ["z", "w"], env=env, now=NOW - 50)
    refusals.remember("openai_chat", URL, "c", ["v"], env=env, now=NOW)
    refusals.remember("openai_chat", URL, "c", [], env=env, now=NOW + 5)      # nothing to add: not written
    d = doc(env)
    assert d["version"] == 1
    assert d["servers"] == [
        {"api": "openai_chat", "baseUrl": URL, "model": "c", "refused": {"v": NOW, "w": NOW - 50, "z": NOW - 50}},
        {"api": "openai_chat", "baseUrl": URL, "model": "b", "refused": {"y": NOW - 100}},
    ]


def test_at_most_max_servers_are_kept_the_most_recent_first(env):
    servers = [{"api": "openai_chat", "baseUrl": URL, "model": f"m{i}", "refused": {"f": NOW}}
               for i in range(refusals.MAX_SERVERS)]
    write(env, {"version": 1, "servers": servers})
    refusals.remember("openai_chat", URL, "new", ["g"], env=env, now=NOW)
    models = [e["model"] for e in doc(env)["servers"]]
    assert len(models) == refusals.MAX_SERVERS and models[0] == "new" and models[-1] == f"m{refusals.MAX_SERVERS - 2}"


@pytest.mark.parametrize("data", [
    b"not json",
    b"[]",
    orjson.dumps({"version": 2, "servers": [{"api": "openai_chat", "baseUrl": URL, "model": "m",
                                               "refused": {"f": NOW}}]}),
    orjson.dumps({"version": 1, "servers": {"not": "a list"}}),
    orjson.dumps({"version": 1, "servers": [{"api": "openai_chat", "baseUrl": URL, "model": 7, "refused": {}},
                                            {"api": "openai_chat", "baseUrl": URL, "model": "m", "refused": []},
                                            "junk"]}),
    orjson.dumps({"version": 1, "servers": [{"api": "openai_chat", "baseUrl": URL, "model": "m",
                                             "refused": {"f": "yesterday", "g": True, "h" * 65: NOW}}]}),
])
def test_a_file_that_is_not_ours_counts_as_empty(env, data):
    write(env, data)
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()


def test_only_valid_fields_of_an_entry_are_read(env):
    write(env, {"version": 1, "servers": [{"api": "openai_chat", "baseUrl": URL, "model": "m",
                                           "refused": {"ok": NOW, "float": NOW + 0.5, "bad": None}}]})
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == {"ok", "float"}
    refusals.remember("openai_chat", URL, "m", ["new"], env=env, now=NOW)
    assert doc(env)["servers"][0]["refused"] == {"float": NOW + 0.5, "new": NOW, "ok": NOW}


def test_a_file_too_large_a_symlink_or_a_fifo_is_not_read(env, tmp_path):
    write(env, b" " * (refusals.MAX_BYTES + 1))
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()
    good = tmp_path / "good.json"
    assert persist.save(str(good), refusals.KIND, {"version": 1, "servers": [
        {"api": "openai_chat", "baseUrl": URL, "model": "m", "refused": {"f": NOW}}]})
    os.rename(refusals.path(env), str(tmp_path / "big"))
    os.rename(str(good), refusals.path(env))
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == {"f"}     # read where it is
    os.rename(refusals.path(env), str(good))
    os.symlink(good, refusals.path(env))
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()
    os.unlink(refusals.path(env))
    os.mkfifo(refusals.path(env))
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user needs root to make")
def test_a_file_of_another_user_is_not_read(env):
    refusals.remember("openai_chat", URL, "m", ["f"], env=env, now=NOW)
    os.chown(refusals.path(env), 4321, 4321)
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()


def test_a_state_directory_that_cannot_be_made_is_no_memory_and_no_error(tmp_path):
    (tmp_path / "blocker").write_text("a file where the directory would be")
    env = {"XDG_STATE_HOME": str(tmp_path / "blocker"), "HOME": str(tmp_path)}
    refusals.remember("openai_chat", URL, "m", ["f"], env=env, now=NOW)
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()


def test_a_write_that_cannot_replace_the_file_leaves_no_temporary(env):
    os.makedirs(refusals.path(env))          # a directory where the file goes: the rename fails
    refusals.remember("openai_chat", URL, "m", ["f"], env=env, now=NOW)
    d = os.path.dirname(refusals.path(env))
    assert os.listdir(d) == ["refused.json"] and os.path.isdir(refusals.path(env))
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()


@pytest.mark.parametrize("harm", ["0666", "other code", "one digit"])
def test_a_well_formed_file_that_is_not_private_ours_or_whole_is_not_trusted(env, harm):
    refusals.remember("openai_chat", URL, "m", ["f"], env=env, now=NOW)
    f = refusals.path(env)
    if harm == "0666":
        os.chmod(f, 0o666)
    elif harm == "other code":
        data = open(f, "rb").read()
        with open(f, "wb") as out:
            out.write(data.replace(persist.code().encode(), b"0123456789abcdef", 1))
    else:
        data = open(f, "rb").read()
        with open(f, "wb") as out:
            out.write(data.replace(b'"f":%d' % NOW, b'"f":%d' % (NOW + 1)))
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == set()
    refusals.remember("openai_chat", URL, "m", ["g"], env=env, now=NOW)      # and it is replaced by a good one
    assert refusals.recall("openai_chat", URL, "m", env=env, now=NOW) == {"g"}
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
