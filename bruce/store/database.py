"""The one connection: aiosqlite over SQLite in WAL mode, schema from ``migrations``.

Only the store package runs SQL. Every write commits before it returns, so what a caller was
told is stored survives a crash. Writers share one connection and take turns on one lock.

aiosqlite runs every call on the connection's own thread; each call is one trip there and
back through the event loop (about 60-70 microseconds of CPU). ``write`` and ``read`` run a
plain function of the ``sqlite3`` connection in one trip: a write's statements and its commit
(or rollback), or several reads. aiosqlite has no public name for that trip: it goes through
``_aiosqlite_shim``, the one module that touches aiosqlite's internals (tested, its version pinned).

The WAL is bounded: ``journal_size_limit`` (``WAL_SIZE_LIMIT``) makes SQLite cut the ``-wal`` file
back to that size each time a checkpoint resets it, instead of leaving it at its largest. A write
that fails because the disk is full or failing (SQLITE_FULL, SQLITE_IOERR) is followed by a
``wal_checkpoint(TRUNCATE)``: what the WAL holds is copied into the database file and the WAL is
emptied to 0 bytes, so the space it took is given back at once (``store.wal_truncated``, or
``store.checkpoint_failed`` when even that cannot run).

Before a migration changes a database that already has a schema, ``migrate`` backs it up into
``backups/`` beside it (``bruce.store.backup``), named for the version it came from; a backup
that cannot be written stops the migration, and nothing is changed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import structlog

from bruce.clock import Clock, utc_iso
from bruce.errors import StoreBusy, StoreError
from bruce.store._aiosqlite_shim import run_on_connection_thread
from bruce.store.backup import copy_from, folder_of, stamped
from bruce.store.migrations import MIGRATIONS

__all__ = ["Database"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

WAL_SIZE_LIMIT = 4 * 2**20  # bytes the -wal file is cut back to after a checkpoint (PRAGMA journal_size_limit)


class Database:
    """The connection, its write lock and the clock that stamps rows."""

    def __init__(self, connection: aiosqlite.Connection, clock: Clock, *, busy_retries: int = 2,
                 busy_timeout_ms: int = 5000, path: Path | None = None) -> None:
        self._db = connection
        self._clock = clock
        self.path = path  # the file (None: in memory); its backups go in backups/ beside it
        self._write_lock = asyncio.Lock()
        self._busy_retries = busy_retries
        self._busy_timeout_ms = busy_timeout_ms
        self._writers = 0  # writes started (queued or running) and not finished
        self._no_writers = asyncio.Event()
        self._no_writers.set()

    @classmethod
    async def open(cls, path: Path | str, clock: Clock, *, busy_timeout_ms: int = 5000,
                   create: bool = True) -> Database:
        """Connect and migrate. ``create=False`` (commands that only read or decide) refuses a
        missing file with StoreError and makes neither the file nor its folder."""
        path = Path(path)
        memory = str(path) == ":memory:"
        if not create and not memory and not path.exists():
            raise StoreError(f"no database at {path.absolute()}")
        try:
            if memory:
                connection = await aiosqlite.connect(path)
            elif create:
                path.parent.mkdir(parents=True, exist_ok=True)
                connection = await aiosqlite.connect(path)
            else:  # mode=rw: a file removed since the check above is not made again
                connection = await aiosqlite.connect(path.absolute().as_uri() + "?mode=rw", uri=True)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open database {path}: {exc}") from exc
        database = cls(connection, clock, busy_timeout_ms=busy_timeout_ms, path=None if memory else path)
        try:
            await database._prepare()
        except (OSError, sqlite3.Error) as exc:
            await connection.close()
            raise StoreError(_advice(path, exc)) from exc
        except BaseException:
            await connection.close()
            raise
        return database

    async def _prepare(self) -> None:
        db = self._db
        db.row_factory = sqlite3.Row
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA foreign_keys=ON")
        await db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        await self.migrate()

    async def migrate(self) -> int:
        """Apply the migrations this database has not seen; return the schema version."""
        async with self._db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version > len(MIGRATIONS):
            raise StoreError(f"database schema version {version} is newer than this Bruce ({len(MIGRATIONS)})")
        if 0 < version < len(MIGRATIONS):
            await self._back_up_before_migrating(version)
        await self._db.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: set before
        try:
            for target, script in enumerate(MIGRATIONS[version:], start=version + 1):
                await self._db.executescript(f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {target};")
                broken = await self.rows("PRAGMA foreign_key_check")
                if broken:
                    await self._db.rollback()
                    raise StoreError(f"migration {target} would break {len(broken)} foreign keys; nothing changed")
                await self._db.commit()
                log.info("store.migrated", version=target)
        finally:
            await self._db.execute("PRAGMA foreign_keys=ON")
        return len(MIGRATIONS)

    async def _back_up_before_migrating(self, version: int) -> None:
        """The database as schema ``version`` left it, in ``backups/<stem>-vNN-<stamp>.db``."""
        if self.path is None:
            return
        target = stamped(folder_of(self.path), self.path.stem, self._clock.now(), label=f"v{version:02d}")
        try:
            copy = await self._trip(_plainly, lambda conn: copy_from(conn, target, name=str(self.path)))
        except (OSError, sqlite3.Error, StoreError) as exc:
            raise StoreError(f"cannot back up {self.path} before migrating it from schema version {version} "
                             f"to {len(MIGRATIONS)}: {exc}; nothing was changed (free disk space, or make "
                             f"{target.parent} writable)") from exc
        log.info("store.backed_up", reason="migration", path=str(copy.path), version=version, size=copy.size)

    async def close(self, *, drain_s: float = 10.0) -> None:
        """Close once the writes under way have finished (a write shielded from a cancelled
        caller still completes; closing under it would lose it)."""
        try:
            async with asyncio.timeout(drain_s):
                await self._no_writers.wait()
        except TimeoutError:
            log.error("store.close_with_writes_pending", writes=self._writers)
        await self._db.close()

    def now(self) -> str:
        return utc_iso(self._clock.now())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One atomic unit of writes. The connection is shared, so writers take turns: without
        the lock, another coroutine's commit could land in the middle of this transaction."""
        async with self._writing():
            try:
                yield self._db
                await self._db.commit()
            except sqlite3.Error as exc:
                await self._db.rollback()
                if _is_busy(exc):
                    raise StoreBusy(f"database write failed: {exc}") from exc
                if _is_disk_error(exc):
                    await self._trip(_plainly, _truncate_wal)
                raise StoreError(f"database write failed: {exc}") from exc
            except BaseException:
                await self._db.rollback()
                raise

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """Hold the write lock, counted as a write under way (``close`` waits for those)."""
        self._writers += 1
        self._no_writers.clear()
        try:
            async with self._write_lock:
                yield
        finally:
            self._writers -= 1
            if self._writers == 0:
                self._no_writers.set()

    async def write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work``'s statements as one transaction, committed (or rolled back whole) in one trip
        to the database thread. A database locked by another process (longer than the busy
        timeout) is tried again, twice. A caller cancelled meanwhile does not stop the trip: the
        transaction still commits or rolls back whole, never half."""
        for attempt in range(self._busy_retries + 1):
            try:
                async with self._writing():
                    return await self._trip(_atomically, work)
            except sqlite3.Error as exc:
                if not _is_busy(exc):
                    if _is_disk_error(exc):
                        async with self._writing():
                            await self._trip(_plainly, _truncate_wal)
                    raise StoreError(f"database write failed: {exc}") from exc
                if attempt == self._busy_retries:
                    raise StoreBusy(f"database write failed: {exc}") from exc
                log.warning("store.busy_retry", attempt=attempt + 1)
            await asyncio.sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")

    async def read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Several reads (``work`` runs them on the ``sqlite3`` connection) in one trip."""
        try:
            return await self._trip(_plainly, work)
        except sqlite3.Error as exc:
            raise StoreError(f"database read failed: {exc}") from exc

    async def _trip(self, how: Callable[[sqlite3.Connection, Callable[[sqlite3.Connection], _T]], _T],
                    work: Callable[[sqlite3.Connection], _T]) -> _T:
        """One trip to the connection's thread."""
        return await run_on_connection_thread(self._db, lambda conn: how(conn, work))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, int]:
        """Run one write in its own transaction; return (lastrowid, rowcount)."""
        return await self.write(lambda conn: _one_write(conn, sql, params))

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """One read; ``StoreError`` (``StoreBusy`` for a lock) when the database fails it."""
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            error = StoreBusy if _is_busy(exc) else StoreError
            raise error(f"database read failed: {exc}") from exc

    async def row(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        found = await self.rows(sql, params)
        return found[0] if found else None


def _atomically(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """On the database thread: ``work`` and its commit, or a rollback of all of it."""
    try:
        result = work(conn)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return result


def _truncate_wal(conn: sqlite3.Connection) -> None:
    """On the database thread, after a failed write: the WAL copied into the database file and
    emptied, giving its space back (a full disk must not stay full of our WAL)."""
    try:
        busy, wal_pages, moved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        log.error("store.checkpoint_failed", error=str(exc))
        return
    if busy:  # another connection (a reader) kept it from finishing; the next failure tries again
        log.warning("store.checkpoint_blocked", wal_pages=wal_pages, moved=moved)
    else:
        log.warning("store.wal_truncated", wal_pages=wal_pages, moved=moved)


def _plainly(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    return work(conn)


def _one_write(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> tuple[int, int]:
    cur = conn.execute(sql, params)
    return int(cur.lastrowid or 0), cur.rowcount


def _is_busy(exc: sqlite3.Error) -> bool:
    """Locked by another connection: worth trying again (a full disk or a bad file is not)."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _is_disk_error(exc: sqlite3.Error) -> bool:
    """The disk is full or failing (SQLITE_FULL, SQLITE_IOERR*): the WAL should give its space back.
    A broken constraint or a bad statement is not."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR") or (
        isinstance(exc, sqlite3.OperationalError) and ("full" in str(exc) or "disk I/O error" in str(exc)))


def _advice(path: Path, exc: BaseException) -> str:
    """What went wrong with the database file at start-up, and what to do about it."""
    text = str(exc)
    if "readonly" in text or "read-only" in text or isinstance(exc, PermissionError):
        hint = "the file or its folder is read-only: make them writable for the user running Bruce"
    elif "full" in text or "No space" in text:
        hint = "the disk is full: free some space"
    elif "not a database" in text or "malformed" in text:
        hint = "the file is not a Bruce database (or is damaged): point storage.path at another file, or restore a backup (`bruce restore PATH`)"
    else:
        hint = "check storage.path, the folder's permissions and free disk space"
    return f"cannot use the database {path}: {text}; {hint}"
