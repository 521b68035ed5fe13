"""``bruce backup [PATH]`` and ``bruce restore PATH``: the database copied while Bruce runs, and
put back while it does not (``bruce.store.backup`` does the copying and the checks).

``backup`` writes a stamped file into ``backups/`` in the data folder (or into the folder PATH
names) and keeps the newest ``storage.backups_keep`` there; PATH that names a new file is written
as it is, and nothing is rotated. ``restore`` refuses while a Bruce process uses the database: a
daemon answering on the console socket, or a process holding one of the database's leases (the
scheduler, a channel) that is still alive. See docs/operations.md, "Backups and restore".
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from pathlib import Path

from bruce.clock import SystemClock, utc_iso
from bruce.config.schema import Config
from bruce.errors import BruceError, StoreError
from bruce.runtime.leases import process_gone
from bruce.store.backup import folder_of, leases, restore, rotate, stamped, take
from bruce.store.migrations import MIGRATIONS

__all__ = ["add_backup_arguments", "add_restore_arguments", "backup_command", "restore_command", "who_uses"]


def add_backup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", type=Path, default=None, metavar="PATH",
                        help="a folder to write a stamped backup in, or a new file name (default: backups/ in the "
                             "data folder, keeping the newest storage.backups_keep)")


def add_restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="PATH", help="the backup file to put in place of the database")


async def backup_command(config: Config, args: argparse.Namespace, config_path: Path) -> int:
    database = config.storage.path
    if not database.is_file():
        print(f"bruce: no database at {database} (storage.path in {config_path}): nothing to back up",
              file=sys.stderr)
        return 1
    folder = folder_of(database) if args.path is None else args.path if args.path.is_dir() else None
    if folder is not None:
        target = stamped(folder, database.stem, SystemClock().now())
    elif args.path.exists():
        raise StoreError(f"{args.path} exists: name a new file, or a folder to write a stamped backup in")
    elif not args.path.parent.is_dir():
        raise StoreError(f"no folder {args.path.parent.absolute()}: make it first, or name another")
    else:
        target = args.path
    copy = await asyncio.to_thread(take, database, target, busy_timeout_ms=config.storage.busy_timeout_ms)
    print(f"backup written: {copy.path.absolute()} ({_size(copy.size)}, schema version {copy.version})")
    if folder is not None:
        removed = rotate(folder, database.stem, config.storage.backups_keep)
        if removed:
            print(f"removed {len(removed)} older backup{'s' if len(removed) > 1 else ''}: the newest "
                  f"{config.storage.backups_keep} are kept (storage.backups_keep)")
    return 0


async def restore_command(config: Config, args: argparse.Namespace, config_path: Path) -> int:
    database = config.storage.path
    if args.path.absolute() == database.absolute():
        raise StoreError(f"{args.path} is the database itself (storage.path in {config_path}): name a backup")
    user = await who_uses(config)
    if user is not None:
        print(f"bruce: not restored: {user}; stop it first (sudo systemctl stop bruce), then run bruce restore again",
              file=sys.stderr)
        return 1
    kept = stamped(folder_of(database), database.stem, SystemClock().now(), label="before-restore")
    copy, replaced = await asyncio.to_thread(restore, args.path, database, kept)
    print(f"restored {args.path} into {copy.path.absolute()} ({_size(copy.size)}, schema version {copy.version})")
    if copy.version < len(MIGRATIONS):
        print(f"Bruce migrates it to schema version {len(MIGRATIONS)} at its next start (backing it up first)")
    print(f"the database it replaced is kept as {replaced}" if replaced is not None
          else "there was no database at storage.path before")
    return 0


async def who_uses(config: Config) -> str | None:
    """What shows a Bruce process uses the config's database now, or None: a daemon that answers
    on the console socket, or a live holder of one of the database's leases."""
    from bruce.cli.daemon import NotOurDaemon, connect

    path = config.console.socket_path
    try:
        connected = await connect(path)
    except NotOurDaemon:
        return f"a Bruce daemon of another user answers at {path}"
    except BruceError:  # not a socket we can use: the leases tell
        connected = None
    if connected is not None:
        connected[1].close()
        return f"a Bruce daemon is running (it answers at {path})"
    now, here = utc_iso(SystemClock().now()), socket.gethostname()
    for name, owner, expires_at in await asyncio.to_thread(leases, config.storage.path):
        if not process_gone(owner) and (expires_at > now or owner.split(":")[0] == here):
            return f"a Bruce process ({owner}) is using {config.storage.path} (it holds the {name} lease)"
    return None


def _size(size: int) -> str:
    return f"{size / 1024**2:.1f} MiB" if size >= 1024**2 else f"{size / 1024:.0f} KiB"
