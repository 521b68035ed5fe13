"""Fetching an attachment's bytes from Telegram: ``getFile`` (the file's path and size), then its
download, never more than ``max_bytes``. A file larger than that is refused before any download
when ``getFile`` says so, and the download stops once more arrived. Every failure (a file gone,
Telegram's 20 MB limit for bots, an HTTP error, a connection cut, no answer in ``timeout_s``)
becomes ``MediaFetchError`` with a reason the user can read; none carries the file's URL,
which holds the bot token.
"""

from __future__ import annotations

import asyncio

import aiohttp
import structlog

from bruce.channel import Attachment
from bruce.errors import MediaFetchError
from channels.telegram.api import BotAPI, Refused, TooLarge, Unreachable

__all__ = ["fetch_file"]

log = structlog.get_logger(__name__)


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


async def fetch_file(api: BotAPI, attachment: Attachment, *, max_bytes: int, timeout_s: float) -> bytes:
    """The attachment's bytes (its ``ref`` is a ``file_id``), or ``MediaFetchError`` saying why not."""
    if not attachment.ref:
        raise MediaFetchError("there is nothing to download for this item")
    try:
        async with asyncio.timeout(timeout_s):
            info = await api.call("getFile", {"file_id": attachment.ref}, timeout=timeout_s)
            path = info.get("file_path") if isinstance(info, dict) else None
            if not isinstance(path, str) or not path:
                raise MediaFetchError("Telegram no longer has this file")
            size = info.get("file_size")
            if isinstance(size, int) and size > max_bytes:
                raise MediaFetchError(f"the file is {_mb(size)}, more than the {_mb(max_bytes)} I accept")
            return await api.download(path, max_bytes=max_bytes, timeout=timeout_s)
    except TooLarge:
        raise MediaFetchError(f"the file is more than the {_mb(max_bytes)} I accept") from None
    except Refused as exc:
        log.warning("telegram.fetch_refused", file=attachment.ref, status=exc.status, error=exc.description)
        if "too big" in exc.description.lower():
            raise MediaFetchError("Telegram does not let bots download files over 20 MB") from None
        if exc.status in (400, 404):
            raise MediaFetchError("Telegram no longer has this file") from None
        raise MediaFetchError(f"Telegram could not send the file ({exc.status})") from None
    except TimeoutError:
        log.warning("telegram.fetch_timeout", file=attachment.ref, seconds=timeout_s)
        raise MediaFetchError(f"the download from Telegram took longer than {timeout_s:g} s") from None
    except (aiohttp.ClientPayloadError, *Unreachable) as exc:
        log.warning("telegram.fetch_failed", file=attachment.ref, error=type(exc).__name__)
        raise MediaFetchError("the download from Telegram failed (the connection broke)") from None
