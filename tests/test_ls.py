"""panto-ls (SPEC §7): this directory's sessions, most recently active first."""
import os
import shutil
import subprocess
import time

import orjson
import pytest

from conftest import assert_clean_error, run
from pantolib import paths

A = "0199aaaa-bbbb-7ccc-8ddd-000000000001"
B = "0199aaaa-bbbc-7ccc-8ddd-000000000002"   # same first 8 chars: same minute
C = "0199cccc-0000-7ccc-8ddd-000000000003"


def entry(eid, parent, role, text, t="2026-04-25T17:40:16.000Z"):
    e = {"type": "message", "id": eid, "parentId": parent, "timestamp": t}
    if role == "user":
        e["provider"], e["model"] = "openai", "gpt-4o"
    e["message"] = {"role": role, "content": [{"type": "text", "text": text}]}
    return orjson.dumps(e) + b"\n"


def make(cwd, sid, prompt="first prompt", turns=1, created="2026-04-25T17:40:15.990Z",
         mtime=None, system=True, extra=b"", last="2026-04-25T17:40:16.000Z", **head):
    """A session file; its entries are stamped `last` (its last activity); `head`: more header keys."""
    cwd = str(cwd)
    d = paths.session_dir(cwd)
    os.makedirs(d, mode=0o700, exist_ok=True)
    out = [orjson.dumps({"type": "session", "version": 1, "id": sid, "timestamp": created, "cwd": cwd, **head})
           + b"\n"]
    parent = None
    if system:
        out.append(entry("5y5y5y5y", None, "system", "You are helpful. (not a prompt)"))
        parent = "5y5y5y5y"
    for i in range(turns):
        u, a = f"{i:04x}aaaa", f"{i:04x}bbbb"
        out.append(entry(u, parent, "user", prompt if i == 0 else f"later question {i}", last))
        out.append(entry(a, u, "assistant", f"answer {i}", last))
        parent = a
    p = os.path.join(d, sid + ".jsonl")
    with open(p, "wb") as f:
        f.write(b"".join(out) + extra)
    if mtime is not None:
        os.utime(p, (mtime, mtime))
    return p


def ls(*args, **kw):
    p = run(["panto-ls", *args], **kw)
    assert p.returncode == 0, p.stderr
    assert b"Traceback" not in p.stderr
    return p


def rows(p):
    return [l.split("\t") for l in p.stdout.decode().splitlines()]


def as_json(p):
    return [orjson.loads(l) for l in p.stdout.splitlines()]


def test_no_sessions_prints_nothing(isolated):
    p = ls()
    assert p.stdout == b"" and p.stderr == b""
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])   # listing creates no session dirs


def test_lists_only_this_directory_by_header_cwd(isolated, tmp_path):
    a = tmp_path / "work" / "a-b" / "c"
    b = tmp_path / "work" / "a" / "b-c"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    assert paths.session_dir(str(a)) == paths.session_dir(str(b))   # the folder collides
    make(a, A, prompt="in a-b/c")
    make(b, C, prompt="in a/b-c")
    make(tmp_path / "elsewhere", B, prompt="elsewhere")
    ra = rows(ls(cwd=a))
    rb = rows(ls(cwd=b))
    assert [r[4] for r in ra] == ["in a-b/c"]
    assert [r[4] for r in rb] == ["in a/b-c"]
    assert rows(ls()) == []
    every = as_json(ls("--all", "--json"))
    assert sorted(s["id"] for s in every) == sorted([A, B, C])
    assert {s["id"]: s["cwd"] for s in every}[C] == str(b)
    assert len(rows(ls("--all"))) == 3


