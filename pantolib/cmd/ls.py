"""List panto sessions, most recently active first.

Usage:
  panto-ls [--all] [--json] [--grep=TEXT] [--no-cache]
  panto-ls -h | --help
  panto-ls --version

Prints one tab-separated line per session of this directory: ID-PREFIX,
created, last active, message count, title (its name, else its first
prompt; "[agent] " first for an imported session, "↳ " for a fork or a
sub-agent); with --all the working directory as a sixth field; with --grep
the first matching snippet as the last field.

Options:
  --all         Sessions of every directory, not just this one.
  --json        One JSON object per session (full id, path, cwd, times...).
  --grep=TEXT   Only the sessions whose messages (text, tool calls and
                results, any role) contain TEXT, in any case.
  --no-cache    Read every file; leave the cache as it is.
  -h --help     Show this help.
  --version     Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-ls"


@cli.command(NAME)
def main(argv=None):
    args = cli.parse(__doc__, argv, memo="ls-args.memo")
    from pantolib import listing, paths, scan
    from pantolib.errors import UsageError

    grep = args["--grep"]
    if grep is not None and not grep:
        raise UsageError("--grep needs some text to look for")
    needle = None if grep is None else scan.Needle(grep)    # TEXT that is not UTF-8: a usage error
    if args["--all"]:
        dirs, cwd = paths.all_dirs(), None
    else:
        dirs, cwd = [paths.session_dir()], os.getcwd()
    use = not args["--no-cache"]
    stamp = key = None
    if use:
        from pantolib import persist

        stamp = persist.now()    # before the files are stat'ed: git's racy rule (persist.racy)
    listed = [(d, paths.list_dir(d)) for d in dirs]
    if use:
        key = persist.key(args, os.getcwd(), [(d, persist.idents(files)) for d, files in listed])
        memo = persist.recall(MEMO, key, [st for _, files in listed for _, st in files])
        if memo is not None:
            for note in memo[1]:
                cli.warn(NAME, note)
            _write(memo[0], args["--json"])
            return memo[2]
    said = []

    def warn(message):
        said.append(message)
        cli.warn(NAME, message)

    lister = listing.Lister(stamp, warn=warn, use=use)
    found = lister.sessions(listed, cwd, needle)
    lister.save()
    out = _rows(args, found, grep)
    _write(out, args["--json"])
    if key is not None:
        persist.remember(MEMO, key, stamp, out, said, cli.OK)
    return cli.OK


MEMO = "ls-report.memo"


def _rows(args, found, grep):
    """The listing's bytes."""
    from pantolib import listing, scan

    prefixes = listing.unique_prefixes(s["id"] for s in found)   # unique among all listed
    if grep is not None:
        found = [s for s in found if s["match"] is not None]
    if args["--json"]:
        return _json(found, grep is not None)
    from pantolib.terminal import visible_line

    rows = []  # written at once: stdout may be unbuffered (PYTHONUNBUFFERED)
    cwds = {}  # a directory holds many sessions: shown once each
    for s in found:
        n = s["messages"]
        row = [prefixes[s["id"]], listing.local_time(scan.epoch(s["created"])), listing.local_time(s["active"]),
               f"{n} message" if n == 1 else f"{n} messages", title_field(listing.title(s))]
        if args["--all"]:
            cwd = cwds.get(s["cwd"])
            if cwd is None:
                cwd = cwds[s["cwd"]] = visible_line(s["cwd"])
            row.append(cwd)
        if grep is not None:
            row.append(s["match"])
        rows.append("\t".join(row) + "\n")
    return "".join(rows).encode("utf-8", "replace")


def _write(out, json):
    if json and sys.stdout.isatty():     # a person reads it: nothing in a title may act on the terminal
        from pantolib.terminal import visible_json

        out = visible_json(out)
    cli.stdout().write(out)


def _json(found, grep):
    import orjson

    rows = []
    for s in found:
        obj = {"id": s["id"], "path": s["path"], "cwd": s["cwd"], "created": s["created"],
               "modified": _iso(s["mtime"] / 1e9), "lastActive": s["last"] or _iso(s["mtime"] / 1e9),
               "messages": s["messages"], "firstPrompt": s["firstPrompt"], "name": s["name"],
               "agent": s["agent"], "parentSession": s["parentSession"]}
        if grep:
            obj["match"] = s["match"]
        rows.append(orjson.dumps(obj) + b"\n")
    return b"".join(rows)


def _iso(secs):
    from pantolib.entries import iso_ms

    return iso_ms(int(secs * 1000))


def title_field(text, width=80):
    """A title as one field: control characters shown, tabs and newlines as spaces."""
    from pantolib.terminal import visible_line

    if not text:
        return ""
    flat = text[: 2 * width]
    # Printable text (str.isprintable: no control, format or separator
    # character but the space, so nothing visible_line would change) that
    # has no run of spaces and none at its ends is already one line.
    if not (flat.isprintable() and "  " not in flat and flat[0] != " " and flat[-1] != " "):
        flat = " ".join(visible_line(flat).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
