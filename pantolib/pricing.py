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

models.toml holds one table per (provider, model):

    [anthropic."claude-sonnet-4-20250514"]
    input = 3.0          # USD per million tokens
    output = 15.0
    cache_read = 0.3
    cache_write = 3.75   # 5-minute cache writes
    cache_write_1h = 6.0 # the cacheWrite1h part of cacheWrite
    above_tokens = 200000
    input_above = 6.0    # the whole request, when input+cacheRead+cacheWrite > above_tokens
    output_above = 22.5

A bare dotted header such as `[openai.gpt-4.1]` is, in TOML, the nested
table openai -> "gpt-4" -> "1"; nested tables are read back as the model id
their keys spell joined with ".", so it means the same as `[openai."gpt-4.1"]`.
"""
import os

from pantolib.entries import usage_of
from pantolib.errors import PantoError

PICO_PER_USD = 10**12
BASE = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
ABOVE = tuple(k + "_above" for k in BASE)
THRESHOLD = "above_tokens"
KEYS = BASE + ABOVE + (THRESHOLD,)
MAX_USD_PER_MTOK = 10**9        # $1,000 a token: anything larger is a typo
MAX_FILE = 16 << 20
MAX_DEPTH = 16                  # dotted parts in one model id
MARK = b'"assistant"'           # in every assistant entry (see `scan`)
CHUNK = 1 << 20
FIELDS = ("turns", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h",
          "reasoning", "knownPicoUsd", "unpricedTurns")


class Price:
    """The rates of one (provider, model): picodollars per token, None = unknown."""

    __slots__ = ("base", "above", "above_tokens")

    def __init__(self, above_tokens=None, **rates):
        unknown = set(rates) - set(BASE + ABOVE)
        if unknown:
            raise TypeError(f"unknown rates: {sorted(unknown)}")
        self.base = tuple(rates.get(k) for k in BASE)
        self.above = tuple(rates.get(k) for k in ABOVE)
        self.above_tokens = above_tokens

    def __getattr__(self, key):  # price.input, price.cache_write_above, ...
        if key in BASE:
            return self.base[BASE.index(key)]
        if key in ABOVE:
            return self.above[ABOVE.index(key)]
        raise AttributeError(key)

    def __eq__(self, other):
        return isinstance(other, Price) and (self.base, self.above, self.above_tokens) == (
            other.base, other.above, other.above_tokens)

    def __repr__(self):
        known = {k: getattr(self, k) for k in BASE + ABOVE if getattr(self, k) is not None}
        if self.above_tokens is not None:
            known[THRESHOLD] = self.above_tokens
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


# --- models.toml -----------------------------------------------------------


class Prices:
    """The price table: (provider, model) -> Price. A missing entry is unknown."""

    def __init__(self, table=None, path=None, missing=False, notes=()):
        self.table = dict(table or {})
        self.path, self.missing, self.notes = path, missing, list(notes)

    def get(self, provider, model):
        return self.table.get((provider, model))

    def __len__(self):
        return len(self.table)


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
    """Parse models.toml bytes or text; errors read `NAME:LINE:COL: message`."""
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
    table, notes = {}, []
    for provider, models in doc.items():
        if not isinstance(models, dict):
            raise PantoError(f"{name}: '{provider}' is not a table of models "
                             f"(write prices under [{_label(provider)}.MODEL])")
        for model, fields in _models(provider, models, name):
            key = (provider, model)
            if key in table:
                raise PantoError(f"{name}: [{_label(provider, model)}] is defined twice")
            table[key] = _price(fields, _label(provider, model), name, notes)
    return Prices(table, path=name, notes=notes)


def _models(provider, models, name):
    """(model id, scalar fields) of a provider's table, nested tables joined with '.'."""
    stack = [((), models)]
    while stack:
        keys, t = stack.pop()
        scalars, subs = {}, []
        for k, v in t.items():
            if isinstance(v, dict) and keys and k in KEYS:
                raise PantoError(f"{name}: [{_label(provider, *keys)}] '{k}' is not a number (a table)")
            if isinstance(v, dict):
                subs.append((k, v))
            elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
                raise PantoError(f"{name}: [[{_label(provider, *keys, k)}]] is an array of tables, "
                                 f"not a model table")
            else:
                scalars[k] = v
        if not keys and scalars:
            k = next(iter(scalars))
            raise PantoError(f"{name}: [{_label(provider)}] '{k}': prices go in a model table, "
                             f"e.g. [{_label(provider, 'MODEL-ID')}]")
        if keys and (scalars or not subs):
            yield ".".join(keys), scalars
        if len(keys) >= MAX_DEPTH and subs:
            raise PantoError(f"{name}: [{_label(provider, *keys)}...] is nested too deeply")
        stack.extend((keys + (k,), v) for k, v in reversed(subs))


def _price(fields, label, name, notes):
    rates, above_tokens = {}, None
    for key, value in fields.items():
        if key == THRESHOLD:
            above_tokens = _threshold(value, label, name)
        elif key in BASE or key in ABOVE:
            try:
                rates[key] = pico_per_token(value, key)
            except ValueError as e:
                raise PantoError(f"{name}: [{label}] {e}") from None
        else:
            notes.append(f"{name}: [{label}] unknown key '{key}' ignored "
                         f"(known: {', '.join(KEYS)})")
    if above_tokens is None and any(k in rates for k in ABOVE):
        notes.append(f"{name}: [{label}] '_above' rates are unused without '{THRESHOLD}'")
    return Price(above_tokens=above_tokens, **rates)


