"""What sessions cost: the token sums of priced entries (which
`scan.PricedEntries` reads from files) by model, day and session, priced at
models.toml's rates (prices.py holds the rates and the arithmetic,
models_toml.py the table)."""
from pantolib.entries import billed_in, not_a_turn, usage_counts
from pantolib.prices import UNKNOWN, canonical_stamp, in_force, today, utc_day

FIELDS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h",
          "reasoning", "knownPicoUsd", "unpricedTurns", "compactions", "billedElsewhere")



# Token sums per key, with no dollars in them (a cache of them stays right
# when models.toml changes): (provider, model, WHEN, ABOVE, MASK) -> SUMS.
#   WHEN   the two days a turn's timestamp gives: "UTC-DAY LOCAL-DAY" for
#          what panto writes (UTC, ms; the local day is that of its quarter
#          hour, as every time zone's midnight falls on one, and is cached per
#          quarter hour), "=" and the timestamp for any other string, None for
#          none. The local day is the time zone's: a cache of sums is kept per
#          time zone (`persist.zone`).
#   ABOVE  whether the request's prompt exceeded the model's above_tokens
#          (a cache of sums is keyed by `Prices.tiers()`, which decides it).
#   MASK   which of the five priced categories had tokens (bits in RATE
#          order), -1 for an entry without usage, BILLED for a copy of a
#          response paid in another session (`entries.billed_in`: a known
#          zero): turns alike in it are priced alike, so a sum prices
#          exactly as its turns would one by one.
SUMS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning", "compactions")
_COLUMN_OF_SUM = tuple(FIELDS.index(f) for f in SUMS)   # where each of SUMS goes in a row of FIELDS
BILLED = 1 << 5    # beyond the five category bits: no rate applies, the turn costs 0
_QUARTER = {f"{m:02d}": f"{m // 15 * 15:02d}:00Z" for m in range(60)}


def when_key(ts, quarters):
    """WHEN of a timestamp (see above); `quarters` is a dict that remembers
    the WHEN of each quarter hour (for one time zone)."""
    if type(ts) is not str:
        return None
    if len(ts) == 24 and ts[23] == "Z":
        if canonical_stamp(ts):
            q = ts[:14] + _QUARTER[ts[14:16]]
            when = quarters.get(q)
            if when is None:
                when = quarters[q] = f"{q[:10]} {local_day(q)}"
            return when
    return "=" + ts


def days_of(when):
    """(UTC day or None, local day or 'unknown') of a WHEN."""
    if when is None:
        return None, "unknown"
    if when[0] == "=":
        return utc_day(when[1:]), local_day(when[1:])
    return when[:10], when[11:]


