"""panto-cost's report: what it prints, and the last one carried over.

A report is built from the priced rows of a pricing.Tally (`View.of`) and
printed as a table or as JSON (`View.text`). For --by session its rows
follow the tree of sub-agents, each with its sub-agents' rows added.

The last report is kept with each file's own priced rows and what it
printed of each session (`Kept`: the memos cost-parts.memo and
cost-parts-new.memo, persist.py), so that the next one, when a few files
changed and nothing else did, is the last one with those files' old rows
taken out and their new rows put in. Money is exact integers: a sum with one
part taken out and another put in is the sum made afresh, and nothing of the
files that did not change is read or printed again. Where the two could
differ — a changed file with a note (a bad line, a torn tail), counted under
another session, agent or inode, without a row it had (of a model or a
day), or with a row of a model, day or session the report lacks; a session
in a tree of sub-agents; a price table with notes; a report with notes; the
options, the price table, the day, the time zone, the folder, the list of
files or the code not all as they were — cmd/cost.py makes the report
afresh. tests/test_cost_carried.py holds the two to the same bytes.
"""
import os
from operator import add

from pantolib.pricing import as_dict

NAME = "cost-parts.memo"
NEW = "cost-parts-new.memo"
TOKENS = (("input", "INPUT"), ("output", "OUTPUT"), ("cacheRead", "CACHE-READ"),
          ("cacheWrite", "CACHE-WRITE"), ("reasoning", "REASONING"))
_JSON_KEYS = ("turns", "input", "output", "cacheRead", "cacheWrite", "reasoning", "picoUsd", "knownPicoUsd",
              "unpricedTurns", "cacheWrite1h", "compactions", "billedElsewhere")
TOP = ("panto", None, None)     # the lineage of a session of panto's own (stream.lineage)


