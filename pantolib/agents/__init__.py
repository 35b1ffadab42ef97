"""Other agents' sessions, one module per agent, each with the same small interface
(SPEC §12; `panto-log import` drives them, pantolib/importing.py):

    NAME                      the agent's name ("claude-code", "codex", "pi", "opencode")
    sources(env) -> [str]     every session source `--all` brings in, in import order;
                              a missing agent directory gives [], an unreadable one
                              raises OSError naming it
    sniff(head: bytes) -> bool   whether a file's first bytes look like this agent's
    Reader(source, start=0, state=None)
        iter(reader)          panto lines as dicts: the header (only when start == 0),
                              then entries, streamed; what is still being written is
                              not yielded (it waits for the next run)
        .end                  where the next run starts (a byte offset, or what the
                              module's docstring says)
        .state                JSON-able: what a run from `end` needs to go on with the
                              same output as a run from the top
        .skipped              kind -> count of records left out
        .bad                  [(line number, why)] of malformed lines, skipped

An entry may carry the private key "_billing" (a list naming the API response,
for de-duplication across files); the driver removes it before writing. Two
shapes (importing.ask): Claude Code's [message id, request id, sidechain:
bool], known by its ids; any other is the agent's name then what tells the
response from others (pi: time, model, tokens), known whole.

The helpers in pantolib.agents.common make the parts every module writes
alike: session ids, entry ids, the header, message entries, stop reasons,
usage and timestamps. The modules import them from there, never from here
(this front loads the modules).
"""
AGENTS = ("claude-code", "codex", "pi", "opencode")


def module(name):
    """The module of agent `name` (one of AGENTS)."""
    if name == "claude-code":
        from pantolib.agents import claude_code as m
    elif name == "codex":
        from pantolib.agents import codex as m
    elif name == "pi":
        from pantolib.agents import pi as m
    elif name == "opencode":
        from pantolib.agents import opencode as m
    else:
        raise ValueError(f"unknown agent {name!r}")
    return m