def test_most_recent_activity_first(isolated):
    """Activity is the last entry's timestamp: mtimes that say otherwise (a copy,
    a sync, a touch) do not reorder sessions (SPEC §4.2, §7)."""
    now = time.time()
    make(isolated, A, prompt="created first, used last", mtime=now - 3600, last="2026-04-26T12:00:00.000Z")
    make(isolated, C, prompt="created last, used first", mtime=now, created="2026-04-25T18:00:00.000Z",
         last="2026-04-25T18:00:01.000Z")
    want = ["created first, used last", "created last, used first"]
    assert [r[4] for r in rows(ls())] == want
    os.utime(paths.session_dir(str(isolated)) + f"/{C}.jsonl", (now + 60, now + 60))
    assert [r[4] for r in rows(ls())] == want
    assert [s["id"] for s in as_json(ls("--json"))] == [A, C]
    assert as_json(ls("--json"))[0]["lastActive"] == "2026-04-26T12:00:00.000Z"
    # --last agrees with the listing
    p = run(["panto-log", "replay", "--last"])
    assert orjson.loads(p.stdout.splitlines()[0])["id"] == A


def test_mtime_counts_only_when_no_entry_has_a_valid_timestamp(isolated):
    now = time.time()
    make(isolated, A, prompt="stamped", last="2026-04-26T12:00:00.000Z", mtime=now)
    make(isolated, C, prompt="bad stamps", last="not a time", mtime=now - 60, system=False)
    make(isolated, B, turns=0, system=False, mtime=now - 30)
    # A: 2026-04-26; C and B fall back to their mtimes, which are later
    assert [r[4] for r in rows(ls())] == ["", "bad stamps", "stamped"]
    p = run(["panto-log", "replay", "--last"])
    assert orjson.loads(p.stdout.splitlines()[0])["id"] == B


def test_columns_and_local_times(isolated):
    mtime = 1777199400  # 2026-04-26T10:30:00Z
    make(isolated, C, prompt="what files are here?", turns=2, mtime=mtime - 86400,
         last="2026-04-26T10:30:00.000Z")
    env = dict(os.environ, TZ="XYZ-5")                      # UTC+5, no tz database needed
    p = ls(env=env)
    line = p.stdout.decode().rstrip("\n")
    cols = line.split("\t")
    assert len(cols) == 5, cols
    assert cols[0] == C[:8]
    assert cols[1] == "2026-04-25 22:40"                     # 17:40:15Z in UTC+5
    assert cols[2] == "2026-04-26 15:30"                     # the last entry's time in UTC+5
    assert cols[3] == "4 messages"
    assert cols[4] == "what files are here?"
    utc = rows(ls(env=dict(os.environ, TZ="UTC0")))[0]
    assert utc[1] == "2026-04-25 17:40" and utc[2] == "2026-04-26 10:30"


def test_shortest_unique_prefix_of_at_least_8(isolated):
    make(isolated, A, last="2026-04-25T17:40:19.000Z")
    make(isolated, B, last="2026-04-25T17:40:18.000Z")
    make(isolated, C, last="2026-04-25T17:40:17.000Z")
    got = [r[0] for r in rows(ls())]
    assert got == ["0199aaaa-bbbb", "0199aaaa-bbbc", "0199cccc"]
    for prefix, sid in zip(got, (A, B, C)):                 # every prefix names its session
        p = run(["panto-log", "replay", prefix])
        assert p.returncode == 0, p.stderr
        assert orjson.loads(p.stdout.splitlines()[0])["id"] == sid


def test_two_real_uuid7_sessions_in_the_same_minute_get_distinct_prefixes(isolated):
    from pantolib import entries
    ids = [entries.uuid7(), entries.uuid7()]
    assert ids[0][:8] == ids[1][:8]
    for i, sid in enumerate(ids):
        make(isolated, sid, prompt=f"p{i}")
    got = [r[0] for r in rows(ls())]
    assert len(set(got)) == 2 and all(len(g) >= 8 for g in got)
    assert {g for g in got} == {next(g for g in got if s.startswith(g)) for s in ids}


def test_message_count_is_user_plus_assistant(isolated):
    make(isolated, C, turns=3, system=True)
    assert rows(ls())[0][3] == "6 messages"
    assert as_json(ls("--json"))[0]["messages"] == 6


def test_message_count_ignores_other_entry_types(isolated):
    """A later entry type may embed a message object (a compaction summary, say): it is not a message."""
    odd = (b'{"type":"compaction","id":"c0c0c0c0","parentId":"0002bbbb","timestamp":"2026-04-25T17:40:16.000Z",'
           b'"summary":{"role":"user","content":[{"type":"text","text":"\\"role\\":\\"assistant\\""}]}}\n')
    make(isolated, C, turns=3, system=True, extra=odd)
    assert rows(ls())[0][3] == "6 messages"


