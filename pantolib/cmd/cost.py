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
TOKENS = (("input", "INPUT"), ("output", "OUTPUT"), ("cacheRead", "CACHE-READ"),
          ("cacheWrite", "CACHE-WRITE"), ("reasoning", "REASONING"))


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

    global _said, _lineages
    _said, _lineages = [], {}
    key = _report_key(args, inputs) if use else None
    if key is not None:
        memo = persist.recall(REPORT, key[0], key[1])
        if memo is not None:
            _write(memo[0], args["--json"])
            for note in memo[1]:
                _warn(note)
            return memo[2]
    out, status = _report(args, inputs, by, span, stamp)
    _write(out, args["--json"])
    if key is not None:
        persist.remember(REPORT, key[0], stamp, out, _said, status)
    return status


def _write(out, json):
    if json and sys.stdout.isatty():     # model and session names come from files
        from pantolib.terminal import visible_json

        out = visible_json(out)
    cli.stdout().write(out)


REPORT = "cost-report.memo"
_said = []
_lineages = {}   # --by session: group -> (agent, parentSession, relation) of the session


def _report_key(args, inputs):
    """What a report depends on (persist.key): the options, every file's
    identity and state, the price table's, and today's date; and the stats of
    those files (persist.recall's racy rule); None for stdin."""
    if any(st is None for _, st in inputs):
        return None
    from pantolib import models_toml, persist
    from pantolib.prices import today

    path = args["--prices"] or models_toml.default_path()
    try:
        listed = [(path, os.stat(path))]
    except OSError:
        listed = []
    return persist.key({k: v for k, v in args.items() if k != "FILE"}, os.path.abspath(path),
                       persist.idents(listed) or None, today(), os.getcwd(), persist.idents(inputs)), \
        [st for _, st in listed + inputs]


