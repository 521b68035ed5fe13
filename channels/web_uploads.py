"""Files the owner sends from the admin page's chat: read from a ``multipart/form-data`` POST,
kept under the data folder (``<data>/uploads/<id>``, mode 0600) and fetched back by the core.

A part is streamed to a temporary file in chunks and refused past ``media.max_file_mb`` (413)
before the rest is read; at most ``MAX_FILES`` files come in one message. The files of a message
are renamed into place only once the whole body was read: a refused, malformed or cut-off upload
leaves nothing behind. A file is named by a random id, which is the attachment's ``ref``; the
name the browser gave is only shown (``Attachment.name``, cleaned), never used as a path.
Uploads older than ``media.keep_days`` are deleted at start and at most once a day after.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from bruce.channel import Attachment
from bruce.clock import Clock
from bruce.errors import MediaFetchError
from bruce.values import AttachmentKind

__all__ = ["Uploads", "Received", "UploadRefused", "MAX_FILES", "attachment_kind", "display_name", "mime_type"]

log = structlog.get_logger(__name__)

MAX_FILES = 10
CHUNK = 64 * 1024
DAY_S = 86_400.0
STALE_PART_S = 3_600.0  # a temporary file this old belongs to no upload still under way
UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
AUDIO_TYPES = frozenset({"audio/ogg", "audio/opus", "audio/webm", "audio/mpeg", "audio/mp3", "audio/mp4",
                         "audio/x-m4a", "audio/wav", "audio/x-wav"})
BY_EXTENSION = {  # when the browser declares no type (or application/octet-stream)
    ".ogg": "audio/ogg", ".oga": "audio/ogg", ".opus": "audio/ogg", ".weba": "audio/webm", ".mp3": "audio/mpeg",
    ".m4a": "audio/mp4", ".wav": "audio/wav", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
    ".gif": "image/gif", ".webp": "image/webp", ".heic": "image/heic", ".pdf": "application/pdf",
    ".txt": "text/plain", ".md": "text/markdown", ".csv": "text/csv", ".json": "application/json",
}


class UploadRefused(Exception):
    """The upload is not taken; ``status`` and ``message`` are the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Received:
    """A message read from a form: its caption and the files now stored."""

    text: str
    attachments: tuple[Attachment, ...]


def display_name(given: str) -> str:
    """The browser's file name, for showing only: its last path segment, printable, no leading dots."""
    last = given.replace("\\", "/").rsplit("/", 1)[-1]
    shown = "".join(ch for ch in last if ch.isprintable()).strip().lstrip(".").strip()
    return shown[:120] or "upload"


def mime_type(declared: str | None, name: str) -> str | None:
    """The declared type (without parameters), or one from the name's extension when none was given."""
    mime = (declared or "").split(";", 1)[0].strip().lower()
    if mime and mime != "application/octet-stream":
        return mime
    return BY_EXTENSION.get(Path(name).suffix.lower(), mime or None)


def attachment_kind(mime: str | None) -> AttachmentKind:
    """Audio the transcription can take, an image, or a document (everything else)."""
    if mime in AUDIO_TYPES:
        return AttachmentKind.AUDIO
    if mime is not None and mime.startswith("image/"):
        return AttachmentKind.IMAGE
    return AttachmentKind.DOCUMENT


def _refusal(exc: BaseException) -> UploadRefused | None:
    """What the page is told when reading an upload failed; None: not an answer (a cancellation)."""
    match exc:
        case UploadRefused():
            return exc
        case ValueError() | AssertionError() | HttpProcessingError():  # aiohttp's words for a broken body
            log.info("web.upload_malformed", error=str(exc)[:200])
            return UploadRefused(400, "the upload is malformed (a multipart/form-data body with the fields "
                                      "text and files was expected); nothing was sent")
        case ConnectionError():
            log.info("web.upload_cut_off")
            return UploadRefused(400, "the upload was cut off; nothing was sent")
        case OSError():
            log.warning("web.upload_failed", error=str(exc))
            return UploadRefused(507, f"the upload could not be stored ({exc.strerror}); nothing was sent")
    return None