def test_message_count_of_entries_not_written_compactly(isolated):
    """Valid entries written by other tools (spaces after colons) are echoed byte for byte into files."""
    spaced = (b'{"type": "message", "id": "5a5a5a5a", "parentId": "0000bbbb", "timestamp": "2026-04-25T17:40:16.000Z", '
              b'"message": {"role": "user", "content": [{"type": "text", "text": "spaced"}]}}\n')
    p = make(isolated, C, turns=1, system=True, extra=spaced)
    assert run(["panto-log", "replay", p]).returncode == 0      # a valid session
    assert rows(ls())[0][3] == "3 messages"


def test_one_message(isolated):
    d = paths.session_dir(str(isolated))
    os.makedirs(d)
    with open(os.path.join(d, C + ".jsonl"), "wb") as f:
        f.write(orjson.dumps({"type": "session", "version": 1, "id": C, "timestamp": "2026-04-25T17:40:15.990Z",
                              "cwd": str(isolated)}) + b"\n" + entry("00000001", None, "assistant", "hi"))
    assert rows(ls())[0][3] == "1 message"


def test_first_prompt_is_the_first_user_text_on_one_line(isolated):
    make(isolated, C, prompt="line one\nline\ttwo", turns=2)
    r = rows(ls())[0]
    assert "line one" in r[4] and "\t" not in r[4] and "\n" not in r[4]
    assert r[4] != "You are helpful. (not a prompt)"
    assert as_json(ls("--json"))[0]["firstPrompt"].startswith("line one\nline\ttwo")


def test_json_fields(isolated):
    mtime = 1777199400.25
    p = make(isolated, C, prompt="hello", turns=2, mtime=mtime)
    got = as_json(ls("--json"))
    assert len(got) == 1
    s = got[0]
    for key in ("id", "path", "cwd", "created", "modified", "messages", "firstPrompt"):
        assert key in s, key
    assert s["id"] == C and s["cwd"] == str(isolated) and os.path.samefile(s["path"], p)
    assert s["created"] == "2026-04-25T17:40:15.990Z"
    assert s["modified"].startswith("2026-04-26T10:30:00") and s["modified"].endswith("Z")
    assert s["messages"] == 4 and s["firstPrompt"] == "hello"


def test_never_modifies_files(isolated):
    torn = b'{"type":"message","id":"dead'
    p = make(isolated, C, extra=torn)
    before = open(p, "rb").read()
    st = os.stat(p)
    r = rows(ls())
    assert len(r) == 1 and r[0][3] == "2 messages"          # the torn line is not counted
    ls("--all", "--json")
    assert open(p, "rb").read() == before
    st2 = os.stat(p)
    assert (st2.st_mtime_ns, st2.st_size, st2.st_mode) == (st.st_mtime_ns, st.st_size, st.st_mode)


def test_foreign_and_broken_files_are_skipped_with_a_note(isolated):
    make(isolated, C, prompt="the real one")
    d = paths.session_dir(str(isolated))
    for name, data in (("garbage.jsonl", b"\x00\xff not json\n"), ("list.jsonl", b"[1,2]\n"),
                       ("empty.jsonl", b""), ("entry-first.jsonl", entry("00000001", None, "user", "x"))):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    os.mkdir(os.path.join(d, "dir.jsonl"))
    with open(os.path.join(d, "notes.txt"), "wb") as f:
        f.write(b"not a session, not a .jsonl")
    p = ls()
    assert [r[4] for r in rows(p)] == ["the real one"]
    err = p.stderr.decode()
    for name in ("garbage.jsonl", "list.jsonl", "entry-first.jsonl"):
        assert name in err, err
    assert all(l.startswith("panto-ls: ") for l in err.splitlines())
    assert "notes.txt" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files")
def test_unreadable_file_is_skipped_with_a_note(isolated):
    make(isolated, C)
    p = make(isolated, A, prompt="locked")
    os.chmod(p, 0)
    r = ls()
    assert len(rows(r)) == 1 and A[:8].encode() in r.stderr


