"""The calendar's SQLite file: one ``events`` table, times stored as UTC text.

Times are kept as ``YYYY-MM-DDTHH:MM:SSZ`` so that comparing the text compares the instants.
Each call opens its own short connection (the server runs tools on worker threads); the file
is in WAL mode, so a reader never waits for a writer. :meth:`CalendarStore.create` writes all
of its events in one transaction, and an event with the same title, start and end as one
already stored is returned instead of being added again (a unique index backs this up).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["CalendarStore", "Change", "Event", "EventNotFound", "NewEvent", "from_utc_text", "to_utc_text"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    start_utc TEXT NOT NULL,
    end_utc TEXT NOT NULL,
    location TEXT,
    notes TEXT,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_same_event ON events (title, start_utc, end_utc);
CREATE INDEX IF NOT EXISTS events_by_start ON events (start_utc);
"""

_COLUMNS = "id, title, start_utc, end_utc, location, notes, created_at"


@dataclass(frozen=True)
class NewEvent:
    """An event to store; ``start`` and ``end`` are aware datetimes, ``end`` after ``start``."""

    title: str
    start: datetime
    end: datetime
    location: str | None = None
    notes: str | None = None
    uid: str | None = None  # a CalDAV backend stores the event under this UID; SQLite makes its own id


@dataclass(frozen=True)
class Event:
    """A stored event; its times are aware datetimes in UTC."""

    id: str
    title: str
    start: datetime
    end: datetime
    location: str | None
    notes: str | None
    created_at: datetime
    all_day: bool = False  # a date-only event: start and end are midnights in the calendar's timezone
    recurring: bool = False  # one occurrence of a repeating event; its id is the series'


class EventNotFound(Exception):
    """No event has this id."""


@dataclass(frozen=True)
class Change:
    """New values for an event; ``None`` keeps the old one. ``start`` and ``end`` are aware."""

    title: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    location: str | None = None
    notes: str | None = None


def to_utc_text(moment: datetime) -> str:
    """``moment`` (aware) as the stored form, whole seconds in UTC: ``2026-03-14T18:00:00Z``."""
    return moment.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def from_utc_text(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _event(row: sqlite3.Row) -> Event:
    return Event(
        id=row["id"],
        title=row["title"],
        start=from_utc_text(row["start_utc"]),
        end=from_utc_text(row["end_utc"]),
        location=row["location"],
        notes=row["notes"],
        created_at=from_utc_text(row["created_at"]),
    )


class CalendarStore:
    """The events table in the SQLite file at ``path`` (its parent directories are created)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        # isolation_level=None: no implicit transactions; create() opens its own.
        with closing(sqlite3.connect(self.path, timeout=10.0, isolation_level=None)) as conn:
            conn.row_factory = sqlite3.Row
            yield conn

    def overlapping(self, start: datetime, end: datetime) -> list[Event]:
        """Events that overlap ``[start, end)``, by start time."""
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE start_utc < ? AND end_utc > ? ORDER BY start_utc, end_utc, id",
                (to_utc_text(end), to_utc_text(start)),
            ).fetchall()
        return [_event(row) for row in rows]

    def upcoming(self, now: datetime, until: datetime, limit: int) -> list[Event]:
        """At most ``limit`` events not yet ended at ``now`` that start before ``until``, soonest first."""
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM events WHERE end_utc > ? AND start_utc < ? "
                "ORDER BY start_utc, end_utc, id LIMIT ?",
                (to_utc_text(now), to_utc_text(until), limit),
            ).fetchall()
        return [_event(row) for row in rows]

    def create(self, events: Sequence[NewEvent], now: datetime) -> list[tuple[Event, bool]]:
        """Store ``events`` in one transaction: all of them or, on any error, none.

        Returns each event as stored with ``True``, or the identical event (same title, start
        and end) that was already there with ``False``; nothing is stored twice.
        """
        results: list[tuple[Event, bool]] = []
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")  # take the write lock now: no other writer between check and insert
            try:
                for new in events:
                    results.append(self._create_one(conn, new, now))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return results

    @staticmethod
    def _create_one(conn: sqlite3.Connection, new: NewEvent, now: datetime) -> tuple[Event, bool]:
        key = (new.title, to_utc_text(new.start), to_utc_text(new.end))
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM events WHERE title = ? AND start_utc = ? AND end_utc = ?", key
        ).fetchone()
        if row is not None:
            return _event(row), False
        event_id = "ev_" + secrets.token_hex(8)
        conn.execute(
            f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event_id, *key, new.location, new.notes, to_utc_text(now)),
        )
        row = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
        return _event(row), True

    def get(self, event_id: str) -> Event:
        with self._connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
        if row is None:
            raise EventNotFound(event_id)
        return _event(row)

    def update(self, event_id: str, change: Change) -> Event:
        """The event with ``change`` applied (``None`` fields keep their value)."""
        old = self.get(event_id)
        start, end = change.start or old.start, change.end or old.end
        with self._connection() as conn:
            conn.execute(
                "UPDATE events SET title = ?, start_utc = ?, end_utc = ?, location = ?, notes = ? WHERE id = ?",
                (change.title or old.title, to_utc_text(start), to_utc_text(end),
                 old.location if change.location is None else change.location or None,
                 old.notes if change.notes is None else change.notes or None, event_id),
            )
        return self.get(event_id)

    def delete(self, event_id: str) -> Event:
        """Remove the event; returns it as it was."""
        old = self.get(event_id)
        with self._connection() as conn:
            conn.execute("DELETE FROM events WHERE id = ?", (event_id,))
        return old