class View:
    """What a report prints: its total row, its rows by (provider, model) and
    by group (session, day or agent; one group, None, by model), and for
    --by session the tree of sub-agents: the order ((session, depth) pairs)
    and, for each session with sub-agents in the report, its row with
    theirs added (`wholes`). `pieces`: what was printed of each session (its
    JSON object and a comma, or its table line), printed again while its row
    is the same."""

    def __init__(self, by, total, models, groups, lineages, order=None, wholes=None, pieces=None):
        self.by, self.total, self.models, self.groups, self.lineages = by, total, models, groups, lineages
        self.order, self.wholes, self.pieces = order or [], wholes or {}, pieces or {}
        self.json = None     # how text() printed it last: as JSON (True) or a table
        # --by session as a table: each session's cells (a dict, or a Column read from a Kept), and
        # the widths of the columns over the sessions' rows alone and over the whole table
        self.cells, self.row_widths, self.widths = {}, None, None
        self._nested = None     # move(): the sessions below another in the tree

    @classmethod
    def of(cls, tally, by, lineages):
        """The view of a Tally's rows; lineages: session -> (agent, parentSession, relation)."""
        groups = tally.rollup("group")
        view = cls(by, tally.rollup("total"), tally.rollup("model"), groups, lineages)
        if by == "session":
            view.order, view.wholes = _session_tree(groups, lineages)
        return view

    def text(self, json):
        """The report's bytes, as one JSON object or as a table."""
        self.json = json
        return self._json() if json else self._table()

    def _json(self):
        import orjson

        models = [_entry({"provider": p, "model": m}, row) for (p, m), row in sorted(self.models.items(), key=_model_key)]
        head = b'{"total":' + orjson.dumps(_entry({}, self.total)) + b',"models":' + orjson.dumps(models)
        if self.by == "model":
            return head + b"}\n"
        if self.by != "session":
            rows = [_entry({self.by: g}, row) for g, row in sorted(self.groups.items(), key=_str_key)]
            return head + (b',"days":' if self.by == "day" else b',"agents":') + orjson.dumps(rows) + b"}\n"
        pieces = self.pieces
        for g in self._anew():
            pieces[g] = orjson.dumps(self._session(g)) + b","    # each piece as it follows the last
        return head + b',"sessions":[' + self._joined()[:-1] + b"]}\n"

    def _anew(self):
        """The sessions whose pieces are to be printed anew: every one, or in a
        View read from a Kept, those whose rows changed."""
        if isinstance(self.pieces, _Pieces):
            return [g for g, piece in self.pieces.fresh.items() if piece is None]
        return [g for g, _ in self.order]

    def _joined(self):
        """Every session's piece, in order, as one bytes object."""
        if isinstance(self.pieces, _Pieces):
            self._put_pieces()
            return self.pieces.column.joined()
        return b"".join([self.pieces[g] for g, _ in self.order])

    def _session(self, g):
        """A session's object of the JSON report."""
        agent, parent, relation = self.lineages.get(g, TOP)
        head = {"session": g, "agent": agent}
        if parent is not None:
            head["parentSession"] = parent
        if relation is not None:
            head["relation"] = relation
        obj = _entry(head, self.groups[g])
        whole = self.wholes.get(g)
        if whole is not None:
            obj["withSubagents"] = _entry({}, whole)
        return obj

    def _table(self):
        """The report for people. Provider, model and session names come from the
        files: every cell goes through visible_line, so none can move the cursor."""
        from pantolib.terminal import visible_line as cell

        if self.by == "model":
            heads = ["PROVIDER", "MODEL"]
            rows = [[cell(p or "?"), cell(m or "?")] + _numbers(r)
                    for (p, m), r in sorted(self.models.items(), key=_model_key)]
        elif self.by == "session":
            return self._session_table()
        else:
            heads = [self.by.upper()]
            rows = [[cell(str(g))] + _numbers(r) for g, r in sorted(self.groups.items(), key=_str_key)]
        heads += _HEADS
        labels = len(heads) - 7
        lines = [heads] + rows + [["TOTAL"] + [""] * (labels - 1) + _numbers(self.total)]
        widths = [max(map(len, column)) for column in zip(*lines)]
        return b"".join(_line(line, widths, labels) for line in lines)

    def _session_table(self):
        """The table by session. Each session's line is kept (`pieces`) with
        its cells (`cells`): while the columns' widths stay, a line whose row
        did not change is printed as it was. The widths are the longest cells
        of the sessions' rows (`row_widths`), the heads and the total; a
        changed row can only widen them, unless one of its old cells was the
        longest of its column, and then they are measured again."""
        from pantolib.terminal import visible_line as cell

        heads, total = ["SESSION"] + _HEADS, ["TOTAL"] + _numbers(self.total)
        pieces, cells, order = self.pieces, self.cells, self.order
        loaded = isinstance(cells, Column)
        at = self.groups.index if loaded else {g: j for j, (g, _) in enumerate(order)}
        todo = [at[g] for g in self._anew()]      # the rows printed anew
        row_widths = list(self.row_widths) if loaded else [0] * len(heads)
        again = False
        for j in todo:
            g, depth = order[j]
            new = [_nested(depth) + cell(str(g))] + _numbers(self.wholes.get(g) or self.groups[g])
            if loaded:
                old = cells.item(j)
                again = again or any(len(o) == w > len(n) for o, n, w in zip(old, new, row_widths))
                cells.put(j, _pack(new))
            else:
                cells[g] = new
            row_widths = [max(w, len(c)) for w, c in zip(row_widths, new)]
        if again and loaded:
            row_widths = [max(map(len, column)) for column in zip(*(cells.item(j) for j in range(len(order))))] \
                if order else [0] * len(heads)
        widths = [max(a, len(b), len(c)) for a, b, c in zip(row_widths, heads, total)]
        if widths != self.widths:
            todo = range(len(order))      # every line anew
        for j in todo:
            g = order[j][0]
            pieces[g] = _line(cells.item(j) if loaded else cells[g], widths, 1)
        self.row_widths, self.widths = row_widths, widths
        return _line(heads, widths, 1) + self._joined() + _line(total, widths, 1)

    def move(self, rows, sign):
        """Take out (sign -1) or put back (sign 1) one file's priced rows
        ((group, provider, model) -> row, pricing.Tally.merge). False, and
        nothing moved, when that could change more than sums: a row of a model
        or group the report does not have, or of a session in a tree of
        sub-agents (its parent's row holds its sums too)."""
        models, groups, by = self.models, self.groups, self.by
        if by == "session" and self._nested is None:      # the sub-agents in a tree: found once per view
            self._nested = {g for g, depth in self.order if depth}
        nested = self._nested
        for (g, p, m) in rows:
            if (p, m) not in models or g not in groups or (by == "session" and (g in self.wholes or g in nested)):
                return False
        for (g, p, m), row in rows.items():
            if sign < 0:
                row = [-x for x in row]
            models[(p, m)] = list(map(add, models[(p, m)], row))
            groups[g] = list(map(add, groups[g], row))
            self.total = list(map(add, self.total, row))
            self.pieces.pop(g, None)
        return True

    def state(self):
        """What Kept keeps of the view (after text(): its pieces are all there)."""
        json = self.json
        if self.by != "session":
            return (self.by, json, self.total, self.models, self.wholes, self.groups, self.lineages)
        if isinstance(self.groups, _Rows):      # read from a Kept: its columns, the few changed put in
            self._put_pieces()
            rows, pieces, cells = self.groups.column, self.pieces.column, self.cells
        else:
            names = [g for g, _ in self.order]
            rows = Column.of([_pack((self.groups[g], self.lineages.get(g, TOP))) for g in names])
            pieces = Column.of([self.pieces[g] for g in names])
            cells = Column.of([b"" if json else _pack(self.cells[g]) for g in names])
        return (self.by, json, self.total, self.models, self.wholes, [g for g, _ in self.order],
                [d for _, d in self.order], rows.packed(), pieces.packed(), cells.packed(), self.row_widths,
                self.widths)

    def changes(self):
        """What changed in a View read from a Kept (after text()), for apply()."""
        if self.by != "session":
            return self.state()
        self._put_pieces()
        return (self.total, self.models, self.wholes, self.groups.column.new, self.pieces.column.new,
                self.cells.new, self.row_widths, self.widths)

    def apply(self, changes):
        """Take in changes(); False if they do not fit this view."""
        if self.by != "session":
            view = View.read(changes)
            if view is None:
                return False
            self.total, self.models, self.wholes, self.groups, self.lineages = (
                view.total, view.models, view.wholes, view.groups, view.lineages)
            return True
        total, models, wholes, rows, pieces, cells, row_widths, widths = changes
        n = len(self.order)
        if not (type(total) is list and type(models) is dict and type(wholes) is dict
                and _blobs(rows, n) and _blobs(pieces, n) and _blobs(cells, n)
                and (self.json or _widths(row_widths, widths))):
            return False
        self.total, self.models, self.wholes, self.row_widths, self.widths = total, models, wholes, row_widths, widths
        self.groups.column.new, self.pieces.column.new, self.cells.new = rows, pieces, cells
        return True

    def _put_pieces(self):
        """The pieces printed anew put in their column (a View read from a Kept)."""
        for g, piece in self.pieces.fresh.items():
            self.pieces.column.put(self.groups.index[g], piece)
        self.pieces.fresh = {}

    @classmethod
    def read(cls, state):
        """The View of a state(), or None; ValueError or TypeError if it is not one."""
        by, json, total, models, wholes, *rest = state
        if not (type(total) is list and type(models) is dict and type(wholes) is dict):
            return None
        if by != "session":
            groups, lineages = rest
            return cls(by, total, models, groups, lineages, wholes=wholes) \
                if type(groups) is dict and type(lineages) is dict else None
        names, depths, rows, pieces, cells, row_widths, widths = rest
        if (type(names) is not list or type(depths) is not list or len(names) != len(depths)
                or not (json or _widths(row_widths, widths))):
            return None
        index = dict(zip(names, range(len(names))))
        rows, pieces, cells = Column.read(rows), Column.read(pieces), Column.read(cells)
        if not len(rows) == len(pieces) == len(cells) == len(index) == len(names):
            return None
        groups = _Rows(index, rows)
        view = cls(by, total, models, groups, _Lineages(groups), list(zip(names, depths)), wholes,
                   _Pieces(index, pieces))
        view.cells, view.row_widths, view.widths, view.json = cells, row_widths, widths, json
        return view


