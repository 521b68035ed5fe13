"""Writing a file whole or not at all: a temporary file in the same folder, flushed to disk, then
renamed over the target, so a crash or a full disk never leaves half a file under its name."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(target: Path, data: bytes, *, mode: int | None = None, mtime: float | None = None) -> None:
    """Write ``data`` to ``target``. ``mode``: the new file's permission bits (e.g. 0o600); None: a
    replaced file keeps its bits, a new one gets the usual umask-based mode. ``mtime``: the
    modification time to give it (a clock's time), else now."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None and target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        elif mode is not None:
            os.chmod(tmp, mode)  # the umask does not narrow what was asked for
        if mtime is not None:
            os.utime(tmp, (mtime, mtime))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
