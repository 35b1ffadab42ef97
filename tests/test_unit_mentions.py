"""The @PATH rule (pantolib.mentions): what is a mention, what it attaches, and Tab's completion."""
import base64

import pytest

from pantolib import mentions

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x01" * 20


@pytest.fixture
def files(isolated):
    (isolated / "notes.txt").write_text("some notes\n")
    (isolated / "src").mkdir()
    (isolated / "src" / "main.py").write_text("print(1)\n")
    (isolated / "src" / "mod.py").write_text("x = 1\n")
    (isolated / "property").mkdir()      # a directory is never a mention
    return isolated


@pytest.mark.parametrize("text, found", [
    ("look at @notes.txt", ["notes.txt"]),
    ("@notes.txt first", ["notes.txt"]),
    ("see @notes.txt, then @src/main.py.", ["notes.txt", "src/main.py"]),       # sentence punctuation
    ("(@notes.txt) and '@src/mod.py'", ["notes.txt", "src/mod.py"]),
    ("twice @notes.txt @notes.txt @./notes.txt", ["notes.txt"]),                # once per file
    ("mail me@notes.txt or bob@example.com", []),                               # no space before @
    ("@property\ndef f(self): pass", []),                                        # a decorator (a directory here)
    ("@dataclass\nclass A: pass", []),                                           # no such file
    ("in code `@notes.txt` and\n```\n@notes.txt\n```\n", []),                  # code spans and fences
    ("@missing.txt stays text", []),
    ("line one\n@notes.txt on line two", ["notes.txt"]),
])
def test_what_is_a_mention(files, text, found):
    assert [w for w, _ in mentions.find(text, str(files))] == found


def test_the_home_directory(files, isolated):
    home = isolated.parent / "home"
    (home / "h.txt").write_text("at home\n")
    [(word, path)] = mentions.find("see @~/h.txt", str(files))
    assert word == "~/h.txt" and path == str(home / "h.txt")


def test_blocks_text_under_a_line_naming_it_and_images_by_content(files):
    (files / "pic.dat").write_bytes(PNG)                 # an image whatever its name says
    (files / "fake.png").write_text("not an image\n")
    text, image, fake = mentions.blocks(["notes.txt", "pic.dat", "fake.png"])
    assert text == {"type": "text", "text": "File notes.txt:\nsome notes\n"}
    assert image == {"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}
    assert fake["type"] == "text"
    for head, kind in ((b"\xff\xd8\xff\xe0", "image/jpeg"), (b"GIF89a", "image/gif"),
                       (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"), (b"GIF88a", None)):
        assert mentions.image_type(head + b"\x00" * 8) == kind


def test_a_large_text_is_cut_with_a_note_and_binary_is_refused(files):
    from pantolib.errors import PantoError
    from pantolib.tools.common import CAP

    (files / "big.txt").write_text("é" * CAP)      # 2 bytes a character: the cap cuts one in two
    [b] = mentions.blocks(["big.txt"])
    assert len(b["text"].encode()) < CAP + 200
    assert b["text"].endswith(f"[... cut: the file is {2 * CAP} bytes, the first {CAP} are attached; "
                              "read the rest with the read tool ...]\n")
    (files / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(PantoError, match="'blob.bin' is neither text nor an image"):
        mentions.blocks(["blob.bin"])
    said = []
    assert mentions.attach("see @blob.bin and @notes.txt", said.append, str(files)) == ["--attach=notes.txt"]
    assert said == ["'blob.bin' is neither text nor an image (PNG, JPEG, GIF, WebP): not attached"]


@pytest.mark.parametrize("before, after, shown", [
    ("look at @no", "look at @notes.txt ", ""),
    ("@sr", "@src/", ""),
    ("@src/m", "@src/m", "main.py  mod.py"),
    ("@src/ma", "@src/main.py ", ""),
    ("@zz", "@zz", ""),
    ("me@no", None, None),           # not an @word: Tab is a character
    ("plain", None, None),
])
def test_tab_completes_the_path_of_an_at_word(files, before, after, shown):
    got = mentions.complete(before, str(files))
    assert got == (None if after is None else (after, shown))
