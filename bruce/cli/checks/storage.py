"""``bruce doctor``'s checks of the machine: the database (opened, never written), the disk, the clock."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from bruce.cli.checks.findings import Finding, Mark
from bruce.clock import SystemClock
from bruce.config.schema import Config
from bruce.errors import StoreError

__all__ = ["LOW_DISK_BYTES", "check_database", "check_disk", "check_timezone", "existing_folder", "user_name"]

LOW_DISK_BYTES = 100 * 1024 * 1024


def existing_folder(path: Path) -> Path:
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid with no passwd entry (a container)
        return str(os.geteuid())


async def check_database(config: Config) -> list[Finding]:
    from bruce.store import Store

    path = config.storage.path
    if not path.exists():
        folder = existing_folder(path.parent)
        if os.access(folder, os.W_OK | os.X_OK):
            return [Finding(Mark.OK, f"database: no database yet, it will be created at {path} on first run")]
        return [Finding(Mark.FAIL, f"database: {folder} is not writable, so {path} cannot be created",
                        f"make {folder} writable for {user_name()}, or point storage.path elsewhere")]
    try:
        store = await Store.open(path, SystemClock(), busy_timeout_ms=config.storage.busy_timeout_ms, create=False)
    except StoreError as exc:
        return [Finding(Mark.FAIL, f"database {path}: {exc}", "see docs/operations.md (backups, restore)")]
    try:
        version = await store.migrate()
    finally:
        await store.close()
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        return [Finding(Mark.FAIL, f"database {path}: schema version {version}, but not writable",
                        f"make {path} and {path.parent} writable for {user_name()}")]
    return [Finding(Mark.OK, f"database {path}: writable, schema version {version}")]


def check_disk(config: Config) -> list[Finding]:
    folder = existing_folder(config.storage.path.parent)
    free = shutil.disk_usage(folder).free
    text = f"disk: {free / 1024**2:,.0f} MB free at {folder}"
    if free < LOW_DISK_BYTES:
        return [Finding(Mark.WARN, text, f"free some space (below {LOW_DISK_BYTES // 1024**2} MB writes may fail)")]
    return [Finding(Mark.OK, text)]


def check_timezone(config: Config) -> list[Finding]:
    now = SystemClock().now().astimezone(config.assistant.zone)
    return [Finding(Mark.OK, f"timezone: {config.assistant.timezone} (now {now:%H:%M}, UTC{now:%z})")]