def _threshold(value, label, name):
    from decimal import Decimal

    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PantoError(f"{name}: [{label}] '{THRESHOLD}' must be a whole number of tokens "
                         f"({_toml_type(value)} {value!s:.40})")
    return value


def _toml_type(v):
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
    return "a date or time"


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


class Tally:
    """Exact sums of turns, tokens and picodollars per (group, provider, model)."""

    def __init__(self, prices, by=None):
        self.prices, self.by = prices, by
        self.rows = {}
        self._price = {}

    def add(self, entry, group=None):
        """Count one assistant entry (a parsed line)."""
        msg = entry["message"]
        provider, model = msg.get("provider"), msg.get("model")
        if provider is None:
            provider = entry.get("provider")
        if model is None:
            model = entry.get("model")
        provider = provider if isinstance(provider, str) else None
        model = model if isinstance(model, str) else None
        if self.by == "day":
            group = _day(entry.get("timestamp"))
        key = (group, provider, model)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0] * len(FIELDS)
        pm = (provider, model)
        if pm not in self._price:
            self._price[pm] = self.prices.get(provider, model)
        usage = usage_of(msg)
        cost = turn_cost(usage, self._price[pm])
        row[0] += 1
        if usage is not None:
            row[1] += usage["input"]
            row[2] += usage["output"]
            row[3] += usage["cacheRead"]
            row[4] += usage["cacheWrite"]
            row[5] += min(usage["cacheWrite1h"], usage["cacheWrite"])
            row[6] += usage["reasoning"]
        if cost is None:
            row[8] += 1
        else:
            row[7] += cost

    def rollup(self, part):
        """Rows summed by 'model' ((provider, model)), 'group', or 'total' (one row)."""
        out = {}
        for (group, provider, model), row in self.rows.items():
            key = (provider, model) if part == "model" else group if part == "group" else None
            acc = out.get(key)
            if acc is None:
                acc = out[key] = [0] * len(FIELDS)
            for i, v in enumerate(row):
                acc[i] += v
        if part == "total":
            return out.get(None, [0] * len(FIELDS))
        return out


def as_dict(row):
    """A summed row as the JSON report's keys: picoUsd is None when any turn is unpriced."""
    d = dict(zip(FIELDS, row))
    d["picoUsd"] = None if d["unpricedTurns"] else d["knownPicoUsd"]
    return d


def _day(ts):
    """The local calendar day of a UTC ISO timestamp, or 'unknown'."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d")
    except (TypeError, ValueError, OverflowError, OSError):
        return "unknown"


class Scan:
    """The assistant entries of one stream, read without parsing the other lines.

    A line is parsed only when it contains the bytes `"assistant"`: the role
    value of every assistant entry, whatever the key spacing, as long as it
    is not written with \\u escapes. Inside JSON strings quotes are escaped,
    so message text rarely matches; a match that is not an assistant message
    is parsed and dropped. Other lines are not validated (panto-log replay
    does that). The first non-blank line must be a session header or an
    entry (a stream without header); its header, if any, is `.header`.

    A line that has the mark but is not valid JSON is a torn write: it and
    everything after it are ignored, as recovery would cut them. In a file,
    a last line without its line feed is torn and ignored; on a stream
    (`stream=True`) it counts if it parses. Notes on what was ignored go to
    `.notes`. The file is only read; memory stays within a chunk and the
    longest line.
    """

    def __init__(self, f, name, stream=False, chunk=CHUNK):
        self.f, self.name, self.stream, self.chunk = f, name, stream, chunk
        self.header, self.notes = None, []
        self._first = True

    def __iter__(self):
        read, size = self.f.read, self.chunk
        try:  # line numbers are only needed for notes: count them then, if the file can seek
            self._count = not self.f.seekable()
        except (AttributeError, ValueError, OSError):
            self._count = True
        pending, self._before, self._offset, self._stop = [], 0, 0, False
        while True:
            chunk = read(size)
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
                    self.notes.append(f"{self.name}:{self._lineno(buf, 0)}: the last line has no "
                                      f"line feed (a torn write); ignored")
                    return
                buf += b"\n"  # a stream's unterminated last line counts if it parses
            end = buf.rfind(b"\n") + 1
            yield from self._scan(buf, end)
            if self._stop or not chunk:
                return
            if self._count:
                self._before += buf.count(b"\n", 0, end)
            self._offset += end
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

        mark, loads = MARK, orjson.loads
        pos = 0
        if self._first:
            pos = self._first_line(buf, end)
            if pos is None:
                return
            if pos < 0:  # the first line was an assistant entry
                pos = -pos
                yield self._first_entry
        while True:
            i = buf.find(mark, pos, end)
            if i < 0:
                return
            s = buf.rfind(b"\n", 0, i) + 1
            e = buf.find(b"\n", i) + 1
            try:
                obj = loads(buf[s:e])
            except orjson.JSONDecodeError:
                self._torn(self._lineno(buf, s))
                self._stop = True
                return
            if _is_assistant(obj):
                yield obj
            pos = e

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
        if _is_assistant(obj):
            self._first_entry = obj
            return -e
        return e

    def _torn(self, lineno):
        self.notes.append(f"{self.name}:{lineno}: not valid JSON (a torn write); "
                          f"it and the lines after it are ignored")


def _is_assistant(obj):
    if type(obj) is not dict or obj.get("type") != "message":
        return False
    msg = obj.get("message")
    return type(msg) is dict and msg.get("role") == "assistant"
