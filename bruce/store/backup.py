"""Backups of the database file: SQLite's online backup API, checked before they count.

``copy_from`` copies what a connection sees in one step of the backup API: every page under one
read transaction, so the copy is one consistent moment of the database. In WAL mode that read
does not hold up writers (the daemon goes on committing into the WAL meanwhile; those commits
are in the next backup). The copy is written to a hidden temporary name in the target folder,
switched to an ordinary single-file journal (no ``-wal`` beside it), passed through ``PRAGMA
integrity_check``, flushed to disk and only then renamed into place: a backup that exists is
whole; one that failed leaves nothing behind.

Names, in the data folder's ``backups/`` (``folder_of``), stamped in UTC:

    bruce-20261205T141500Z.db                 ``bruce backup`` (rotated: ``storage.backups_keep``)
    bruce-v15-20261205T141500Z.db             before migrating a database from schema version 15
    bruce-before-restore-20261205T141500Z.db  the database ``bruce restore`` replaced

``restore`` puts a checked copy in place of the database; ``leases`` reads who holds a lease,
without migrating anything, so that ``bruce restore`` can tell whether a daemon runs.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bruce.errors import StoreError
from bruce.store.migrations import MIGRATIONS

__all__ = ["BACKUPS", "Copy", "check", "copy_from", "folder_of", "leases", "restore", "rotate", "stamped", "take"]

BACKUPS = "backups"  # the folder beside the database that holds its backups
_STAMP = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True, slots=True)
class Copy:
    """A backup as written (or a database as restored): where, how large, its schema version."""

    path: Path
    size: int
    version: int


def folder_of(database: Path) -> Path:
    """Where a database's backups go by default: ``backups/`` in its folder."""
    return database.parent / BACKUPS


def stamped(folder: Path, stem: str, now: datetime, *, label: str = "") -> Path:
    """A new file name in ``folder``: ``<stem>[-<label>]-<UTC stamp>.db``, then ``-1``, ``-2``… after
    the highest of that second (never a name rotation freed: it would sort before the newer ones)."""
    base = f"{stem}-{label}-" if label else f"{stem}-"
    base += now.astimezone(UTC).strftime(_STAMP)
    same = re.compile(re.escape(base) + r"(?:-(\d+))?\.db")
    taken = [int(m.group(1) or 0) for p in folder.glob(f"{base}*.db") if (m := same.fullmatch(p.name))]
    return folder / (f"{base}-{max(taken) + 1}.db" if taken else f"{base}.db")


def rotate(folder: Path, stem: str, keep: int) -> list[Path]:
    """Remove ``bruce backup``'s stamped files for ``stem`` in ``folder`` beyond the newest ``keep``
    (pre-migration and pre-restore copies, and files of other names, are left alone); the removed."""
    series = re.compile(re.escape(stem) + r"-(\d{8}T\d{6}Z)(?:-(\d+))?\.db")
    found = []
    for path in folder.glob(f"{stem}-*.db"):
        match = series.fullmatch(path.name)
        if match:
            found.append(((match.group(1), int(match.group(2) or 0)), path))
    old = [path for _, path in sorted(found, reverse=True)[keep:]]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def _open_read_only(path: Path, what: str) -> sqlite3.Connection:
    """``path`` opened read-only; StoreError naming ``what`` (database, backup) when it cannot be."""
    if not path.is_file():
        raise StoreError(f"no {what} at {path.absolute()}")
    try:
        return sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}") from exc


def take(database: Path, target: Path, *, busy_timeout_ms: int = 5000, verb: str = "back up") -> Copy:
    """Back ``database`` up into ``target`` (a new file), while other processes may write to it."""
    source = _open_read_only(database, "database")
    try:
        source.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        return copy_from(source, target, name=str(database))
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot {verb} {database}: {exc}") from exc
    except OSError as exc:  # a folder we may not write, a full disk
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        source.close()


def copy_from(source: sqlite3.Connection, target: Path, *, name: str = "the copy") -> Copy:
    """What ``source`` sees, written whole to ``target`` or not at all (see the module's text);
    a failed check names the copy as ``name``. ``target`` must not exist; its folder is made
    (mode 0700: a backup holds every conversation)."""
    _make_folder(target.parent)
    partial = target.parent / f".{target.name}.{os.getpid()}.partial"
    os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))  # an empty file is an empty database
    try:
        _owned_like(partial, target.parent)
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)  # pages=-1: one step, one snapshot
            copy.execute("PRAGMA journal_mode=DELETE")
            version = _checked(copy, name)
        finally:
            copy.close()
        _flush(partial)
        if target.exists():
            raise StoreError(f"{target} exists: choose another name")
        os.replace(partial, target)
        _flush(target.parent)
    finally:
        partial.unlink(missing_ok=True)
    return Copy(target, target.stat().st_size, version)


