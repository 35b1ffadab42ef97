"""A session as Markdown for people (`panto-log show`).

One heading per entry, text as it was written, thinking as a quote, tool
calls and results in fenced blocks (long results cut, with a note saying
so), a compaction or a branch summary as its summary, an image as one
line naming its type and size, and one line of usage per assistant entry. Each entry is rendered on its own, so a transcript is written as it
is read.
"""
RESULT_LINES = 40
RESULT_CHARS = 4000


def fence(text, info=""):
    """A fenced code block that no run of backticks inside text can close."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}\n"


def cut(text, lines=RESULT_LINES, chars=RESULT_CHARS):
    """(shown part, note or None): a long tool result is cut for reading."""
    shown = text[:chars]
    parts = shown.split("\n")
    if len(parts) > lines:
        shown = "\n".join(parts[:lines])
    if len(shown) == len(text):
        return text, None
    rest = text[len(shown):]
    more_lines = rest.count("\n")
    what = f"{len(rest)} more characters" + (f", {more_lines} more lines" if more_lines else "")
    return shown, f"*(cut: {what}; the whole result is in the session file)*"


def quote(text):
    return "\n".join("> " + line if line else ">" for line in text.split("\n")) + "\n"


def usage_line(msg, paid_in=None):
    """`*usage: …*`; for a copy of a response paid in another session, that session."""
    from pantolib import entries

    u = entries.usage_of(msg)
    parts = []
    if paid_in is not None:
        parts.append(f"paid in session {paid_in}")
    elif u is None:
        parts.append("unknown")
    else:
        parts.append(f"{u['input']} input")
        for key, label in (("cacheRead", "cache read"), ("cacheWrite", "cache write"),
                           ("output", "output"), ("reasoning", "reasoning")):
            if u[key] or key == "output":
                parts.append(f"{u[key]} {label}")
    stop = msg.get("stopReason")
    if isinstance(stop, str):
        parts.append(f"stop: {stop}")
    return "*usage: " + " · ".join(parts) + "*\n"


def _who(obj):
    bits = [b for b in (obj.get("provider"), obj.get("model")) if isinstance(b, str) and b]
    return f" ({' '.join(bits)})" if bits else ""


def header(h):
    from pantolib import stream

    out = f"# session {h.get('id')}\n\n"
    facts = [f"{k}: {h[k]}" for k in ("cwd", "timestamp") if isinstance(h.get(k), str)]
    agent, parent, relation = stream.lineage(h)
    if agent != "panto":
        facts.append(f"imported from {agent}")
    if parent is not None:
        facts.append(f"{relation or 'child'} of {parent}")
    if facts:
        out += "*" + " · ".join(facts) + "*\n\n"
    return out


def _blocks(content):
    out = []
    for block in content:
        t = block.get("type")
        if t == "text":
            out.append(block["text"].rstrip("\n") + "\n")
        elif t == "thinking":
            if block["thinking"]:
                out.append(quote(block["thinking"].rstrip("\n")))
        elif t == "redactedThinking":
            out.append("> *(redacted thinking)*\n")
        elif t == "toolUse":
            out.append(f"*tool call {block['name']} ({block['id']}):*\n" + fence(block["input"], "json"))
        elif t == "toolResult":
            shown, note = cut(block["content"])
            what = "tool error" if block.get("isError") else "tool result"
            out.append(f"*{what} ({block['toolUseId']}):*\n" + fence(shown) + (note + "\n" if note else ""))
        elif t == "image":
            from pantolib.entries import image_text

            out.append(f"*{image_text(block)}*\n")
        else:
            out.append(f"*(a content block of type {t})*\n")
    return "\n".join(out)


def _text(obj):
    """The text of an entry that is not a message (a summary, a name), or ""."""
    from pantolib import entries

    return "".join(text for _, text in entries.texts_of(obj))


def entry(obj):
    """The Markdown of one entry (ending in a blank line)."""
    t = obj.get("type")
    if t == "message":
        msg = obj["message"]
        role, content = msg["role"], msg["content"]
        if role == "assistant":
            title = "assistant" + _who(msg)
        elif role == "user" and any(b.get("type") == "toolResult" for b in content) and all(
                b.get("type") in ("toolResult", "image") for b in content):
            title = "tool results"     # images a tool returned come with its results
        else:
            title = role
        body = _blocks(content)
        if role == "assistant":
            from pantolib.entries import billed_in

            paid = billed_in(obj)
            line = usage_line(msg) if paid is None else usage_line(msg, paid)
            body += ("\n" if body else "") + line
        return f"## {title}\n\n{body}\n"
    if t == "compaction":
        summary = _text(obj)
        body = "*summary of the conversation before this point:*\n\n" + summary.rstrip("\n") + "\n"
        if isinstance(obj.get("usage"), dict):
            body += "\n" + usage_line(obj)
        return f"## compaction{_who(obj)}\n\n{body}\n"
    if t == "branchSummary":
        summary = _text(obj)
        start = obj.get("fromId")
        where = f" (left at {start})" if isinstance(start, str) and start else ""
        body = f"*summary of a branch left behind{where}:*\n\n" + summary.rstrip("\n") + "\n"
        if isinstance(obj.get("usage"), dict):
            body += "\n" + usage_line(obj)
        return f"## branch summary{_who(obj)}\n\n{body}\n"
    if t == "sessionInfo":
        name = _text(obj)
        return f"*named: {name}*\n\n"
    return f"*(an entry of type {t})*\n\n"