class _Rows:
    """The rows by session of a View read from a Kept: each session's (row,
    lineage) unmarshalled from its column where asked; `index`: session ->
    its place in the column (the report's order)."""

    def __init__(self, index, column):
        self.index, self.column, self.got = index, column, {}

    def __contains__(self, g):
        return g in self.index

    def _item(self, g):
        got = self.got.get(g)
        if got is None:
            got = self.got[g] = self.column.item(self.index[g])
            if type(got) is not tuple or len(got) != 2 or type(got[0]) is not list:
                raise ValueError("not a row")
        return got

    def __getitem__(self, g):
        return self._item(g)[0]

    def __setitem__(self, g, row):
        lineage = self._item(g)[1]
        self.got[g] = (row, lineage)
        self.column.put(self.index[g], _pack((row, lineage)))

    def lineage(self, g, default):
        return self._item(g)[1] if g in self.index else default


class _Lineages:
    """The lineages of a View read from a Kept: what _Rows holds beside each row."""

    def __init__(self, rows):
        self.rows = rows

    def get(self, g, default=None):
        return self.rows.lineage(g, default)


class _Pieces:
    """What a View read from a Kept printed of each session (its JSON object,
    or its table line, as bytes): from its column, unless printed anew
    (`fresh`) or taken out (its row changed)."""

    def __init__(self, index, column):
        self.index, self.column, self.fresh = index, column, {}

    def get(self, g):
        if g in self.fresh:
            return self.fresh[g]
        return self.column.blob(self.index[g])

    def __setitem__(self, g, piece):
        self.fresh[g] = piece

    def pop(self, g, default=None):
        self.fresh[g] = None


