"""Voice notes and audio files: checked before they cost a call, then heard.

An Ogg file (a Telegram or Discord voice note) is walked page by page: each page starts with
"OggS", its 27-byte header ends with the number of segments, the segment table gives the body's
length; a page that runs past the end of the bytes, bytes that are not a page, or a last page
without the end-of-stream flag mean the file is damaged or cut off, and no call is made. The last
page's granule position gives the length when the platform did not (Opus counts 48 kHz samples
after the pre-skip; Vorbis, samples at the rate in its first header), so a voice note over
``media.max_voice_s`` is refused before it is sent to be transcribed.
"""

from __future__ import annotations

import struct
from pathlib import PurePosixPath
from typing import NamedTuple, Protocol

from bruce.channel import Attachment
from bruce.errors import MediaError
from bruce.turns.scope import TurnScope
from bruce.values import AttachmentKind

__all__ = ["Transcriber", "ogg_duration", "check_audio", "heard_line", "is_ogg"]

_OGG_MIMES = frozenset({"audio/ogg", "audio/opus", "application/ogg", "audio/x-ogg"})
_OGG_SUFFIXES = frozenset({".ogg", ".oga", ".opus"})
_HEADER = 27  # bytes before a page's segment table
_EOS = 0x04
_OPUS_RATE = 48_000
_HEARD_MAX = 120


class Transcriber(Protocol):
    """Turns speech into text; a model call recorded in ``llm_calls`` under the turn (kind
    ``transcription``). Raises ``LLMError`` subclasses (``OverBudget``, ``LLMNotConfigured``,
    ``LLMUnavailable``), which the turn tells the user as for any model call."""

    async def transcribe(self, audio: bytes, *, file_name: str, mime: str | None, scope: TurnScope) -> str: ...


class _Page(NamedTuple):
    flags: int
    granule: int
    body: bytes


def is_ogg(attachment: Attachment, data: bytes) -> bool:
    """Whether the bytes are (or are declared to be) an Ogg stream, to be checked as one."""
    mime = (attachment.mime or "").split(";")[0].strip().lower()
    suffix = PurePosixPath(attachment.name or "").suffix.lower()
    return mime in _OGG_MIMES or suffix in _OGG_SUFFIXES or data[:4] == b"OggS"


def _pages(data: bytes, damaged: str) -> list[_Page]:
    pages, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 4] != b"OggS" or len(data) < pos + _HEADER:
            raise MediaError(damaged)
        segments = data[pos + 26]
        table_end = pos + _HEADER + segments
        if table_end > len(data):
            raise MediaError(damaged)
        end = table_end + sum(data[pos + _HEADER:table_end])
        if end > len(data):
            raise MediaError(damaged)
        granule: int = struct.unpack_from("<q", data, pos + 6)[0]
        pages.append(_Page(data[pos + 5], granule, data[table_end:end]))
        pos = end
    if not pages or not pages[-1].flags & _EOS:
        raise MediaError(damaged)
    return pages


def ogg_duration(data: bytes, *, what: str = "the voice note") -> float | None:
    """The stream's length in seconds (None: a codec whose clock is not known here); raises
    ``MediaError`` when the bytes are not a whole Ogg stream."""
    pages = _pages(data, f"I could not listen to {what}: it is damaged or cut off (not a whole Ogg file).")
    first, last = pages[0].body, pages[-1].granule
    if first.startswith(b"OpusHead") and len(first) >= 12:
        pre_skip: int = struct.unpack_from("<H", first, 10)[0]
        return max(0, last - pre_skip) / _OPUS_RATE
    if first.startswith(b"\x01vorbis") and len(first) >= 16:
        rate: int = struct.unpack_from("<I", first, 12)[0]
        return last / rate if rate else None
    return None


def check_audio(attachment: Attachment, data: bytes, *, what: str, max_voice_s: int) -> None:
    """Raise ``MediaError`` (the user's reply) for audio that must not be sent to be transcribed:
    empty, a damaged Ogg stream, or longer than ``max_voice_s``."""
    if not data:
        raise MediaError(f"I could not listen to {what}: it is empty (0 bytes).")
    if attachment.kind not in (AttachmentKind.VOICE, AttachmentKind.AUDIO) or not is_ogg(attachment, data):
        return
    measured = ogg_duration(data, what=what)  # a whole file, even when the platform gave the length
    seconds = attachment.duration_s if attachment.duration_s is not None else measured
    if seconds is not None and seconds > max_voice_s:
        raise MediaError(f"I did not listen to {what}: it is {seconds:.0f} s long, over the {max_voice_s} s limit "
                         "(media.max_voice_s).")


def heard_line(transcripts: list[str]) -> str:
    """The reply's first line, quoting what was heard (cut to ~120 characters), so a mishearing
    shows; "" when nothing was heard."""
    said = " / ".join(" ".join(t.split()) for t in transcripts if t.strip())
    if not said:
        return ""
    if len(said) > _HEARD_MAX:
        said = said[:_HEARD_MAX - 1].rstrip() + "…"
    return f'🎤 "{said}"'
