"""Photos: what the bytes really are, and how the model is shown them.

The type is read from the bytes (JPEG, PNG, GIF, WEBP), not from what the platform said; anything
else, or nothing, is refused with a clear reply. The model sees the picture only in the turn it
arrived in, as an OpenAI-style ``image_url`` part carrying a data URL; the history keeps a short
placeholder (``[photo: receipt.jpg]``), never the bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from bruce.channel import Attachment
from bruce.errors import MediaError

__all__ = ["sniff", "image_part", "placeholder", "MIME_BY_EXT"]

MIME_BY_EXT = {"jpg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}


def sniff(data: bytes, *, what: str = "the photo") -> str:
    """The image's file extension from its first bytes ("jpg", "png", "gif", "webp"); raises
    ``MediaError`` for an empty file or one that is none of these."""
    if not data:
        raise MediaError(f"I could not look at {what}: it is empty (0 bytes).")
    if data[:3] == b"\xff\xd8\xff":
        return "jpg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    raise MediaError(f"I could not look at {what}: it is not a JPEG, PNG, GIF or WEBP image (or it is damaged).")


def image_part(data: bytes, ext: str) -> dict[str, Any]:
    """One ``image_url`` content part for the model, the picture inline as a data URL."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{MIME_BY_EXT[ext]};base64,{encoded}"}}


def placeholder(attachment: Attachment) -> str:
    """What the history says in place of the picture."""
    return f"[photo: {attachment.name}]" if attachment.name else "[photo]"
