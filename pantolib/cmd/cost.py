"""Report what panto sessions cost, exactly, from their usage and models.toml.

Usage:
  panto-cost [--all] [--by=KEY] [--since=DAY] [--until=DAY] [--json] [--strict] [--prices=FILE] [--no-cache] [FILE...]
  panto-cost --example-prices
  panto-cost -h | --help
  panto-cost --version

Reads a panto stream on stdin, or session FILEs ("-" is stdin), and prices
every assistant entry on every branch. Unknown prices are never counted
as free: the total then reads "≥ $X (N turns unpriced)". What was read of
each file is remembered (token counts, in the cache directory), so a report
reads again only what was added since.

Options:
  --all             Every session of every directory, with any FILEs.
  --by=KEY          Rows per model, session, day or agent [default: model].
  --since=DAY       Only the turns of this local day (YYYY-MM-DD) and after.
  --until=DAY       Only the turns of this local day (YYYY-MM-DD) and before.
  --json            Print one JSON object (picodollars, exact integers).
  --strict          Exit 1 when any turn is unpriced.
  --prices=FILE     Price table (default: models.toml in the config directory).
  --no-cache        Read every file whole; leave the cache as it is.
  --example-prices  Print a starter models.toml, to check and save.
  -h --help         Show this help.
  --version         Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-cost"
BY = ("model", "session", "day", "agent")
REPORT = "cost-report.memo"


@cli.command(NAME)
def main(argv=None):
    args = cli.parse(__doc__, argv, memo="cost-args.memo")
    from pantolib.errors import UsageError

    if args["--example-prices"]:
        cli.stdout().write(example_prices())
        return cli.OK
    by = args["--by"]
    if by not in BY:
        raise UsageError(f"--by takes model, session, day or agent, not '{by}'")

    span = (_day_option(args, "--since"), _day_option(args, "--until"))
    if span[0] is not None and span[1] is not None and span[0] > span[1]:
        raise UsageError(f"--since {span[0]} is after --until {span[1]}")

    from pantolib.errors import PantoError

    if args["--prices"] is not None and not os.path.exists(args["--prices"]):
        raise PantoError(f"--prices '{args['--prices']}': no such file")
    files = list(args["FILE"])
    if not args["--all"] and not files:
        if os.isatty(0):
            raise UsageError("no input: pipe a stream in, or name FILEs, or use --all")
        files = ["-"]
    use = not args["--no-cache"]
    stamp = None
    if use:
        from pantolib import persist

        stamp = persist.now()    # before the files are stat'ed: git's racy rule (persist.racy)
    inputs = []    # (name, os.stat) of each file, in order; ("-", None) for stdin
    if args["--all"]:
        from pantolib import paths

        for d in paths.all_dirs():
            inputs.extend(sorted(paths.list_dir(d)))
    for name in files:
        if name == "-":
            inputs.append((name, None))
        else:
            from pantolib.session import check_path

            check_path(name)  # a directory or a device is no session
            inputs.append((name, os.stat(name)))

    key = _Key(args, inputs, "-" in files) if use else None
    if key is not None and key.whole is not None:
        memo = persist.recall(REPORT, key.whole, key.stats, newest=key.newest)
        if memo is not None:
            _write(memo[0], args["--json"])
            for note in memo[1]:
                _Run.say(note)
            return memo[2]
    run = _Run(args, inputs, by, span, stamp, key)
    out, status = run.carried() or run.afresh()
    _write(out, args["--json"])
    if key is not None and key.whole is not None:
        persist.remember(REPORT, key.whole, stamp, out, run.said, status)
        if run.kept is not None:
            run.kept.save()
    return status


def _write(out, json):
    if json and sys.stdout.isatty():     # model and session names come from files
        from pantolib.terminal import visible_json

        out = visible_json(out)
    cli.stdout().write(out)


class _Key:
    """What a report depends on (persist.key): `whole`, the options, every
    file's identity and state, the price table's, today's date, the time zone
    and the folder (None with stdin among the inputs); `ctx`, all of it but
    the files; `idents`, the files' (persist.idents); `stats`, the os.stat of
    the price table and the files, and `newest`, the newest of their mtimes
    and ctimes (persist.recall's racy rule)."""

    def __init__(self, args, inputs, stdin):
        self.whole = self.ctx = None
        if stdin:
            return
        from operator import itemgetter

        from pantolib import models_toml, persist
        from pantolib.prices import today

        path = args["--prices"] or models_toml.default_path()
        try:
            listed = [(path, os.stat(path))]
        except OSError:
            listed = []
        self._files = listed + inputs
        every = persist.idents(self._files)
        self.newest = max(map(itemgetter(4), every), default=None)    # the newest mtime or ctime
        if self.newest is not None:                                    # (no pair made per file)
            self.newest = max(self.newest, max(map(itemgetter(5), every)))
        ctx = ({k: v for k, v in args.items() if k != "FILE"}, os.path.abspath(path),
               every[:len(listed)] or None, today(), os.getcwd())
        self.idents = every[len(listed):]
        self.whole, self.ctx = persist.key(*ctx, self.idents), persist.key(*ctx)

    @property
    def stats(self):
        """(lazily: persist.recall looks at them one by one only when `newest` is racy)"""
        from operator import itemgetter

        return map(itemgetter(1), self._files)


class _Run:
    """One report: made afresh from the files, or the last one carried over
    (report.py), with the notes it said."""

    def __init__(self, args, inputs, by, span, stamp, key):
        self.args, self.inputs, self.by, self.stamp, self.key = args, inputs, by, stamp, key
        self.span = None if span == (None, None) else span
        self.since, self.until = span
        self.said, self.lineages = [], {}    # --by session: group -> (agent, parentSession, relation) of the session
        self.kept = None          # what the next report may carry over (report.Kept)
        self._table = None        # the price table, once read

    def prices(self):
        """The price table, read once a run (carried() may give up, then
        afresh() prices the same way), through its memo unless --no-cache."""
        if self._table is None:
            from pantolib import models_toml

            self._table = models_toml.load(self.args["--prices"], cache=self.stamp is not None)
        return self._table

    @staticmethod
    def say(message):
        """A note on stderr; file names and model ids in it come from files: shown, never executed."""
        from pantolib.terminal import visible_line

        cli.warn(NAME, visible_line(message))

    def warn(self, message):
        self.said.append(message)
        self.say(message)

    def afresh(self):
        """(the report's bytes, the exit status), reading the files (through the
        cache, stamped `stamp`; None: --no-cache)."""
        from pantolib import pricing, report, tallies
        from pantolib.errors import SessionError

        args, inputs, by, span = self.args, self.inputs, self.by, self.span
        prices = self.prices()
        for note in prices.notes:
            self.warn(note)
        tally = pricing.Tally(prices, by=by, since=self.since, until=self.until)
        files = [(name, st) for name, st in inputs if st is not None]
        reader = tallies.Files(prices, self.stamp, use=self.stamp is not None and bool(files))   # a stream alone: no cache
        keep = self.key is not None and self.key.whole is not None
        parts = [None] * len(inputs) if keep else None
        seen = set()  # (device, inode) of every file counted: each is counted once
        ahead = set()
        reader.read_ahead([(name, st) for name, st in files if _first_time(st, ahead)], span)
        every = len(inputs) - len(args["FILE"])   # the first ones come from --all
        try:
            for i, (name, st) in enumerate(inputs):
                if st is None:
                    self._count_stream(tally, cli.stdin(), "<stdin>")
                elif i >= every:
                    if _first_time(st, seen):
                        self._count(tally, reader, name, st, parts, i)
                else:
                    try:
                        if _first_time(st, seen):
                            self._count(tally, reader, name, st, parts, i)
                    except (SessionError, OSError) as e:
                        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                        self.warn(f"skipped '{name}': {why}" if isinstance(e, OSError) else f"skipped {why}")
        finally:
            reader.close()      # the workers end (an error stopped the count)
        reader.save()

        view = report.View.of(tally, by, self.lineages)
        out = view.text(args["--json"])
        status = self._ending(view.total, view.models, prices)
        if keep and not self.said:
            self.kept = report.Kept(self.key.ctx, self.stamp, self.key.idents, parts, view)
        return out, status

    def carried(self):
        """The last report carried over (report.py), when it was kept for
        these options and files and only a few of the files changed, each in
        a way that changes only sums: (bytes, status), else None."""
        key = self.key
        if key is None or key.whole is None:
            return None
        from pantolib import report

        kept = report.Kept.load(key.ctx)
        if kept is None:
            return None
        changed = kept.changed(key.idents)
        if not changed or len(changed) > max(16, len(key.idents) // 64):   # many: as fast afresh (read in workers)
            return None
        from pantolib import pricing, tallies
        from pantolib.errors import SessionError

        prices = self.prices()
        if prices.notes:
            return None
        # a few small files are read whole; a large one (tallies.CRC_FROM) from where its cache entry ends
        big = any(self.inputs[i][1].st_size >= tallies.CRC_FROM for i in changed)
        reader = tallies.Files(prices, self.stamp, use=big, fast=big)
        view, tally = kept.view, pricing.Tally(prices, by=self.by, since=self.since, until=self.until)
        for i in changed:
            name, st = self.inputs[i]
            old = kept.part(i)
            if old is None or key.idents[i][1:3] != kept.idents[i][1:3]:   # not counted, or another inode
                return None
            try:
                got = reader.read(name, st, self.span)
            except (SessionError, OSError):
                return None
            if got is None or got.notes(name):
                return None
            group = _group(self.by, name, got.header_id, got.lineage)
            if (group, got.lineage) != old[:2]:
                return None
            rows = tally.merge(group, got.sums, part=True)     # each file's own rows (the tally's sums are not used)
            if not old[2].keys() <= rows.keys() or not view.move(old[2], -1) or not view.move(rows, 1):
                return None     # a row gone (of a model or day): the report's rows may be others
            kept.put(i, (group, got.lineage, rows))
        if view.total[8] and (prices.missing or self.args["--strict"]):   # unpriced turns: notes to say
            return None
        reader.save()
        kept.carry(self.stamp, key.idents, changed)
        self.kept = kept
        return view.text(self.args["--json"]), cli.OK

    def _ending(self, total, models, prices):
        """The exit status, and the notes the unpriced turns call for."""
        n = total[8]
        if n:
            if prices.missing:
                self.warn(f"no price table at '{prices.path}' (start one with: "
                          f"panto-cost --example-prices > '{prices.path}', then check it)")
            if self.args["--strict"]:
                labels = sorted({_model_label(p, m) for (p, m), row in models.items() if row[8]})
                self.warn(f"{n} turn{'s' if n != 1 else ''} unpriced: {', '.join(labels)} "
                          f"(give their prices in '{prices.path}')")
                return cli.FAIL
        return cli.OK

    def _group(self, name, header_id, lineage):
        """_group, and for --by session the session's lineage kept for the tree of sub-agents."""
        group = _group(self.by, name, header_id, lineage)
        if self.by == "session":
            self.lineages.setdefault(group, lineage)
        return group

    def _count(self, tally, reader, name, st, parts, i):
        """Count one session file, through the cache (parts: each file's priced rows, to keep)."""
        got = reader.read(name, st, self.span)
        if got is None:   # no entry of it can be in --since/--until
            return
        group = self._group(name, got.header_id, got.lineage)
        rows = tally.merge(group, got.sums, part=parts is not None)
        if parts is not None:
            parts[i] = (group, got.lineage, rows)
        for note in got.notes(name):
            self.warn(note)

    def _count_stream(self, tally, f, name):
        """Count a stream (stdin): read once, never cached."""
        from pantolib.pricing import Tokens
        from pantolib.scan import PricedEntries

        scan = PricedEntries(f, name, stream=True)
        tokens = Tokens(tally.prices)
        for entry in scan:
            tokens.add(entry)
        from pantolib import stream as format_

        header_id = None if scan.header is None else scan.header["id"]
        lineage = format_.lineage(scan.header)
        tally.merge(self._group(name, header_id, lineage), tokens.sums)
        for note in scan.notes:
            self.warn(note)
        if format_.is_partial(scan.header):   # replay --context: never a silently partial figure
            n = len(format_.omitted_ids(scan.header))
            self.warn(f"{name}: not the whole session: a partial stream ({n} entries left out); the figures "
                      f"count only what it holds (price the session file, or panto-log replay without --context)")


def _group(by, name, header_id, lineage):
    """The row a file's sums go to: its session, its agent, or None (rows by model or by day)."""
    if by == "agent":
        return lineage[0]
    if by != "session":
        return None
    return name if header_id is None else header_id


def _first_time(st, seen):
    """Whether the file (its os.stat) is counted for the first time (by device and
    inode: a path given twice, a symlink or a hard link to a file already read is not)."""
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return False
    seen.add(key)
    return True


def _day_option(args, option):
    """The YYYY-MM-DD of --since/--until, or None; a usage error otherwise."""
    day = args[option]
    if day is None:
        return None
    import datetime

    try:
        if len(day) == 10:
            return datetime.date.fromisoformat(day).isoformat()
    except ValueError:
        pass
    from pantolib.errors import UsageError

    raise UsageError(f"{option} takes a day as YYYY-MM-DD, not '{day}'")


def _model_label(provider, model):
    return f"{provider or '?'}/{model or '?'}"


def example_prices():
    """The example price table (package data: pantolib/data/example-prices.toml)."""
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "data", "example-prices.toml"), "rb") as f:
        return f.read()
