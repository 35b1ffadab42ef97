"""List panto sessions, most recently active first.

Usage:
  panto-ls [--all] [--json] [--grep=TEXT]
  panto-ls -h | --help
  panto-ls --version

Prints one tab-separated line per session of this directory: ID-PREFIX,
created, last active, message count, title (its name, else its first
prompt); with --all the working directory as a sixth field; with --grep the
first matching snippet as the last field.

Options:
  --all         Sessions of every directory, not just this one.
  --json        One JSON object per session (full id, path, cwd, times...).
  --grep=TEXT   Only the sessions whose messages (text, tool calls and
                results, any role) contain TEXT, in any case.
  -h --help     Show this help.
  --version     Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-ls"


@cli.command(NAME)
def main(argv=None):
    args = cli.parse(__doc__, argv)
    from pantolib import listing, paths, scan
    from pantolib.errors import UsageError

    grep = args["--grep"]
    if grep is not None and not grep:
        raise UsageError("--grep needs some text to look for")
    lister = listing.Lister(warn=lambda msg: cli.warn(NAME, msg))
    if args["--all"]:
        dirs, cwd = paths.all_dirs(), None
    else:
        dirs, cwd = [paths.session_dir()], os.getcwd()
    found = lister.sessions(dirs, cwd, None if grep is None else scan.Needle(grep))
    lister.save()
    prefixes = listing.unique_prefixes(s["id"] for s in found)   # unique among all listed
    if grep is not None:
        found = [s for s in found if s["match"] is not None]
    if args["--json"]:
        _json(found, grep is not None)
        return cli.OK
    from pantolib.terminal import visible_line

    rows = []  # written at once: stdout may be unbuffered (PYTHONUNBUFFERED)
    for s in found:
        n = s["messages"]
        row = [prefixes[s["id"]], listing.local_time(scan.epoch(s["created"])), listing.local_time(s["active"]),
               f"{n} message" if n == 1 else f"{n} messages", one_line(listing.title(s))]
        if args["--all"]:
            row.append(visible_line(s["cwd"]))
        if grep is not None:
            row.append(s["match"])
        rows.append("\t".join(row) + "\n")
    cli.stdout().write("".join(rows).encode("utf-8", "replace"))
    return cli.OK


def _json(found, grep):
    import orjson

    rows = []
    for s in found:
        obj = {"id": s["id"], "path": s["path"], "cwd": s["cwd"], "created": s["created"],
               "modified": _iso(s["mtime"] / 1e9), "lastActive": s["last"] or _iso(s["mtime"] / 1e9),
               "messages": s["messages"], "firstPrompt": s["firstPrompt"], "name": s["name"]}
        if grep:
            obj["match"] = s["match"]
        rows.append(orjson.dumps(obj) + b"\n")
    data = b"".join(rows)
    if sys.stdout.isatty():           # a person reads it: nothing in a title may act on the terminal
        from pantolib.terminal import visible_json

        data = visible_json(data)
    cli.stdout().write(data)


def _iso(secs):
    import time

    ms = int(secs * 1000)
    s, ms = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{ms:03d}Z"


def one_line(text, width=80):
    """A title as one field: control characters shown, tabs and newlines as spaces."""
    from pantolib.terminal import visible_line

    if not text:
        return ""
    flat = " ".join(visible_line(text[: 2 * width]).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
