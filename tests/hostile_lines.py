"""Hostile session lines the tests share: lines a crash could leave (TORN),
complete objects that break the schema (SCHEMA), and random lines shaped
like entries (random_line), for the tests that check every reader and fast
path agrees with the full reading."""
import orjson


# Lines a crash could have left (torn when last) ...
TORN = {
    "stray brace": b"}{\n",
    "cut short": b'{"type":"message","id":"dead\n',
    "lone surrogate": b'{"type":"message","id":"c0000001","parentId":null,"timestamp":"t","message":'
                      b'{"role":"user","content":[{"type":"text","text":"\\ud800"}]}}\n',
    "1e400": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","n":1e400}\n',
    "not an object": b"[1,2,3]\n",
    # a bare JSON value nested deeply is not an object either, whatever the depth
    "bare value 1000 deep": b"[" * 1000 + b"]" * 1000 + b"\n",
    "bare value 100000 deep": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    # a deep object cut short: its brackets never close
    "100000 deep cut short": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","a":'
                             + b"[" * 100_000 + b"]" * 5000 + b"\n",
    "null": b"null\n",
    "NUL bytes": b"\0\0\0\0\0\0\n",
    "invalid UTF-8": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","x":"\xff\xfe"}\n',
    "second header": None,          # filled in per test (it names the test's cwd)
}
# ... and a complete object that breaks the schema: never a crash artifact
SCHEMA = {
    "message without role": b'{"type":"message","id":"c0000001","parentId":null,"timestamp":"t",'
                            b'"message":{"content":[]}}\n',
    "id a number": b'{"type":"message","id":7,"parentId":null,"timestamp":"t","message":{"role":"user","content":[]}}\n',
    # complete objects nested deeper than panto reads (1024 levels): reported, never cut
    "nesting 1100": b'{"type":"note","id":"c0000001","parentId":null,"timestamp":"t","a":'
                    + b"[" * 1100 + b"]" * 1100 + b"}\n",
    "message 100000 deep": b'{"type":"message","id":"c0000001","parentId":null,"timestamp":"t","message":'
                           b'{"role":"user","content":[{"type":"text","text":"deep","x":'
                           + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b'}]}}\n',
    # readable, but what is wrong with it must be said without a recursive repr
    "role 1000 deep": b'{"type":"message","id":"c0000001","parentId":null,"timestamp":"t","message":'
                      b'{"role":' + b"[" * 1000 + b"]" * 1000 + b',"content":[]}}\n',
}
# what the deep ones are told (where the command says what is wrong with the line)
DEEP_SCHEMA = {"nesting 1100": "nested more than 1024 levels deep",
               "message 100000 deep": "nested more than 1024 levels deep",
               "role 1000 deep": "unknown message role of type list"}


def random_line(rng):
    """A line as panto or another writer might lay it out, with text that mimics keys."""
    import json

    tricky = ['"message":{"role":"user"', '{"type":"message"', "\\", '"', "\n", "é", "\u2028", "assistant", ""]
    text = "".join(rng.choice(tricky) for _ in range(rng.randint(0, 6)))
    t = rng.choice(["message"] * 6 + ["sessionInfo", "compaction", "custom", "session", "messages", ""])
    e = {"type": t}
    for key, value in (("id", rng.choice(["ab12cd34", "x", 7, None])), ("parentId", rng.choice([None, "ab12cd34", 3])),
                       ("timestamp", rng.choice(["2026-04-25T17:40:16.000Z", "t", 5]))):
        if rng.random() < 0.9:
            e[key] = value
    if rng.random() < 0.5:
        e["provider"], e["model"] = rng.choice([("openai", "gpt-4o"), ("x", 1), ("a\"b", "c")])
    if rng.random() < 0.2:
        e["api"] = rng.choice(["openai-responses", {"nested": "x"}])
    role = rng.choice(["user", "assistant", "system", "tool", "", 5])
    content = rng.choice([[{"type": "text", "text": text}], [{"type": "text", "text": 5}], "x", []])
    e["message" if rng.random() < 0.9 else "msg"] = rng.choice(
        [{"role": role, "content": content}, {"content": content, "role": role}, text])
    if t == "sessionInfo":
        e["name"] = text
    if rng.random() < 0.2:
        e = dict(reversed(list(e.items())))
    if rng.random() < 0.2:
        return json.dumps(e).encode()                 # spaced
    return orjson.dumps(e)
