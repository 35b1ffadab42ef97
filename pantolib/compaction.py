"""Compaction (SPEC 3 `compaction`, 5.2): what a compaction keeps and what
its summary request asks (summarize.py sends it: `panto-send --compact`).

A compaction entry summarizes the path before the entry `firstKeptId`; the
next request is built from the system messages, the summary as one user
message and the messages from `firstKeptId` on (conversation.py). The cut
falls before the N-th last prompt (a user entry with text: results alone are
not a prompt), and moves earlier rather than part a tool use from its result.

The part to summarize goes to the model as one transcript in one user
message, followed by SUMMARY_PROMPT: Anthropic's API refuses tool-use blocks
in a request that offers no tools, and a model shown a transcript summarizes
it instead of carrying on with the work.
"""
SUMMARY_PROMPT = (
    "The messages in <conversation> above are about to be replaced by your summary of them: "
    "the work will continue from that summary and the messages after it, and nothing else. "
    "Write the summary for whoever continues the work, as notes under these headings:\n"
    "Goal: what the user wants, with every requirement, constraint and preference they stated.\n"
    "Decisions: what was decided or agreed, and why; approaches tried and dropped.\n"
    "Files: every file read, created, edited or deleted, by path, with what was done to it "
    "and what it now holds.\n"
    "Open problems: errors, failing tests and questions not yet resolved, with their exact messages.\n"
    "Next steps: what was about to be done, in order.\n"
    "Needed to continue: anything else the work depends on (commands and how to run them, "
    "names, values, the user's own words where they matter).\n"
    "Be specific and complete, invent nothing, and answer with the summary alone."
)
INSTRUCTIONS = "\n\nInstructions from the user for this summary:\n"
PREFIX = "The conversation so far, summarized:\n\n"   # the summary's user message (SPEC 3)
DEFAULT_KEEP = 2
TOOL_TEXT_LIMIT = 2000   # characters of a tool's input or result shown in the transcript


def honoured(entry):
    """A compaction entry that can be honoured: a string summary and a
    string or null firstKeptId. Any other is skipped like an unknown type."""
    return (entry.get("type") == "compaction" and isinstance(entry.get("summary"), str)
            and (entry.get("firstKeptId") is None or isinstance(entry["firstKeptId"], str)))


def kept_from(path, at):
    """Index in `path` of the first entry the compaction at `path[at]` keeps:
    its firstKeptId when that entry is on the path before it, else the entry
    after it (a null or unknown firstKeptId keeps nothing from before)."""
    keep = path[at].get("firstKeptId")
    if keep is not None:
        for i in range(at):
            if path[i].get("id") == keep:
                return i
    return at + 1


def summary_message(entry):
    return {"role": "user", "content": [{"type": "text", "text": PREFIX + entry["summary"]}]}


def is_prompt(entry):
    """A user entry with text (a prompt); one holding only tool results is not."""
    msg = entry["message"]
    return msg["role"] == "user" and any(b.get("type") == "text" for b in msg["content"])


def cut(kept, keep):
    """Where to cut the message entries `kept` (the conversation after any
    earlier compaction, system messages left out) so that the `keep` last
    prompts stay: an index, 0 when nothing would be summarized, or len(kept)
    for keep 0. A cut between a tool use and its result moves earlier, to
    the entry holding the tool use."""
    prompts = [i for i, e in enumerate(kept) if is_prompt(e)]
    if keep == 0:
        c = len(kept)
    elif len(prompts) < keep:
        return 0
    else:
        c = prompts[-keep]
    while c > 0:
        answered = {b.get("toolUseId") for e in kept[c:] for b in e["message"]["content"]
                    if b.get("type") == "toolResult"}
        parted = [i for i in range(c) if any(b.get("type") == "toolUse" and b.get("id") in answered
                                             for b in kept[i]["message"]["content"])]
        if not parted:
            break
        c = parted[0]
    return c


def _clip(text, limit=TOOL_TEXT_LIMIT):
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def transcript(messages):
    """Disk-format messages as one text for the summary request: each message
    under its role, tool calls and results by tool name (their text clipped
    to TOOL_TEXT_LIMIT characters), thinking left out."""
    names, parts = {}, []
    for m in messages:
        for b in m["content"]:
            t = b.get("type")
            if t == "text" and b["text"]:
                parts.append(f"[{m['role']}]\n{b['text']}")
            elif t == "toolUse":
                names[b["id"]] = b["name"]
                parts.append(f"[{m['role']} called the tool {b['name']}]\n{_clip(b['input'])}")
            elif t == "toolResult":
                name = names.get(b["toolUseId"], "tool")
                what = "error from" if b.get("isError") else "result of"
                parts.append(f"[{what} {name}]\n{_clip(b['content'])}")
    return "<conversation>\n" + "\n\n".join(parts) + "\n</conversation>"


def request_messages(session, keep, instructions=None):
    """(messages of the summary request, firstKeptId) for a session, or None
    when nothing comes before the kept part."""
    systems, earlier, kept = session.context()
    c = cut(kept, keep)
    if c == 0:
        return None
    part = ([summary_message(earlier)] if earlier is not None else []) + [e["message"] for e in kept[:c]]
    ask = transcript(part) + "\n\n" + SUMMARY_PROMPT
    if instructions:
        ask += INSTRUCTIONS + instructions
    messages = [e["message"] for e in systems] + [{"role": "user", "content": [{"type": "text", "text": ask}]}]
    return messages, (kept[c]["id"] if c < len(kept) else None)


def make_entry(summary, first_kept, parent, taken, provider, model, usage):
    """A compaction entry, keys in the format's order (SPEC 3)."""
    from pantolib import entries

    entry = {"type": "compaction", "id": entries.new_id(taken), "parentId": parent,
             "timestamp": entries.now_iso(), "summary": summary, "firstKeptId": first_kept,
             "provider": provider, "model": model}
    if usage is not None:
        entry["usage"] = usage
    return entry


def too_short(session, keep):
    """Why a session has nothing to compact, for the note."""
    _, earlier, kept = session.context()
    prompts = sum(1 for e in kept if is_prompt(e))
    if not kept:
        return "the conversation is empty" if earlier is None else "it is all summarized already"
    if prompts <= keep:
        held = f"{prompts} prompt" + ("" if prompts == 1 else "s")
        return f"the conversation has {held} and --keep {keep} keeps them all"
    return f"nothing before the last {keep} prompts can be summarized without parting a tool call from its result"


def keep_count(text):
    from pantolib.errors import UsageError

    try:
        n = int(text)
        if not 0 <= n <= 1_000_000:
            raise ValueError
    except (TypeError, ValueError):
        raise UsageError(f"--keep must be a whole number of prompts (0 or more), not '{text}'") from None
    return n