def test_cache_lives_under_xdg_cache_home_and_is_never_stale(isolated):
    p = make(isolated, C, turns=1)
    assert rows(ls())[0][3] == "2 messages"
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    assert os.path.isdir(cache) and os.listdir(cache)
    # append through the real command: the count follows
    more = entry("a0000001", "0000bbbb", "user", "again") + entry("a0000002", "a0000001", "assistant", "ok")
    assert run(["panto-log", "append", p], input=more).returncode == 0
    assert rows(ls())[0][3] == "4 messages"
    # same size, mtime put back: still seen (ctime / identity change)
    st = os.stat(p)
    data = open(p, "rb").read()
    with open(p, "r+b") as f:
        f.write(data.replace(b'"role":"system"', b'"role":"user"  ', 1))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size
    assert rows(ls())[0][3] == "5 messages"
    # replaced by another file under the same name
    tmp = p + ".new"
    with open(tmp, "wb") as f:
        f.write(data.split(b"\n", 1)[0] + b"\n")
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(tmp, p)
    assert rows(ls())[0][3] == "0 messages"
    # removed: gone from the list
    os.unlink(p)
    assert rows(ls()) == []


def test_a_broken_cache_is_ignored(isolated):
    make(isolated, C, turns=2)
    ls()
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    for name in os.listdir(cache):
        with open(os.path.join(cache, name), "wb") as f:
            f.write(b'{"version":1,"files":{"x": [1]}, garbage')
    assert rows(ls())[0][3] == "4 messages"


def test_an_unwritable_cache_only_costs_speed(isolated):
    make(isolated, C)
    with open(os.path.join(os.environ["HOME"], "cachefile"), "wb"):
        pass
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(os.environ["HOME"], "cachefile"))
    p = ls(env=env)
    assert rows(p)[0][3] == "2 messages"


def test_closed_downstream_ends_quietly(isolated):
    for i in range(30):
        make(isolated, f"0199{i:04x}-0000-7ccc-8ddd-{i:012x}", prompt="x" * 70)
    exe = shutil.which("panto-ls")
    proc = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                         # the reader is gone before anything is written
    err = proc.stderr.read()
    assert proc.wait(10) == 0 and err == b""
    sh = subprocess.run(["bash", "-c", "set -o pipefail; panto-ls | head -1"], capture_output=True)
    assert sh.returncode == 0 and sh.stderr == b"" and sh.stdout.count(b"\n") == 1


def test_usage_errors_exit_2(isolated):
    for argv in (["--bogus"], ["extra"], ["--all", "--all", "x"]):
        p = run(["panto-ls", *argv])
        assert_clean_error(p, 2)


# -- titles, names, --grep, the cache (SPEC §7) ---------------------------------------

def info(eid, parent, name, t="2026-04-25T17:41:00.000Z"):
    return orjson.dumps({"type": "sessionInfo", "id": eid, "parentId": parent, "timestamp": t, "name": name}) + b"\n"


def tool_turn(eid, parent, command, result):
    use = {"type": "message", "id": eid + "1", "parentId": parent, "timestamp": "2026-04-25T17:40:20.000Z",
           "message": {"role": "assistant", "content": [
               {"type": "toolUse", "id": "call_" + eid, "name": "bash", "input": orjson.dumps({"command": command}).decode()}],
               "provider": "openai", "model": "gpt-4o", "stopReason": "toolUse"}}
    res = {"type": "message", "id": eid + "2", "parentId": eid + "1", "timestamp": "2026-04-25T17:40:21.000Z",
           "provider": "openai", "model": "gpt-4o",
           "message": {"role": "user", "content": [{"type": "toolResult", "toolUseId": "call_" + eid, "content": result}]}}
    return orjson.dumps(use) + b"\n" + orjson.dumps(res) + b"\n"


