"""`@PATH` in a prompt attaches that file: a text file as a text block under
a line naming it (capped, with a note of what was cut), an image (png, jpeg,
gif, webp) as an image block {"type": "image", "mediaType": S, "data": BASE64}.
The blocks come before the prompt's own text, which stays as typed (the
last text block of the entry, where every reader finds the prompt).
A word after `@` that names no regular file is left as it is."""
import os
import re

from pantolib.tools.common import CAP

_MENTION = re.compile(r"(?:^|(?<=\s))@(\S+)")
IMAGE_CAP = 5 * 1000 * 1000     # bytes of an image attached
_IMAGES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
           (b"GIF89a", "image/gif"))


def paths_in(prompt, cwd):
    """[(as written, real path)] of the regular files the prompt mentions, each once."""
    out, seen = [], set()
    for m in _MENTION.finditer(prompt):
        written = m.group(1).rstrip(".,;:!?)]}'\"")
        path = os.path.realpath(os.path.join(cwd, os.path.expanduser(written)))
        if path not in seen and os.path.isfile(path):
            seen.add(path)
            out.append((written, path))
    return out


def media_type(head):
    for magic, kind in _IMAGES:
        if head.startswith(magic):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def blocks(prompt, cwd):
    """(blocks to send before the prompt's text, [what was attached, for a person])."""
    import base64

    from pantolib.secrets import env_keys
    from pantolib.tools.common import redact, size

    out, said = [], []
    for written, path in paths_in(prompt, cwd):
        try:
            total = os.path.getsize(path)
            with open(path, "rb") as f:
                data = f.read(max(CAP, IMAGE_CAP) + 1)
        except OSError as e:
            said.append(f"@{written}: not attached ({e.strerror or e})")
            continue
        kind = media_type(data[:16])
        if kind is not None:
            if total > IMAGE_CAP:
                said.append(f"@{written}: not attached (an image of {size(total)}; at most {size(IMAGE_CAP)})")
                continue
            out.append({"type": "image", "mediaType": kind, "data": base64.b64encode(data).decode("ascii")})
            said.append(f"@{written}: attached ({kind}, {size(total)})")
            continue
        if b"\0" in data[:8192]:
            said.append(f"@{written}: not attached (not text)")
            continue
        text = data[:CAP].decode("utf-8", "replace")
        note = ""
        if total > CAP:
            text = text[:text.rfind("\n") + 1] or text
            note = f"\n[… cut: the first {size(len(text.encode()))} of {size(total)} attached]"
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        out.append({"type": "text", "text": redact(f"[file @{written}]\n{text}{note}", env_keys())})
        said.append(f"@{written}: attached ({lines:,} line{'s' * (lines != 1)}{', cut' if note else ''})")
    return out, said
