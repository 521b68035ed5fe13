"""What is not read, decided before anything is fetched and before any model call.

The refusals are a table of texts and one pure function over an attachment as the platform
described it (``refusal``). A message is answered whole or not at all: when any attachment of it
is refused, ``message_refusal`` says which and why, and nothing of the message is read (half an
answer to an album with one unreadable part would look like an answer to all of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from bruce.channel import Attachment
from bruce.values import AttachmentKind

__all__ = ["MediaSettings", "DOCUMENT_TYPES", "REFUSALS", "MEDIA_OFF", "refusal", "message_refusal",
           "document_type", "describe"]

_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """The ``media`` config block, as the core uses it."""

    enabled: bool = True
    max_voice_s: int = 300
    max_file_mb: float = 20
    keep_days: int = 30
    max_document_chars: int = 20000
    fetch_timeout_s: float = 60.0

    @property
    def max_bytes(self) -> int:
        return int(self.max_file_mb * _MB)


# the documents whose text is read: file name suffix -> the MIME types that mean the same
DOCUMENT_TYPES: dict[str, frozenset[str]] = {
    ".pdf": frozenset({"application/pdf", "application/x-pdf"}),
    ".txt": frozenset({"text/plain"}),
    ".md": frozenset({"text/markdown", "text/x-markdown"}),
    ".csv": frozenset({"text/csv", "application/csv"}),
}
_READ = "text, voice notes, photos and documents (PDF, .txt, .md, .csv)"

MEDIA_OFF = ("Attachments are switched off here (media.enabled: false), so I did not read that message. "
             "Set media.enabled: true in the config to have voice notes, photos and documents read.")

REFUSALS: dict[str, str] = {
    "other": "it is a {label}; I only read " + _READ,
    "too_large": "it is {size:.1f} MB, over the {limit:g} MB limit (media.max_file_mb)",
    "too_long": "it is {seconds:.0f} s long, over the {limit} s limit (media.max_voice_s)",
    "no_voice": "voice notes are not set up: set media.transcription_model (e.g. openai/whisper-1) to have them heard",
    "no_vision": ("the chat model cannot see images: set llm.model to one that can, or media.vision: true "
                  "if it can and litellm does not know it"),
    "document_type": "I read PDF, .txt, .md and .csv documents, not {type} files",
}


def describe(attachment: Attachment) -> str:
    """How the user would name it: its file name, else what it is."""
    if attachment.name:
        return attachment.name
    return {AttachmentKind.VOICE: "the voice note", AttachmentKind.AUDIO: "the audio file",
            AttachmentKind.IMAGE: "the photo", AttachmentKind.DOCUMENT: "the document",
            }.get(attachment.kind, f"the {attachment.label or 'attachment'}")


def document_type(attachment: Attachment) -> str | None:
    """The document type read (".pdf", ".txt", ".md", ".csv") by file name, else by MIME type; None: not read."""
    suffix = PurePosixPath(attachment.name or "").suffix.lower()
    if suffix in DOCUMENT_TYPES:
        return suffix
    mime = (attachment.mime or "").split(";")[0].strip().lower()
    return next((s for s, mimes in DOCUMENT_TYPES.items() if mime in mimes), None)


def refusal(attachment: Attachment, settings: MediaSettings, *, hears: bool, sees: bool) -> str | None:
    """Why this attachment will not be read (None: it will be). ``hears``: voice can be turned into
    text (a transcription model is set up); ``sees``: the chat model takes images."""
    a = attachment
    if a.kind is AttachmentKind.OTHER:
        return REFUSALS["other"].format(label=a.label or "kind of message")
    if a.size is not None and a.size > settings.max_bytes:
        return REFUSALS["too_large"].format(size=a.size / _MB, limit=settings.max_file_mb)
    if a.kind in (AttachmentKind.VOICE, AttachmentKind.AUDIO):
        if a.duration_s is not None and a.duration_s > settings.max_voice_s:
            return REFUSALS["too_long"].format(seconds=a.duration_s, limit=settings.max_voice_s)
        if not hears and not a.transcript:
            return REFUSALS["no_voice"]
    if a.kind is AttachmentKind.IMAGE and not sees:
        return REFUSALS["no_vision"]
    if a.kind is AttachmentKind.DOCUMENT and document_type(a) is None:
        shown = PurePosixPath(a.name or "").suffix or a.mime or "unknown"
        return REFUSALS["document_type"].format(type=shown)
    return None


def message_refusal(attachments: Sequence[Attachment], settings: MediaSettings, *, hears: bool,
                    sees: bool) -> str | None:
    """The reply to a message that is not read, naming each refused part and why; None: read it."""
    if not attachments:
        return None
    if not settings.enabled:
        return MEDIA_OFF
    refused = [(a, r) for a in attachments if (r := refusal(a, settings, hears=hears, sees=sees)) is not None]
    if not refused:
        return None
    if len(attachments) == 1:
        ((attachment, reason),) = refused
        return f"I did not read {describe(attachment)}: {reason}."
    lines = "\n".join(f"- {describe(a)}: {reason}" for a, reason in refused)
    return (f"I did not read this message: {len(refused)} of its {len(attachments)} attachments cannot be used, "
            f"and I read a message whole or not at all.\n{lines}")
