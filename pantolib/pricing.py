"""Prices from models.toml as integer picodollars per token; what turns cost.

Units: a price is an int of *picodollars per token* (10^-12 USD), that is
round(USD per million tokens x 10^6): $3/Mtok -> 3_000_000, $0.005/Mtok ->
5_000. Every price with up to six decimals is exact, and sums of Python ints
never drift or overflow. Dollars appear only when a report is printed
(`format_usd`, 1 USD = 10^12 picodollars).

A price that is absent is *unknown* (None), which is not the same as a known
zero. A turn whose usage has tokens > 0 in a category with an unknown price,
or which has no usage at all, costs *unknown*; a sum that includes one is
unknown too, and the known part is kept beside the count of unpriced turns.

models.toml holds one table per (provider, model), and optionally dated
changes to it:

    [anthropic."claude-sonnet-5-5"]
    input = 2.0          # USD per million tokens
    output = 10.0
    cache_read = 0.2
    cache_write = 2.5    # 5-minute cache writes
    cache_write_1h = 4.0 # the cacheWrite1h part of cacheWrite
    above_tokens = 200000
    input_above = 6.0    # the whole request, when input+cacheRead+cacheWrite > above_tokens
    context = 1000000    # the context window, in tokens

    [[anthropic."claude-sonnet-5-5".changes]]
    since = 2026-10-07   # from this day (UTC) on
    cache_read = 0.1

A change overrides the fields it names from its day on; changes apply
cumulatively in date order, whatever their order in the file. A model's
rates are kept as *periods*: (first day, Price) pairs, the first starting
on day "" (always). A turn is priced at the period of its timestamp's UTC
day.

A bare dotted header such as `[openai.gpt-4.1]` is, in TOML, the nested
table openai -> "gpt-4" -> "1"; nested tables are read back as the model id
their keys spell joined with ".", so it means the same as `[openai."gpt-4.1"]`.
"""
import io
import os

from pantolib.entries import usage_counts, usage_of
from pantolib.errors import PantoError

PICO_PER_USD = 10**12
BASE = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
ABOVE = tuple(k + "_above" for k in BASE)
THRESHOLD = "above_tokens"
CONTEXT = "context"
CHANGES = "changes"
SINCE = "since"
KEYS = BASE + ABOVE + (THRESHOLD, CONTEXT)
INFO = ("checked", "source")    # where and when the figures were read: kept for people, not used
MAX_USD_PER_MTOK = 10**9        # $1,000 a token: anything larger is a typo
MAX_FILE = 16 << 20
MAX_DEPTH = 16                  # dotted parts in one model id
CHUNK = 4 << 20
FAST_FROM = 64 << 10            # from this much text on, the scanner searches with memmem (ctypes)
FIELDS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h",
          "reasoning", "knownPicoUsd", "unpricedTurns", "compactions")


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
        raise ValueError(f"'{key}' is not a number ({_toml_type(v)})")
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


def utc_day(timestamp):
    """'YYYY-MM-DD': the UTC day of an entry's ISO timestamp; None when it has none that reads."""
    if type(timestamp) is not str:
        return None
    if len(timestamp) >= 11 and timestamp[10] == "T" and timestamp[-1] == "Z" and \
            timestamp[4] == "-" and timestamp[7] == "-" and timestamp[:4].isdigit():
        return timestamp[:10]  # what panto writes: UTC already
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


# --- models.toml -----------------------------------------------------------


class Prices:
    """The price table: (provider, model) -> periods. A missing entry is unknown.

    `periods(provider, model)` gives the model's ((since, Price), ...) in date
    order, the first since "" (None for a model the table does not name);
    `get(provider, model, day)` the Price in force on a UTC day
    ('YYYY-MM-DD', default today).
    """

    def __init__(self, table=None, path=None, missing=False, notes=()):
        self.table = {k: (v if isinstance(v, tuple) else (("", v),)) for k, v in (table or {}).items()}
        self.path, self.missing, self.notes = path, missing, list(notes)

    def periods(self, provider, model):
        return self.table.get((provider, model))

    def get(self, provider, model, day=None):
        periods = self.table.get((provider, model))
        if periods is None:
            return None
        if len(periods) == 1:
            return periods[0][1]
        return in_force(periods, today() if day is None else str(day))

    def __len__(self):
        return len(self.table)

    def tiers(self):
        """Every long-context threshold of the table: [[provider, model, since, above_tokens], ...]."""
        return sorted([p, m, since, price.above_tokens] for (p, m), periods in self.table.items()
                      for since, price in periods if price.above_tokens is not None)


