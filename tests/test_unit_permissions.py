"""pantolib.permissions on its own (SPEC §6 "Permissions", panto-tool(1)):
rule texts, rules files under tmp_path, what the shell would pass, what is
always asked whatever the rules, and what "always" offers."""
import os

import pytest

from pantolib import permissions as p
from pantolib.permissions import Rule, Rules


def rules(*texts):
    return Rules((p.parse(t), "this run") for t in texts)


# -- rules --------------------------------------------------------------------------------

def test_rule_texts_and_how_they_are_shown():
    r = p.parse("  bash:git \t status ")
    assert r == Rule("bash", ["git", "status"]) and r.text == "bash:git status"
    assert r.shown == "git status" and repr(r) == "Rule('bash:git status')"
    assert p.parse("write").shown == "write" and repr(p.parse("edit")) == "Rule('edit')"
    assert r != "bash:git status" and len({r, Rule("bash", ("git", "status"))}) == 1


@pytest.mark.parametrize("text,error", [
    ("read", "'read' is not a rule (bash:WORDS, write or edit)"),
    ("bash:", "'bash:' names no command (bash:WORDS, e.g. bash:git status)"),
    ("bash:git log | head", "'bash:git log | head' holds '|': a rule is the first words of one simple command"),
    ("bash:ls\nrm", "'bash:ls\nrm' holds a newline: a rule is the first words of one simple command"),
])
def test_bad_rule_texts(text, error):
    with pytest.raises(ValueError) as e:
        p.parse(text)
    assert str(e.value) == error


def test_rules_keep_one_of_each_and_can_drop_a_source():
    rs = Rules([(p.parse("bash:git"), "a:1"), (p.parse("bash:git"), "b:1"), (p.parse("write"), "b:2")])
    assert [(r.text, o) for r, o in rs] == [("bash:git", "a:1"), ("write", "b:2")]
    rs.remove_from("b:2")
    assert len(rs) == 1 and rs.tool_rule("write") is None and rs.tool_rule("edit") is None


def test_the_longest_matching_rule_is_named_and_a_bare_interpreter_matches_nothing():
    rs = rules("bash:git", "bash:git status", "bash:python", "bash:npm run test")
    assert rs.bash_rule(["git", "status", "-s"]).text == "bash:git status"
    assert rs.bash_rule(["git", "log"]).text == "bash:git"
    assert rs.bash_rule(["python", "x.py"]) is None
    assert rs.bash_rule(["npm", "run"]) is None


# -- rules files ---------------------------------------------------------------------------

def test_where_the_rules_files_are(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": "relative/dir"}
    assert p.user_file(env) == str(tmp_path / ".config" / "panto" / "allow")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "cfg")
    env["PANTO_ALLOW_FILE"] = "extra.rules"
    assert p.rule_files(env) == [(str(tmp_path / "cfg" / "panto" / "allow"), None),
                                 (os.path.abspath("extra.rules"), "PANTO_ALLOW_FILE")]


def test_a_rules_file_with_comments_blank_and_bad_lines(tmp_path):
    f = tmp_path / "allow"
    f.write_bytes(b"# mine\n\nbash:git status   # a comment\r\nwrite\nbash:ls | wc\nbash:python\n"
                  b"bash:ruby\xff -w\nbash:a#b\n")
    found, problems = p.read_file(str(f))
    assert [(r.text, n) for r, n in found] == [("bash:git status", 3), ("write", 4),
                                               ("bash:ruby\ufffd -w", 7), ("bash:a#b", 8)]
    assert problems == [
        f"{f}:5: 'bash:ls | wc' holds '|': a rule is the first words of one simple command; the line is ignored",
        f"{f}:6: 'bash:python' matches nothing (a rule for an interpreter must name more, "
        f"e.g. 'bash:python -m pytest'); the line is ignored"]


