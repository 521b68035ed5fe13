"""What a user's message carried, on its turn's trace: ``attachment_items`` reads the stored JSON
(``messages.attachments``: each entry the platform's description plus what the core made of it,
see ``bruce.store.media``) into what the page shows; ``MediaPages`` serves a kept photo at
``/media/MESSAGE_ID/INDEX``.

The URL only names a message and the position of an attachment in it; the file is the one that
message's stored entry names (``saved``, relative to the data folder), and it must lie inside
the data folder's ``media/`` after resolving links: a stored ``../`` path or a link out of the
folder is refused, like a missing file. Only image types are served, each with its own content
type; the page's headers (CSP, ``nosniff``) are the app's (``bruce.admin.server``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from bruce.store.media import MediaStore

__all__ = ["MediaFiles", "MediaPages", "attachment_items", "IMAGE_TYPES"]

IMAGE_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif",
               ".webp": "image/webp"}
_MAX_INDEX_DIGITS = 3
_MAX_ID_DIGITS = 18


class MediaFiles:
    """The kept photos: files under ``data_dir/media`` (None: nothing is served)."""

    def __init__(self, data_dir: Path | None) -> None:
        self._data = data_dir.resolve() if data_dir is not None else None
        self._media = self._data / "media" if self._data is not None else None

    def file(self, saved: object) -> Path | None:
        """The kept file an entry's ``saved`` names, if it is an image inside the media folder
        and still there (``media.keep_days`` deletes old ones); None otherwise."""
        if self._data is None or self._media is None or not isinstance(saved, str) or not saved or "\0" in saved:
            return None
        try:
            path = (self._data / saved).resolve()
        except (OSError, ValueError, RuntimeError):
            return None
        if not path.is_relative_to(self._media) or path.suffix.lower() not in IMAGE_TYPES:
            return None
        return path if path.is_file() else None


def _size(size: object) -> str | None:
    if not isinstance(size, int | float) or isinstance(size, bool) or size < 0:
        return None
    if size < 1024:
        return f"{int(size)} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return str(value) if value is not None and value != "" else None


def _item(entry: dict[str, Any], message_id: int, index: int, files: MediaFiles) -> dict[str, Any]:
    """One stored entry as the trace shows it; any field may be missing or of the wrong type."""
    kind = _text(entry, "kind") or "other"
    item: dict[str, Any] = {
        "kind": kind, "name": _text(entry, "name"), "mime": _text(entry, "mime"), "size": _size(entry.get("size")),
        "label": _text(entry, "label"), "transcript": _text(entry, "transcript"), "error": _text(entry, "error"),
        "duration_s": entry.get("duration_s") if isinstance(entry.get("duration_s"), int | float) else None,
        "chars": entry.get("chars") if isinstance(entry.get("chars"), int) else None, "cut": entry.get("cut") is True,
        "saved": _text(entry, "saved"), "url": None, "kept": False,
    }
    if kind == "image" and item["saved"] is not None:
        item["kept"] = files.file(item["saved"]) is not None
        item["url"] = f"/media/{message_id}/{index}" if item["kept"] else None
    return item


def attachment_items(stored: str | None, message_id: int, files: MediaFiles) -> list[dict[str, Any]]:
    """The message's attachments as the page and ``/api/turns/ID`` show them; JSON that is not a
    list of objects shows as one entry saying so (never an error page)."""
    if not stored:
        return []
    try:
        entries = json.loads(stored)
    except ValueError:
        entries = None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return [_item({"kind": "other", "error": "the stored attachments could not be read"}, message_id, 0, files)]
    return [_item(entry, message_id, index, files) for index, entry in enumerate(entries)]


class MediaPages:
    def __init__(self, media: MediaStore, files: MediaFiles) -> None:
        self._media = media
        self._files = files

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/media/{message_id}/{index}", self._media_file)]

    async def _media_file(self, request: web.Request) -> web.Response:
        """One kept photo of one message, behind the admin gate like every page."""
        message_id, index = request.match_info["message_id"], request.match_info["index"]
        if not (message_id.isdigit() and len(message_id) <= _MAX_ID_DIGITS
                and index.isdigit() and len(index) <= _MAX_INDEX_DIGITS):
            raise web.HTTPNotFound(text="no such attachment")
        entries = _entries(await self._media.attachments_of(int(message_id)))
        entry = entries[int(index)] if int(index) < len(entries) else None
        if not isinstance(entry, dict) or entry.get("kind") != "image":
            raise web.HTTPNotFound(text="no such attachment")
        file = self._files.file(entry.get("saved"))
        if file is None:
            raise web.HTTPNotFound(text="the photo is no longer kept")
        try:
            body = file.read_bytes()
        except OSError:
            raise web.HTTPNotFound(text="the photo is no longer kept") from None
        return web.Response(body=body, content_type=IMAGE_TYPES[file.suffix.lower()],
                            headers={"X-Content-Type-Options": "nosniff"})


def _entries(stored: str | None) -> list[Any]:
    """The stored list, positions kept (an entry that is not an object is checked where used)."""
    try:
        entries = json.loads(stored) if stored else []
    except ValueError:
        return []
    return entries if isinstance(entries, list) else []