def test_title_is_the_last_name_else_the_first_prompt(isolated):
    make(isolated, A, prompt="unnamed prompt", last="2026-04-25T17:40:19.000Z")
    make(isolated, C, prompt="named prompt", extra=info("1a1a1a1a", "0000bbbb", "old name")
         + info("2b2b2b2b", "1a1a1a1a", "new name", t="2026-04-25T17:40:18.000Z"))
    got = {r[0]: r[4] for r in rows(ls())}
    assert got == {A[:8]: "unnamed prompt", C[:8]: "new name"}
    js = {s["id"]: s for s in as_json(ls("--json"))}
    assert js[C]["name"] == "new name" and js[C]["firstPrompt"] == "named prompt" and js[A]["name"] is None


def test_title_with_tab_newline_and_escapes_is_one_field(isolated):
    make(isolated, A, prompt="tab\there\nnewline \x1b[2Jclear \x9b1m \u202eabc")
    make(isolated, C, extra=info("1a1a1a1a", "0000bbbb", "a\tname\r\nwith\x07bell"))
    out = ls().stdout.decode()
    assert out.count("\n") == 2
    for r in rows(ls()):
        assert len(r) == 5, r
    got = {r[0]: r[4] for r in rows(ls())}
    assert got[A[:8]] == "tab here newline ^[[2Jclear \\x9b1m <U+202E>abc"
    assert got[C[:8]] == "a name^M with^Gbell"
    assert "\x1b" not in out and "\x07" not in out


def grep_rows(*args):
    return rows(ls("--grep", *args))


def grep_ids(*args):
    return sorted(s["id"] for s in as_json(ls("--json", "--grep", *args)))


def test_grep_message_text_tool_inputs_and_results_any_case(isolated):
    make(isolated, A, prompt="Where is the FLOCK call?")
    make(isolated, B, prompt="nothing here", extra=tool_turn("cccc000", "0000bbbb", "grep -rn flock .", "no match"))
    make(isolated, C, prompt="nothing either", extra=tool_turn("dddd000", "0000bbbb", "ls", "src/flock.c"))
    make(tmp_other := isolated / "sub", "0199eeee-0000-7ccc-8ddd-000000000004", prompt="flock elsewhere")
    assert grep_ids("Flock") == sorted([A, B, C])                # this directory only
    got = {s["id"]: s["match"] for s in as_json(ls("--json", "--grep", "Flock"))}
    assert [r[5] for r in grep_rows("Flock")] == [got[i] for i in (C, B, A)]   # the snippet is the last field
    assert got[A] == "Where is the FLOCK call?"
    assert "flock" in got[B] and "command" in got[B]             # in the tool call's input
    assert got[C] == "src/flock.c"
    every = rows(ls("--all", "--grep", "flock"))
    assert len(every) == 4 and all(len(r) == 7 for r in every)
    assert {r[5] for r in every} == {str(isolated), str(tmp_other)}
    js = as_json(ls("--json", "--grep", "FLOCK"))
    assert {s["id"]: s["match"] for s in js}[C] == "src/flock.c"
    assert grep_rows("no such words") == []


def test_grep_ignores_keys_ids_and_thinking(isolated):
    think = orjson.dumps({"type": "message", "id": "7a7a7a7a", "parentId": "0000bbbb",
                          "timestamp": "2026-04-25T17:40:20.000Z",
                          "message": {"role": "assistant", "content": [
                              {"type": "thinking", "thinking": "secretword", "signature": "sigword"},
                              {"type": "text", "text": "plain"}], "provider": "openai", "model": "gpt-4o"}}) + b"\n"
    make(isolated, A, extra=think)
    for word in ("secretword", "sigword", "timestamp", "parentId", "gpt-4o", "0000bbbb", "assistant"):
        assert grep_rows(word) == [], word
    assert len(grep_rows("PLAIN")) == 1


def test_grep_quotes_backslashes_and_control_characters(isolated):
    make(isolated, A, prompt='she said "use C:\\temp\\new" then\ttabbed')
    make(isolated, C, prompt='she said use C: temp new')
    assert grep_ids('"use c:\\temp\\NEW"') == [A]
    assert grep_ids("\\t") == [A]                                 # a backslash and a t, not a tab
    assert grep_ids("then\ttabbed") == [A]                       # a real tab
    assert grep_ids("\\n") == [A]
    assert grep_ids("use c: temp") == [C]
    assert grep_rows('"') and not grep_rows('\\"u')
    snippet = grep_rows("then")[0][5]
    assert "\t" not in snippet and snippet.endswith("then tabbed")