class Kept:
    """The last report's parts, to carry it over (see above): `ctx`, the key
    of all it depends on but the files (persist.key); `stamp` (persist.now,
    taken before the files were stat'ed); `idents`, each file's (path,
    device, inode, size, mtime, ctime) as persist.idents gives them; for
    each file its (group, lineage, priced rows), None for a file not counted
    (a second path to one inode, or none of its turns in the days asked
    for); and the View. What there is one of per file or per session is
    kept marshalled side by side (`Column`): a report carried over reads
    and writes again the few that changed, not 10,000 objects.

    Two memos hold it: cost-parts.memo, all of it as a report made afresh
    left it, with a token of its own; and cost-parts-new.memo, what the
    reports carried over since changed (the files, their parts, the
    sessions' rows and pieces, the totals), naming that token. A report
    carried over rewrites only the second; past MOVED files it writes the
    first anew. Either written alone (a crash between) leaves a pair that
    agrees or a second memo of another token, which is not read."""

    MOVED = 512

    def __init__(self, ctx, stamp, idents, parts, view, token=None):
        self.ctx, self.stamp, self.idents, self.view, self.token = ctx, stamp, idents, view, token
        self.parts = parts if isinstance(parts, Column) else Column.of(
            [b"" if p is None else _pack(p) for p in parts])
        self.moved = set()      # files whose identity changed since the first memo

    def part(self, i):
        """File i's (group, lineage, priced rows), or None: not counted, or not of that shape."""
        got = self.parts.item(i)
        return got if type(got) is tuple and len(got) == 3 and type(got[2]) is dict else None

    def put(self, i, part):
        self.parts.put(i, _pack(part))

    def carry(self, stamp, idents, changed):
        """The files of `changed` were read again at `stamp`; idents: every file's now."""
        self.stamp = stamp
        for i in changed:
            self.idents[i] = idents[i]
        self.moved.update(changed)

    @classmethod
    def load(cls, ctx, env=None):
        """The Kept of a report with this ctx, or None."""
        import marshal

        from pantolib import persist

        body = persist.read(persist.path(NAME, env), NAME)
        if body is None:
            return None
        try:
            got = marshal.loads(body)
            if type(got) is not tuple or len(got) != 6 or got[0] != ctx or type(got[2]) is not int:
                return None
            _, token, stamp, idents, parts, state = got
            kept = cls(ctx, stamp, idents, Column.read(parts), View.read(state), token)
            if type(idents) is not list or len(kept.parts) != len(idents) or kept.view is None:
                return None
            body = persist.read(persist.path(NEW, env), NEW)
            got = None if body is None else marshal.loads(body)
            if type(got) is tuple and len(got) == 6 and got[:2] == (ctx, token) and type(got[2]) is int:
                _, _, kept.stamp, moved, parts, state = got
                if not (_blobs(parts, len(idents)) and _blobs(moved, len(idents), tuple) and kept.view.apply(state)):
                    return None
                for i, ident in moved.items():
                    kept.idents[i] = ident
                kept.moved, kept.parts.new = set(moved), parts
        except (ValueError, EOFError, TypeError, KeyError, IndexError, AttributeError):
            return None
        return kept

    def save(self, env=None):
        """Write the changes since the first memo, or past MOVED of them (or for a
        report made afresh) the first memo anew."""
        import marshal

        from pantolib import files, persist

        if self.token is not None and len(self.moved) <= self.MOVED:
            moved = {i: self.idents[i] for i in self.moved}
            body = marshal.dumps((self.ctx, self.token, self.stamp, moved, self.parts.new, self.view.changes()), 4)
            return persist.write(persist.path(NEW, env), NEW, body)
        self.token = os.urandom(8)
        body = marshal.dumps((self.ctx, self.token, self.stamp, self.idents, self.parts.packed(), self.view.state()), 4)
        done = persist.write(persist.path(NAME, env), NAME, body)
        files.unlink_quietly(persist.path(NEW, env))
        return done

    def changed(self, idents):
        """The indexes of the files whose identity is not the one kept, or is
        racy against the stamp (persist.racy); None when the list of files
        is not the one kept."""
        from pantolib import persist

        kept, stamp = self.idents, self.stamp
        if len(kept) != len(idents):
            return None
        old = stamp - persist.COARSE      # a time older than this is racy by no rule: the common case, in one compare
        out = []
        for i, (a, b) in enumerate(zip(idents, kept)):
            if a != b:
                if a[0] != b[0]:
                    return None
                out.append(i)
            elif (a[4] > old or a[5] > old) and persist.racy(a[1:], stamp):
                out.append(i)
        return out


