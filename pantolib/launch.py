"""How every panto command starts, so that no signal can kill one inside
Python's start-up or cut a stream short.

The installed commands are the bin/ scripts: they ignore SIGINT, SIGTERM
and SIGHUP first, before Python starts, then run bin/panto-launcher, whose
first statements set the three as pantolib/signals.py's table says, before
anything else is imported. The REPL starts its children the same way
through this file (run by its path, with -P: the working directory is never
on sys.path, and the pantolib beside it is the one imported), having
blocked the three itself around the fork (a blocked or ignored signal stays
so across exec):

    python -P .../pantolib/launch.py panto-send ARGS...

Either way the command then runs through its one path: its `main` (the
cli.command wrapper: the error boundary, where the signals it takes are
armed, the final flush), whose exit leave() makes.
"""
import os
import sys

MODULES = {
    "panto": "pantolib.cmd.panto",
    "panto-send": "pantolib.cmd.send",
    "panto-tool": "pantolib.cmd.tool",
    "panto-log": "pantolib.cmd.log",
    "panto-ls": "pantolib.cmd.ls",
    "panto-cost": "pantolib.cmd.cost",
}


def run(name, argv=None):
    """Run command `name` (its signals already set by signals.start) and
    exit with its status."""
    import importlib

    argv = sys.argv[1:] if argv is None else list(argv)
    sys.argv = [name] + argv
    if name != "panto":
        _few_collections()
    OrjsonFinder.install()
    try:
        importlib.import_module(MODULES[name]).main(argv)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            leave(e.code or 0)
        print(e.code, file=sys.stderr)
        leave(1)
    leave(0)


# orjson's versions the stand-ins are for. Of uuid and dataclasses, 3.9.0,
# 3.10.0 and 3.11.8 look up (read in their source) only type(uuid.NAMESPACE_DNS)
# (before 3.11) or uuid.UUID (3.11 on), and dataclasses._FIELD; 3.13.0, what
# the tests run on, is checked by them.
ORJSON_READ = ((3, 9), (3, 14))


class OrjsonFinder:
    """Where orjson's compiled module is imported (first by whichever command
    needs it; a command that does not, does not pay for it): without the
    two modules it imports only to know their types when it serializes.
    uuid and dataclasses, with what they import (inspect, ast, platform...),
    were 11-13 ms of each command's 33 ms start with orjson (medians of 15).
    Stand-ins hold what orjson looks up while its module starts, and are
    taken away after it: a later `import uuid` loads the real module. panto
    serializes neither type (orjson now refuses a UUID, and might miss a
    dataclass's fields). An orjson this code was not read against (or one
    whose version cannot be found beside it) is imported as it is: a
    stand-in lacking what it looks up would crash it; so is one imported
    while another thread runs (it could take a stand-in for the real
    module). On sys.meta_path until its one use."""

    @classmethod
    def install(cls):
        if cls not in sys.meta_path:
            sys.meta_path.insert(0, cls)

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "orjson.orjson":
            return None
        sys.meta_path.remove(cls)
        if not path or "uuid" in sys.modules or "dataclasses" in sys.modules:
            return None
        frames = getattr(sys, "_current_frames", None)     # (CPython's)
        if frames is None or len(frames()) > 1:     # another thread could import a stand-in meanwhile
            return None
        if not ORJSON_READ[0] <= orjson_version(os.path.dirname(path[0])) < ORJSON_READ[1]:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _StandIns(spec.loader)
        return spec


class _StandIns:
    """A loader that runs another with the stand-ins of uuid and dataclasses in place."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self._with(self.loader.create_module, spec)

    def exec_module(self, module):
        return self._with(self.loader.exec_module, module)

    @staticmethod
    def _with(fn, arg):
        uuid, dataclasses = type(sys)("uuid"), type(sys)("dataclasses")
        uuid.UUID = type("UUID", (), {})
        uuid.NAMESPACE_DNS = uuid.UUID()
        dataclasses._FIELD = object()
        sys.modules.update(uuid=uuid, dataclasses=dataclasses)
        try:
            return fn(arg)
        finally:
            del sys.modules["uuid"], sys.modules["dataclasses"]


def orjson_version(folder):
    """(major, minor) of the orjson installed in `folder` (its dist-info); (0, 0)
    unless there is exactly one (a stale one left beside could name another)."""
    try:
        found = [name for name in os.listdir(folder) if name.startswith("orjson-") and name.endswith(".dist-info")]
    except OSError:
        return (0, 0)
    try:
        return tuple(int(x) for x in found[0][7:-10].split(".")[:2]) if len(found) == 1 else (0, 0)
    except ValueError:
        return (0, 0)


def _few_collections():
    """A command that runs once and ends (all but the REPL) builds its data
    and drops it whole at exit: the cyclic collector's passes over it, one
    every 700 new objects, find nothing to free. What start-up made is
    frozen (never scanned again) and a collection waits for 100,000 new
    objects. panto-cost's first report over 10,737 sessions, medians of 5
    side by side: its own user time 0.81 -> 0.58 s (its workers' the same),
    its peak memory the same (93 MB)."""
    import gc

    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def leave(status):
    """End the process with `status`, without the interpreter's teardown: it
    frees every object one by one (a report over 10,000 sessions spent 5 ms
    of its 70 there), and a teardown while panto-send's network thread is in
    an import can crash. What a teardown would do that matters is done here:
    the atexit functions (panto-send's wait for that thread; coverage's data)
    and the flush of stdout and stderr (what cli.run did not flush after an
    error; a flush that fails then has nobody to tell). Nothing panto writes waits for one:
    sessions and caches are written and closed where they are made, and no
    object of panto has a finalizer."""
    import atexit

    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(int(status))


def main():
    from pantolib import signals

    signals.start(sys.argv[1], sys.argv[2:])
    run(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if _root not in sys.path:
        sys.path.insert(0, _root)
    main()
