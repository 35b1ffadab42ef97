"""Keep sessions on disk: append a stream durably, replay, branch, read or name a session.

Usage:
  panto-log append [FILE]
  panto-log replay [--no-repair | --skip-bad] [--at=ID] [--context] [SESSION | --last]
  panto-log tree [--json] [SESSION | --last | -]
  panto-log show [--at=ID | --all] [SESSION | --last | -]
  panto-log name TITLE [SESSION | --last]
  panto-log import [--from=AGENT] [--session=ID] [-v] FILE
  panto-log import --all [--from=AGENT]... [--dry-run] [-v]
  panto-log -h | --help
  panto-log --version

Commands:
  append        Persist every entry of the stream on stdin that the session
                file does not have yet, echoing each line once it is durable.
                Without FILE the header decides the file (see panto-session(5)).
  replay        Recover a session file (cut a torn tail) and print its lines.
                SESSION is a path, a session id or a unique id prefix; without
                one, or with --last, the most recently active session here.
                A bad line with valid lines after it is reported, not cut.
                With --at, only the header and the entries on the path from
                the root to entry ID: what is appended next branches there.
                With --context, only what the next request needs (see
                panto-session(5)): a stream marked as not the whole session.
  tree          One line per entry, as a tree: id (* on the active path),
                role indented by fork depth, time, first line of text.
  show          The active path (or --at ID's path, or --all entries) as
                Markdown for people; `-` reads a stream on stdin.
  name          Name the session: append a sessionInfo entry with TITLE.
  import        Print the panto stream of another agent's session FILE
                (claude-code, codex, pi, opencode); with --all, bring every
                session of every agent found into panto's sessions, read on
                from where the last import stopped (see panto-log(1)).

Options:
  --no-repair   Read without cutting a torn tail; say on stderr what would go.
  --skip-bad    Print the session without its bad lines (each named on
                stderr) and without a torn tail; the file is not changed.
  --at=ID       An entry id, or a unique prefix of one.
  --context     Print the header, marked partial, the system entries and the
                path from the last compaction's first kept entry on, read by
                offset (the index cache) instead of the whole file.
  --json        One JSON object per entry instead of tab-separated lines.
  --all         Every entry in file order, not just the active path.
  --last        The session of this directory with the most recent activity.
  --from=AGENT  The agent: claude-code, codex, pi or opencode (import FILE:
                detected from the content; --all: every agent, or those named).
  --session=ID  The session in FILE when FILE holds several (opencode's database).
  --dry-run     Read and count, write nothing.
  -v            Name every malformed line skipped.
  -h --help     Show this help.
  --version     Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-log"


def _args_memo(argv):
    """The memo of the parse (cli.parse) of `import`, whose run over sources
    that did not change is otherwise mostly the parse. The other subcommands
    keep no memo: replay and append write nothing but the session and its
    index."""
    return "log-import-args.memo" if argv and argv[0] == "import" else None


# What docopt gives for the usage above when nothing is given: the start of _plain's answers
_NOTHING = {"append": False, "FILE": None, "replay": False, "--no-repair": False, "--skip-bad": False, "--at": None,
            "--context": False, "SESSION": None, "--last": False, "tree": False, "--json": False, "-": False,
            "show": False, "--all": False, "name": False, "TITLE": None, "import": False, "--session": None,
            "-v": False, "--dry-run": False, "--help": False, "--version": False}
# The two commands of every turn of a pipeline, as they are written: their argument, and the flags taken as written
_PLAIN = {"append": ("FILE", ()), "replay": ("SESSION", ("--context", "--last"))}


def _plain(argv):
    """docopt's parse of `append [FILE]` and `replay [--context] [SESSION |
    --last]` (each flag spelt whole, no `--`), without importing docopt:
    3 ms of the 30 that each of them took to start (29.6 -> 26.5 ms,
    bench_startup), twice a turn. Any other arguments: None (docopt parses
    them; tests/test_unit_log_args.py holds the two to the same answers)."""
    if not argv or argv[0] not in _PLAIN:
        return None
    slot, flags = _PLAIN[argv[0]]
    args = dict(_NOTHING, **{argv[0]: True, "--from": []})
    for a in argv[1:]:
        if a in flags and not args[a]:
            args[a] = True
        elif a[:1] != "-" and args[slot] is None:
            args[slot] = a
        else:
            return None
    return None if args["--last"] and args["SESSION"] is not None else args


@cli.command(NAME)
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = _plain(argv) or cli.parse(__doc__, argv, memo=_args_memo(argv))
    if args["append"]:
        return append(args["FILE"])
    if args["tree"]:
        return tree(args["SESSION"], args["--json"])
    if args["show"]:
        return show(args["SESSION"], args["--at"], args["--all"])
    if args["name"]:
        return name(args["TITLE"], args["SESSION"])
    if args["import"]:
        return import_(args)
    if args["--context"]:
        return replay_context(args["SESSION"], args["--no-repair"], args["--at"], args["--skip-bad"])
    return replay(args["SESSION"], args["--no-repair"], args["--at"], args["--skip-bad"])


def append(path):
    import signal

    # Ctrl-C, SIGTERM and SIGHUP reach every process of the pipeline; the
    # lines already received must still be written, so append ignores them
    # (pantolib/signals.py, from the launcher's first statements) and ends at
    # EOF only. A file size limit must fail the write (EFBIG), not kill it.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    from pantolib import prefix, session, stream

    out = cli.stdout()
    downstream = [True, None]     # still echoing; the error that stopped it

    def echo(data):
        if data and downstream[0]:
            try:
                out.write(data)
                out.flush()
            except OSError as e:
                # Nobody reads any more (or stdout cannot take more): keep
                # persisting, stop echoing.
                downstream[0] = False
                if not isinstance(e, BrokenPipeError):
                    downstream[1] = e
                cli.silence_stdout()

    # Lines that arrive together are written under one lock and one check of
    # the path; each is echoed only once it is durable, and the next ones are
    # read and parsed meanwhile (read_ahead). When anything fails,
    # nothing that waits for the file's creation is echoed: it is on no disk.
    writer = session.Writer(path, warn=lambda message: cli.warn(NAME, message))
    try:
        # the part the file has already (replay F | ... | append F) is compared, not parsed
        rest, lineno, started = prefix.append_known(writer, cli.stdin(), echo)
        for batch in stream.read_ahead(stream.read_batches(cli.stdin(), first=rest, lineno=lineno,
                                                           started=started)):
            writer.feed_batch(batch, echo)
        echo(writer.finish())
    finally:
        writer.close()
    if downstream[1] is not None:
        where = f" (every line is saved in {writer.path})" if writer.path else ""
        cli.warn(NAME, f"stdout: {downstream[1].strerror or downstream[1]}: the stream was not "
                       f"passed on whole{where}")
        return cli.FAIL
    return cli.OK


def replay(arg, no_repair, at=None, skip_bad=False):
    from pantolib import session

    kept = []       # --last: the line that decided which session is the last, parsed once
    path = _session_path(arg, kept)
    session.check_path(path)
    if skip_bad:
        r = session.scan(path, skip_bad=True, ids=False)
        for lineno, _, _, why in r.bad:
            cli.warn(NAME, f"{path}:{lineno}: {why}; left out")
        if r.end < r.size:
            cli.warn(NAME, f"{path}:{r.cut_line}: a torn tail ({r.size - r.end} bytes); left out")
        start = 0
        for _, s, e, _ in r.bad:
            _copy(path, s, start)
            start = e
        _copy(path, r.end, start)
        return cli.OK
    # Where the valid lines end (opened read-only, without a lock, as a
    # plain read): read on from what the index cache covers (bytes it
    # covers were read and found valid: copied, not parsed again), else from
    # the top; the lines read are not kept (constant memory), nor is the
    # cache written for them (a replay's first read costs what it did). A
    # cache that covers the whole file but had to be checked by content
    # (the last append wrote it within a timestamp tick of the file's last
    # change) is saved again (r.fresh), stamped now, before the copy: the
    # commands that read it next (the append at the end of this pipeline)
    # believe it on the file's identity instead of reading the whole file.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        r = session.read_indexed(path, fd, fix=False, ids=False, known=kept[0] if kept else None)
        if r.fresh:
            from pantolib import index

            index.save(path, fd, r)
    finally:
        os.close(fd)
    if r.end < r.size:
        what = f"{r.size - r.end} bytes from line {r.cut_line}"
        if no_repair:
            cli.warn(NAME, f"{path}:{r.cut_line}: torn tail; a repair would cut {what}")
        else:
            r = session.recover_file(path)
            if r.cut:
                cli.warn(NAME, f"{path}:{r.cut_line}: cut a torn tail ({r.cut} bytes)")
    if at is not None:
        return replay_at(path, r.end, at)
    _copy(path, r.end)
    return cli.OK


def replay_context(arg, no_repair, at, skip_bad):
    """replay --context: the header marked partial (stream.partial_header,
    naming the ids left out), then the entries of the path to the leaf (or
    to `at`) that the next request needs (index.context), in path order,
    byte for byte. Read by offset: the file's tree comes from the index
    cache, read on from where it stopped (a torn tail is cut, as replay does).
    When nothing is left out, the output is the plain replay."""
    from pantolib import conversation, index, session, stream
    from pantolib.errors import UsageError

    if skip_bad:
        raise UsageError("--context reads a session by its index: it cannot skip bad lines "
                         "(repair the file with --skip-bad first)")
    path = _session_path(arg)
    session.check_path(path)
    fd = os.open(path, (os.O_RDONLY if no_repair else os.O_RDWR) | os.O_CLOEXEC)
    try:
        r = session.read_locked(path, fd, fix=not no_repair)
        if r.cut:
            cli.warn(NAME, f"{path}:{r.cut_line}: cut a torn tail ({r.cut} bytes)")
        elif no_repair and r.cut_line is not None:
            cli.warn(NAME, f"{path}:{r.cut_line}: torn tail; a repair would cut it")
        target = r.leaf if at is None else conversation.find_entry(r.ids, at, f"'{path}'")
        on_path, keep = index.context(r.ids, target) if target is not None else ([], [])
        whole = at is None and len(keep) == len(r.ids)     # sent as the file's bytes: no offset used
        if r.sum is not None and not whole and not all(index.line_of(fd, r.ids[i], i, r.end) for i in keep):
            r = session.read_locked(path, fd, fix=not no_repair, cached=False)   # its index cache lied: reread
            target = r.leaf if at is None else conversation.find_entry(r.ids, at, f"'{path}'")
            on_path, keep = index.context(r.ids, target) if target is not None else ([], [])
        if r.fresh:
            index.save(path, fd, r)
        nodes = r.ids
        if at is None and len(keep) == len(nodes):      # the whole session
            _copy(path, r.end)
            return cli.OK
        kept = set(keep)
        head = stream.partial_header(r.header, [i for i in nodes if i not in kept]) \
            if len(keep) < len(nodes) else r.header_raw
        out = cli.stdout()
        out.write(head)
        out.flush()
        for start, end in index.ranges(nodes, keep):
            _send(fd, start, end)
    finally:
        os.close(fd)
    return cli.OK


def _session_path(arg, kept=None):
    """SESSION or --last (None) -> the path of a session file (SPEC §4.2);
    `kept`: paths.last_session's."""
    from pantolib import paths
    from pantolib.errors import PantoError

    if arg is None:
        path = paths.last_session(kept=kept)
        if path is None:
            raise PantoError(f"no sessions in {paths.session_dir()} (start one with panto-send)")
        return path
    return paths.resolve(arg)


def _copy(path, length, offset=0):
    """Write bytes offset..length of the file to stdout."""
    with open(path, "rb") as f:
        _send(f.fileno(), offset, length)


def _send(fd, offset, end):
    """Write bytes offset..end of the open file fd to stdout."""
    from pantolib import files

    out = cli.stdout()
    out.flush()
    files.send(fd, offset, end, sys.stdout.fileno(), out)


# -- branches: replay --at, tree, show, name ------------------------------------


def _bounded(f, length):
    """The lines of a file within its first `length` bytes (the valid part)."""
    n = 0
    for raw in f:
        if n >= length:
            return
        if n + len(raw) > length:
            raw = raw[:length - n]
        n += len(raw)
        yield raw


class _Source:
    """The Lines of a session file's first `end` bytes, or of a stream kept
    in memory, readable twice (a file is read again)."""

    def __init__(self, name, end=None, kept=None):
        self.name, self.end, self.kept = name, end, kept

    @classmethod
    def of(cls, arg):
        """SESSION, --last (None) or `-` (stdin), read-only: a torn tail is left out."""
        from pantolib import session, stream

        if arg == "-":
            return cls("<stdin>", kept=list(stream.read(cli.stdin())))
        path = _session_path(arg)
        session.check_path(path)
        r = session.scan(path)
        if r.end < r.size:
            cli.warn(NAME, f"{path}:{r.cut_line}: a torn tail is left out (panto-log replay repairs it)")
        return cls(path, r.end)

    def lines(self):
        from pantolib import stream

        if self.kept is not None:
            yield from self.kept
            return
        with open(self.name, "rb") as f:
            yield from stream.read(_bounded(f, self.end), self.name)


def replay_at(path, length, at):
    """Print the header and the entries on the path from the root to entry `at`."""
    from pantolib import conversation, stream

    src = _Source(path, length)
    _, parent_of, _ = conversation.parents(src.lines())
    target = conversation.find_entry(parent_of, at, f"'{path}'")
    keep = set(conversation.chain(parent_of, target))
    out = cli.stdout()
    for line in src.lines():
        if line.kind == stream.HEADER or line.obj.get("id") in keep:
            out.write(line.raw)
    return cli.OK


def _first_line(obj):
    """A one-line summary of an entry's text, for tree."""
    from pantolib import entries

    for block, text in entries.texts_of(obj):
        if block is not None and block["type"] == "toolUse":
            text = f"[{block['name']}] {text}"
        elif block is not None and block["type"] == "toolResult":
            text = "[result] " + text
        for line in text.split("\n"):
            if line.strip():
                return line.strip()
    if obj.get("type") == "message":     # a message of images alone: the first of them
        for block in obj["message"]["content"]:
            if type(block) is dict and block.get("type") == "image":
                return entries.image_text(block)
    return ""


# Past this many levels of forks, the indentation stops growing and the depth
# is written as a number: an output line stays short however deep the fork
# (a staircase of two spaces per level made output grow with the square of
# the depth).
TREE_INDENT = 10


def tree(arg, as_json):
    """One line per entry in tree order: depth counts forks, not ancestors.

    Streams: a first pass keeps only each entry's parent and where its line
    is; a second prints each entry's line, read again, in tree order (a
    stream on stdin is kept in an unnamed temporary file for that), so memory
    is the tree itself, whatever the text."""
    from pantolib import conversation, stream

    if arg == "-":
        name, spool = "<stdin>", _spool()
        raws = _spooled(cli.stdin(), spool)
    else:
        from pantolib import session

        name = _session_path(arg)
        session.check_path(name)
        r = session.scan(name, ids=False)
        if r.end < r.size:
            cli.warn(NAME, f"{name}:{r.cut_line}: a torn tail is left out (panto-log replay repairs it)")
        spool = open(name, "rb")
        raws = _bounded_at(spool, r.end)
    with spool:
        found = ((line.obj["id"], line.obj.get("parentId"), raws.offset)
                 for line in stream.read(raws, name) if line.kind == stream.ENTRY)
        out = cli.stdout()
        row = _tree_json() if as_json else _tree_row

        def rows():
            for eid, where, depth, active in conversation.tree(found):
                spool.seek(where)
                yield row(stream.loads(spool.readline()), eid, depth, active)

        stream.write_joined(out, rows())
    return cli.OK


def _spool():
    """An unnamed file (mode 0600) in panto's cache directory (0700), for
    session text read from stdin; in memory when there is no such place."""
    import io
    import tempfile

    from pantolib import files, paths

    try:
        d = paths.cache_dir()
        files.make_dirs(d)
        return tempfile.TemporaryFile(dir=d)
    except OSError:
        return io.BytesIO()


class _Lines:
    """The raw lines of a binary file, with the offset of the latest one."""

    def __init__(self, lines):
        self.lines, self.offset = lines, 0

    def __iter__(self):
        return self

    def __next__(self):
        self.offset, raw = next(self.lines)
        return raw


def _bounded_at(f, length):
    def lines():
        n = 0
        for raw in _bounded(f, length):
            yield n, raw
            n += len(raw)
    return _Lines(lines())


def _spooled(src, spool):
    """The lines of src, each kept in spool as it passes (with a line feed)."""
    def lines():
        for raw in src:
            at = spool.tell()
            spool.write(raw if raw[-1:] == b"\n" else raw + b"\n")
            yield at, raw
        spool.flush()
    return _Lines(lines())


def _tree_fields(obj):
    role = obj["message"]["role"] if obj.get("type") == "message" else None
    return obj.get("parentId"), obj.get("type"), role, obj["timestamp"], _first_line(obj)


def _tree_row(obj, eid, depth, active):
    from pantolib import listing, scan, terminal

    _, etype, role, ts, text = _tree_fields(obj)
    indent = "  " * depth if depth <= TREE_INDENT else "  " * TREE_INDENT + f"[{depth}] "
    cells = [terminal.visible_line(eid) + ("*" if active else ""),
             indent + terminal.visible_line(role or etype or "?"),
             listing.local_time(scan.epoch(ts)), terminal.visible_line(text[:100])]
    return ("\t".join(cells) + "\n").encode("utf-8", "replace")


def _tree_json():
    """--json rows; on a terminal with every character that could act on it
    written as a \\u escape (still valid JSON, meaning the same)."""
    import orjson

    from pantolib import terminal

    tty = sys.stdout.isatty()      # a person reads it

    def row(obj, eid, depth, active):
        parent, etype, role, ts, text = _tree_fields(obj)
        data = orjson.dumps({"id": eid, "parentId": parent, "depth": depth, "type": etype, "role": role,
                             "timestamp": ts, "text": text, "active": active}) + b"\n"
        return terminal.visible_json(data) if tty else data
    return row


def show(arg, at, every):
    """The active path (or --at's, or every entry) as Markdown."""
    import sys

    from pantolib import conversation, stream, terminal, transcript

    src = _Source.of(arg)
    keep = None
    if not every:
        _, parent_of, leaf = conversation.parents(src.lines())
        target = leaf if at is None else conversation.find_entry(parent_of, at, f"'{src.name}'")
        keep = set(conversation.chain(parent_of, target)) if target else set()
    tty = sys.stdout.isatty()     # a person reads it: no escape sequence may act
    out = cli.stdout()

    def write(text):
        out.write((terminal.visible(text) if tty else text).encode("utf-8", "replace"))

    for line in src.lines():
        if line.kind == stream.HEADER:
            write(transcript.header(line.obj))
        elif line.kind == stream.ENTRY and (keep is None or line.obj["id"] in keep):
            write(transcript.entry(line.obj))
        elif line.kind == stream.BARE and at is None:   # to be appended after the leaf
            write(transcript.entry(line.obj))
    return cli.OK


def import_(args):
    from pantolib import importing

    def warn(message):
        cli.warn(NAME, message)

    if args["--all"]:
        if args["--session"]:
            from pantolib.errors import UsageError

            raise UsageError("--session names a session in FILE; --all imports every session")
        names = args["--from"] if isinstance(args["--from"], list) else [args["--from"]] if args["--from"] else []
        summary = _import_all(names, args["--dry-run"], args["-v"])
        warn(summary.line(args["--dry-run"]))
        return cli.FAIL if summary.failed else cli.OK
    agent = args["--from"]
    agent = agent[0] if isinstance(agent, list) and agent else agent or None
    importing.one(args["FILE"], agent, args["--session"], cli.stdout(),
                  warn, args["-v"])
    return cli.OK


def _import_all(names, dry_run, verbose):
    """importing.everything, with how far it is on stderr when that is a
    terminal (terminal.Spinner: `⠋ importing 3214/10000 sessions 1.4s`,
    erased before any other line and at the end)."""
    from pantolib import importing
    from pantolib.terminal import Spinner

    spinner = Spinner(sys.stderr)

    def warn(message):
        spinner.stop()
        cli.warn(NAME, message)

    said = [None]

    def progress(done, total):      # (called for every entry of a large source read here: the label made once)
        if said[0] != (done, total):
            said[0] = (done, total)
            spinner.label = "looking for sessions " if total is None else f"importing {done}/{total} sessions "
        spinner.tick()

    try:
        return importing.everything(names, dry_run, verbose, warn, progress=progress if spinner.on else None)
    finally:
        spinner.stop()


def name(title, arg):
    """Append a sessionInfo entry naming the session, durably, as append does."""
    from pantolib import session, stream
    from pantolib.errors import PantoError

    if arg == "-":
        raise PantoError("a name is written into a session file, not a stream (give SESSION or --last)")
    if not title.strip():
        raise PantoError("a session name cannot be empty")
    path = _session_path(arg)
    obj = {"type": "sessionInfo", "name": title}
    line = stream.Line(stream.dumps(obj), obj, stream.BARE)
    writer = session.Writer(path)
    try:
        writer.feed(line)
        writer.finish()
    finally:
        writer.close()
    return cli.OK
