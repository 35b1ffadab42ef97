"""List panto sessions, most recently active first.

Usage:
  panto-ls [--all] [--json]
  panto-ls -h | --help
  panto-ls --version

Prints one tab-separated line per session of this directory:
ID-PREFIX, created, last active, message count, first prompt.

Options:
  --all         Sessions of every directory, not just this one.
  --json        One JSON object per session (full id, path, cwd, times...).
  -h --help     Show this help.
  --version     Show the version.
"""
import os

from pantolib import cli

NAME = "panto-ls"


@cli.command(NAME)
def main(argv=None):
    args = cli.parse(__doc__, argv)
    from pantolib import listing, paths

    lister = listing.Lister(warn=lambda msg: cli.warn(NAME, msg))
    if args["--all"]:
        dirs, cwd = paths.all_dirs(), None
    else:
        dirs, cwd = [paths.session_dir()], os.getcwd()
    found = lister.sessions(dirs, cwd)
    lister.save()
    rows = []  # written at once: stdout may be unbuffered (PYTHONUNBUFFERED)
    if args["--json"]:
        import orjson

        for s in found:
            rows.append(orjson.dumps({
                "id": s["id"], "path": s["path"], "cwd": s["cwd"], "created": s["created"],
                "modified": _iso(s["mtime"]), "messages": s["messages"], "firstPrompt": s["firstPrompt"],
            }) + b"\n")
        cli.stdout().write(b"".join(rows))
        return cli.OK
    prefixes = listing.unique_prefixes(s["id"] for s in found)
    for s in found:
        n = s["messages"]
        row = [prefixes[s["id"]], _local(s["createdEpoch"]), _local(s["mtime"] / 1e9),
               f"{n} message" if n == 1 else f"{n} messages", _one_line(s["firstPrompt"])]
        if args["--all"]:
            row.append(s["cwd"])
        rows.append("\t".join(row) + "\n")
    cli.stdout().write("".join(rows).encode("utf-8", "replace"))
    return cli.OK


def _local(ts):
    import time

    if ts is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _iso(mtime_ns):
    import time

    secs, ms = divmod(mtime_ns // 1_000_000, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"


def _one_line(text, width=80):
    if not text:
        return ""
    flat = " ".join(text[: 2 * width].split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
