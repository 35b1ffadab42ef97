"""Permissions (SPEC §6): what runs unasked, through the real `panto-tool
--check`; the rules files; the escalation attempts; and the REPL flow with
"always" in a real terminal."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import assert_clean_error, repl_env
from tool_term import Term as ToolTerm, answered, results, stream_with, tool

ALWAYS = "always"     # asked whatever the rules ("... asked every time")
ASK = "ask"           # no rule matches

DESTRUCTIVE = ("/bin/rm -rf x", "/usr/bin/rmdir d", "/usr/bin/unlink f", "/usr/bin/shred f", "/bin/dd if=a of=b",
               "/usr/bin/truncate -s0 f", "/sbin/mkfs /dev/x", "/sbin/mkfs.ext4 /dev/x", "/bin/chmod 777 f",
               "/bin/chown me f", "/bin/chgrp me f", "/bin/mv a b", "/bin/ln -sf a b", "/bin/kill 1",
               "/usr/bin/pkill x", "/usr/bin/killall x", "/sbin/shutdown now", "/sbin/reboot", "/sbin/halt",
               "/sbin/poweroff", "/usr/bin/crontab -r")
WRAPPERS = ("/bin/sh x.sh", "/bin/bash x.sh", "/bin/zsh x", "/bin/dash x", "/usr/bin/env rm x", "/usr/bin/sudo ls",
            "/usr/bin/doas ls", "/bin/su root", "eval ls", "exec ls", "command ls", "builtin cd", "/usr/bin/xargs rm",
            "/usr/bin/nohup ls", "/usr/bin/nice ls", "/usr/bin/timeout 5 ls", "time ls", "/usr/bin/watch ls",
            "/usr/bin/setsid ls", "/usr/sbin/chroot / ls", ". ./env.sh", "source ./env.sh")
FIND_ACTIONS = ("-delete", "-exec rm {} +", "-execdir rm {} +", "-ok rm {} +", "-okdir rm {} +", "-fprint out",
                "-fprint0 out", "-fprintf out %p", "-fls out")
INLINE = ("python -c 1", "python3 -c 1", "python3.12 -c 1", "/usr/bin/python3 -Bc 1", "pypy3 -c 1",
          "node -e 1", "node -p 1", "node --eval 1", "node --print=1", "nodejs -pe 1", "deno eval 1", "deno --eval 1",
          "deno -p 1", "bun -e 1", "bun -p 1", "bun --print 1",
          "perl -e 1", "perl -E 1", "perl -lne 1", "ruby -e 1", "ruby -E 1", "php -r 1", "lua -e 1")


def _name(command):
    word = command.split()[0]
    return word.split("/")[-1]


CASES = [
    # (rules, command line, expected: "allow RULE", ASK or ALWAYS)
    (["bash:git status"], "git status", "allow bash:git status"),
    (["bash:git status"], "git status -s", "allow bash:git status"),
    (["bash:git status"], "git push", ASK),
    (["bash:git status"], "git statuses", ASK),
    (["bash:git status"], "gitx status", ASK),
    (["bash:git status"], "/usr/bin/git status", ASK),
    (["bash:git status"], "git 'status'", ASK),                   # quotes are part of a word
    (["bash:git status"], 'git "status" -s', ASK),
    (["bash:git status"], "git\tstatus", "allow bash:git status"),   # tabs split words
    (["bash:git status"], "  git \t  status\t-s  ", "allow bash:git status"),
    (["bash:git status"], "FOO=1 git status", ASK),
    (["bash:git  status"], "git status", "allow bash:git status"),   # a rule's spaces are runs too
    (["bash:git", "bash:git status"], "git status -s", "allow bash:git status"),   # the longest is named
    (["bash:git status", "bash:git"], "git status", "allow bash:git status"),
    (["bash:git status", "bash:git"], "git push --force", "allow bash:git"),
    (["bash:npm", "bash:npm run test", "bash:npm run"], "npm run test -- -x", "allow bash:npm run test"),
    (["bash:npm run test"], "npm run", ASK),
    ([], "ls", ASK),
    (["bash:ls"], "ls -la", "allow bash:ls"),
    (["bash:ls"], "", ASK),
    # each separator, also inside quotes
    *[(["bash:git status"], f"git status {s} rm -rf x", ALWAYS) for s in (";", "&", "|", "&&", "||", ">", "<")],
    (["bash:git status"], "git status `rm -rf x`", ALWAYS),
    (["bash:git status"], "git status $(rm -rf x)", ALWAYS),
    (["bash:git status"], "git status\nrm -rf x", ALWAYS),
    (["bash:echo"], "echo 'a;b'", ALWAYS),
    (["bash:echo"], 'echo "a|b"', ALWAYS),
    (["bash:echo"], "echo a\\>b", ALWAYS),
    # always asked, by basename, whatever the rules
    *[([f"bash:{_name(c)}"], c, ALWAYS) for c in DESTRUCTIVE],
    *[([f"bash:{_name(c)}"], c, ALWAYS) for c in WRAPPERS],
    (["bash:rm"], "rm x", ALWAYS),
    (["bash:rm"], "'rm' x", ALWAYS),
    (["bash:rm"], "\\rm x", ALWAYS),
    (["bash:LC_ALL=C"], "LC_ALL=C rm -rf x", ALWAYS),       # an assignment does not hide the command
    (["bash:LC_ALL=C sort"], "LC_ALL=C sort f", "allow bash:LC_ALL=C sort"),
    # find: its actions
    (["bash:find"], "find . -name x", "allow bash:find"),
    *[(["bash:find"], f"find . -name x {a}", ALWAYS) for a in FIND_ACTIONS],
    (["bash:/usr/bin/find"], "/usr/bin/find . -delete", ALWAYS),
    (["bash:find"], "find . '-delete'", ALWAYS),
    (["bash:find"], "find . -del''ete", ALWAYS),
    (["bash:find"], "find . ${X}", ALWAYS),
    (["bash:find"], "find * -name x", ALWAYS),                # a glob could expand to an action
    (["bash:find"], "find . -name '*.py'", "allow bash:find"),
    # sed and perl in place
    (["bash:sed"], "sed -n 1,10p f", "allow bash:sed"),
    (["bash:sed"], "sed -e 's/a/b/g' f", "allow bash:sed"),
    (["bash:sed"], "sed -i 's/a/b/' f", ALWAYS),
    (["bash:sed"], "sed -i.bak 's/a/b/' f", ALWAYS),
    (["bash:sed"], "sed -ni p f", ALWAYS),
    (["bash:sed"], "sed -Ei 's/a/b/' f", ALWAYS),
    (["bash:sed"], "sed --in-place 's/a/b/' f", ALWAYS),
    (["bash:sed"], "sed --in-place=.bak 's/a/b/' f", ALWAYS),
    (["bash:sed"], "sed --in 's/a/b/' f", ALWAYS),
    (["bash:sed"], "sed '1e rm -rf x' f", ALWAYS),           # GNU sed's e runs a command
    (["bash:sed"], "sed 's/a/b/w out' f", ALWAYS),
    (["bash:sed"], "sed -f prog.sed f", ALWAYS),
    (["bash:sed"], "sed --sandbox '1e rm -rf x' f", "allow bash:sed"),   # GNU sed refuses e, w, r then
    (["bash:sed"], "sed -n p *.txt", ALWAYS),                  # a file named -i.txt would be an option
    (["bash:perl x.pl"], "perl x.pl -i", "allow bash:perl x.pl"),
    (["bash:perl x.pl"], "perl -pi -e 's/a/b/' f", ALWAYS),
    (["bash:perl x.pl"], "perl -i.bak x.pl", ALWAYS),
    (["bash:perl x.pl"], "perl --in-place x.pl", ALWAYS),
    # awk whatever its arguments
    *[([f"bash:{a}"], f"{a} '{{print $1}}' f", ALWAYS) for a in ("awk", "gawk", "mawk", "/usr/bin/awk")],
    # interpreters with an inline program; a bare interpreter rule matches nothing
    *[([f"bash:{_name(c)} -m pytest", f"bash:{_name(c)}"], c, ALWAYS) for c in INLINE],
    (["bash:python"], "python -m pytest", ASK),
    (["bash:python3"], "python3 x.py", ASK),
    (["bash:node"], "node build.js", ASK),
    (["bash:python -m pytest"], "python -m pytest -q tests/", "allow bash:python -m pytest"),
    (["bash:python -m pytest"], "python -m pytest -c pytest.ini", "allow bash:python -m pytest"),
    (["bash:python -m pytest"], "python -c 'import pytest' -m pytest", ALWAYS),
    (["bash:python -m pytest"], "python --check-hash-based-pycs always -c 1", ALWAYS),
    (["bash:python -m pytest"], "python -W error -c 1", ALWAYS),
    (["bash:node build.js"], "node build.js --prod", "allow bash:node build.js"),
]


def check(rules, command, env=None):
    argv = [shutil.which("panto-tool"), "--check"]
    for r in rules:
        argv.append(f"--rule={r}")
    return subprocess.run(argv + ["--", command], capture_output=True, env=env, timeout=60)


@pytest.mark.parametrize("rules,command,expected", CASES, ids=[f"{i}-{c[1][:40]}" for i, c in enumerate(CASES)])
def test_check_follows_the_rules(rules, command, expected):
    p = check(rules, command)
    out = p.stdout.decode()
    assert p.stderr == b"", p.stderr
    if expected.startswith("allow "):
        assert (p.returncode, out) == (0, expected + "\n")
        return
    assert p.returncode == 1 and out.startswith("ask: ") and out.endswith("\n") and out.count("\n") == 1, out
    assert ("asked every time" in out) is (expected == ALWAYS), out


def test_the_table_is_big_enough():
    assert len(CASES) >= 80


@pytest.mark.parametrize("command,offer", [
    ("git status -s", "bash:git status"), ("npm run test -- -x", "bash:npm run test"), ("ls -la", "bash:ls"),
    ("python -m pytest -q", "bash:python -m pytest"), ("python3 -m http.server 8000", "bash:python3 -m http.server"),
    ("cargo test --release", "bash:cargo test"), ("make -j4 all", "bash:make"), ("./run.sh fast now later", "bash:./run.sh fast now"),
    ("git log src/x.py", "bash:git log"),
])
def test_what_always_offers(command, offer):
    p = check([], command)
    assert p.returncode == 1 and f"\"always\" would add '{offer}'" in p.stdout.decode(), p.stdout


@pytest.mark.parametrize("command", ["python x.py", "node build.js", "FOO=1 make", "'ls'"])
def test_always_is_not_offered_when_it_would_say_nothing(command):
    p = check([], command)
    assert p.returncode == 1 and "no \"always\"" in p.stdout.decode(), p.stdout


def test_a_bad_rule_on_the_command_line_is_a_usage_error():
    for rule in ("bash:", "bash:a;b", "read", "git status"):
        assert_clean_error(check([rule], "ls"), 2, "panto-tool")


# -- the rules files -------------------------------------------------------------------------

def user_allow(isolated):
    d = isolated.parent / "home" / ".config" / "panto"
    d.mkdir(parents=True, exist_ok=True)
    return d / "allow"


def test_the_users_file_and_panto_allow_file(isolated, tmp_path):
    user_allow(isolated).write_text("# my rules\n\nbash:git status   # safe\nbash:make\n")
    extra = tmp_path / "extra"
    extra.write_text("bash:npm run test\n")
    env = dict(os.environ, PANTO_ALLOW_FILE=str(extra))
    assert check([], "git status -s", env).stdout == b"allow bash:git status\n"
    assert check([], "npm run test", env).stdout == b"allow bash:npm run test\n"
    assert check([], "make all", env).stdout == b"allow bash:make\n"
    p = check(["bash:make all"], "make all x", env)
    assert p.stdout == b"allow bash:make all\n"
    no_files = subprocess.run([shutil.which("panto-tool"), "--check", "--no-rule-files", "git status"],
                              capture_output=True, env=env, timeout=60)
    assert no_files.returncode == 1
    # XDG_CONFIG_HOME unset: ~/.config/panto/allow
    env.pop("XDG_CONFIG_HOME")
    assert check([], "git status", env).returncode == 0


def test_a_bad_line_is_one_warning_naming_the_file_and_line(isolated, tmp_path):
    f = user_allow(isolated)
    f.write_text("bash:ls\nbash git\nbash:a|b\nbash:python\nwrite\n")
    p = check([], "ls -l")
    assert p.returncode == 0 and p.stdout == b"allow bash:ls\n"
    lines = p.stderr.decode().splitlines()
    assert [x.split(": ")[1] for x in lines] == [f"{f}:2", f"{f}:3", f"{f}:4"], lines
    assert all(x.startswith("panto-tool: ") and "ignored" in x for x in lines)


def test_a_missing_rules_file_is_no_rules(isolated, tmp_path):
    env = dict(os.environ, PANTO_ALLOW_FILE=str(tmp_path / "nothing-here"))
    p = check([], "ls", env)
    assert p.returncode == 1 and p.stderr == b""


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom", "directory", "symlink-to-fifo"])
def test_a_rules_file_that_is_not_a_regular_file_is_refused_at_once(isolated, tmp_path, kind):
    path = {"fifo": tmp_path / "fifo", "directory": tmp_path, "symlink-to-fifo": tmp_path / "link"}.get(kind, kind)
    if kind in ("fifo", "symlink-to-fifo"):
        os.mkfifo(tmp_path / "fifo")
    if kind == "symlink-to-fifo":
        os.symlink(tmp_path / "fifo", path)
    env = dict(os.environ, PANTO_ALLOW_FILE=str(path))
    p = check(["bash:ls"], "ls", env)          # would hang on a FIFO, never end on /dev/zero
    assert p.returncode == 0 and p.stdout == b"allow bash:ls\n"
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "is not a regular file" in err and "not read" in err, err
    # panto-tool running calls says it the same way, and the calls are answered
    data = stream_with(("bash", {"command": "echo hi"}))
    proc = tool(data, "--rule", "bash:echo", env=env)
    assert results(proc, data)[0]["content"] == "hi\n"
    assert proc.stderr.decode() == err


def test_nothing_in_the_project_grants_a_permission(isolated):
    for d in (isolated, isolated / ".panto", isolated / ".config" / "panto", isolated / "panto"):
        d.mkdir(parents=True, exist_ok=True)
        (d / "allow").write_text("bash:touch\n")
    (isolated.parent / "allow").write_text("bash:touch\n")
    for xdg in (None, ".", "relative/dir", ""):
        env = dict(os.environ)
        if xdg is None:
            env.pop("XDG_CONFIG_HOME")
        else:
            env["XDG_CONFIG_HOME"] = xdg
        env["HOME"] = str(isolated.parent / "home")
        p = check([], "touch pwned", env)
        assert p.returncode == 1, (xdg, p.stdout)


# -- escalation: an allowed command cannot change what is asked in the same run --------------

PAYLOAD = "bash:touch\nwrite\n"


def test_an_allowed_command_writing_allow_lines_changes_nothing_in_the_run(isolated, tmp_path):
    extra = tmp_path / "extra-rules"
    extra.write_text("bash:cp\n")
    user = user_allow(isolated)
    (isolated / "payload").write_text(PAYLOAD)
    targets = [str(extra), str(user), "allow", ".panto-allow", "AGENTS.md"]
    env = dict(os.environ, PANTO_ALLOW_FILE=str(extra))
    calls = [("bash", {"command": f"cp payload {t}"}) for t in targets]
    # cp cannot append, so the payload replaces the files: the run's rules are those read at its start
    calls += [("bash", {"command": "touch pwned"}), ("write", {"path": "w.txt", "content": "x"}),
              ("bash", {"command": "cp payload again"})]
    data = stream_with(*calls)
    blocks = results(tool(data, env=env), data)
    assert all("isError" not in b for b in blocks[:len(targets)]), blocks   # cp is allowed by the rules file
    assert user.read_text() == PAYLOAD and extra.read_text() == PAYLOAD     # the files were changed...
    assert "no terminal" in blocks[len(targets)]["content"] and not (isolated / "pwned").exists()   # ...in vain
    assert "no terminal" in blocks[len(targets) + 1]["content"] and not (isolated / "w.txt").exists()
    assert "isError" not in blocks[-1] and (isolated / "again").exists()    # bash:cp still holds: read at start


def test_a_command_sees_no_rules_file_and_no_channel(isolated, tmp_path):
    extra = tmp_path / "extra-rules"
    extra.write_text("bash:ls\n")
    import fcntl

    r, w0 = os.pipe()
    w = fcntl.fcntl(w0, fcntl.F_DUPFD, 50)
    os.close(w0)
    data = stream_with(("bash", {"command": "echo [$PANTO_ALLOW_FILE]; ls /proc/self/fd"}))
    env = dict(os.environ, PANTO_ALLOW_FILE=str(extra))
    p = subprocess.run([shutil.which("panto-tool"), "--yes", f"--granted-fd={w}"], input=data, capture_output=True,
                       env=env, timeout=60, pass_fds=(w,))
    os.close(w)
    os.close(r)
    out = results(p, data)[0]["content"].split("\n")
    assert out[0] == "[]"
    assert sorted(x for x in out[1:] if x) == ["0", "1", "2", "3"]     # 3: ls's own directory handle


# -- the REPL ---------------------------------------------------------------------------------

from sse_server import openai_text, openai_tools   # noqa: E402
from repl_term import Term   # noqa: E402


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path, NO_COLOR="1")


def bash(cid, command):
    return openai_tools([(cid, "bash", json.dumps({"command": command}))])


def test_always_in_the_repl_lasts_the_run_and_nothing_else(isolated, srv, env, tmp_path):
    (isolated / ".git").mkdir()
    extra = tmp_path / "extra-rules"
    extra.write_text("bash:cp\n")
    user = user_allow(isolated)
    user.write_text("bash:make test\nbash:python\n")
    (isolated / "payload").write_text(PAYLOAD)
    env = dict(env, PANTO_ALLOW_FILE=str(extra))
    assert "PANTO_ALLOW_FILE" in env
    srv.push(bash("c1", "git status"), bash("c2", "git status -s"),
             bash("c3", f"cp payload {extra}"), bash("c4", f"cp payload {user}"),
             bash("c5", "touch pwned"), bash("c6", "git push"), openai_text("Done."),
             openai_text("Second."), bash("c7", "git status"), openai_text("Third."))
    t = Term([], env)
    t.expect(f"{user}:2: 'bash:python' matches nothing")      # the bad line, said once at start
    t.expect("> ")
    t.line("look around")
    t.expect("[a]lways for 'git status' in this run")
    t.send("A")
    t.expect("allow bash? [y]es [n]o [a]lways for 'touch pwned' in this run")   # git status -s and both cp ran unasked
    t.decline()
    t.expect("allow bash? [y]es [n]o [a]lways for 'git push' in this run")
    t.decline()
    t.expect("Done.")
    t.expect("> ")
    t.line("/allowed")
    listing = t.expect("this run") + "this run"      # the files' rules first, then this run's
    assert re.search(r"bash:git status +this run", listing), listing
    assert re.search(rf"bash:make test +{re.escape(str(user))}:1", listing), listing
    assert re.search(rf"bash:cp +PANTO_ALLOW_FILE {re.escape(str(extra))}:1", listing), listing
    assert "touch" not in listing and "write" not in listing
    t.expect("> ")
    t.turn("/allowed clear", "this run's rules cleared (1)")
    t.line("/allowed")
    listing = t.expect("PANTO_ALLOW_FILE")
    t.expect("> ")
    assert "git status" not in listing and "bash:make test" in listing
    t.turn("again", "Second.")
    t.line("and now")
    t.expect("[a]lways for 'git status' in this run")     # cleared: asked again
    t.decline()
    t.expect("Third.")
    t.expect("> ")
    assert t.quit() == 0
    assert not (isolated / "pwned").exists()
    tools_run = [m for m in srv.requests[-1].body["messages"] if m["role"] == "tool"]
    contents = [m["content"] for m in tools_run]
    assert sum("declined" in c for c in contents) == 3, contents
    assert not [p for p in os.listdir(env["TMPDIR"]) if p.startswith("panto-allow")]


def test_a_cut_write_preview_offers_the_whole_content(isolated, tmp_path):
    content = "".join(f"line {i}\n" for i in range(1, 301)).replace("line 300\n", "rm -rf ~ # PAYLOAD\n")
    content += "x" * 400 + "TAIL-OF-LONG-LINE\n"
    data = stream_with(("write", {"path": "run.sh", "content": content}))
    t = ToolTerm(data, env=dict(os.environ, PAGER="cat"))
    t.expect(b"[v]iew all (291 more lines hidden)")
    assert b"PAYLOAD" not in t.seen
    t.send(b"v")
    t.expect(b"PAYLOAD")
    t.expect(b"TAIL-OF-LONG-LINE")
    t.expect(b"[v]iew all", 2)                       # asked again afterwards
    t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert answered(out, data)[0]["isError"] and not (isolated / "run.sh").exists()


def test_a_cut_edit_diff_and_a_long_line_offer_the_whole_diff(isolated):
    (isolated / "f.py").write_text("".join(f"old {i}\n" for i in range(100)))
    new = "".join(f"new {i}\n" for i in range(99)) + "y" * 500 + " HIDDEN-END\n"
    data = stream_with(("edit", {"path": "f.py", "old_text": (isolated / "f.py").read_text(), "new_text": new}),
                       ("write", {"path": "one.txt", "content": "z" * 400 + " CUT-OFF\n"}),
                       ("write", {"path": "short.txt", "content": "short\n"}))
    env = dict(os.environ)
    env.pop("PAGER", None)
    env["PATH"] = os.path.dirname(shutil.which("panto-tool"))     # no less: printed in full
    t = ToolTerm(data, env=env)
    t.expect(b"[v]iew all (140 more lines of the diff hidden)")
    t.send(b"v")
    t.expect(b"HIDDEN-END")
    t.expect(b"[v]iew all", 2)
    t.decline()
    t.expect(b"[v]iew all (1 long line cut)")
    t.send(b"v")
    t.expect(b"CUT-OFF")
    t.expect(b"[v]iew all (1 long line cut)", 2)      # asked again: a key sent before is flushed
    t.decline()
    t.expect(b"allow write?", 3)
    t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert t.seen.split(b"short.txt")[-1].count(b"[v]iew") == 0      # nothing cut, no view key


def test_the_view_key_in_the_repl_shows_what_the_preview_hides(isolated, srv, env):
    content = "".join(f"echo step {i}\n" for i in range(1, 300)) + "rm -rf ~  # PAYLOAD-AT-300\n"
    srv.push(openai_tools([("w1", "write", json.dumps({"path": "setup.sh", "content": content}))]),
             openai_text("Not written."))
    t = Term([], dict(env, PAGER="cat"))
    t.expect("> ")
    t.line("write the setup script")
    t.expect("[v]iew all (290 more lines hidden)")
    assert "PAYLOAD" not in t.buf.decode("utf-8", "replace")
    t.send("v")
    t.expect("PAYLOAD-AT-300")
    t.expect("[v]iew all (290 more lines hidden)")     # and the question again
    t.decline()
    t.expect("Not written.")
    t.expect("> ")
    assert t.quit() == 0
    assert not (isolated / "setup.sh").exists()
