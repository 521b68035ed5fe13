"""What a Telegram message carries besides its text, as the core's ``Attachment``s (nothing is
downloaded here: ``ref`` is the ``file_id`` that ``files.py`` fetches later, even after a restart).

A voice note is a ``VOICE`` (Ogg Opus), an audio file an ``AUDIO``, a photo an ``IMAGE`` (only its
largest size: Telegram sends each photo in several), a file a ``DOCUMENT``, or an ``IMAGE`` when its
MIME type is an image's (a photo sent "as a file", uncompressed). Stickers, videos, locations,
contacts, polls and the like are an ``OTHER`` with a ``label`` and nothing to fetch: the core
answers them without a model call.

A voice note's ``transcript``: the Bot API (and aiogram 3.31's ``Voice``) has no such field; aiogram
keeps fields it does not know (``model_extra``), so a server that adds one (Telegram Premium's
transcription) is read, and no call is made for that voice note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bruce.channel import Attachment
from bruce.values import AttachmentKind

if TYPE_CHECKING:
    from aiogram.types import Document, Message, PhotoSize

__all__ = ["attachments_of", "album_key"]

# a message field that is something the core cannot read, and what it is called in a reply;
# checked in this order (a venue also carries its location, an animation its document)
OTHER_LABELS = (("sticker", "sticker"), ("video_note", "video message"), ("animation", "GIF"), ("video", "video"),
                ("venue", "venue"), ("location", "location"), ("contact", "contact"), ("poll", "poll"),
                ("dice", "dice"), ("game", "game"), ("story", "story"), ("invoice", "invoice"),
                ("paid_media", "paid media"), ("checklist", "checklist"))


def album_key(item: Any) -> tuple[Any, str] | None:
    """(chat id, ``media_group_id``) of a raw update (JSON) whose message is one item of an album, else None."""
    message = item.get("message") if isinstance(item, dict) else None
    if not isinstance(message, dict) or not message.get("media_group_id"):
        return None
    chat = message.get("chat")
    return (chat.get("id") if isinstance(chat, dict) else None), str(message["media_group_id"])


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """The message's attachment as the core takes it; () for a text message (or a service one)."""
    for field, label in OTHER_LABELS:
        if getattr(message, field, None) is not None:
            return (Attachment(AttachmentKind.OTHER, ref="", label=label),)
    if (voice := message.voice) is not None:
        return (Attachment(AttachmentKind.VOICE, ref=voice.file_id, mime=voice.mime_type or "audio/ogg",
                           size=voice.file_size, name="voice.ogg", duration_s=float(voice.duration),
                           transcript=_extra_text(voice, "transcript")),)
    if (audio := message.audio) is not None:
        return (Attachment(AttachmentKind.AUDIO, ref=audio.file_id, mime=audio.mime_type, size=audio.file_size,
                           name=audio.file_name or "audio", duration_s=float(audio.duration),
                           transcript=_extra_text(audio, "transcript")),)
    if message.photo:
        return (_photo(message.photo),)
    if (document := message.document) is not None:
        return (_document(document),)
    return ()


def _photo(sizes: list[PhotoSize]) -> Attachment:
    largest = max(sizes, key=lambda size: (size.width * size.height, size.file_size or 0))
    return Attachment(AttachmentKind.IMAGE, ref=largest.file_id, mime="image/jpeg", size=largest.file_size,
                      name="photo.jpg")


def _document(document: Document) -> Attachment:
    mime = document.mime_type
    kind = AttachmentKind.IMAGE if (mime or "").lower().startswith("image/") else AttachmentKind.DOCUMENT
    return Attachment(kind, ref=document.file_id, mime=mime, size=document.file_size,
                      name=document.file_name or ("image" if kind is AttachmentKind.IMAGE else "document"))


def _extra_text(item: Any, field: str) -> str | None:
    """A text field aiogram does not know but kept (``model_extra``), if the server sent one."""
    extra = getattr(item, "model_extra", None) or {}
    value = extra.get(field)
    return value.strip() or None if isinstance(value, str) else None