def default_path(env=None):
    from pantolib import paths

    return os.path.join(paths.config_dir(env), "models.toml")


def load(path=None, env=None):
    """Read models.toml (default: the config directory's). A missing file is an empty table."""
    path = default_path(env) if path is None else path
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except FileNotFoundError:
        return Prices(path=path, missing=True)
    except IsADirectoryError:
        raise PantoError(f"'{path}' is a directory, not a models.toml") from None
    if len(data) > MAX_FILE:
        raise PantoError(f"'{path}' is too large for a price table (over {MAX_FILE >> 20} MB)")
    return parse(data, path)


def parse(data, name="models.toml"):
    """Parse models.toml bytes or text; errors read `NAME:LINE:COL: message` where the place is known."""
    import tomllib
    from decimal import Decimal

    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            col = e.start - data.rfind(b"\n", 0, e.start)
            raise PantoError(f"{name}:{line}:{col}: not valid UTF-8") from None
    else:
        text = data
    text = text.removeprefix("\ufeff")
    try:
        doc = tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as e:
        raise PantoError(_toml_error(e, text, name)) from None
    except RecursionError:
        raise PantoError(f"{name}: nested too deeply") from None
    raw = {}
    for provider, models in doc.items():
        if not isinstance(models, dict):
            raise PantoError(f"{name}: '{provider}' is not a table of models "
                             f"(write prices under [{_label(provider)}.MODEL])")
        for model, fields, changes in _models(provider, models, name):
            key = (provider, model)
            if key in raw:  # spelt twice (quoted and bare): one may hold the fields, the other the changes
                fields0, changes0 = raw[key]
                if (fields0 and fields) or (changes0 is not None and changes is not None):
                    raise PantoError(f"{name}: [{_label(provider, model)}] is defined twice")
                fields, changes = fields0 or fields, changes if changes0 is None else changes0
            raw[key] = (fields, changes)
    notes, where = [], _Where(text, name)
    table = {key: _periods(*key, fields, changes, where, notes) for key, (fields, changes) in raw.items()}
    return Prices(table, path=name, notes=notes)


def _models(provider, models, name):
    """(model id, scalar fields, change tables) of a provider's table, nested tables joined with '.'."""
    stack = [((), models)]
    while stack:
        keys, t = stack.pop()
        scalars, subs, changes = {}, [], None
        for k, v in t.items():
            if isinstance(v, dict) and keys and k in KEYS:
                raise PantoError(f"{name}: [{_label(provider, *keys)}] '{k}' is not a number (a table)")
            if isinstance(v, dict):
                subs.append((k, v))
            elif keys and k == CHANGES:
                changes = v  # checked with the model's fields
            elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
                raise PantoError(f"{name}: [[{_label(provider, *keys, k)}]] is an array of tables, "
                                 f"not a model table")
            else:
                scalars[k] = v
        if not keys:
            _info(scalars.pop("source", None), "source", f"[{_label(provider)}]", name)
        if not keys and scalars:
            k = next(iter(scalars))
            raise PantoError(f"{name}: [{_label(provider)}] '{k}': prices go in a model table, "
                             f"e.g. [{_label(provider, 'MODEL-ID')}]")
        if keys and (scalars or changes is not None or not subs):
            yield ".".join(keys), scalars, changes
        if len(keys) >= MAX_DEPTH and subs:
            raise PantoError(f"{name}: [{_label(provider, *keys)}...] is nested too deeply")
        stack.extend((keys + (k,), v) for k, v in reversed(subs))


