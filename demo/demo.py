#!/usr/bin/env python3
"""An offline tour of panto: a scripted provider on 127.0.0.1 and a real session.

Needs no API key and touches nothing of yours: HOME, the XDG folders and
the session directory point into a temporary directory that is removed at
the end (--keep keeps it). Every step runs the real commands and prints
them first, so each one can be copied and tried by hand.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "tests", "sse_server.py")
COLOR = sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def style(text, code):
    return f"\033[{code}m{text}\033[0m" if COLOR else text


def section(n, title, note=""):
    print()
    print(style(f"── {n}. {title} " + "─" * max(0, 60 - len(title)), "1;35"))
    if note:
        print(style(note, "2"))


def sh(command, cwd, env, stdin=None):
    """Show a command line, then run it with bash in the project directory."""
    print(style("$ " + command, "1;32"), flush=True)
    p = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env,
                       input=stdin.encode() if stdin is not None else None)
    if p.returncode != 0:
        print(style(f"(exit status {p.returncode})", "31"))
    return p.returncode


def start_server(tmp, env):
    port_file = os.path.join(tmp, "server.port")
    log = os.path.join(tmp, "requests.jsonl")
    proc = subprocess.Popen([sys.executable, SERVER, "--port-file", port_file, "--auto", "--log", log],
                            env=env, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("demo: the scripted provider did not start")
        time.sleep(0.02)
    with open(port_file) as f:
        return proc, f"http://127.0.0.1:{f.read().strip()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory and say where it is")
    a = ap.parse_args()
    for name in ("panto", "panto-send", "panto-tool", "panto-log", "panto-ls", "panto-cost"):
        if not shutil.which(name):
            raise SystemExit(f"demo: '{name}' is not on PATH (run it with: make demo)")

    tmp = tempfile.mkdtemp(prefix="panto-demo-")
    home, project = os.path.join(tmp, "home"), os.path.join(tmp, "project")
    os.makedirs(home)
    os.makedirs(os.path.join(project, "src"))
    for name, text in (("README.md", "# hello\n"), ("src/main.py", "print('hello')\n"),
                       ("notes.txt", "remember the milk\n")):
        with open(os.path.join(project, name), "w") as f:
            f.write(text)

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "PANTO_", "XDG_"))}
    env.update(HOME=home, XDG_DATA_HOME=os.path.join(home, ".local", "share"),
               XDG_CONFIG_HOME=os.path.join(home, ".config"), XDG_CACHE_HOME=os.path.join(home, ".cache"),
               XDG_STATE_HOME=os.path.join(home, ".local", "state"),
               PANTO_SESSION_DIR=os.path.join(home, "sessions"))
    server, url = start_server(tmp, env)
    env["OPENAI_BASE_URL"] = url + "/v1"
    try:
        print(style("panto, offline: a scripted OpenAI-style provider answers on " + url, "1"))
        print(style(f"(a throw-away HOME in {tmp}; no API key is used)", "2"))

        section(1, "a question, a tool call, the answer",
                "The REPL runs each step as a pipeline: panto-send | panto-tool | panto-send ... | panto-log append.\n"
                "Prompts come from a pipe here; on a terminal you type them after '> ', and --yes is\n"
                "not needed: each bash/write/edit call is shown and waits for y / n / a(lways).")
        sh("printf 'What files are in this directory?\\n' | panto --yes", project, env)

        section(2, "resume the session", "panto --resume prints where you were, then goes on.")
        sh("printf 'Thanks, that is all.\\n' | panto --resume --no-tools", project, env)

        section(3, "the same session, with the plumbing by hand")
        sh("panto-log replay --last | panto-send --live 'And which file is the biggest?' | panto-log append >/dev/null",
           project, env)

        section(4, "list the sessions", "ID-PREFIX, created, last active, messages, first prompt")
        sh("panto-ls", project, env)

        section(5, "what it cost", "With an example price table (list prices: check them before you rely on them).")
        sh('mkdir -p "$XDG_CONFIG_HOME/panto" && panto-cost --example-prices > "$XDG_CONFIG_HOME/panto/models.toml"',
           project, env)
        sh("panto-log replay --last | panto-cost", project, env)

        section(6, "the session file", "One JSON object per line: header, then entries.")
        sh("panto-log replay --last | cut -c1-150", project, env)
    finally:
        server.terminate()
        server.wait()
        print()
        print(style("the scripted provider is stopped.", "2"))
        if a.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(style("next: make test — and for real use: export OPENAI_API_KEY=...; panto", "1"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