class Column:
    """Blobs (bytes; b"" for none) kept side by side in one bytes object with
    the offset where each ends: one object to read and write whatever their
    number. `item(i)` is blob i unmarshalled (None for b""), `put(i, blob)`
    replaces it."""

    def __init__(self, data, ends):
        self.data, self.ends, self.new = data, ends, {}

    @classmethod
    def of(cls, blobs):
        from array import array
        from itertools import accumulate

        return cls(b"".join(blobs), array("Q", accumulate(map(len, blobs))))

    @classmethod
    def read(cls, packed):
        """A column from its packed(); ValueError if it is not one."""
        from array import array

        data, ends = packed
        column = cls(data, array("Q"))
        column.ends.frombytes(ends)
        if type(data) is not bytes or (column.ends and column.ends[-1] != len(data)):
            raise ValueError("not a column")
        return column

    def __len__(self):
        return len(self.ends)

    def blob(self, i):
        got = self.new.get(i)
        if got is not None:
            return got
        return self.data[self.ends[i - 1] if i else 0:self.ends[i]]

    def item(self, i):
        import marshal

        blob = self.blob(i)
        return marshal.loads(blob) if blob else None

    def put(self, i, blob):
        self.new[i] = blob

    def joined(self):
        """Every blob, in order, as one bytes object (the ones put in spliced
        in: the blobs between them are copied whole, not one by one)."""
        if not self.new:
            return self.data
        data, ends, pieces, at = self.data, self.ends, [], 0
        for i in sorted(self.new):
            pieces += (data[at:ends[i - 1] if i else 0], self.new[i])
            at = ends[i]
        pieces.append(data[at:])
        return b"".join(pieces)

    def packed(self):
        """(data, ends as bytes), the blobs put in their places."""
        from array import array

        if self.new:
            data, ends, shift, marks = self.joined(), self.ends, 0, sorted(self.new)
            was = array("Q", ends)
            for n, i in enumerate(marks):
                shift += len(self.new[i]) - (was[i] - (was[i - 1] if i else 0))
                stop = marks[n + 1] if n + 1 < len(marks) else len(ends)
                if shift:
                    ends[i:stop] = array("Q", [e + shift for e in was[i:stop]])
            self.data, self.new = data, {}
        return self.data, self.ends.tobytes()


