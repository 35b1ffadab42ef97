"""Branches (SPEC §4.1): replay --at, tree and name, on a session built
through the real pipeline against the scripted server."""
import os
import shutil
import subprocess
import sys

import orjson

from builders import lines
from conftest import assert_clean_error, reply, run, shell
from on_terminal import EVIL, RAW, on_a_terminal


def texts(body):
    """The texts of the messages a chat-completions request carried."""
    out = []
    for m in body["messages"]:
        c = m.get("content")
        out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c or []))
    return out


def test_branches_share_the_file_and_nothing_is_removed(branched):
    srv, path, e = branched
    every = lines(open(path, "rb").read())
    assert len(every) == 10                       # header + 9 entries: the first branch is all still there
    assert e["u3"]["parentId"] == e["a1"]["id"] and e["u4"]["parentId"] == e["a1"]["id"]
    assert e["u2"]["parentId"] == e["a1"]["id"]
    assert [x["message"]["content"][0]["text"] for x in (e["u3"], e["u4"])] == ["branch b", "branch c"]


def test_the_request_after_a_branch_carries_only_the_branch(branched):
    srv, path, e = branched
    assert len(srv.requests) == 4
    sent = [texts(r.body) for r in srv.requests]
    assert sent[1][1:] == ["first question", "one", "second question"]
    assert sent[2][1:] == ["first question", "one", "branch b"]   # not the second question
    assert sent[3][1:] == ["first question", "one", "branch c"]   # nor branch b
    assert all("two" not in s and "three" not in s for s in sent[3])


def test_replay_at_prints_the_header_and_the_path_in_file_order(branched):
    srv, path, e = branched
    p = run(["panto-log", "replay", "--at", e["a3"]["id"], path])
    assert p.returncode == 0, p.stderr
    got = lines(p.stdout)
    assert got[0]["type"] == "session"
    assert [x["id"] for x in got[1:]] == [e[k]["id"] for k in ("system", "u1", "a1", "u3", "a3")]
    raw = open(path, "rb").read().split(b"\n")
    assert all(line in raw for line in p.stdout.split(b"\n"))  # byte for byte


def test_replay_at_the_old_branch_brings_it_back(branched):
    srv, path, e = branched
    srv.push(reply("five"))
    shell(srv, f'panto-log replay --at {e["a2"]["id"]} {path} | panto-send "back on two" | panto-log append {path} >/dev/null')
    assert texts(srv.requests[-1].body)[1:] == ["first question", "one", "second question", "two", "back on two"]
    p = shell(srv, "panto-log replay --last")
    assert lines(p.stdout)[-2]["parentId"] == e["a2"]["id"]


