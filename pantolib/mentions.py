"""@PATH mentions: a file named in a prompt is attached to it.

The rule (panto(1), Mentions): `@` at the start of the prompt or after
whitespace or an opening bracket or quote, followed by a path (no
whitespace; `~` is the home directory), names a mention when that path is
an existing regular file; punctuation that ends a sentence (`.,;:!?` and
closing brackets or quotes) is not part of the path unless the file's name
has it. Inside a fenced (```) or inline (`...`) code span nothing is a
mention. So `me@example.com` (no space before the @), a decorator such as
`@property` (no such file) and a directory stay plain text, and the prompt's
own text is always kept as typed.

What is attached (blocks, for the user entry before the prompt's text): an
image (PNG, JPEG, GIF or WebP, known by its first bytes) as
{"type":"image","mediaType":S,"data":BASE64}; anything else that is UTF-8
text as a text block under a line naming it, capped like the read tool's
output (50 KB, with a note of what was cut).
"""
import os
import re

IMAGE_MAX = 5 << 20      # bytes: the largest image the APIs take (Anthropic: 5 MB)
CLOSERS = ".,;:!?)]}>'\""
_AT = re.compile(r"(?:^|(?<=[\s(\[{<'\"]))@(\S+)")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)


def find(text, cwd=None):
    """The files the prompt mentions, each once in order: [(as typed, path)]."""
    cwd = os.getcwd() if cwd is None else cwd
    code = [m.span() for m in _CODE.finditer(text)]
    found, seen = [], set()
    for m in _AT.finditer(text):
        if any(a <= m.start() < b for a, b in code):
            continue
        word = m.group(1)
        while word:
            path = os.path.join(cwd, os.path.expanduser(word))
            if os.path.isfile(path):
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    found.append((word, path))
                break
            if word[-1] not in CLOSERS:
                break
            word = word[:-1]
    return found


def attach(text, say, cwd=None):
    """The panto-send arguments attaching the files the prompt mentions
    (`--attach=PATH`, as typed); say(why) for each that cannot be attached."""
    argv = []
    for word, path in find(text, cwd):
        try:
            block(path, word)
        except NotAttached as e:
            say(f"{e}: not attached")
            continue
        argv.append(f"--attach={word}")
    return argv


def blocks(names):
    """The blocks attaching the files named (panto-send --attach): PantoError
    naming the first that cannot be attached."""
    from pantolib.errors import PantoError

    out = []
    for name in names:
        try:
            out.append(block(os.path.expanduser(name), name))
        except NotAttached as e:
            raise PantoError(f"{e}: not attached, nothing sent") from None
        except FileNotFoundError:
            raise PantoError(f"'{name}' does not exist: not attached, nothing sent") from None
    return out


def image_type(head):
    """The media type of an image by its first bytes, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


class NotAttached(Exception):
    """A mentioned file that cannot be attached (why, for the person)."""


def block(path, shown=None):
    """The content block attaching the file at path (shown: its name as
    typed). NotAttached when it is neither an image nor text, or too large."""
    import base64

    from pantolib.tools.common import CAP, ToolError, open_regular

    shown = path if shown is None else shown
    try:
        fd = open_regular(path, shown)
    except ToolError as e:
        raise NotAttached(str(e)) from None
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 16, 0)
        kind = image_type(head)
        if kind is not None:
            if size > IMAGE_MAX:
                raise NotAttached(f"'{shown}' is an image of {size} bytes (at most {IMAGE_MAX} can be sent)")
            data = _read(fd, IMAGE_MAX)
            return {"type": "image", "mediaType": kind, "data": base64.b64encode(data).decode("ascii")}
        data = _read(fd, CAP + 1)
    finally:
        os.close(fd)
    cut = len(data) > CAP
    data = data[:CAP]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not (cut and e.start >= len(data) - 3):     # not just a character the cap cut in two
            raise NotAttached(f"'{shown}' is neither text nor an image (PNG, JPEG, GIF, WebP)") from None
        text = data[:e.start].decode("utf-8")
    if "\0" in text:
        raise NotAttached(f"'{shown}' is neither text nor an image (PNG, JPEG, GIF, WebP)")
    if cut:
        got = len(text.encode("utf-8"))
        text += (f"\n[... cut: the file is {size} bytes, the first {got} are attached; "
                 f"read the rest with the read tool ...]\n")
    return {"type": "text", "text": f"File {shown}:\n{text}"}


def _read(fd, cap):
    chunks, got = [], 0
    while got < cap:
        chunk = os.read(fd, min(1 << 20, cap - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


_TYPING = re.compile(r"(?:^|(?<=[\s(\[{<'\"]))@(\S*)\Z")


def complete(before, cwd=None, limit=200):
    """Tab after `@PART` (the text before the cursor): (that text with PART
    completed as far as it is one path, the choices to show or ""), or None
    when the cursor is not at the end of an @word. A directory completes
    with `/`, a file with a space; hidden names only when PART's last part
    starts with a dot."""
    m = _TYPING.search(before)
    if m is None:
        return None
    cwd = os.getcwd() if cwd is None else cwd
    part = m.group(1)
    folder, base = os.path.split(part)
    where = os.path.join(cwd, os.path.expanduser(folder)) if folder else cwd
    try:
        names = sorted(n for n in os.listdir(where) if n.startswith(base) and (base[:1] == "." or n[:1] != "."))
    except OSError:
        return before, ""
    if not names:
        return before, ""

    def done(name):
        return name + ("/" if os.path.isdir(os.path.join(where, name)) else "")

    head = before[:m.start(1)] + (folder + "/" if folder and not folder.endswith("/") else folder)
    if len(names) == 1:
        full = done(names[0])
        return head + full + ("" if full.endswith("/") else " "), ""
    common = os.path.commonprefix(names)
    if common != base:
        return head + common, ""
    shown = [done(n) for n in names[:limit]]
    more = f"  (and {len(names) - limit} more)" if len(names) > limit else ""
    return before, "  ".join(shown) + more
