"""Prices as integer picodollars per token, and what a turn costs at them.

Units: a price is an int of *picodollars per token* (10^-12 USD), that is
round(USD per million tokens x 10^6): $3/Mtok -> 3_000_000, $0.005/Mtok ->
5_000. Every price with up to six decimals is exact, and sums of Python ints
never drift or overflow. Dollars appear only when a report is printed
(`format_usd`, 1 USD = 10^12 picodollars).

A price that is absent is *unknown* (None), which is not the same as a known
zero. A turn whose usage has tokens > 0 in a category with an unknown price,
or which has no usage at all, costs *unknown*; a sum that includes one is
unknown too, and the known part is kept beside the count of unpriced turns.
"""

from pantolib.entries import usage_of

PICO_PER_USD = 10**12
BASE = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
ABOVE = tuple(k + "_above" for k in BASE)
THRESHOLD = "above_tokens"
CONTEXT = "context"
MAX_USD_PER_MTOK = 10**9        # $1,000 a token: anything larger is a typo


class Price:
    """The rates of one (provider, model) in one period: picodollars per token, None = unknown.

    `context` (the context window in tokens) rides along: it can change on a
    date like a rate.
    """

    __slots__ = ("base", "above", "above_tokens", "context")

    def __init__(self, above_tokens=None, context=None, **rates):
        unknown = set(rates) - set(BASE + ABOVE)
        if unknown:
            raise TypeError(f"unknown rates: {sorted(unknown)}")
        self.base = tuple(rates.get(k) for k in BASE)
        self.above = tuple(rates.get(k) for k in ABOVE)
        self.above_tokens, self.context = above_tokens, context

    @classmethod
    def of(cls, base, above, above_tokens, context):
        """The Price whose slots are these (as a memo keeps them)."""
        if len(base) != len(BASE) or len(above) != len(ABOVE):
            raise ValueError("not a price's rates")
        price = cls.__new__(cls)
        price.base, price.above, price.above_tokens, price.context = tuple(base), tuple(above), above_tokens, context
        return price

    def __getattr__(self, key):  # price.input, price.cache_write_above, ...
        if key in BASE:
            return self.base[BASE.index(key)]
        if key in ABOVE:
            return self.above[ABOVE.index(key)]
        raise AttributeError(key)

    def __eq__(self, other):
        return isinstance(other, Price) and (self.base, self.above, self.above_tokens, self.context) == (
            other.base, other.above, other.above_tokens, other.context)

    def __repr__(self):
        known = {k: getattr(self, k) for k in BASE + ABOVE if getattr(self, k) is not None}
        for k in (THRESHOLD, CONTEXT):
            if getattr(self, k) is not None:
                known[k] = getattr(self, k)
        return f"Price({', '.join(f'{k}={v}' for k, v in known.items())})"


UNKNOWN = Price()


def pico_per_token(usd_per_mtok, key="price"):
    """USD per million tokens (int, float or Decimal) -> picodollars per token.

    Rounds half up. Non-finite or <= 0 -> 0 (a known zero). Raises ValueError
    for something that is not a number, or an absurdly large one.
    """
    from decimal import ROUND_HALF_UP, Decimal

    v = usd_per_mtok
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        raise ValueError(f"'{key}' is not a number ({toml_type(v)})")
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return 0
        v = Decimal(repr(v))  # the shortest repr: 0.1 means 0.1, not its binary neighbour
    if isinstance(v, Decimal) and not v.is_finite():
        return 0
    if v <= 0:
        return 0
    if v > MAX_USD_PER_MTOK:
        raise ValueError(f"'{key}' is too large (at most {MAX_USD_PER_MTOK:,} USD per million tokens)")
    if isinstance(v, int):
        return v * 10**6
    return int(v.scaleb(6).to_integral_value(ROUND_HALF_UP))