def test_rules_files_that_are_refused(tmp_path):
    assert p.read_file(str(tmp_path / "missing")) == ([], [])
    (tmp_path / "file").write_text("write\n")
    found, problems = p.read_file(str(tmp_path / "file" / "allow"))
    assert found == [] and problems == [
        f"cannot read the rules file '{tmp_path}/file/allow' (Not a directory): its rules do not apply"]
    found, problems = p.read_file(str(tmp_path))
    assert found == [] and problems == [f"the rules file '{tmp_path}' is not a regular file (a directory): "
                                        "it was not read"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    found, problems = p.read_file(str(fifo))
    assert found == [] and problems[0].startswith(f"the rules file '{fifo}' is not a regular file (")
    big = tmp_path / "big"
    big.write_bytes(b"# x\n" * (p.MAX_FILE // 4 + 1))
    assert p.read_file(str(big)) == ([], [f"the rules file '{big}' is larger than 1 MB: its rules do not apply"])


def test_load_reads_the_users_file_then_panto_allow_file(tmp_path):
    (tmp_path / "cfg" / "panto").mkdir(parents=True)
    (tmp_path / "cfg" / "panto" / "allow").write_text("bash:git status\nbash:make\n")
    (tmp_path / "more").write_text("bash:make\nedit\nnonsense\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PANTO_ALLOW_FILE": str(tmp_path / "more")}
    rs, problems = p.load(env)
    user = tmp_path / "cfg" / "panto" / "allow"
    assert [(r.text, o) for r, o in rs] == [("bash:git status", f"{user}:1"), ("bash:make", f"{user}:2"),
                                            ("edit", f"PANTO_ALLOW_FILE {tmp_path}/more:2")]
    assert problems == [f"{tmp_path}/more:3: 'nonsense' is not a rule (bash:WORDS, write or edit); the line is ignored"]


# -- what the shell passes ------------------------------------------------------------------

@pytest.mark.parametrize("word,value", [
    ("plain", "plain"),
    ("'single $x'", "single $x"),
    ('"double"', "double"),
    ('"a\\"b\\\\c\\$d\\q"', 'a"b\\c$d\\q'),
    ("back\\slash", "backslash"),
    ("trailing\\", "trailing"),
    ("'open", None),
    ('"open', None),
    ('"$HOME"', None),
    ("$HOME", None),
    ("$'\\x41'", None),
    ("{a,b}", None),
    ("{}", "{}"),
    ("*.py", None),
    ("-*", None),
    ("x*", "x*"),
    ("'*'", "*"),
    ("'-'*", None),
    ("[ab]c", None),
])
def test_shell_value(word, value):
    assert p.shell_value(word) == value


@pytest.mark.parametrize("line,words", [
    ("a  b\tc", ["a", "b", "c"]),
    ("echo 'two words' \"and  more\" x\\ y", ["echo", "'two words'", '"and  more"', "x\\ y"]),
    ('say "a \\" b"', ["say", '"a \\" b"']),
    ("  ", []),
    ("echo 'open", None),
    ('echo "open', None),
    ('echo "ends\\"', None),
])
def test_shell_words(line, words):
    assert p.shell_words(line) == words


def test_interpreters_are_known_by_their_basename():
    assert p.interpreter("/usr/bin/python3.12")[0] == "python"
    assert p.interpreter("nodejs")[0] == "node" and p.interpreter("luajit")[0] == "lua"
    assert p.interpreter("pythonic") is None and p.interpreter("git") is None


# -- always asked ---------------------------------------------------------------------------

@pytest.mark.parametrize("line,why", [
    ("git status", None),
    ("LC_ALL=C X+=1", None),
    ("LC_ALL=C rm -rf x", "'rm' deletes or changes files or processes"),
    ("/sbin/mkfs.ext4 /dev/sda1", "'mkfs.ext4' deletes or changes files or processes"),
    ("'/bin/rm' x", "'rm' deletes or changes files or processes"),
    ("$EDITOR x", "the command name '$EDITOR' is not plain"),
    ("'r*' x", "the command name ''r*'' is not plain"),
    ("echo 'open", "a quote is not closed"),
    ("env X=1 ls", "'env' runs other commands"),
    (". ./env.sh", "'.' runs other commands"),
    ("gawk '{print}' f", "'gawk' programs can run commands"),
    ("find . -name '*.py'", None),
    ("/usr/bin/find . -delete", "'find -delete' deletes, writes or runs commands"),
    ("find . -fprint out", "'find -fprint' deletes, writes or runs commands"),
    ("find . $X", "'find' with a word the shell expands ('$X')"),
    ("sed -ni p f", "'sed -ni' edits files in place"),
    ("sed --in-pl=.bak s/a/b/ f", "'sed --in-pl=.bak' edits files in place"),
    ("sed --posix -n p f", None),
    ("sed -e s/a/b/ -- -i", None),
    ("sed -f script.sed f", "'sed -f' runs a program from a file (it may run commands or write files)"),
    ("sed --file=script.sed f", "'sed -f' runs a program from a file (it may run commands or write files)"),
    ("sed -e 1d -e s/x/y/g f", None),
    ("sed --expression=p f", None),
    ("sed --expression 'w out' f", "a 'sed' program that may run commands or write files "
                                   "(only p, d, s, y and the like are plain)"),
    ("sed -ee f", "a 'sed' program that may run commands or write files (only p, d, s, y and the like are plain)"),
    ("sed 1e f", "a 'sed' program that may run commands or write files (only p, d, s, y and the like are plain)"),
    ("sed --sandbox 1e f", None),
    ("sed -l 5 p f", None),
    ("sed -l5 p f", None),
    ("sed --line-length 5 p f", None),
    ("sed -n '/start/,/end/p' f", None),
    ("sed 'y/abc/xyz/' f", None),
    ("sed '2,$!d' f", None),
    ("sed $S f", "'sed' with a word the shell expands ('$S')"),
    ("sed -e", None),
    ("perl -pi -e 's/a/b/' f", "'perl -pi' edits files in place"),
    ("perl -Ilib -i f", "'perl -i' edits files in place"),
    ("perl -I lib x.pl -i", None),
    ("perl -ne 'print' f", "'perl -e' runs an inline program"),
    ("perl x.pl -e 1", None),
    ("python3 -c 'print(1)'", "'python3 -c' runs an inline program"),
    ("python -Wignore -c 1", "'python -c' runs an inline program"),     # -W's value is "ignore"
    ("python -Wc x.py", None),                                           # -W's value is "c"
    ("python -W ignore -c 1", "'python -c' runs an inline program"),
    ("python -Ic 1", "'python -c' runs an inline program"),
    ("python -m pytest -c cfg", None),
    ("python x.py -c 1", None),
    ("python --check-hash-based-pycs always -c 1", "'python -c' runs an inline program"),
    ("python -- -c", None),
    ("python $F", "'python' with a word the shell expands ('$F')"),
    ("node --eval=1", "'node --eval' runs an inline program"),
    ("node build.js -e 1", "'node -e' runs an inline program"),
    ("node --inspect build.js", None),
    ("deno eval 'console.log(1)'", "'deno eval' runs an inline program"),
    ("deno $X", "'deno $X' runs an inline program"),
    ("deno run x.ts", None),
    ("ruby -e 1", "'ruby -e' runs an inline program"),
    ("php -r 'echo 1;'", "'php -r' runs an inline program"),
    ("php -c php.ini x.php", None),
    ("lua -l mod x.lua", None),
    ("Rscript -e 1", "'Rscript -e' runs an inline program"),
    ("elixir --eval 1", "'elixir --eval' runs an inline program"),
])
def test_always_asked(line, why):
    assert p.always_asked(line) == why


# -- the verdict on a command line ------------------------------------------------------------

def test_check_allows_a_simple_command_a_rule_begins():
    v = p.check("git status -s", rules("bash:git status"))
    assert v.allowed and v.rule.text == "bash:git status" and v.offer.text == "bash:git status"
    assert "Verdict(rule=Rule('bash:git status')" in repr(v)


@pytest.mark.parametrize("line,why,offer", [
    ("git status; rm x", "not one simple command (';' in it): asked every time", None),
    ("echo 'a|b'", "not one simple command ('|' in it): asked every time", None),
    ("ls\nrm x", "not one simple command (a newline in it): asked every time", None),
    (" \t ", "an empty command line", None),
    ("rm -rf build", "'rm' deletes or changes files or processes: asked every time", None),
    ("git log -3", "no rule matches (\"always\" would add 'bash:git log')", "bash:git log"),
    ("python -m pytest -q", "no rule matches (\"always\" would add 'bash:python -m pytest')",
     "bash:python -m pytest"),
    ("python x.py", "no rule matches (no \"always\": a rule for 'python' must name more than the interpreter)",
     None),
    ("./-x y", "no rule matches (\"always\" would add 'bash:./-x y')", "bash:./-x y"),
    ("-x y", "no rule matches (no \"always\": '-x' is not a plain command name)", None),
    ("'git' status", "no rule matches (no \"always\": ''git'' is not a plain command name)", None),
])
def test_check_asks(line, why, offer):
    v = p.check(line, rules("bash:git status"))
    assert not v.allowed and v.why == why
    assert (v.offer.text if v.offer else None) == offer


@pytest.mark.parametrize("line,offer", [
    ("git status -s", "bash:git status"),
    ("npm run test -- -x", "bash:npm run test"),
    ("ls -la", "bash:ls"),
    ("make a b c d", "bash:make a b"),
    ("python -m pytest -q", "bash:python -m pytest"),
    ("python -m", None),
    ("python3 -m http.server 8000", "bash:python3 -m http.server"),
    ("cargo 'build'", "bash:cargo"),
    ("rm x", None),
    ("ls > out", None),
    ("", None),
])
def test_what_always_offers(line, offer):
    got = p.offered(line)
    assert (got.text if got else None) == offer


def test_the_note_of_a_call_always_cannot_offer():
    v = p.check("python x.py", Rules())
    assert v.note == "no \"always\": a rule for 'python' must name more than the interpreter"
    v = p.check("rm x", Rules())
    assert v.note == v.why


# -- protected paths ---------------------------------------------------------------------------

def test_protected_paths(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PANTO_ALLOW_FILE": str(tmp_path / "rules")}
    (tmp_path / "link").symlink_to(tmp_path / "rules")
    assert p.protected(str(tmp_path / "rules"), env) == "a rules file: asked every time"
    assert p.protected(str(tmp_path / "link"), env) == "a rules file: asked every time"
    assert p.protected(str(tmp_path / "cfg" / "panto" / "allow"), env) == "a rules file: asked every time"
    git = "inside .git, whose config and hooks run commands: asked every time"
    assert p.protected(str(tmp_path / "repo" / ".git" / "config"), env) == git
    (tmp_path / "hooks").mkdir()
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".git").symlink_to(tmp_path / "hooks")
    assert p.protected(str(tmp_path / "repo" / ".git" / "pre-commit"), env) == git
    assert p.protected(str(tmp_path / "repo" / "src.py"), env) is None
    assert p.protected(str(tmp_path / "repo" / ".github" / "ci.yml"), env) is None


def test_an_abbreviated_expression_option_is_a_sed_program(tmp_path):
    line = "sed --e='w written' p"         # GNU sed 4.9 writes the file `written`
    assert p.always_asked(line) == ("a 'sed' program that may run commands or write files "
                                    "(only p, d, s, y and the like are plain)")
    assert not p.check(line, rules("bash:sed")).allowed


@pytest.mark.parametrize("wrapper", ["coproc", "taskset 1", "chrt -f 1", "prlimit --nofile=9", "numactl -C 0",
                                     "sg wheel", "ssh host"])
def test_commands_that_run_another_command_are_never_allowed_always(wrapper):
    name = wrapper.split()[0]
    assert p.always_asked(f"{wrapper} rm -rf x") == f"'{name}' runs other commands"
    assert p.offered(f"{wrapper} rm -rf x") is None
