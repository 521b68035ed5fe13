"""What a Discord message carries besides its text, as the core's ``Attachment``s, and their bytes.

Describing (``attachments_of``). Each of a message's attachments becomes one ``Attachment``: a
voice message (recorded in Discord's app: ``is_voice_message()``, with its ``duration``) is
``VOICE``; an ``audio/*`` file ``AUDIO``; an ``image/*`` file ``IMAGE``; anything else
``DOCUMENT``. The MIME type is Discord's ``content_type`` without its parameters (guessed from the
file name when Discord gave none), ``size`` is Discord's (exact), ``ref`` the attachment's URL.
Stickers are ``OTHER`` labelled "sticker"; a message with only embeds (no text, no file) is one
``OTHER`` labelled "embed". All of them go in one message: one turn.

Fetching (``Downloads``). The ``ref`` is a signed CDN URL (``?ex=...&is=...&hm=...``) that Discord
lets expire after about a day: an old message's file then answers 404 and ``fetch`` fails with
"no longer available". The download uses an aiohttp session of its own and never sends the bot
token (Discord's CDN needs none; a file host is not the API). Only ``http``/``https`` URLs are
fetched. A file whose declared size, or ``Content-Length``, is over ``max_bytes`` is refused
before anything is read, and reading stops as soon as it would pass ``max_bytes``. Not found,
a server failure, a connection cut short and no answer within ``timeout_s`` are each a
``MediaFetchError`` whose message says which, for the user (the core names the file: "I could not
fetch receipt.pdf: it is no longer available on Discord ...").
"""

from __future__ import annotations

import asyncio
import mimetypes

import aiohttp
import discord
import structlog
import yarl

from bruce.channel import Attachment
from bruce.errors import MediaFetchError
from bruce.values import AttachmentKind

__all__ = ["Downloads", "attachments_of", "attachment_of"]

log = structlog.get_logger(__name__)

CHUNK = 64 * 1024
GONE = (403, 404, 410)  # an expired signed URL, or a deleted message's file


def _mime(attachment: discord.Attachment) -> str | None:
    given = attachment.content_type or mimetypes.guess_type(attachment.filename)[0] or ""
    return given.split(";", 1)[0].strip().lower() or None


def attachment_of(attachment: discord.Attachment) -> Attachment:
    """One Discord attachment as the core describes it (nothing is fetched)."""
    mime = _mime(attachment)
    if attachment.is_voice_message():
        kind = AttachmentKind.VOICE
    elif mime is not None and mime.startswith("audio/"):
        kind = AttachmentKind.AUDIO
    elif mime is not None and mime.startswith("image/"):
        kind = AttachmentKind.IMAGE
    else:
        kind = AttachmentKind.DOCUMENT
    return Attachment(kind=kind, ref=attachment.url, mime=mime, size=attachment.size, name=attachment.filename,
                      duration_s=attachment.duration)


def attachments_of(message: discord.Message, *, has_text: bool) -> tuple[Attachment, ...]:
    """The message's files, then its stickers; an embed-only message (no text) is one ``OTHER``."""
    found = [attachment_of(a) for a in message.attachments]
    found += [Attachment(kind=AttachmentKind.OTHER, ref=s.url, label="sticker") for s in message.stickers]
    if not found and not has_text and message.embeds:
        found.append(Attachment(kind=AttachmentKind.OTHER, ref=message.jump_url, label="embed"))
    return tuple(found)


class Downloads:
    """Fetches attachment URLs with a session of its own (opened on first use, closed by ``close``)."""

    def __init__(self, *, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The bytes at ``attachment.ref``, at most ``max_bytes`` of them, or ``MediaFetchError``."""
        url = yarl.URL(attachment.ref)
        if url.scheme not in ("http", "https") or not url.host:
            raise MediaFetchError("it has no web address to download it from")
        if attachment.size is not None and attachment.size > max_bytes:
            raise MediaFetchError(f"it is too large ({_mb(attachment.size)}; the limit is {_mb(max_bytes)})")
        try:
            async with asyncio.timeout(self._timeout_s):
                data = await self._download(url, attachment, max_bytes)
        except TimeoutError:
            log.warning("discord.fetch_failed", host=url.host, reason="timeout")
            raise MediaFetchError(f"Discord did not send it within {self._timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            log.warning("discord.fetch_failed", host=url.host, reason=type(exc).__name__)
            raise MediaFetchError(f"the download from Discord broke off ({type(exc).__name__})") from None
        if attachment.size is not None and len(data) < attachment.size:
            raise MediaFetchError(f"the download from Discord was cut short ({len(data)} of {attachment.size} bytes)")
        return data

    async def _download(self, url: yarl.URL, attachment: Attachment, max_bytes: int) -> bytes:
        async with self._open().get(url, allow_redirects=True) as response:
            if response.status in GONE:
                raise MediaFetchError("it is no longer available on Discord (its link expires after about a day, "
                                      "or the message was deleted); please send it again")
            if response.status >= 400:
                raise MediaFetchError(f"Discord failed to send it ({response.status})")
            if response.content_length is not None and response.content_length > max_bytes:
                raise MediaFetchError(f"it is too large ({_mb(response.content_length)}; the limit is {_mb(max_bytes)})")
            data = bytearray()
            async for chunk in response.content.iter_chunked(CHUNK):
                if len(data) + len(chunk) > max_bytes:
                    raise MediaFetchError(f"it is larger than the limit of {_mb(max_bytes)}")
                data += chunk
            return bytes(data)


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB" if size >= 100 * 1024 else f"{size} bytes"