def _periods(provider, model, fields, changes, where, notes):
    """The model's periods: its own fields from day "", then each change, cumulatively by date."""
    label = _label(provider, model)
    base = _fields(fields, f"[{label}]", lambda: where.model(provider, model), where, notes)
    if changes is None:
        changes = []
    if not isinstance(changes, list) or any(not isinstance(c, dict) for c in changes):
        raise PantoError(where.error(where.key(lambda: where.model(provider, model), CHANGES),
                                     f"[{label}] '{CHANGES}' must be an array of tables "
                                     f"([[{label}.{CHANGES}]] with a '{SINCE}' date)"))
    dated = {}
    for i, change in enumerate(changes):
        section = (lambda i=i: where.change(provider, model, i))
        what = f"[[{label}.{CHANGES}]]"
        since = change.get(SINCE)
        if since is None:
            raise PantoError(where.error(section(), f"{what} has no '{SINCE}' date "
                                                  f"(write e.g. {SINCE} = 2026-10-07)"))
        day = _date(since)
        if day is None:
            raise PantoError(where.error(where.key(section, SINCE),
                                         f"{what} '{SINCE}' must be a TOML date such as 2026-10-07, "
                                         f"not {_toml_type(since)} ({since!s:.40})"))
        if day in dated:
            raise PantoError(where.error(where.key(section, SINCE),
                                         f"{what} has two changes since {day}: merge them into one"))
        rest = {k: v for k, v in change.items() if k != SINCE}
        dated[day] = _fields(rest, f"{what} since {day}", section, where, notes)
    periods, current = [("", base)], dict(base)
    for day in sorted(dated):
        current.update(dated[day])
        periods.append((day, dict(current)))
    if any(THRESHOLD not in p and any(k in p for k in ABOVE) for _, p in periods):
        notes.append(f"{where.name}: [{label}] '_above' rates are unused without '{THRESHOLD}'")
    return tuple((day, Price(**p)) for day, p in periods)


def _fields(fields, label, section, where, notes):
    """Check one table's fields: {key: picodollars per token, or whole tokens}; unknown keys noted."""
    out = {}
    for key, value in fields.items():
        try:
            if key in (THRESHOLD, CONTEXT):
                out[key] = _tokens(value, key, 0 if key == THRESHOLD else 1)
            elif key in BASE or key in ABOVE:
                out[key] = pico_per_token(value, key)
            elif key == CHANGES:
                raise ValueError(f"'{CHANGES}' cannot be nested in a change")
            elif key in INFO:
                _info(value, key, label, where.name, raise_=ValueError)
            else:
                if isinstance(value, (dict, list)) and any(isinstance(x, dict) for x in (
                        value if isinstance(value, list) else [value])):
                    raise ValueError(f"'{key}' is not a number ({_toml_type(value)})")
                notes.append(f"{where.name}: {label} unknown key '{key}' ignored "
                             f"(known: {', '.join(KEYS + INFO + (CHANGES,))})")
        except ValueError as e:
            raise PantoError(where.error(where.key(section, key), f"{label} {e}")) from None
    return out


def _info(value, key, label, name, raise_=None):
    """`source` must be a string (a URL), `checked` a TOML date; None passes."""
    if value is None or (isinstance(value, str) if key == "source" else _date(value) is not None):
        return
    want = "a string (the page the prices came from)" if key == "source" else "a TOML date such as 2026-12-01"
    message = f"'{key}' must be {want}, not {_toml_type(value)}"
    if raise_:
        raise raise_(message)
    raise PantoError(f"{name}: {label} {message}")


def _tokens(value, key, least):
    from decimal import Decimal

    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        what = "a positive" if least else "a"
        raise ValueError(f"'{key}' must be {what} whole number of tokens ({_toml_type(value)} {value!s:.40})")
    return value


def _date(value):
    """A TOML local date as 'YYYY-MM-DD'; None for anything else (a date-time, a string, ...)."""
    from datetime import date, datetime

    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    return None


def _toml_type(v):
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


