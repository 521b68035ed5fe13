from __future__ import annotations

import base64

import pytest

from bruce.channel import Attachment
from bruce.errors import MediaError
from bruce.media.images import image_part, placeholder, sniff
from bruce.values import AttachmentKind
from tests.fakes.media_files import jpeg, pdf_with_text, png


def test_types_are_read_from_the_bytes() -> None:
    assert sniff(jpeg()) == "jpg"
    assert sniff(png()) == "png"
    assert sniff(b"GIF89a" + bytes(10)) == "gif"
    assert sniff(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "webp"


@pytest.mark.parametrize("data, words", [(b"", "empty"), (pdf_with_text(), "not a JPEG"), (b"\xff\xd8", "not a JPEG")])
def test_anything_else_is_refused(data: bytes, words: str) -> None:
    with pytest.raises(MediaError, match=words):
        sniff(data)


def test_the_part_carries_the_bytes_intact() -> None:
    part = image_part(jpeg(), "jpg")
    url = part["image_url"]["url"]
    assert part["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == jpeg()


def test_placeholder() -> None:
    assert placeholder(Attachment(AttachmentKind.IMAGE, "r", name="receipt.jpg")) == "[photo: receipt.jpg]"
    assert placeholder(Attachment(AttachmentKind.IMAGE, "r")) == "[photo]"
