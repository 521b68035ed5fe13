"""Kept photos: under the data folder, for ``media.keep_days``, then deleted.

A photo is written to ``media/<YYYY-MM>/<message id>-<n>.<ext>`` under the data folder (the folder
of ``storage.path``), readable by the owner only (0600, folders 0700), atomically: a temporary file
in the same folder, then a rename, so a crash never leaves half a photo under the final name. Its
modification time is set from the injected clock, and ``clean`` deletes every kept file older than
``keep_days`` by that clock; it runs at start-up and once a day. The history keeps the placeholder
(``[photo: …]``) and the message's attachments keep the path, which then points at nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from pathlib import Path

import structlog

from bruce.clock import Clock
from bruce.files import write_atomic

__all__ = ["KeptMedia", "FOLDER"]

log = structlog.get_logger(__name__)

FOLDER = "media"
_DAY_S = 86400.0


class KeptMedia:
    def __init__(self, *, data_dir: Path, clock: Clock, keep_days: int) -> None:
        self._data_dir = data_dir
        self._root = data_dir / FOLDER
        self._clock = clock
        self._keep_days = keep_days
        self._task: asyncio.Task[None] | None = None

    def save(self, message_id: int, n: int, data: bytes, ext: str) -> str:
        """Keep ``data`` as the ``n``-th attachment of the message; returns its path relative to the data folder."""
        now = self._clock.now()
        folder = self._root / f"{now:%Y-%m}"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        final = folder / f"{message_id}-{n}.{ext}"
        write_atomic(final, data, mode=0o600, mtime=now.timestamp())
        return final.relative_to(self._data_dir).as_posix()

    def read(self, relative: str) -> bytes | None:
        """A kept file's bytes; None when it is gone (cleaned up, or deleted by hand)."""
        path = self._data_dir / relative
        if FOLDER not in Path(relative).parts[:1] or ".." in Path(relative).parts:
            return None
        try:
            return path.read_bytes()
        except OSError:
            return None

    def discard(self, relative: str) -> None:
        """Delete a file kept for a message that could not be used after all."""
        with contextlib.suppress(OSError):
            (self._data_dir / relative).unlink()

    def clean(self) -> int:
        """Delete kept files older than ``keep_days`` (and the month folders left empty); how many went."""
        if not self._root.is_dir():
            return 0
        cutoff = (self._clock.now() - timedelta(days=self._keep_days)).timestamp()
        removed = 0
        for month in sorted(p for p in self._root.iterdir() if p.is_dir()):
            for path in month.iterdir():
                with contextlib.suppress(OSError):
                    if path.is_file() and path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
            with contextlib.suppress(OSError):
                month.rmdir()  # only when empty
        if removed:
            log.info("media.cleaned", removed=removed, keep_days=self._keep_days)
        return removed

    async def start(self) -> None:
        """Clean now, then once a day until ``stop``."""
        await asyncio.to_thread(self.clean)
        if self._task is None:
            self._task = asyncio.create_task(self._daily(), name="media.clean")

    async def _daily(self) -> None:
        while True:
            await asyncio.sleep(_DAY_S)
            try:
                await asyncio.to_thread(self.clean)
            except Exception:
                log.exception("media.clean_failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