def test_unknown_and_ambiguous_ids_are_errors_naming_candidates(isolated, tmp_path):
    f = tmp_path / "s.jsonl"
    head = {"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-000000000001",
            "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(isolated)}
    rows = [head]
    for i, parent in (("abc00001", None), ("abc00002", "abc00001"), ("def00003", "abc00002")):
        rows.append({"type": "message", "id": i, "parentId": parent, "timestamp": "2026-04-25T17:40:16.000Z",
                     "message": {"role": "user", "content": [{"type": "text", "text": i}]}})
    f.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    p = run(["panto-log", "replay", "--at", "abc", str(f)])
    assert_clean_error(p, 1, "panto-log")
    assert b"abc00001" in p.stderr and b"abc00002" in p.stderr and p.stdout == b""
    p = run(["panto-log", "replay", "--at", "ffff", str(f)])
    assert_clean_error(p, 1, "panto-log")
    assert b"ffff" in p.stderr
    p = run(["panto-log", "replay", "--at", "def", str(f)])
    assert [x["id"] for x in lines(p.stdout)[1:]] == ["abc00001", "abc00002", "def00003"]


def test_tree_marks_the_active_path_and_indents_forks_only(branched):
    srv, path, e = branched
    p = run(["panto-log", "tree", path], env=dict(os.environ, TZ="UTC0"))
    assert p.returncode == 0, p.stderr
    rows = [r.split("\t") for r in p.stdout.decode().splitlines()]
    assert all(len(r) == 4 for r in rows)
    order = ["system", "u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4"]
    assert [r[0].rstrip("*") for r in rows] == [e[k]["id"] for k in order]
    active = {"system", "u1", "a1", "u4", "a4"}
    assert [r[0].endswith("*") for r in rows] == [k in active for k in order]
    # a linear session is one column: the first child keeps its depth
    assert [r[1] for r in rows] == ["system", "user", "assistant", "user", "assistant",
                                    "  user", "  assistant", "  user", "  assistant"]
    assert rows[5][3] == "branch b" and rows[2][3] == "one"
    ts = e["u1"]["timestamp"]
    assert rows[1][2] == f"{ts[:10]} {ts[11:16]}"


def test_tree_json(branched):
    srv, path, e = branched
    got = lines(run(["panto-log", "tree", "--json", path]).stdout)
    assert [g["id"] for g in got][-2:] == [e["u4"]["id"], e["a4"]["id"]]
    u3 = next(g for g in got if g["id"] == e["u3"]["id"])
    assert u3 == {"id": e["u3"]["id"], "parentId": e["a1"]["id"], "depth": 1, "type": "message",
                  "role": "user", "timestamp": e["u3"]["timestamp"], "text": "branch b", "active": False}
    assert [g["active"] for g in got].count(True) == 5


def test_tree_depth_of_a_fork_of_a_fork(isolated, tmp_path):
    f = tmp_path / "s.jsonl"
    rows = [{"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-000000000001",
             "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(isolated)}]
    for i, parent in (("r", None), ("a", "r"), ("b", "r"), ("c", "b"), ("d", "b"), ("e", "r")):
        rows.append({"type": "message", "id": i * 8, "parentId": parent and parent * 8,
                     "timestamp": "2026-04-25T17:40:16.000Z",
                     "message": {"role": "user", "content": [{"type": "text", "text": i}]}})
    f.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    got = {g["id"][0]: g["depth"] for g in lines(run(["panto-log", "tree", "--json", str(f)]).stdout)}
    assert got == {"r": 0, "a": 0, "b": 1, "c": 1, "d": 2, "e": 1}
    order = [g["id"][0] for g in lines(run(["panto-log", "tree", "--json", str(f)]).stdout)]
    assert order == ["r", "a", "b", "c", "d", "e"]


def test_tree_cells_stay_one_line(isolated, tmp_path):
    f = tmp_path / "s.jsonl"
    rows = [{"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-000000000001",
             "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(isolated)},
            {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
             "message": {"role": "user", "content": [{"type": "text", "text": "\n\n  tab\there \x1b[31mred\nsecond"}]}}]
    f.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = run(["panto-log", "tree", str(f)]).stdout
    assert out.count(b"\n") == 1 and out.count(b"\t") == 3 and b"\x1b" not in out
    assert out.split(b"\t")[3] == b"tab here ^[[31mred\n"


def test_name_appends_a_session_info_entry_and_ls_shows_the_last(branched):
    srv, path, e = branched
    before = open(path, "rb").read()
    p = run(["panto-log", "name", "First name", "--last"])
    assert p.returncode == 0, p.stderr
    assert run(["panto-log", "name", "Better\tname\x1b]0;x\x07", path]).returncode == 0
    after = open(path, "rb").read()
    assert after.startswith(before)                            # appended, nothing rewritten
    infos = lines(after[len(before):])
    assert [i["type"] for i in infos] == ["sessionInfo", "sessionInfo"]
    assert infos[0]["parentId"] == e["a4"]["id"] and infos[1]["parentId"] == infos[0]["id"]
    assert infos[1]["name"] == "Better\tname\x1b]0;x\x07"          # the user's text, as it was
    assert list(infos[0]) == ["type", "id", "parentId", "timestamp", "name"]
    row = run(["panto-ls"]).stdout.decode().rstrip("\n").split("\t")
    assert len(row) == 5 and row[4] == "Better name^[]0;x^G"
    # the session goes on after a name: the name is no message
    srv.push(reply("six"))
    shell(srv, 'panto-log replay --last | panto-send "after the name" | panto-log append >/dev/null')
    assert texts(srv.requests[-1].body)[1:] == ["first question", "one", "branch c", "four", "after the name"]
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_name_refuses_an_empty_title_and_stdin(isolated, branched):
    srv, path, e = branched
    assert_clean_error(run(["panto-log", "name", "", path]), 1, "panto-log")
    assert_clean_error(run(["panto-log", "name", "x", "-"]), 1, "panto-log")
    assert_clean_error(run(["panto-log", "name", "x", "0000000"]), 1, "panto-log")


def test_session_ids_resolve_across_directories(branched, tmp_path):
    srv, path, e = branched
    sid = os.path.basename(path)[:-len(".jsonl")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cmd in (["replay", sid[:13]], ["tree", sid[:13]], ["show", sid[:13]]):
        p = run(["panto-log", *cmd], cwd=elsewhere)
        assert p.returncode == 0, (cmd, p.stderr)
    assert run(["panto-log", "replay", sid], cwd=elsewhere).stdout == open(path, "rb").read()
    for bad in ("../" + sid, sid[:8] + "/..", ".."):
        assert_clean_error(run(["panto-log", "tree", bad], cwd=elsewhere), 1, "panto-log")


def test_tree_of_a_stream_on_stdin_is_the_tree_of_the_file(branched):
    srv, path, e = branched
    data = open(path, "rb").read()
    from_file = run(["panto-log", "tree", path])
    from_stdin = run(["panto-log", "tree", "-"], input=data)
    assert from_file.returncode == from_stdin.returncode == 0
    assert from_stdin.stdout == from_file.stdout and from_file.stdout.count(b"\n") == 9
    assert open(path, "rb").read() == data


# -- hostile trees: deep forks, long text, text that could act on a terminal -----------------------

HEAD = {"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-000000000001",
        "timestamp": "2026-04-25T17:40:15.990Z", "cwd": "/x"}


def message(eid, parent, text, role="user"):
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:16.000Z",
            "message": {"role": role, "content": [{"type": "text", "text": text}]}}


def staircase(depth):
    """Entries whose forks go `depth` levels deep: each level's second child
    forks again (2 entries a level)."""
    rows, parent = [message("r0000000", None, "root")], "r0000000"
    for i in range(1, depth + 1):
        rows.append(message(f"a{i:07d}", parent, f"first child {i}"))
        rows.append(message(f"b{i:07d}", parent, f"fork {i}"))
        parent = f"b{i:07d}"
    return rows


def write_rows(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [HEAD] + rows))
    return str(path)


def test_tree_indentation_stops_growing_and_shows_the_depth_as_a_number(isolated, tmp_path):
    """Two spaces a level up to 10 levels, then the depth as [N]: output
    linear in the file (a staircase made it grow with the square of the depth)."""
    depth = 3000
    f = write_rows(tmp_path / "s.jsonl", staircase(depth))
    p = run(["panto-log", "tree", f])
    assert p.returncode == 0, p.stderr
    rows = [r.split("\t") for r in p.stdout.decode().splitlines()]
    assert len(rows) == 2 * depth + 1 and all(len(r) == 4 for r in rows)
    assert max(len(line) for line in p.stdout.splitlines()) < 120
    assert len(p.stdout) < 100 * len(rows)
    cells = {r[0].rstrip("*"): r[1] for r in rows}
    assert cells["b0000001"] == "  user" and cells["b0000010"] == "  " * 10 + "user"
    assert cells["b0000011"] == "  " * 10 + "[11] user"
    assert cells[f"b{depth:07d}"] == "  " * 10 + f"[{depth}] user"
    assert cells[f"a{depth:07d}"] == "  " * 10 + f"[{depth - 1}] user"      # a first child keeps its depth
    got = {g["id"]: g["depth"] for g in lines(run(["panto-log", "tree", "--json", f]).stdout)}
    assert got[f"b{depth:07d}"] == depth and got["b0000011"] == 11            # --json: the number as it is


def test_tree_memory_is_the_tree_not_the_text(isolated, tmp_path):
    """Each entry's line is read again when it is printed: a 60 MB session of
    long one-line texts is shown in far less memory than its text."""
    big = "x" * (200 << 10)
    rows, parent = [], None
    for i in range(300):
        rows.append(message(f"{i:08d}", parent, f"{i} " + big))
        parent = f"{i:08d}"
    f = write_rows(tmp_path / "s.jsonl", rows)
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
             "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    for args in (["tree", f], ["tree", "--json", f], ["tree", "-"]):
        with open(f, "rb") as stdin:
            out = subprocess.run([sys.executable, "-c", probe, shutil.which("panto-log"), *args],
                                 stdin=stdin, capture_output=True, timeout=120).stdout.split()
        status, kib = int(out[0]), int(out[1])
        assert status == 0
        assert kib < 45 << 10, (args, kib)           # the text alone is 60 MB




def test_tree_json_on_a_terminal_escapes_what_could_act_on_it(isolated, tmp_path):
    rows = [message("aaaaaaaa", None, EVIL), message("bbbbbbbb", "aaaaaaaa", "ok \u2028 " + EVIL, "assistant")]
    f = write_rows(tmp_path / "s.jsonl", rows)
    piped = run(["panto-log", "tree", "--json", f]).stdout
    assert "\x9b".encode() in piped and "\u202e".encode() in piped      # a pipe gets orjson's JSON as it is
    shown = on_a_terminal([shutil.which("panto-log"), "tree", "--json", f])
    assert not any(c in shown for c in RAW), shown
    assert b"\\u009b2J" in shown and b"\\u202eexe.txt\\u202c" in shown and b"\\u2028" in shown
    got = [orjson.loads(x) for x in shown.replace(b"\r\n", b"\n").splitlines()]
    assert got == lines(piped)                                           # the same JSON, still valid
    assert got[0]["text"] == EVIL.split("\n")[0]
    table = on_a_terminal([shutil.which("panto-log"), "tree", f])
    assert not any(c in table for c in RAW), table
    assert b"\\x9b2J" in table and b"<U+202E>exe.txt<U+202C>" in table
