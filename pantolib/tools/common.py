"""What every built-in tool shares: its error, paths, output caps, key redaction."""
import os
import re

CAP = 50 * 1024          # bytes of output a tool result may carry
MIN_SECRET = 8           # shorter values are not treated as keys (they would mangle output)
_KEY_NAME = re.compile(r"(_API_KEY|_AUTH_TOKEN)$")
KNOWN_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


class ToolError(Exception):
    """A call that failed in a way the model can act on: becomes an isError result."""


def is_key_name(name):
    return name in KNOWN_KEYS or bool(_KEY_NAME.search(name))


def secrets(env=None):
    """Values of the API keys present in the environment, longest first."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if is_key_name(k) and len(v) >= MIN_SECRET}
    return sorted(vals, key=len, reverse=True)


def without_keys(env=None):
    """A copy of the environment with every API key variable removed."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if not is_key_name(k)}


FRAGMENT = 6              # a piece of a key this long, left at a cut, is redacted too
# the notes the tools put where they cut output (common.cap_bytes, read.py)
_CUT = re.compile(r"(\n\[\.\.\. \d+ bytes cut: [^\n]*\.\.\.\]\n| \[line cut at 50 KB\])")


def redact(text, keys):
    """Replace every key by [redacted], and any piece of one that a cut of
    capped output left at its edges (so no part of a key survives)."""
    for k in keys:
        if k in text:
            text = text.replace(k, "[redacted]")
    parts = _CUT.split(text) if keys else [text]  # text, note, text, note, ..., text
    for i in range(0, len(parts) - 1, 2):
        before, after = parts[i], parts[i + 2]
        for k in keys:
            for n in range(len(k) - 1, FRAGMENT - 1, -1):
                if before.endswith(k[:n]):
                    before = before[:-n] + "[redacted]"
                    break
            for n in range(len(k) - 1, FRAGMENT - 1, -1):
                if after.startswith(k[-n:]):
                    after = "[redacted]" + after[n:]
                    break
        parts[i], parts[i + 2] = before, after
    return "".join(parts)


def resolve(path, cwd):
    if not path:
        raise ToolError("'path' is empty")
    return os.path.join(cwd, os.path.expanduser(path))


def cap_bytes(head, tail, total, cap=CAP):
    """Join a kept head and tail of `total` bytes of output, with a note of the cut."""
    if total <= cap:
        return (head + tail).decode("utf-8", "replace")
    half = cap // 2
    h, t = head[:half], tail[-half:] if tail else b""
    cut = total - len(h) - len(t)
    note = f"\n[... {cut} bytes cut: output was {total} bytes, showing the first {len(h)} and the last {len(t)} ...]\n"
    return h.decode("utf-8", "replace") + note + t.decode("utf-8", "replace")


def cap_text(text, cap=CAP):
    """Cap a result that is already in memory (keeps head and tail)."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= cap:
        return text
    return cap_bytes(data[: cap // 2], data[-(cap // 2):], len(data), cap)