def _label(*keys):
    """TOML spelling of a table name: bare keys where allowed, else quoted."""
    import re

    out = []
    for k in keys:
        if re.fullmatch(r"[A-Za-z0-9_-]+", k):
            out.append(k)
        else:
            out.append('"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return ".".join(out)


class _Where:
    """Finds, on demand, where in models.toml a table or a key was written.

    tomllib gives values, not places, so on an error the text is searched for
    the table's header line ([provider.model], the i-th [[provider.model.changes]])
    and the key's line within it. A place found is LINE:COL (1-based);
    tables written inline or as dotted keys have none, and the error names
    the file and the table only.
    """

    def __init__(self, text, name):
        self.text, self.name, self._headers = text, name, None

    def _index(self):
        if self._headers is None:
            self._headers = {}
            lines = self.text.split("\n")
            self._lines = lines
            for i, line in enumerate(lines):
                s = line.lstrip()
                if not s.startswith("["):
                    continue
                array = s.startswith("[[")
                parts = _header_keys(s[2:] if array else s[1:], "]]" if array else "]")
                if parts:
                    self._headers.setdefault((array, parts[0], ".".join(parts[1:])), []).append(i)
        return self._headers

    def model(self, provider, model):
        rows = self._index().get((False, provider, model))
        return rows[0] if rows else None

    def change(self, provider, model, i):
        rows = self._index().get((True, provider, f"{model}.{CHANGES}" if model else CHANGES), [])
        return rows[i] if i < len(rows) else None

    def key(self, section, key):
        """(line, col) of key's value in the table whose header section() finds; else of that header."""
        section = section()
        if section is None:
            return None
        import re

        pattern = re.compile(r"\s*(?:%s|\"%s\"|'%s')\s*=\s*" % ((re.escape(key),) * 3))
        for i in range(section + 1, len(self._lines)):
            line = self._lines[i]
            if line.lstrip().startswith("["):
                break
            m = pattern.match(line)
            if m:
                return i, m.end()
        return section, len(self._lines[section]) - len(self._lines[section].lstrip())

    def error(self, place, message):
        if isinstance(place, int):
            place = (place, len(self._lines[place]) - len(self._lines[place].lstrip()))
        if place is None:
            return f"{self.name}: {message}"
        return f"{self.name}:{place[0] + 1}:{place[1] + 1}: {message}"


def _header_keys(s, close):
    """The keys of a table header's text after its '[' or '[[' (None if it does not read)."""
    import re

    part = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")
    keys, pos = [], 0
    while True:
        m = part.match(s, pos)
        if not m:
            return None
        bare, basic, literal = m.groups()
        if basic is not None:
            import json

            try:
                basic = json.loads(f'"{basic}"')
            except ValueError:
                pass
        keys.append(bare if bare is not None else basic if basic is not None else literal)
        pos = m.end()
        if s.startswith(close, pos):
            return keys
        if not s.startswith(".", pos):
            return None
        pos += 1


def _toml_error(e, text, name):
    import re

    msg, line, col = str(e), getattr(e, "lineno", None), getattr(e, "colno", None)
    m = re.match(r"(.*) \(at line (\d+), column (\d+)\)$", msg, re.S)
    if m:
        msg, line, col = m.group(1), int(m.group(2)), int(m.group(3))
    elif msg.endswith(" (at end of document)"):
        msg = msg.removesuffix(" (at end of document)")
        line = text.count("\n") + 1
        col = len(text) - text.rfind("\n")
    if line is None:
        return f"{name}: {msg}"
    return f"{name}:{line}:{col}: {msg[:1].lower()}{msg[1:]}"


# --- reading sessions --------------------------------------------------------


# Token sums per key, with no dollars in them (a cache of them stays right
# when models.toml changes): (provider, model, WHEN, ABOVE, MASK) -> SUMS.
#   WHEN   the two days a turn's timestamp gives: "UTC-DAY LOCAL-DAY" for
#          what panto writes (UTC, ms; the local day is that of its quarter
#          hour, as every time zone's midnight falls on one, and is cached per
#          quarter hour), "=" and the timestamp for any other string, None for
#          none. The local day is the time zone's: a cache of sums is kept per
#          time zone (`cache.zone`).
#   ABOVE  whether the request's prompt exceeded the model's above_tokens
#          (a cache of sums is keyed by `Prices.tiers()`, which decides it).
#   MASK   which of the five priced categories had tokens (bits in RATE
#          order), -1 for an entry without usage: turns alike in it are
#          priced alike, so a sum prices exactly as its turns would one by one.
SUMS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning", "compactions")
_QUARTER = {f"{m:02d}": f"{m // 15 * 15:02d}:00Z" for m in range(60)}
_CANONICAL = []


def when_key(ts, quarters):
    """WHEN of a timestamp (see above); `quarters` is a dict that remembers
    the WHEN of each quarter hour (for one time zone)."""
    if type(ts) is not str:
        return None
    if len(ts) == 24 and ts[23] == "Z":
        if not _CANONICAL:
            import re

            _CANONICAL.append(re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z").fullmatch)
        if _CANONICAL[0](ts):
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
        """Count one priced entry (a parsed line that `Scan` yields)."""
        if entry.get("type") == "compaction":
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
        n = usage_counts(src.get("usage"))
        above = False
        if n is None:
            mask, inp, out, cr, cw, cw1h, reasoning = -1, 0, 0, 0, 0, 0, 0
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
        """Count one priced entry (a parsed line that `Scan` yields)."""
        t = self._sums.get(group)
        if t is None:
            t = self._sums[group] = {}
            self.parts.append((group, t))
        self._tokens.sums = t
        self._tokens.add(entry)
        self._rows = self._rollups = None

    def merge(self, group, sums):
        """Add token sums: a Tokens.sums dict or a list of Tokens rows (e.g. one
        file's), priced at once (nothing of them is kept)."""
        self._price(((group, sums),), self._merged)
        self._rows = self._rollups = None

    @property
    def rows(self):
        """(group, provider, model) -> FIELDS, priced now."""
        if self._rows is None:
            rows = {k: list(v) for k, v in self._merged.items()}
            self._rows = self._price(self.parts, rows)
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
                turns, inp, out, cr, cw, cw1h, reasoning, compactions = v
                row[0] += turns
                row[1] += inp
                row[2] += out
                row[3] += cr
                row[4] += cw
                row[5] += cw1h
                row[6] += reasoning
                row[9] += compactions
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


_STREAM = []


def priced(obj):
    """Whether a parsed line is a turn to price: an assistant message or a compaction entry.

    The verdict on the line is the stream's (`stream.classify`): a line that
    is not a valid header, entry or bare entry raises ValueError saying why,
    whatever it holds.
    """
    if not _STREAM:
        from pantolib import stream  # orjson comes with it: imported only by what reads streams

        _STREAM.extend((stream.classify, stream.HEADER, stream.is_assistant, stream.is_compaction))
    classify, header, is_assistant, is_compaction = _STREAM
    if classify(obj) == header:
        return False
    return is_assistant(obj) or is_compaction(obj)


class Scan:
    """The priced entries of one stream, read without parsing the other lines.

    A line is parsed only when it contains the bytes `"assistant"` or
    `"compaction"` (`stream.ASSISTANT_MARK`, `stream.COMPACTION_MARK`): the
    role value of every assistant message and the type of every compaction
    entry, whatever the key spacing, as long as they are not
    written with \\u escapes. Inside JSON strings quotes are escaped, so
    message text rarely matches; a match is judged by the stream's rules
    (`priced`), and one that is not a turn is dropped. Other lines are not
    validated (panto-log replay does that). The first non-blank line must be
    a session header or an entry (a stream without header); its header, if
    any, is `.header`.

    A matching line that is not valid JSON, or not a valid entry, is not
    counted and is named in `.notes` (FILE:LINE: why); the lines after it
    still count. In a file, a last line without its line feed is a torn write
    and ignored; on a stream (`stream=True`) it counts if it parses. The file
    is only read; memory stays within a chunk and the longest line.

    `start` resumes a file read before up to that offset (the end of a
    line; f is positioned there), whose first line was checked then
    (`started`). After the scan, `covered` is the offset of the end of the
    last whole line read, `bad` the (line, why) of the lines not counted and
    `torn` the line number of a torn last line (or None).
    """

    def __init__(self, f, name, stream=False, chunk=CHUNK, fast=True, start=0, started=False):
        self.f, self.name, self.stream, self.chunk = f, name, stream, chunk
        self.header, self.bad, self.torn = None, [], None
        self._first = not started
        self._fast = fast
        self.covered = self._start = start

    @property
    def notes(self):
        """FILE:LINE: what is wrong, for each line not counted (and a torn tail)."""
        out = [f"{self.name}:{n}: {why}; not counted" for n, why in self.bad]
        if self.torn is not None:
            out.append(f"{self.name}:{self.torn}: the last line has no line feed (a torn write); ignored")
        return out

    @property
    def started(self):
        """Whether the first non-blank line has been read (and checked)."""
        return not self._first

    def __iter__(self):
        read, size = self.f.read, self.chunk
        try:  # line numbers are only needed for notes: count them then, if the file can seek
            self._count = not self.f.seekable()
        except (AttributeError, ValueError, OSError):
            self._count = True
        pending, self._before, self._offset = [], 0, self._start
        left = None
        if not self._count:   # a file: never ask for much more than is there (a big buffer costs page faults)
            try:
                left = os.fstat(self.f.fileno()).st_size - self.f.tell()
            except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
                left = None
        while True:
            if left is None:
                chunk = read(size)
            else:
                chunk = read(min(size, left + 1)) if left >= 0 else b""
                left -= len(chunk)
            if chunk:
                if chunk.rfind(b"\n") < 0:  # a line longer than a chunk: gather it
                    pending.append(chunk)
                    continue
                buf = b"".join(pending) + chunk if pending else chunk
            else:
                buf = b"".join(pending)
                if not buf.strip():
                    return
                if not self.stream:
                    self.torn = self._lineno(buf, 0)
                    return
                buf += b"\n"  # a stream's unterminated last line counts if it parses
            end = buf.rfind(b"\n") + 1
            yield from self._scan(buf, end)
            if not chunk:
                return
            if self._count:
                self._before += buf.count(b"\n", 0, end)
            self._offset += end
            self.covered = self._offset
            pending = [buf[end:]] if end < len(buf) else []

    def _lineno(self, buf, pos):
        """The line number of offset pos in buf (the current window of the stream)."""
        if self._count:
            return self._before + buf.count(b"\n", 0, pos) + 1
        here = self.f.tell()
        try:
            self.f.seek(0)
            n, left = 0, self._offset + pos
            while left > 0:
                block = self.f.read(min(left, CHUNK))
                if not block:
                    break
                n += block.count(b"\n")
                left -= len(block)
            return n + 1
        finally:
            self.f.seek(here)

    def _scan(self, buf, end):
        import orjson

        from pantolib.stream import ASSISTANT_MARK, COMPACTION_MARK

        loads, find = orjson.loads, buf.find
        mark = find
        if self._fast and end >= FAST_FROM and _memmem() is not None:
            mark = _searcher(_memmem(), buf, end)
        a_mark, c_mark = ASSISTANT_MARK, COMPACTION_MARK
        pos = 0
        if self._first:
            pos = self._first_line(buf, end)
            if pos is None:
                return
            if pos < 0:  # the first line was a priced entry
                pos = -pos
                yield self._first_entry
        a, c = mark(a_mark, pos, end), mark(c_mark, pos, end)
        while True:  # the next of either mark; each search runs once per match
            if a < 0 and c < 0:
                return
            i = c if a < 0 or 0 <= c < a else a
            s = buf.rfind(b"\n", 0, i) + 1
            e = find(b"\n", i) + 1
            try:
                obj = loads(buf[s:e])
                if priced(obj):
                    yield obj
                elif obj["type"] == "session":
                    self._bad(buf, s, "a session header after the first line")
            except orjson.JSONDecodeError:
                self._bad(buf, s, "not valid JSON")
            except ValueError as why:
                self._bad(buf, s, str(why))
            if a >= 0 and a < e:
                a = mark(a_mark, e, end)
            if c >= 0 and c < e:
                c = mark(c_mark, e, end)

    def _first_line(self, buf, end):
        """Check the first non-blank line; the offset after it (negative: yield it), or None."""
        import orjson

        from pantolib.stream import HEADER, classify

        pos = 0
        while pos < end:
            e = buf.find(b"\n", pos) + 1
            raw = buf[pos:e]
            if raw.strip():
                break
            pos = e
        else:
            return None
        self._first = False
        try:
            obj = orjson.loads(raw)
            kind = classify(obj)
        except (orjson.JSONDecodeError, ValueError) as e:
            why = "not valid JSON" if isinstance(e, orjson.JSONDecodeError) else str(e)
            from pantolib.errors import SessionError

            raise SessionError(f"not a panto session or stream ({why})", self.name,
                               self._lineno(buf, pos)) from None
        if kind == HEADER:
            self.header = obj
            return e
        if priced(obj):
            self._first_entry = obj
            return -e
        return e

    def _bad(self, buf, start, why):
        self.bad.append((self._lineno(buf, start), why))


def _memmem():
    from pantolib import scan

    return scan.memmem()


def _searcher(memmem, buf, end):
    from pantolib import scan

    return scan.searcher(memmem, buf, end)