_HEADS = ["TURNS"] + [h for _, h in TOKENS] + ["COST"]


def _line(cells, widths, labels):
    """One line of a table, as bytes: the first `labels` cells padded on the
    right, the others but the last on the left, two spaces apart."""
    padded = [c.ljust(w) if i < labels else c.rjust(w) for i, (c, w) in enumerate(zip(cells[:-1], widths))]
    padded.append(cells[-1])
    return ("  ".join(padded).rstrip() + "\n").encode("utf-8", "replace")


def _widths(*lists):
    """Are these the widths of a table's columns (lists of ints, of the same length)?"""
    return all(type(x) is list and all(type(w) is int for w in x) and len(x) == len(lists[0]) for x in lists)


def _blobs(d, n, kind=bytes):
    """Is d a dict of places 0..n-1 to values of type kind (what a second memo holds)?"""
    return type(d) is dict and all(type(k) is int and 0 <= k < n and type(v) is kind for k, v in d.items())


def _pack(part):
    import marshal

    return marshal.dumps(part, 4)


def _session_tree(groups, lineages):
    """The rows by session as a tree: ([(session, depth)] in order, {session:
    its row with its sub-agents' added} for each that has some in the report).
    A sub-agent (`relation` "subagent") whose parent is in the report follows
    its parent, one level deeper; a fork, or a sub-agent whose parent is not
    in the report, is a row of its own at the top."""
    children = {}
    for g in groups:
        _, parent, relation = lineages.get(g, TOP)
        if relation == "subagent" and parent in groups and parent != g:
            children.setdefault(parent, []).append(g)
    below = {c for cs in children.values() for c in cs}
    out, wholes, done = [], {}, set()

    def visit(root):      # depth first, without recursion: a chain of sub-agents may be long
        if root not in children:        # most sessions have none: themselves alone, at the top
            done.add(root)
            out.append((root, 0))
            return
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
            if g in kids:
                wholes[g] = w
        out.extend(order)

    order = sorted(groups.items(), key=_str_key)
    for g, _ in order:
        if g not in below and g not in done:
            visit(g)
    for g, _ in order:     # a loop of parents (a file that names itself, say): each at the top
        if g not in done:
            visit(g)
    return out, wholes


def _entry(head, row):
    d = as_dict(row)
    return {**head, **{k: d[k] for k in _JSON_KEYS}}


def _nested(depth, most=10):
    """What goes before a sub-agent's session id: `↳ ` one level deeper per
    generation, past `most` levels the depth as a number instead."""
    if not depth:
        return ""
    if depth <= most:
        return "  " * (depth - 1) + "↳ "
    return "  " * (most - 1) + f"↳ [{depth}] "


def _numbers(row):
    d = as_dict(row)
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