def _report(args, inputs, by, span, stamp):
    """(the report's bytes, the exit status), reading the files (through the
    cache, stamped `stamp`; None: --no-cache)."""
    from pantolib import models_toml, pricing, tallies
    from pantolib.errors import SessionError

    prices = models_toml.load(args["--prices"])
    for note in prices.notes:
        _warn(note)
    tally = pricing.Tally(prices, by=by, since=span[0], until=span[1])
    files = [(name, st) for name, st in inputs if st is not None]
    reader = tallies.Files(prices, stamp, use=stamp is not None and bool(files))   # a stream alone: no cache
    span = None if span == (None, None) else span
    seen = set()  # (device, inode) of every file counted: each is counted once
    ahead = set()
    reader.read_ahead([(name, st) for name, st in files if _first_time(st, ahead)], span)
    every = len(inputs) - len(args["FILE"])   # the first ones come from --all
    for i, (name, st) in enumerate(inputs):
        if st is None:
            _count_stream(tally, cli.stdin(), "<stdin>", by)
        elif i >= every:
            if _first_time(st, seen):
                _count(tally, reader, name, st, by, span)
        else:
            try:
                if _first_time(st, seen):
                    _count(tally, reader, name, st, by, span)
            except (SessionError, OSError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                _warn(f"skipped '{name}': {why}" if isinstance(e, OSError) else f"skipped {why}")
    reader.save()

    total = pricing.as_dict(tally.rollup("total"))
    if args["--json"]:
        out = _json(tally, by, total)
    else:
        out = _table(tally, by, total).encode("utf-8", "replace")
    if total["unpricedTurns"]:
        if prices.missing:
            _warn(f"no price table at '{prices.path}' (start one with: "
                  f"panto-cost --example-prices > '{prices.path}', then check it)")
        if args["--strict"]:
            n = total["unpricedTurns"]
            models = sorted({_model_label(p, m) for (p, m), row in tally.rollup("model").items()
                             if row[8]})
            _warn(f"{n} turn{'s' if n != 1 else ''} unpriced: {', '.join(models)} "
                  f"(give their prices in '{prices.path}')")
            return out, cli.FAIL
    return out, cli.OK


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


def _count(tally, reader, name, st, by, span):
    """Count one session file, through the cache."""
    got = reader.read(name, st, span)
    if got is None:   # no entry of it can be in --since/--until
        return
    tally.merge(_group(by, name, got.header_id, got.lineage), got.sums)
    for note in got.notes(name):
        _warn(note)


def _count_stream(tally, f, name, by):
    """Count a stream (stdin): read once, never cached."""
    from pantolib.pricing import Tokens
    from pantolib.scan import PricedEntries

    scan = PricedEntries(f, name, stream=True)
    tokens = Tokens(tally.prices)
    for entry in scan:
        tokens.add(entry)
    from pantolib import stream as format_

    header_id = None if scan.header is None else scan.header["id"]
    tally.merge(_group(by, name, header_id, format_.lineage(scan.header)), tokens.sums)
    for note in scan.notes:
        _warn(note)
    if format_.is_partial(scan.header):   # replay --context: never a silently partial figure
        n = len(format_.omitted_ids(scan.header))
        _warn(f"{name}: not the whole session: a partial stream ({n} entries left out); the figures "
              f"count only what it holds (price the session file, or panto-log replay without --context)")


def _group(by, name, header_id, lineage):
    """The row a file's sums go to: its session (remembering its lineage for
    the tree of sub-agents), its agent, or None (rows by model or by day)."""
    if by == "agent":
        return lineage[0]
    if by != "session":
        return None
    group = name if header_id is None else header_id
    _lineages.setdefault(group, lineage)
    return group


def _first_time(st, seen):
    """Whether the file (its os.stat) is counted for the first time (by device and
    inode: a path given twice, a symlink or a hard link to a file already read is not)."""
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return False
    seen.add(key)
    return True


def _warn(message):
    """A note on stderr; file names and model ids in it come from files: shown, never executed."""
    from pantolib.terminal import visible_line

    _said.append(message)
    cli.warn(NAME, visible_line(message))


def _json(tally, by, total):
    import orjson

    from pantolib.pricing import as_dict

    def entry(head, row):
        d = as_dict(row)
        body = {k: d[k] for k in ("turns", "input", "output", "cacheRead", "cacheWrite",
                                  "reasoning", "picoUsd", "knownPicoUsd", "unpricedTurns",
                                  "cacheWrite1h", "compactions", "billedElsewhere")}
        return {**head, **body}

    doc = {"total": entry({}, tally.rollup("total")),
           "models": [entry({"provider": p, "model": m}, row)
                      for (p, m), row in sorted(tally.rollup("model").items(), key=_model_key)]}
    if by == "session":
        doc["sessions"] = []
        for g, _, row, whole in _session_tree(tally.rollup("group")):
            agent, parent, relation = _lineages.get(g, ("panto", None, None))
            head = {"session": g, "agent": agent}
            if parent is not None:
                head["parentSession"] = parent
            if relation is not None:
                head["relation"] = relation
            obj = entry(head, row)
            if whole is not row:
                obj["withSubagents"] = entry({}, whole)
            doc["sessions"].append(obj)
    elif by != "model":
        doc["days" if by == "day" else "agents"] = [
            entry({by: g}, row) for g, row in sorted(tally.rollup("group").items(), key=_str_key)]
    return orjson.dumps(doc) + b"\n"


def _session_tree(groups):
    """The rows by session as a tree, in order: (session, depth, its own row,
    its row with those of its sub-agents added — the same object when it has
    none). A sub-agent (`relation` "subagent") whose parent is in the report
    follows its parent, one level deeper; a fork, or a sub-agent whose parent
    is not in the report, is a row of its own at the top."""
    from operator import add

    children = {}
    for g in groups:
        _, parent, relation = _lineages.get(g, ("panto", None, None))
        if relation == "subagent" and parent in groups and parent != g:
            children.setdefault(parent, []).append(g)
    below = {c for cs in children.values() for c in cs}
    out, done = [], set()

    def visit(root):      # depth first, without recursion: a chain of sub-agents may be long
        order, kids, stack = [], {}, [(root, 0, None)]
        while stack:
            g, depth, up = stack.pop()
            if g in done:
                continue
            done.add(g)
            order.append((g, depth))
            if up is not None:
                kids.setdefault(up, []).append(g)
            stack.extend((c, depth + 1, g) for c in sorted(children.get(g, ()), key=str, reverse=True))
        whole = {}
        for g, _ in reversed(order):      # descendants before their ancestors
            w = groups[g]
            for c in kids.get(g, ()):
                w = list(map(add, w, whole[c]))
            whole[g] = w
        out.extend((g, depth, groups[g], whole[g]) for g, depth in order)

    order = sorted(groups.items(), key=_str_key)
    for g, _ in order:
        if g not in below and g not in done:
            visit(g)
    for g, _ in order:     # a loop of parents (a file that names itself, say): each at the top
        if g not in done:
            visit(g)
    return out


def _table(tally, by, total):
    """The report for people. Provider, model and session names come from the
    files: every cell goes through visible_line, so none can move the cursor."""
    from pantolib.pricing import as_dict
    from pantolib.terminal import visible_line as cell

    if by == "model":
        heads = ["PROVIDER", "MODEL"]
        rows = [([cell(p or "?"), cell(m or "?")], as_dict(r))
                for (p, m), r in sorted(tally.rollup("model").items(), key=_model_key)]
    elif by == "session":
        heads = ["SESSION"]
        rows = [([_nested(depth) + cell(str(g))], as_dict(whole))
                for g, depth, _, whole in _session_tree(tally.rollup("group"))]
    else:
        heads = [by.upper()]
        rows = [([cell(str(g))], as_dict(r)) for g, r in sorted(tally.rollup("group").items(), key=_str_key)]
    heads += ["TURNS"] + [h for _, h in TOKENS] + ["COST"]
    lines = [heads]
    for labels, d in rows:
        lines.append(labels + _numbers(d))
    lines.append(["TOTAL"] + [""] * (len(heads) - 7 - 1) + _numbers(total))
    n_labels = len(heads) - 7
    widths = [max(len(line[i]) for line in lines) for i in range(len(heads))]
    text = []
    for line in lines:
        cells = [c.ljust(widths[i]) if i < n_labels else c.rjust(widths[i])
                 for i, c in enumerate(line[:-1])]
        text.append("  ".join(cells + [line[-1]]).rstrip() + "\n")
    return "".join(text)


def _nested(depth, most=10):
    """What goes before a sub-agent's session id: `↳ ` one level deeper per
    generation, past `most` levels the depth as a number instead."""
    if not depth:
        return ""
    if depth <= most:
        return "  " * (depth - 1) + "↳ "
    return "  " * (most - 1) + f"↳ [{depth}] "


def _numbers(d):
    return [f"{d['turns']:,}"] + [f"{d[k]:,}" for k, _ in TOKENS] + [cost_text(d)]


def cost_text(d):
    """`$0.0938`, `≥ $0.4210 (3 turns unpriced)`, or `unknown (2 turns unpriced)`: never $0 for unknown."""
    from pantolib.prices import format_usd

    n = d["unpricedTurns"]
    if not n:
        return format_usd(d["knownPicoUsd"])
    what = f"({n:,} turn{'s' if n != 1 else ''} unpriced)"
    if not d["knownPicoUsd"]:
        return f"unknown {what}"
    return f"≥ {format_usd(d['knownPicoUsd'])} {what}"


def _model_key(item):
    (p, m), _ = item
    return (p is None, p or "", m is None, m or "")


def _str_key(item):
    return (item[0] is None, str(item[0]))


def _model_label(provider, model):
    return f"{provider or '?'}/{model or '?'}"


def example_prices():
    """The example price table (package data: pantolib/data/example-prices.toml)."""
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "data", "example-prices.toml"), "rb") as f:
        return f.read()