def check(path: Path) -> int:
    """``path``'s schema version, once it has passed ``PRAGMA integrity_check`` and is a Bruce
    database this Bruce knows; StoreError saying what is wrong otherwise."""
    connection = _open_read_only(path, "backup")
    try:
        return _checked(connection, str(path))
    finally:
        connection.close()


def _checked(connection: sqlite3.Connection, name: str) -> int:
    try:
        problems = [str(row[0]) for row in connection.execute("PRAGMA integrity_check").fetchall()]
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        tables = {str(row[0]) for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{name} is not a usable database: {exc}") from exc
    if problems != ["ok"]:
        raise StoreError(f"{name} failed the integrity check: {'; '.join(problems[:3])}")
    if version < 1 or "conversations" not in tables:
        raise StoreError(f"{name} is not a Bruce database (schema version {version})")
    if version > len(MIGRATIONS):
        raise StoreError(f"{name} has schema version {version}, newer than this Bruce knows ({len(MIGRATIONS)}): "
                         "use the Bruce version that wrote it, or update Bruce first")
    return version


def restore(backup: Path, database: Path, kept: Path) -> tuple[Copy, Path | None]:
    """Put a copy of ``backup`` in place of ``database`` (no process may have it open), once the
    copy has passed ``check``'s tests.
    The database replaced is copied to ``kept`` first (its ``-wal`` beside it, as ``kept-wal``).
    Returns the restored copy and the kept path (None when there was no database)."""
    if not backup.is_file():
        raise StoreError(f"no backup at {backup.absolute()}")
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot make {database.parent}: {exc.strerror or exc}") from exc
    staged = take(backup, stamped(database.parent, f".{database.stem}-restoring", datetime.now(UTC)), verb="restore")
    try:
        previous = _swap(staged.path, database, kept)
    except OSError as exc:
        raise StoreError(f"cannot restore into {database}: {exc.strerror or exc}") from exc
    finally:
        staged.path.unlink(missing_ok=True)
    return Copy(database, database.stat().st_size, staged.version), kept if previous is not None else None


def _swap(staged: Path, database: Path, kept: Path) -> os.stat_result | None:
    """``staged`` renamed to ``database``, the database it replaces kept first; its stat, or None."""
    previous = database.stat() if database.exists() else None
    if previous is not None:
        _keep(database, kept)
        os.chmod(staged, previous.st_mode & 0o777)
        if os.geteuid() == 0:  # `sudo bruce restore`: the daemon's user keeps its file
            os.chown(staged, previous.st_uid, previous.st_gid)
    for suffix in ("-wal", "-shm"):  # the old WAL must never be replayed into the restored file
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    os.replace(staged, database)
    _flush(database.parent)
    return previous


def _keep(database: Path, kept: Path) -> None:
    """The database as it is (with its WAL: what it holds may not be in the main file yet)."""
    _make_folder(kept.parent)
    shutil.copy2(database, kept)
    os.chmod(kept, 0o600)
    _owned_like(kept, kept.parent)
    wal = Path(f"{database}-wal")
    if wal.exists() and wal.stat().st_size:
        shutil.copy2(wal, Path(f"{kept}-wal"))
        _owned_like(Path(f"{kept}-wal"), kept.parent)
        _flush(Path(f"{kept}-wal"))
    _flush(kept)
    _flush(kept.parent)


def leases(database: Path) -> list[tuple[str, str, str]]:
    """(name, owner, expires_at) of every lease held in ``database``, read without changing it:
    empty when there is no database, or it predates leases."""
    if not database.is_file():
        return []
    try:
        connection = sqlite3.connect(database.absolute().as_uri() + "?mode=ro", uri=True)
        try:
            rows = connection.execute("SELECT name, owner, expires_at FROM leases").fetchall()
        finally:
            connection.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise StoreError(f"cannot read {database}: {exc}") from exc
    except sqlite3.DatabaseError:
        return []  # not a database (the damage restore is there to repair): nobody can be serving it
    return [(str(name), str(owner), str(expires)) for name, owner, expires in rows]


def _make_folder(folder: Path) -> None:
    """``folder`` (mode 0700), made if missing and then owned like the folder it is in."""
    try:
        folder.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        if not folder.is_dir():
            raise
        return
    _owned_like(folder, folder.parent)


def _owned_like(path: Path, model: Path) -> None:
    """Run as root (``sudo bruce backup``): ``path`` belongs to whoever owns ``model``, so that the
    daemon's user can still write its folder (the backup before a migration) and read its files."""
    if os.geteuid() == 0:
        found = model.stat()
        os.chown(path, found.st_uid, found.st_gid)


def _flush(path: Path) -> None:
    """To the disk: a file's bytes, or a folder's entries (a rename is durable once its folder is)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