class Tokens:
    """The token sums of priced entries (see SUMS above), e.g. of one file."""

    def __init__(self, prices, sums=None, quarters=None):
        self.prices = prices
        self.sums = {} if sums is None else sums
        self._tiers = {}
        self._quarters = {} if quarters is None else quarters
        self.today_dependent = False  # a tier was decided by today's rates (an entry without a time)

    def add(self, entry):
        """Count one priced entry (a parsed line that `scan.PricedEntries` yields)."""
        t = entry.get("type")
        if t == "compaction" or t == "branchSummary":
            if not_a_turn(entry):
                return
            src, compaction = entry, 1
            provider, model = entry.get("provider"), entry.get("model")
        else:
            src, compaction = entry["message"], 0
            provider, model = src.get("provider"), src.get("model")
            if provider is None:
                provider = entry.get("provider")
            if model is None:
                model = entry.get("model")
        if type(provider) is not str:
            provider = None
        if type(model) is not str:
            model = None
        ts = entry.get("timestamp")
        when = when_key(ts, self._quarters)
        billed = "billedIn" in entry and billed_in(entry) is not None
        n = None if billed else usage_counts(src.get("usage"))
        above = False
        if n is None:
            mask, inp, out, cr, cw, cw1h, reasoning = BILLED if billed else -1, 0, 0, 0, 0, 0, 0
        else:
            inp, out, cr, cw, reasoning, cw1h = n
            if cw1h > cw:
                cw1h = cw
            mask = (inp > 0) | (out > 0) << 1 | (cr > 0) << 2 | (cw > cw1h) << 3 | (cw1h > 0) << 4
            pm = (provider, model)
            tiers = self._tiers.get(pm, self)
            if tiers is self:
                periods = self.prices.periods(provider, model)
                tiers = self._tiers[pm] = periods if periods and any(
                    p.above_tokens is not None for _, p in periods) else None
            if tiers is not None:
                if len(tiers) == 1:
                    price = tiers[0][1]
                else:
                    day = utc_day(ts)
                    if day is None:
                        day, self.today_dependent = today(), True
                    price = in_force(tiers, day)
                above = price.above_tokens is not None and inp + cr + cw > price.above_tokens
        key = (provider, model, when, above, mask)
        row = self.sums.get(key)
        if row is None:
            self.sums[key] = [1, inp, out, cr, cw, cw1h, reasoning, compaction]
        else:
            row[0] += 1
            row[1] += inp
            row[2] += out
            row[3] += cr
            row[4] += cw
            row[5] += cw1h
            row[6] += reasoning
            row[7] += compaction

    def rows(self):
        """The sums as lists for a cache: [provider, model, when, above, mask, *SUMS]."""
        return [[*k, *v] for k, v in self.sums.items()]

    @staticmethod
    def read(rows):
        """The sums of `rows()` read back (ValueError if they make no sense)."""
        out = {}
        for r in rows:
            if type(r) is not list or len(r) != 5 + len(SUMS):
                raise ValueError("not a row of token sums")
            p, m, w, above, mask = r[:5]
            v = r[5:]
            if not ((p is None or type(p) is str) and (m is None or type(m) is str)
                    and (w is None or type(w) is str) and type(above) is bool and type(mask) is int
                    and all(type(x) is int and x >= 0 for x in v)):
                raise ValueError("not a row of token sums")
            key = (p, m, w, above, mask)
            if key in out:
                raise ValueError("a row twice")
            out[key] = v
        return out


