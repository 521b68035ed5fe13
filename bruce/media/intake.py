"""A message's attachments, made into what its turn and the history use.

``refused`` decides from what the platform said, before anything is fetched and with no model
call (``bruce.media.rules``), and records why on the message. ``prepare`` runs inside the turn (so
a transcription is recorded under its id): it fetches each attachment through the message's
channel (a ``MediaChannel``, within ``media.fetch_timeout_s``), hears voice, reads documents, keeps
photos, and writes the message's text and attachments once, after all of them were made
(``store.media.set_media``). When one fails, the photos kept for the message are deleted, the
failure is recorded on the message and raised (``MediaError``, ``MediaFetchError``: the user's
reply), and nothing else was written. A message prepared before a restart is not made again: its
stored text stands, its photos are read back from where they were kept.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import structlog

from bruce.channel import Attachment, Channel, MediaChannel
from bruce.errors import MediaError, MediaFetchError
from bruce.media.audio import Transcriber, check_audio, heard_line, is_ogg
from bruce.media.documents import MARK, read_document
from bruce.media.images import image_part, placeholder, sniff
from bruce.media.keep import KeptMedia
from bruce.media.rules import REFUSALS, MediaSettings, describe, document_type, message_refusal, refusal
from bruce.records import StoredMessage
from bruce.store import Store
from bruce.turns.scope import TurnScope
from bruce.values import AttachmentKind

__all__ = ["MediaIntake", "Prepared"]

log = structlog.get_logger(__name__)

_HEARD = (AttachmentKind.VOICE, AttachmentKind.AUDIO)
_AUDIO_SUFFIX = {"audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/x-m4a": ".m4a", "audio/wav": ".wav",
                 "audio/x-wav": ".wav", "audio/webm": ".webm", "audio/flac": ".flac"}


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one message's attachments came to, for its turn."""

    text: str  # the stored text: caption, transcripts, placeholders, documents' text
    content: str | list[dict[str, Any]]  # the user message the model sees this turn (with the pictures)
    heard: str  # the reply's first line quoting what was heard; "" when nothing was
    owner_text: str  # the asker's own words: the caption and what they said, never a document's text
    tainted: bool  # a document's text is in it: text from outside


@dataclass(slots=True)
class _Made:
    found: dict[str, Any]  # added to the attachment's stored entry
    piece: str  # its part of the stored text
    image: dict[str, Any] | None = None
    saved: str | None = None
    heard: str | None = None
    document: bool = False


def _entries(inbound: StoredMessage) -> list[dict[str, Any]]:
    loaded = json.loads(inbound.attachments) if inbound.attachments else []
    return [e for e in loaded if isinstance(e, dict)] if isinstance(loaded, list) else []


