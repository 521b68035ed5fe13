"""What the calendar tools need from a calendar: the SQLite file (``store``) or a CalDAV
collection (``caldav_store``) give the same methods, so the tools do not know which one runs.

A backend that cannot reach its calendar raises :class:`CalendarUnavailable`; the tools turn it
into an error that starts with ``unavailable:``. An unknown event id is :class:`EventNotFound`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from tools.mcp_servers.calendar.store import Change, Event, EventNotFound, NewEvent

__all__ = ["CalendarBackend", "CalendarUnavailable", "Change", "EventNotFound"]


class CalendarUnavailable(Exception):
    """The calendar did not answer, or refused the login; the message says which, without secrets."""


class CalendarBackend(Protocol):
    def overlapping(self, start: datetime, end: datetime) -> list[Event]: ...

    def upcoming(self, now: datetime, until: datetime, limit: int) -> list[Event]: ...

    def create(self, events: Sequence[NewEvent], now: datetime) -> list[tuple[Event, bool]]: ...

    def get(self, event_id: str) -> Event: ...

    def update(self, event_id: str, change: Change) -> Event: ...

    def delete(self, event_id: str) -> Event: ...