class Tally:
    """Exact sums of turns, tokens and picodollars per (group, provider, model).

    A turn is an assistant message or a compaction entry (whose usage,
    provider and model sit at the entry's top level). Each is priced at the
    rates in force on its timestamp's UTC day; an entry without a timestamp
    that reads (a bare entry not yet stamped) at today's. Tokens are summed
    first (`Tokens`) and priced when the rows are asked for, so sums read
    from a cache price exactly as the entries would. `since`/`until`
    ('YYYY-MM-DD', local days, inclusive) keep only the turns of those days.
    """

    def __init__(self, prices, by=None, since=None, until=None):
        self.prices, self.by, self.since, self.until = prices, by, since, until
        self.parts = []   # (group, Tokens.sums) of the entries added one by one, priced when asked
        self._sums = {}   # group -> its Tokens.sums in parts
        self._merged = {}  # the rows of the sums merged, priced already
        self._rates_memo, self._days_memo = {}, {}
        self._tokens = Tokens(prices)
        self._rows = self._rollups = None

    def add(self, entry, group=None):
        """Count one priced entry (a parsed line that `scan.PricedEntries` yields)."""
        t = self._sums.get(group)
        if t is None:
            t = self._sums[group] = {}
            self.parts.append((group, t))
        self._tokens.sums = t
        self._tokens.add(entry)
        self._rows = self._rollups = None

    def merge(self, group, sums, part=False):
        """Add token sums: a Tokens.sums dict or a list of Tokens rows (e.g. one
        file's), priced at once (nothing of them is kept). part: return the
        rows they priced to, (group, provider, model) -> FIELDS, as well."""
        self._rows = self._rollups = None
        if not part:
            self._price(((group, sums),), self._merged)
            return None
        rows, merged = self._price(((group, sums),), {}), self._merged
        for k, v in rows.items():
            acc = merged.get(k)
            merged[k] = list(v) if acc is None else [a + b for a, b in zip(acc, v)]
        return rows

    @property
    def rows(self):
        """(group, provider, model) -> FIELDS, priced now."""
        if self._rows is None:
            if self.parts:   # priced into a copy: the merged rows stay as merged
                self._rows = self._price(self.parts, {k: list(v) for k, v in self._merged.items()})
            else:
                self._rows = self._merged
        return self._rows

    def _price(self, parts, rows):
        """Price parts ((group, sums), ...) into rows; returns rows."""
        rates, days = self._rates_memo, self._days_memo
        by_day, ranged = self.by == "day", self.since is not None or self.until is not None
        since, until = self.since or "", self.until or "\uffff"
        width = len(FIELDS)
        for group, sums in parts:
            items = sums.items() if type(sums) is dict else ((tuple(r[:5]), r[5:]) for r in sums)
            for key, v in items:
                if by_day or ranged:
                    when = key[2]
                    day = days.get(when)
                    if day is None:
                        day = days[when] = days_of(when)[1]
                    if ranged and (day == "unknown" or not since <= day <= until):
                        continue
                    if by_day:
                        group = day
                r = rates.get(key, self)
                if r is self:   # the rates of a period, tier and categories: the same over many keys
                    w = key[2]
                    pk = (key[0], key[1], w if w is None or w[0] == "=" else w[:10], key[3], key[4])
                    r = rates.get(pk, self)
                    if r is self:
                        r = rates[pk] = self._rates(*key)
                    rates[key] = r
                rk = (group, key[0], key[1])
                row = rows.get(rk)
                if row is None:
                    row = rows[rk] = [0] * width
                for i, n in zip(_COLUMN_OF_SUM, v):
                    row[i] += n
                turns, inp, out, cr, cw, cw1h = v[:6]
                if key[4] == BILLED:
                    row[10] += turns
                if r is None:
                    row[8] += turns
                else:
                    row[7] += inp * r[0] + out * r[1] + cr * r[2] + (cw - cw1h) * r[3] + cw1h * r[4]
        return rows

    def _rates(self, provider, model, when, above, mask):
        """The five rates a sum is priced at (0 where it has no tokens), or None: unpriced."""
        if mask < 0:
            return None
        periods = self.prices.periods(provider, model)
        if periods is None:
            price = UNKNOWN
        elif len(periods) == 1:
            price = periods[0][1]
        else:
            price = in_force(periods, days_of(when)[0] or today())
        out = []
        for bit, rate in enumerate(price.above if above else price.base):
            if mask >> bit & 1:
                if rate is None:
                    return None
                out.append(rate)
            else:
                out.append(0)
        return out

    def rollup(self, part):
        """Rows summed by 'model' ((provider, model)), 'group', or 'total' (one row); computed once."""
        if self._rollups is None:
            from operator import add

            model, group = {}, {}
            for (g, provider, m), row in self.rows.items():
                acc = model.get((provider, m))
                model[(provider, m)] = row if acc is None else list(map(add, acc, row))
                acc = group.get(g)
                group[g] = row if acc is None else list(map(add, acc, row))
            total = [0] * len(FIELDS)
            for row in model.values():
                total = list(map(add, total, row))
            self._rollups = {"model": model, "group": group, "total": total}
        return self._rollups[part]   # to read, not to change


def as_dict(row):
    """A summed row as the JSON report's keys: picoUsd is None when any turn is unpriced."""
    d = dict(zip(FIELDS, row))
    d["picoUsd"] = None if d["unpricedTurns"] else d["knownPicoUsd"]
    return d


def local_day(ts):
    """The local calendar day of a UTC ISO timestamp, or 'unknown'."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d")
    except (TypeError, ValueError, OverflowError, OSError):
        return "unknown"
