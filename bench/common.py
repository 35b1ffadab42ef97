"""What the bench scripts share: finding the command under test, an
environment of their own, timing a run, and a command's peak memory."""
import os
import shutil
import subprocess
import sys
import tempfile
import time


def command(name):
    """The path of a console script on PATH, or exit saying how to get it there."""
    path = shutil.which(name)
    if not path:
        sys.exit(f"{name} is not on PATH (run with the venv's bin/ first, e.g. make bench)")
    return path


def isolated_env(home, **extra):
    """The environment for a bench run: no provider keys or panto/XDG settings
    of the user's, a HOME of its own with sessions and cache inside it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PANTO_", "OPENAI_", "ANTHROPIC_", "XDG_"))}
    env.update(HOME=home, PANTO_SESSION_DIR=os.path.join(home, "sessions"),
               XDG_CACHE_HOME=os.path.join(home, ".cache"), XDG_CONFIG_HOME=os.path.join(home, ".config"))
    env.update(extra)
    return env


def timed(argv, env, stdin_path=None, cwd=None, capture=False):
    """Run argv to completion: (seconds, stdout bytes or None). Exit if it fails."""
    with open(stdin_path or os.devnull, "rb") as fin:
        t = time.perf_counter()
        p = subprocess.run(argv, stdin=fin, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=env, cwd=cwd)
        dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {p.stderr.decode(errors='replace').strip()[:500]}")
    return dt, p.stdout


class PeakRss:
    """Wrap argv in GNU time to learn its peak RSS in KB (None without GNU time):
    a child forked from this large Python process would inherit its high-water mark."""

    def __init__(self, argv):
        self.path = None
        self.argv = argv
        if os.access("/usr/bin/time", os.X_OK):
            fd, self.path = tempfile.mkstemp()
            os.close(fd)
            self.argv = ["/usr/bin/time", "-f", "%M", "-o", self.path, *argv]

    def kb(self):
        if self.path is None:
            return None
        try:
            with open(self.path) as f:
                return int(f.read().split()[-1])
        except (OSError, ValueError, IndexError):
            return None
        finally:
            os.unlink(self.path)
            self.path = None


# One floor process: `import orjson`, then a stat of each file named on stdin
# and, unless told to only stat, orjson.loads of its lines (all of them, or
# those holding MARK: found by a search through the whole file, as panto's
# scanner finds its priced lines, not by a Python loop over every line).
_FLOOR = r"""
import os, sys
import orjson
mode = sys.argv[1]
mark = sys.argv[2].encode() if len(sys.argv) > 2 else None
for path in sys.stdin.buffer.read().split(b"\0"):
    os.stat(path)
    if mode == "stat":
        continue
    with open(path, "rb") as f:
        data = f.read()
    if mark is None:
        for line in data.split(b"\n"):
            if line:
                orjson.loads(line)
        continue
    at = data.find(mark)
    while at >= 0:
        s, e = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
        e = len(data) if e < 0 else e
        orjson.loads(data[s:e])
        at = data.find(mark, e)
"""


def floor(files, mark=None, stat_only=False, processes=None):
    """Seconds for the least a Python program must do over `files`: fresh
    processes (`python -c` that imports orjson; one per CPU unless told),
    each given every n-th file, stat it and orjson.loads its lines (those
    holding `mark`, when given; none with stat_only). The floor a target
    is measured against where panto misses it."""
    n = processes or len(os.sched_getaffinity(0))
    args = ["stat"] if stat_only else ["parse", *([mark] if mark else [])]
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _FLOOR, *args], stdin=subprocess.PIPE) for _ in range(n)]
    for k, p in enumerate(procs):
        p.stdin.write(b"\0".join(os.fsencode(f) for f in files[k::n]))
        p.stdin.close()
    if any(p.wait() for p in procs):
        sys.exit("the floor's processes failed")
    return time.perf_counter() - t
