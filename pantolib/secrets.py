"""What a secret is and how it is hidden: the one rule every writer follows.

A secret is the value of an API key variable of at least MIN_LEN characters,
or a credential inside a base URL (its password, or a query value of that
length). Shorter values (`none`, `x`, `local`, which local servers accept)
are not secrets: hiding them would rewrite the user's text, so nothing is
ever changed for them.
"""
import os

MIN_LEN = 16
MARK = "[redacted]"
FRAGMENT = 6             # a piece of a key this long, left at a cut, is hidden too
KNOWN_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_VAR_ENDS = ("_API_KEY", "_AUTH_TOKEN", "_API_KEY\n", "_AUTH_TOKEN\n")   # (as a regex's $ would take them)
# Key prefixes a server may drop when it echoes a key back ("Incorrect API key: abc…").
_PREFIXES = ("sk-ant-api03-", "sk-ant-", "sk-proj-", "sk-svcacct-", "sk-")
# Text shaped like a key, hidden in what servers say (errors), never in the user's text.
# Every such text holds "k-": text without it is passed on without importing re.
_KEYLIKE = r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{16,}"


def is_key_var(name):
    return name in KNOWN_VARS or name.endswith(_VAR_ENDS)


def is_secret(value):
    return isinstance(value, str) and len(value) >= MIN_LEN


def env_keys(env=None):
    """The secret values of the key variables in the environment, longest first."""
    env = os.environ if env is None else env
    return ordered(v for k, v in env.items() if is_key_var(k))


def without_keys(env=None):
    """A copy of the environment with every key variable removed."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if not is_key_var(k)}


def url_keys(url):
    """Credentials inside a URL: the password of its user info, long query values."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url or "")
        found = [parts.password or "", parts.username or ""]
        found += [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
    except ValueError:
        return []
    return ordered(found)


def shown_url(url):
    """A URL as it may be shown: without user info, query or fragment."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        p = urlsplit(url or "")
        host = p.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if p.port is not None:
            host += f":{p.port}"
        return urlunsplit((p.scheme, host, p.path, "", ""))
    except ValueError:
        return "(a URL that cannot be parsed)"


def ordered(values):
    """The secrets among values, each with the forms a server may echo, longest first."""
    out = set()
    for v in values:
        if not is_secret(v):
            continue
        out.add(v)
        for p in _PREFIXES:
            if v.startswith(p) and is_secret(v[len(p):]):
                out.add(v[len(p):])
                break
    return sorted(out, key=len, reverse=True)


def redact(text, keys, keylike=False):
    """Text with every key replaced by MARK. keylike=True also hides what is
    shaped like a key (for a server's own words, never for the user's text)."""
    for k in keys:
        if k in text:
            text = text.replace(k, MARK)
    if keylike and "k-" in text:
        import re

        text = re.sub(_KEYLIKE, MARK, text)
    return text


def redact_bytes(data, keys):
    for k in keys:
        kb = k.encode()
        if kb in data:
            data = data.replace(kb, MARK.encode())
    return data


def redact_edges(before, after, keys):
    """Hide a piece of a key that a cut left at the end of `before` or at the
    start of `after` (at least FRAGMENT characters of it)."""
    for k in keys:
        for n in range(len(k) - 1, FRAGMENT - 1, -1):
            if before.endswith(k[:n]):
                before = before[:-n] + MARK
                break
        for n in range(len(k) - 1, FRAGMENT - 1, -1):
            if after.startswith(k[-n:]):
                after = MARK + after[n:]
                break
    return before, after


class Holdback:
    """Redaction of text that arrives in pieces: a tail that could be the start
    of a key is held back until the next piece shows whether it is one."""

    def __init__(self, keys):
        self.keys = list(keys)
        self.pending = ""

    def feed(self, piece):
        """What of the text so far can be released now."""
        data = redact(self.pending + piece, self.keys)
        hold = 0
        for k in self.keys:
            for n in range(min(len(k) - 1, len(data)), hold, -1):
                if data.endswith(k[:n]):
                    hold = n
                    break
        self.pending = data[len(data) - hold:] if hold else ""
        return data[:len(data) - hold]

    def flush(self):
        data, self.pending = self.pending, ""
        return data