def test_grep_folds_the_case_of_non_ascii_letters(isolated):
    make(isolated, A, prompt="un café crème à Zürich")
    make(isolated, B, prompt="ΣΟΦΊΑ und STRASSE 漢字")
    make(isolated, C, prompt="cafe creme")
    assert grep_ids("CAFÉ") == [A]
    assert grep_ids("CRÈME À zÜRICH") == [A]
    assert grep_ids("σοφία") == [B]
    assert grep_ids("漢字") == [B]
    assert grep_ids("caf") == sorted([A, C])


def test_grep_snippet_is_one_short_line_around_the_match(isolated):
    text = "x" * 300 + " the needle is here\nand\tmore " + "y" * 300
    make(isolated, A, prompt=text)
    (r,) = grep_rows("NEEDLE")
    snippet = r[5]
    assert len(snippet) <= 80 and "needle" in snippet and "\n" not in snippet
    assert snippet.startswith("…") and snippet.endswith("…")


def test_prefixes_are_unique_among_all_sessions_not_just_the_matches(isolated):
    make(isolated, A, prompt="match me", last="2026-04-25T17:40:19.000Z")
    make(isolated, B, prompt="other", last="2026-04-25T17:40:18.000Z")
    (r,) = grep_rows("match")
    assert r[0] == "0199aaaa-bbbb"                       # B shares 0199aaaa-bbb
    p = run(["panto-log", "replay", r[0]])
    assert orjson.loads(p.stdout.splitlines()[0])["id"] == A


def test_grep_needs_text(isolated):
    assert_clean_error(run(["panto-ls", "--grep", ""]), 2, "panto-ls")


@pytest.mark.parametrize("text,shown", [(b"\xff", "'\\xff'"), (b"caf\xe9", "'caf\\xe9'"),
                                        (b"ok \xc3(", "'ok \\xc3('")])
def test_grep_text_that_is_not_utf8_is_a_usage_error(isolated, text, shown):
    """Session text is UTF-8: bytes that are not (a Latin-1 é from the shell)
    could match nothing, so they are refused in one line that shows them."""
    make(isolated, A, prompt="café \xff")
    p = run(["panto-ls", "--grep", text])
    assert_clean_error(p, 2, "panto-ls")
    err = p.stderr.decode()
    assert len(err.splitlines()) == 1 and "not valid UTF-8" in err and shown in err, err
    assert p.stdout == b""


def test_grep_finds_a_text_of_64k_characters(isolated):
    long = "".join(f"Line {i} of the Café log, ÀÉÎ õü;\n" for i in range(2000))[:64_000]
    assert len(long) == 64_000
    make(isolated, A, extra=tool_turn("cccc000", "0000bbbb", "cat log", "before " + long.lower() + " after"))
    make(isolated, B, extra=tool_turn("cccc000", "0000bbbb", "cat log", long[:-1] + "#"))
    p = run(["panto-ls", "--json", "--grep", long], timeout=120)
    assert p.returncode == 0, p.stderr
    assert [s["id"] for s in as_json(p)] == [A]


def _old_window(forms, most):
    """The piece of a needle the search looks for, found the slow way: from
    every start, as far as the spellings allow (what Needle must agree with)."""
    best, best_len = (0, 0), -1
    for i in range(len(forms)):
        n, j = 1, i
        while j < len(forms) and n * len(forms[j]) <= most:
            n *= len(forms[j])
            j += 1
        size = sum(len(f[0]) for f in forms[i:j])
        if size > best_len:
            best, best_len = (i, j), size
    return best


def test_needle_picks_the_same_piece_as_the_search_from_every_start():
    import random

    from pantolib import scan

    rng = random.Random(7)
    alphabet = "aZ 9\"\\\tßéÉσΣǅ漢"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))
        forms = [scan._forms(ch) for ch in text]
        i, j = _old_window(forms, scan.MAX_VARIANTS)
        variants = [b""]
        for f in forms[i:j]:
            variants = [v + x for v in variants for x in f]
        assert scan.Needle(text).literals == variants, text