def turn_cost(usage, price):
    """Picodollars for one assistant turn, or None when it cannot be known.

    `usage` is `entries.usage_of(message)` (None = not reported). Reasoning is
    part of output and never added. The cacheWrite1h part of cacheWrite is
    priced at cache_write_1h, the rest at cache_write. When the prompt tokens
    (input + cacheRead + cacheWrite) exceed above_tokens, every category of
    the request is priced at its `_above` rate.
    """
    if usage is None:
        return None
    if price is None:  # a model missing from the table: every rate unknown
        price = UNKNOWN
    inp, out, cr, cw = usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]
    cw1h = min(usage.get("cacheWrite1h", 0), cw)
    rates = price.base
    if price.above_tokens is not None and inp + cr + cw > price.above_tokens:
        rates = price.above
    total = 0
    for tokens, rate in zip((inp, out, cr, cw - cw1h, cw1h), rates):
        if tokens:
            if rate is None:
                return None
            total += tokens * rate
    return total


def format_usd(pico, places=4):
    """Dollars for people: `$0.0938`; tiny non-zero amounts keep their digits."""
    sign = "-" if pico < 0 else ""
    pico = abs(pico)
    unit = 10 ** (12 - places)
    q = (pico + unit // 2) // unit
    if q == 0 and pico:
        whole, frac = divmod(pico, PICO_PER_USD)
        return f"{sign}${whole}.{frac:012d}".rstrip("0")
    whole, frac = divmod(q, 10**places)
    return f"{sign}${whole:,}.{frac:0{places}d}"


def prompt_tokens(usage):
    """All the prompt tokens of a request: input + cacheRead + cacheWrite.

    `usage` is an entry's raw usage object (or None); a missing, non-integer
    or negative field counts 0 (SPEC §3), and so does a usage that is not an
    object.
    """
    u = usage_of({"usage": usage})
    return 0 if u is None else u["input"] + u["cacheRead"] + u["cacheWrite"]


def context_window(table, provider, model, day=None):
    """The context window of (provider, model) in tokens, or None when the table does not say.

    `table` is what `load()` returns (None: no table). The window in force on
    `day` ('YYYY-MM-DD', default today, UTC) counts, as a dated change may
    widen it.
    """
    if table is None:
        return None
    price = table.get(provider, model, day)
    return None if price is None else price.context


_DAYS = {}      # 'YYYY-MM-DD' -> whether it is a date


_CANONICAL = []    # the compiled pattern, on first use


def canonical_stamp(ts):
    """Is ts a timestamp as panto writes it (entries.iso_ms: UTC, milliseconds, Z)?
    Its day still has to be a date (2026-02-31 is not)."""
    if not _CANONICAL:
        import re

        _CANONICAL.append(re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z").fullmatch)
    return _CANONICAL[0](ts) is not None


def _is_date(day):
    from datetime import date

    try:
        date.fromisoformat(day)
        return True
    except ValueError:
        return False


def utc_day(timestamp):
    """'YYYY-MM-DD': the UTC day of an entry's ISO timestamp; None when it has none that reads."""
    if type(timestamp) is not str:
        return None
    if len(timestamp) == 24 and canonical_stamp(timestamp):     # what panto writes: UTC already
        day = timestamp[:10]
        real = _DAYS.get(day)
        if real is None:
            real = _DAYS[day] = _is_date(day)
        return day if real else None
    from datetime import datetime, timezone

    try:
        t = datetime.fromisoformat(timestamp)
        if t.tzinfo is not None:  # a local time with its offset; without one, UTC is assumed
            t = t.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None
    return t.date().isoformat()


def today():
    import time

    return time.strftime("%Y-%m-%d", time.gmtime())


def in_force(periods, day):
    """The Price of the last period that began on or before day (periods in date order)."""
    for since, price in reversed(periods):
        if since <= day:
            return price
    return periods[0][1]


def toml_type(v):
    """How TOML names the type of a value, for messages: 'a string', 'a date', …"""
    from datetime import date, datetime
    from decimal import Decimal

    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float, Decimal)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, datetime):
        return "a date-time"
    if isinstance(v, date):
        return "a date"
    return "a time"
