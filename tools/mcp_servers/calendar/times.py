"""What the calendar tools share: event arguments read in the calendar's timezone, and times
and events shown back in it.

Times come in as ISO 8601; one without an offset is read in the server's timezone. They go out
as local ISO 8601 with their UTC offset (``2026-03-14T15:00-03:00``); an all-day event keeps
that form (local midnight to midnight) and says ``all_day``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tools.mcp_servers.calendar.store import Event, NewEvent

__all__ = ["DEFAULT_DURATION_MINUTES", "EventInput", "EventList", "EventView", "length", "local_iso",
           "normalize_events", "parse_time", "view"]

DEFAULT_DURATION_MINUTES = 30
MIN_YEAR, MAX_YEAR = 1900, 2999


# ---- input ----


class EventInput(BaseModel):
    """One event to propose or create."""

    model_config = ConfigDict(extra="forbid")

    title: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)] = Field(
        description="What the event is, 1-200 characters."
    )
    start: Annotated[str, StringConstraints(max_length=64)] = Field(
        description="ISO 8601 date and time, e.g. 2026-03-14T15:00; without an offset it is in the calendar's timezone."
    )
    end: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        None, description="ISO 8601 date and time after start. Give end or duration_minutes, not both."
    )
    duration_minutes: Annotated[int, Field(ge=1, le=1440)] | None = Field(
        None, description=f"Length in minutes, instead of end (default {DEFAULT_DURATION_MINUTES})."
    )
    location: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] | None = None
    notes: Annotated[str, StringConstraints(max_length=2000)] | None = None


EventList = Annotated[list[EventInput], Field(min_length=1, max_length=20, description="1 to 20 events.")]


def parse_time(text: str, zone: ZoneInfo, field: str) -> datetime:
    """``text`` as an aware UTC datetime in whole seconds; a naive time is in ``zone``."""
    text = text.strip()
    try:
        date.fromisoformat(text)
    except ValueError:
        pass
    else:
        raise ToolError(f"{field}: {text!r} is a date without a time of day; add one, e.g. {text}T09:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{field}: {text[:64]!r} is not an ISO 8601 date and time such as 2026-03-14T15:00") from None
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        raise ToolError(f"{field}: the year must be between {MIN_YEAR} and {MAX_YEAR}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(UTC).replace(microsecond=0)


def _normalize_one(item: EventInput, zone: ZoneInfo, where: str) -> NewEvent:
    start = parse_time(item.start, zone, f"{where}.start")
    if item.end is not None and item.duration_minutes is not None:
        raise ToolError(f"{where}: give end or duration_minutes, not both")
    if item.end is not None:
        end = parse_time(item.end, zone, f"{where}.end")
        if end <= start:
            raise ToolError(f"{where}.end: {item.end.strip()!r} is not after start ({local_iso(start, zone)})")
    else:
        end = start + timedelta(minutes=item.duration_minutes or DEFAULT_DURATION_MINUTES)
    return NewEvent(title=item.title, start=start, end=end, location=item.location or None, notes=item.notes or None)


def normalize_events(items: list[EventInput], zone: ZoneInfo) -> list[NewEvent]:
    """The events with their times resolved to UTC; every problem found is reported in one ToolError."""
    events: list[NewEvent] = []
    problems: list[str] = []
    for index, item in enumerate(items):
        try:
            events.append(_normalize_one(item, zone, f"events.{index}"))
        except ToolError as exc:
            problems.append(str(exc))
    if problems:
        raise ToolError("; ".join(problems))
    return events


# ---- output ----


def local_iso(moment: datetime, zone: ZoneInfo) -> str:
    """``moment`` in ``zone`` as ISO 8601 with its offset, to the minute when the seconds are zero."""
    return moment.astimezone(zone).isoformat(timespec="minutes" if moment.second == 0 else "seconds")


class EventView(BaseModel):
    id: str
    title: str
    start: str
    end: str
    location: str | None = None
    notes: str | None = None

    all_day: bool = False
    recurring: bool = Field(False, description="One occurrence of a repeating event; its id is the whole series'.")


def length(start: datetime, end: datetime) -> int:
    """Whole minutes from ``start`` to ``end``."""
    return (end - start) // timedelta(minutes=1)


def view(event: Event, zone: ZoneInfo) -> EventView:
    return EventView(
        id=event.id,
        title=event.title,
        start=local_iso(event.start, zone),
        end=local_iso(event.end, zone),
        location=event.location,
        notes=event.notes,
        all_day=event.all_day,
        recurring=event.recurring,
    )