def test_needle_work_grows_linearly_with_the_text():
    """Counted in lines of Python run (not in seconds: the machine may be busy):
    16 times the text costs about 16 times the work, not 256 times."""
    import sys

    from pantolib import scan

    def work(text):
        count = [0]

        def trace(frame, event, arg):
            if frame.f_code.co_filename == scan.__file__:
                count[0] += 1
                return trace
            return None

        before = sys.gettrace()         # coverage's own tracer, under `make coverage`: put back
        sys.settrace(trace)
        try:
            scan.Needle(text)
        finally:
            sys.settrace(before)
        return count[0]

    for piece in ("a", "aB", "aé"):                   # one spelling each, two, some of each
        small, big = work(piece * 500), work(piece * 8000)
        assert big < 20 * small, (piece, small, big)


def test_sessions_of_hand_written_layouts_are_read_line_by_line(isolated):
    """A line that panto-log append echoed byte for byte from a tool that spaces its JSON."""
    spaced = (b'{"type": "message", "id": "5a5a5a5a", "parentId": "0000bbbb", "timestamp": "2026-04-25T17:40:16.000Z", '
              b'"message": {"role": "assistant", "content": [{"type": "text", "text": "spaced flock"}]}}\n'
              + b'{"type": "sessionInfo", "id": "5b5b5b5b", "parentId": "5a5a5a5a", '
              b'"timestamp": "2026-04-25T17:40:17.000Z", "name": "spaced name"}\n')
    make(isolated, C, turns=1, extra=spaced)
    r = rows(ls())[0]
    assert r[3] == "3 messages" and r[4] == "spaced name"
    assert grep_rows("FLOCK")[0][5] == "spaced flock"


def test_cache_is_private_whatever_the_umask(isolated):
    make(isolated, C)
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "panto")
    p = subprocess.run(["bash", "-c", "umask 000 && panto-ls"], capture_output=True)
    assert p.returncode == 0, p.stderr
    assert os.stat(cache).st_mode & 0o777 == 0o700
    files = sorted(os.listdir(cache))
    assert files == ["ls-args.memo", "ls-cache.json", "ls-report.memo"]
    for name in files:
        assert os.stat(os.path.join(cache, name)).st_mode & 0o777 == 0o600


def test_a_cache_that_makes_no_sense_is_rebuilt(isolated):
    from pantolib import persist

    p = make(isolated, C, turns=2)
    ls()
    path = os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "ls-cache.json")
    good = persist.load(path, "ls-cache.json")
    key, stamp = good[p][0], good[p][1]
    for bad in (b"[]", b"\xff\xfe", b"", [], {p: [1, 2, 3]}, {p: [key, stamp, {"id": 5}]},
                {p: [key, stamp, {"id": C, "cwd": str(isolated), "messages": "4"}]}, {p: [key, stamp, None]},
                {p: [key, {"id": C, "cwd": str(isolated), "messages": 4}]}):
        if isinstance(bad, bytes):
            with open(path, "wb") as f:
                f.write(bad)
        else:
            assert persist.save(path, "ls-cache.json", bad)
        memo = os.path.join(os.path.dirname(path), "ls-report.memo")
        if os.path.exists(memo):
            os.unlink(memo)          # else the remembered listing is shown, and the cache not read
        r = ls()
        assert rows(r)[0][3] == "4 messages", bad
        assert r.stderr == b""


def test_json_on_a_terminal_escapes_what_could_act_on_it(isolated):
    """Titles, prompts and directories come from files: on a terminal --json
    writes controls, C1 and bidi characters as \\u escapes (valid JSON, the
    same values); a pipe gets them as they are."""
    from on_terminal import EVIL, RAW, on_a_terminal

    make(isolated, A, prompt="prompt " + EVIL)
    piped = ls("--json").stdout
    assert "\x9b".encode() in piped and "\u202e".encode() in piped
    shown = on_a_terminal([shutil.which("panto-ls"), "--json"])
    assert not any(c in shown for c in RAW), shown
    got = [orjson.loads(x) for x in shown.replace(b"\r\n", b"\n").splitlines()]
    assert got == as_json(ls("--json")) and got[0]["firstPrompt"].startswith("prompt 8-bit CSI \x9b2J")
    table = on_a_terminal([shutil.which("panto-ls")])
    assert not any(c in table for c in RAW) and b"\\x9b2J" in table and b"<U+202E>" in table


