"""models.toml: the price table, read exactly, with a locator for its errors.

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
import os

from pantolib.errors import PantoError
from pantolib.prices import ABOVE, BASE, CONTEXT, THRESHOLD, Price, in_force, pico_per_token, toml_type, today

CHANGES = "changes"
SINCE = "since"
KEYS = BASE + ABOVE + (THRESHOLD, CONTEXT)
INFO = ("checked", "source")    # where and when the figures were read: kept for people, not used
MAX_FILE = 16 << 20
MAX_DEPTH = 16                  # dotted parts in one model id


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


def load(path=None, env=None, cache=False):
    """Read models.toml (default: the config directory's). A missing file is an empty table.

    cache: the table parsed from these very bytes is recalled from a memo
    (MEMO, keyed by the file's name and its whole text: never another
    file's or an older text's), and remembered there when parsed here. A
    fresh process spends about 20 ms importing tomllib and parsing; a recall
    takes about one."""
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
    return _remembered(data, path, env) if cache else parse(data, path)


MEMO = "prices.memo"


def _remembered(data, path, env):
    """parse(data, path), through MEMO (persist.py)."""
    import marshal

    from pantolib import persist

    key = persist.key(MEMO, path, data)
    got = persist.recall(MEMO, key, env=env)
    if got is not None:
        try:
            table = {(provider, model): tuple((since, Price.of(*rates)) for since, *rates in periods)
                     for provider, model, periods in marshal.loads(got[0])}
            return Prices(table, path=path, notes=got[1])
        except (ValueError, EOFError, TypeError):
            pass
    prices = parse(data, path)
    plain = [(provider, model, [(since, p.base, p.above, p.above_tokens, p.context) for since, p in periods])
             for (provider, model), periods in prices.table.items()]
    persist.remember(MEMO, key, 0, marshal.dumps(plain, 0), prices.notes, 0, env=env)
    return prices


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
                                         f"not {toml_type(since)} ({since!s:.40})"))
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
                    raise ValueError(f"'{key}' is not a number ({toml_type(value)})")
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
    message = f"'{key}' must be {want}, not {toml_type(value)}"
    if raise_:
        raise raise_(message)
    raise PantoError(f"{name}: {label} {message}")


def _tokens(value, key, least):
    from decimal import Decimal

    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        what = "a positive" if least else "a"
        raise ValueError(f"'{key}' must be {what} whole number of tokens ({toml_type(value)} {value!s:.40})")
    return value


def _date(value):
    """A TOML local date as 'YYYY-MM-DD'; None for anything else (a date-time, a string, ...)."""
    from datetime import date, datetime

    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    return None


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
            self._lines, self._in_value = lines, _in_value(lines)
            for i, line in enumerate(lines):
                s = line.lstrip()
                if not s.startswith("[") or self._in_value[i]:
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
            if self._in_value[i]:
                continue
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


def _in_value(lines):
    """For each line of a TOML text (one tomllib read), whether it starts
    inside a value that spans lines: a multi-line string or an array. Such
    a line is no header and no key, whatever it spells."""
    out, quote, depth = [], None, 0   # the open multi-line string's delimiter; open arrays
    for line in lines:
        out.append(quote is not None or depth > 0)
        if quote is None and depth == 0 and line.lstrip().startswith("["):
            continue                  # a header: its brackets are its own
        i, n = 0, len(line)
        while i < n:
            if quote is not None:     # to the end of the multi-line string, if on this line
                j = _closing(line, i, quote)
                if j < 0:
                    break
                i, quote = j, None
                continue
            c = line[i]
            if c == "#":
                break
            if line.startswith('"""', i) or line.startswith("'''", i):
                quote, i = line[i:i + 3], i + 3
            elif c == '"':
                i = _closing(line, i + 1, '"')
                i = n if i < 0 else i
            elif c == "'":
                j = line.find("'", i + 1)
                i = n if j < 0 else j + 1
            else:
                depth += (c == "[") - (c == "]" and depth > 0)
                i += 1
    return out


def _closing(line, i, quote):
    """Where a string closed by `quote` that goes on at line[i] ends (after
    the quote; a multi-line one may end in up to two more quote marks); -1
    when it goes on past the line. A backslash escapes in basic strings."""
    while i < len(line):
        if quote != "'''" and line[i] == "\\":
            i += 2
        elif line.startswith(quote, i):
            i += len(quote)
            if len(quote) == 3:
                for _ in range(2):
                    i += line.startswith(quote[0], i)
            return i
        else:
            i += 1
    return -1


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
