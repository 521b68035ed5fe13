"""One process at a time: an exclusive ``flock`` on a file beside the database.

The daemon holds one per channel it serves (``<db>.<channel>.lock``) and one for the scheduler
(``<db>.scheduler.lock``). The kernel drops a lock when its holder dies, even by ``kill -9``,
so a stale lock never blocks the next start. Closing the file releases it.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import TextIO

__all__ = ["FileLock"]


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: TextIO | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def take(self) -> bool:
        """True once this process holds the lock (at once if it already did); False when another
        process holds it. Never waits."""
        if self._handle is not None:
            return True
        handle = self.path.open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