# -- the byte rule of a walked line agrees with the full reading ------------------------------

def test_the_walked_line_rule_agrees_with_the_full_reading():
    import random

    from hostile_lines import SCHEMA, TORN, random_line
    from pantolib import scan, stream

    rng = random.Random(7)
    lines = [random_line(rng) for _ in range(20000)] + [b for b in [*TORN.values(), *SCHEMA.values()] if b]
    decided = 0
    for raw in lines:
        raw = raw.rstrip(b"\n")
        fast = scan.line_role(raw)
        obj = stream.loads(raw)
        if fast is None or scan.kind(obj) is None:   # read carefully, or a line the stream refuses
            continue
        decided += 1
        full = scan.role_of(obj)
        assert (full or "") == fast, raw
    assert decided > 800


def test_an_imported_session_is_titled_with_its_agent_and_a_child_with_an_arrow(isolated):
    make(isolated, A, prompt="fix the refresh bug", source={"agent": "codex", "path": "/r.jsonl", "id": "x"},
         last="2026-04-25T17:40:19.000Z")
    make(isolated, B, prompt="look for callers", source={"agent": "claude-code", "path": "/a.jsonl", "id": "y"},
         parentSession=A, relation="subagent", last="2026-04-25T17:40:18.000Z")
    make(isolated, C, prompt="other way", extra=info("1a1a1a1a", "0000bbbb", "the fork"), parentSession=A,
         relation="fork")
    make(isolated, D := "0199dddd-0000-7ccc-8ddd-000000000004", prompt="mine",
         source={"agent": "pi\x1b[2J", "path": "/p", "id": "z"}, last="2026-04-25T17:40:15.000Z")
    for _ in range(2):                                   # read, then from the cache
        prefixes = {r[0]: r[4] for r in rows(ls())}
        assert {i: prefixes[p] for i, p in ((A, A[:13]), (B, B[:13]), (C, C[:8]), (D, D[:8]))} == {
            A: "[codex] fix the refresh bug", B: "↳ [claude-code] look for callers", C: "↳ the fork",
            D: "[pi^[[2J] mine"}
        js = {s["id"]: s for s in as_json(ls("--json"))}
        assert {i: (s["agent"], s["parentSession"]) for i, s in js.items()} == {
            A: ("codex", None), B: ("claude-code", A), C: ("panto", A), D: ("pi\x1b[2J", None)}
        assert js[A]["firstPrompt"] == "fix the refresh bug" and js[C]["name"] == "the fork"
    assert "[codex] fix the refresh bug" in [r[4] for r in rows(ls("--no-cache"))]


def test_grep_never_matches_image_data(isolated):
    """Image blocks are base64 text that holds, sooner or later, any short word in
    some case: a hit in it only makes its line a candidate, which is parsed and
    checked on the message's text, so no session is listed for its images."""
    import base64

    data = base64.b64encode(b"\x00refresh" * 2000 + bytes(range(256)) * 40).decode()
    words = ["AHJ", "ZWZy", "ZXNo", "AAECAwQFBgc"]
    assert all(w in data for w in words)
    image = orjson.dumps({"type": "message", "id": "1a1a1a1a", "parentId": "0000bbbb",
                          "timestamp": "2026-04-25T17:40:17.000Z", "provider": "openai", "model": "gpt-4o",
                          "message": {"role": "user", "content": [
                              {"type": "text", "text": "what is on this screenshot?"},
                              {"type": "image", "mediaType": "image/png", "data": data}]}}) + b"\n"
    make(isolated, A, extra=image)
    for w in words:
        assert grep_rows(w) == [] and grep_rows(w.lower()) == [], w
    [row] = grep_rows("SCREENSHOT")
    assert row[5] == "what is on this screenshot?"