def _content(text: str, images: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    return [{"type": "text", "text": text}, *images] if images else text


class MediaIntake:
    """``transcriber``: None when ``media.transcription_model`` is not set (voice is not heard
    unless the platform sent a transcript); ``sees_images``: whether the chat model takes images,
    asked for each message (``media.vision``, else litellm's capability data)."""

    def __init__(self, *, store: Store, channels: Mapping[str, Channel], keep: KeptMedia, settings: MediaSettings,
                 transcriber: Transcriber | None, sees_images: Callable[[], bool]) -> None:
        self._store = store
        self._channels = channels
        self._keep = keep
        self._settings = settings
        self._transcriber = transcriber
        self._sees_images = sees_images

    async def refused(self, inbound: StoredMessage) -> str | None:
        """The reply to a message none of which will be read (recorded on the message); None: go on."""
        entries = _entries(inbound)
        if any(e.get("used") for e in entries):
            return None
        attachments = [Attachment.from_json(e) for e in entries]
        hears = self._transcriber is not None
        images = any(a.kind is AttachmentKind.IMAGE for a in attachments)
        # litellm's capability data may still be importing right after start-up: never on the event loop
        sees = await asyncio.to_thread(self._sees_images) if images else True
        reason = message_refusal(attachments, self._settings, hears=hears, sees=sees)
        if reason is not None:
            log.info("media.refused", kinds=[str(a.kind) for a in attachments])
            why = [("media.enabled is false" if not self._settings.enabled else
                    refusal(a, self._settings, hears=hears, sees=sees) or "not read: another attachment was refused")
                   for a in attachments]
            await self._store.media.set_media(inbound.id, text=inbound.text, attachments=json.dumps(
                [{**e, "error": w} for e, w in zip(entries, why, strict=True)]))
        return reason

    async def prepare(self, scope: TurnScope, inbound: StoredMessage) -> Prepared:
        entries = _entries(inbound)
        if entries and all(e.get("used") for e in entries):
            return self._again(inbound.text, entries)
        made: list[_Made] = []
        try:
            for n, entry in enumerate(entries):
                made.append(await self._make(scope, inbound.id, n, Attachment.from_json(entry)))
        except BaseException as exc:
            for m in made:
                if m.saved is not None:
                    self._keep.discard(m.saved)
            if isinstance(exc, MediaError | MediaFetchError):
                log.warning("media.failed", reason=str(exc))
                failed = [{**e, "error": str(exc)} if i == len(made) else e for i, e in enumerate(entries)]
                await self._store.media.set_media(inbound.id, text=inbound.text, attachments=json.dumps(failed))
            raise
        caption = inbound.text.strip()
        text = "\n\n".join([caption] * bool(caption) + [m.piece for m in made])
        await self._store.media.set_media(inbound.id, text=text, attachments=json.dumps(
            [{**e, **m.found, "used": True} for e, m in zip(entries, made, strict=True)]))
        heard = [m.heard for m in made if m.heard]
        return Prepared(text, _content(text, [m.image for m in made if m.image]), heard_line(heard),
                        "\n".join([caption, *heard]).strip(), any(m.document for m in made))

    def _again(self, text: str, entries: list[dict[str, Any]]) -> Prepared:
        """A message prepared before (the process stopped before its answer): as stored."""
        images = []
        for entry in entries:
            if entry.get("saved"):
                data = self._keep.read(str(entry["saved"]))
                if data is None:
                    raise MediaError(f"I can no longer see {describe(Attachment.from_json(entry))}: it is not kept any more.")
                images.append(image_part(data, PurePosixPath(str(entry["saved"])).suffix.lstrip(".")))
        heard = [str(e["transcript"]) for e in entries if e.get("kind") in _HEARD and e.get("transcript")]
        return Prepared(text, _content(text, images), heard_line(heard), "\n".join(heard),
                        any(e.get("chars") is not None for e in entries))

    async def _make(self, scope: TurnScope, message_id: int, n: int, attachment: Attachment) -> _Made:
        what = describe(attachment)
        if attachment.kind in _HEARD:
            return await self._hear(scope, attachment, what)
        data = await self._fetch(scope, attachment, what)
        if attachment.kind is AttachmentKind.IMAGE:
            ext = sniff(data, what=what)
            try:
                saved = await asyncio.to_thread(self._keep.save, message_id, n, data, ext)
            except OSError as exc:  # a full disk, a data folder we may not write: said, not a crash
                log.error("media.keep_failed", error=str(exc))
                raise MediaError(f"I could not keep {what} to look at it: {exc.strerror or exc} "
                                 "(the data folder).") from None
            return _Made({"saved": saved}, placeholder(attachment), image=image_part(data, ext), saved=saved)
        kind = document_type(attachment)
        if attachment.kind is not AttachmentKind.DOCUMENT or kind is None:  # the rules refuse these first
            raise MediaError(f"I did not read {what}: I only read text, voice notes, photos and documents.")
        document = await read_document(data, kind=kind, what=what, max_chars=self._settings.max_document_chars)
        return _Made({"chars": document.chars, "cut": document.cut},
                     f"{MARK}{attachment.name or 'document' + kind}]\n{document.text}", document=True)

    async def _hear(self, scope: TurnScope, attachment: Attachment, what: str) -> _Made:
        if attachment.transcript:  # the platform heard it: no call
            return _Made({}, attachment.transcript, heard=attachment.transcript)
        if self._transcriber is None:
            raise MediaError(f"I did not listen to {what}: {REFUSALS['no_voice']}.")
        data = await self._fetch(scope, attachment, what)
        check_audio(attachment, data, what=what, max_voice_s=self._settings.max_voice_s)
        mime = (attachment.mime or "").split(";")[0].strip().lower()
        name = attachment.name or "voice" + (".ogg" if is_ogg(attachment, data) else _AUDIO_SUFFIX.get(mime, ".ogg"))
        text = (await self._transcriber.transcribe(data, file_name=name, mime=attachment.mime, scope=scope)).strip()
        if not text:
            raise MediaError(f"I could not make out any words in {what}.")
        log.info("media.heard", chars=len(text))
        return _Made({"transcript": text}, text, heard=text)

    async def _fetch(self, scope: TurnScope, attachment: Attachment, what: str) -> bytes:
        name = scope.conversation.channel
        channel = self._channels.get(name)
        if channel is None or not isinstance(channel, MediaChannel):
            raise MediaError(f"I cannot fetch files sent in this chat ({name}), so I did not read {what}.")
        s = self._settings
        try:
            async with asyncio.timeout(s.fetch_timeout_s):
                data = await channel.fetch(attachment, max_bytes=s.max_bytes)
        except TimeoutError:
            raise MediaFetchError(f"I could not fetch {what}: the download took longer than {s.fetch_timeout_s:g} s "
                                  "(media.fetch_timeout_s).") from None
        except MediaFetchError as exc:
            raise MediaFetchError(f"I could not fetch {what}: {str(exc).rstrip('.')}.") from None
        if len(data) > s.max_bytes:
            raise MediaError(f"I did not read {what}: it is over the {s.max_file_mb:g} MB limit (media.max_file_mb).")
        return data