class Uploads:
    """The uploads folder: what comes in, what the core fetches, what gets old."""

    def __init__(self, folder: Path, *, clock: Clock, max_file_mb: float, keep_days: int, max_text_chars: int) -> None:
        self.folder = folder
        self._clock = clock
        self.max_file_mb = max_file_mb
        self._max_bytes = int(max_file_mb * 1024 * 1024)
        self._keep_s = keep_days * DAY_S
        self._max_text_chars = max_text_chars
        self._cleaned_at: float | None = None

    @property
    def max_body_bytes(self) -> int:
        """A larger body cannot be a valid upload: refused before reading it."""
        return MAX_FILES * self._max_bytes + self._max_text_chars * 4 + 1024 * 1024

    # receiving ---------------------------------------------------------------------------------

    async def receive(self, request: web.Request) -> Received:
        """Read the whole form; the files are stored only if all of it was good."""
        parts: list[tuple[Path, Attachment]] = []
        try:
            text = await self._read_form(await request.multipart(), parts)
            for tmp, attachment in parts:
                os.replace(tmp, self.folder / attachment.ref)
        except BaseException as exc:  # refused, malformed, cut off, or cancelled: nothing stays
            self._drop(tmp for tmp, _ in parts)
            self.discard(tuple(a for _, a in parts))
            refused = _refusal(exc)
            if refused is None or refused is exc:
                raise
            raise refused from None
        return Received(text=text, attachments=tuple(a for _, a in parts))

    async def _read_form(self, reader: MultipartReader, parts: list[tuple[Path, Attachment]]) -> str:
        text = ""
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise UploadRefused(400, "a nested multipart body is not an upload; send the fields text and files")
            if part.name == "text":
                text = await self._text(part)
            elif part.name in ("files", "file"):
                if not part.filename:  # a file input left empty
                    await part.release()
                    continue
                if len(parts) >= MAX_FILES:
                    raise UploadRefused(400, f"at most {MAX_FILES} files in one message; nothing was sent")
                parts.append(await self._store(part, display_name(part.filename)))
            else:
                raise UploadRefused(400, f"unknown field {str(part.name)[:40]!r}: send the fields text and files")
        return text

    async def _text(self, part: BodyPartReader) -> str:
        limit = self._max_text_chars * 4
        data = bytearray()
        while chunk := await part.read_chunk(CHUNK):
            data += chunk
            if len(data) > limit:  # (a character is at most 4 bytes)
                raise UploadRefused(400, f"text: at most {self._max_text_chars} characters")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UploadRefused(400, "text: the caption must be UTF-8") from None
        if len(text) > self._max_text_chars:
            raise UploadRefused(400, f"text: at most {self._max_text_chars} characters")
        return text

    async def _store(self, part: BodyPartReader, name: str) -> tuple[Path, Attachment]:
        ref = uuid.uuid4().hex
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.folder / f".{ref}.part"
        size = 0
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                while chunk := await part.read_chunk(CHUNK):
                    size += len(chunk)
                    if size > self._max_bytes:
                        raise UploadRefused(413, f"{name} is larger than media.max_file_mb ({self.max_file_mb:g} MB); "
                                                 "nothing was sent")
                    out.write(chunk)
                out.flush()
                await asyncio.to_thread(os.fsync, out.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if size == 0:
            tmp.unlink(missing_ok=True)
            raise UploadRefused(400, f"{name} is empty (0 bytes); nothing was sent")
        mime = mime_type(part.headers.get("Content-Type"), name)
        attachment = Attachment(kind=attachment_kind(mime), ref=ref, mime=mime, size=size, name=name)
        log.info("web.upload_stored", ref=ref, kind=str(attachment.kind), size=size)
        return tmp, attachment

    def discard(self, attachments: tuple[Attachment, ...]) -> None:
        """Delete stored uploads whose message was not taken after all."""
        self._drop(self.folder / a.ref for a in attachments if UPLOAD_ID.fullmatch(a.ref))

    @staticmethod
    def _drop(paths: Iterable[Path]) -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    # fetching and cleaning -----------------------------------------------------------------------

    async def fetch(self, ref: str, *, max_bytes: int) -> bytes:
        """An upload's bytes; ``MediaFetchError`` when it is gone or larger than ``max_bytes``."""
        if not UPLOAD_ID.fullmatch(ref):
            raise MediaFetchError("this is not a web chat upload")
        return await asyncio.to_thread(self._read, self.folder / ref, max_bytes)

    def _read(self, path: Path, max_bytes: int) -> bytes:
        try:
            with path.open("rb") as f:
                if os.fstat(f.fileno()).st_size > max_bytes:
                    raise MediaFetchError(f"the file is larger than {max_bytes} bytes")
                data = f.read(max_bytes + 1)
        except FileNotFoundError:
            raise MediaFetchError(f"the upload is gone (uploads are kept {self._keep_s / DAY_S:g} days)") from None
        except OSError as exc:
            raise MediaFetchError(f"the upload could not be read ({exc.strerror})") from None
        if len(data) > max_bytes:
            raise MediaFetchError(f"the file is larger than {max_bytes} bytes")
        return data

    def clean_if_due(self) -> int:
        """Delete what is too old, at most once a day (and the first time it is asked)."""
        now = self._clock.monotonic()
        if self._cleaned_at is not None and now - self._cleaned_at < DAY_S:
            return 0
        self._cleaned_at = now
        return self.clean()

    def clean(self) -> int:
        """Delete uploads older than ``keep_days`` and temporary files left by a crash; returns how many."""
        if not self.folder.is_dir():
            return 0
        now = self._clock.now().timestamp()
        removed = 0
        for entry in self.folder.iterdir():
            upload = UPLOAD_ID.fullmatch(entry.name) is not None
            part = entry.name.startswith(".") and entry.name.endswith(".part")
            try:
                age = now - entry.stat().st_mtime
                if (upload and age > self._keep_s) or (part and age > STALE_PART_S):
                    entry.unlink()
                    removed += 1
            except OSError as exc:
                log.warning("web.upload_clean_failed", file=entry.name, error=str(exc))
        if removed:
            log.info("web.uploads_cleaned", removed=removed)
        return removed
