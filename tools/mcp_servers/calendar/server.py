"""The calendar.* tools: an MCPServer over a :class:`CalendarStore`, in one IANA timezone.

Times go out as local ISO 8601 with their UTC offset (``2026-03-14T15:00-03:00``). Times come
in as ISO 8601; one without an offset is read in the server's timezone. Argument shapes are
checked by the input schema (pydantic) and reported one line per field, without echoing the
values; the rest (dates that do not parse, an end before its start) raises :class:`ToolError`.
Either way the caller gets an error result naming the field, never a crash. ``propose_events`` and ``create_events`` share that validation and the conflict check;
only ``create_events`` writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from tools.mcp_servers.calendar.store import CalendarStore, Event, NewEvent

__all__ = ["EventInput", "build_server", "free_busy_days", "normalize_events"]

SLOT_MINUTES = 30
SLOT = timedelta(minutes=SLOT_MINUTES)
DEFAULT_DURATION_MINUTES = 30
MIN_YEAR, MAX_YEAR = 1900, 2999
NOTHING_SAVED = "Nothing was saved. Call calendar.create_events with these events to add them."

_HHMM = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_HHMM_OR_24 = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"


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


def _parse_time(text: str, zone: ZoneInfo, field: str) -> datetime:
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
    start = _parse_time(item.start, zone, f"{where}.start")
    if item.end is not None and item.duration_minutes is not None:
        raise ToolError(f"{where}: give end or duration_minutes, not both")
    if item.end is not None:
        end = _parse_time(item.end, zone, f"{where}.end")
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


class BusyEvent(BaseModel):
    id: str
    title: str
    start: str
    end: str


class FreeRange(BaseModel):
    start: str
    end: str
    minutes: int


class DayView(BaseModel):
    date: str
    weekday: str
    busy: list[BusyEvent] = Field(description="Events on this day that have not ended yet.")
    free: list[FreeRange] = Field(description="Free whole 30-minute slots between day_start and day_end, merged.")


class FreeBusyResult(BaseModel):
    timezone: str
    now: str
    slot_minutes: int
    days: list[DayView]


class UpcomingResult(BaseModel):
    timezone: str
    now: str
    events: list[EventView]
    more: bool = Field(description="True when more events in the window were left out by limit.")


class Conflict(BaseModel):
    kind: Literal["existing", "proposed"] = Field(
        description="existing: an event already in the calendar; proposed: another event in this same call."
    )
    id: str | None = Field(None, description="The existing event's id.")
    index: int | None = Field(None, description="The other event's position in this call's events.")
    title: str
    start: str
    end: str


class CheckedEvent(BaseModel):
    index: int
    title: str
    start: str
    end: str
    duration_minutes: int
    location: str | None = None
    notes: str | None = None
    existing_id: str | None = Field(
        None, description="An identical event (same title, start, end) already saved; create_events returns it."
    )
    conflicts: list[Conflict]


class ProposalResult(BaseModel):
    saved: bool
    note: str
    events: list[CheckedEvent]


class CreatedEvent(EventView):
    created: bool = Field(description="False when an identical event already existed and was returned instead.")
    conflicts: list[Conflict]


class CreateResult(BaseModel):
    added: int = Field(description="How many events were written.")
    already_saved: int = Field(description="How many were identical to saved events, returned instead.")
    events: list[CreatedEvent]


# ---- the work behind the tools ----


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def _wall(day: date, minutes: int, zone: ZoneInfo) -> datetime:
    """The UTC instant of the wall-clock time ``minutes`` after midnight of ``day`` in ``zone``."""
    naive = datetime.combine(day, time()) + timedelta(minutes=minutes)
    return naive.replace(tzinfo=zone).astimezone(UTC)


def _free_ranges(busy: list[Event], first: datetime, last: datetime, now: datetime) -> list[tuple[datetime, datetime]]:
    """Free 30-minute slots from ``first`` while they end by ``last``, merged; past or busy slots are not free."""
    ranges: list[tuple[datetime, datetime]] = []
    slot = first
    while slot + SLOT <= last:
        slot_end = slot + SLOT
        free = slot >= now and not any(e.start < slot_end and e.end > slot for e in busy)
        if free and ranges and ranges[-1][1] == slot:
            ranges[-1] = (ranges[-1][0], slot_end)
        elif free:
            ranges.append((slot, slot_end))
        slot = slot_end
    return ranges


def free_busy_days(
    events: list[Event], zone: ZoneInfo, now: datetime, days: int, day_start: str, day_end: str
) -> list[DayView]:
    """Per local day from today, for ``days`` days: the events not yet ended and the free ranges.

    Slots lie on the local half-hour grid (:00 and :30); one counts only if it fits inside
    ``day_start``..``day_end`` whole and starts at or after ``now``.
    """
    start_minutes = -(-_minutes(day_start) // SLOT_MINUTES) * SLOT_MINUTES  # round up to the grid
    end_minutes = _minutes(day_end)
    today = now.astimezone(zone).date()
    views: list[DayView] = []
    for offset in range(days):
        day = today + timedelta(days=offset)
        begins, ends = max(_wall(day, 0, zone), now), _wall(day + timedelta(days=1), 0, zone)
        busy = [e for e in events if e.start < ends and e.end > begins]
        free = _free_ranges(busy, _wall(day, start_minutes, zone), _wall(day, end_minutes, zone), now)
        views.append(
            DayView(
                date=day.isoformat(),
                weekday=day.strftime("%A"),
                busy=[BusyEvent(id=e.id, title=e.title, start=local_iso(e.start, zone), end=local_iso(e.end, zone))
                      for e in busy],
                free=[FreeRange(start=local_iso(a, zone), end=local_iso(b, zone), minutes=_length(a, b))
                      for a, b in free],
            )
        )
    return views


def _overlaps(a: NewEvent | Event, b: NewEvent | Event) -> bool:
    return a.start < b.end and b.start < a.end


def _same(a: NewEvent | Event, b: NewEvent | Event) -> bool:
    return (a.title, a.start, a.end) == (b.title, b.start, b.end)


@dataclass(frozen=True)
class _Check:
    """What the calendar already holds against one event of a call."""

    existing_id: str | None
    conflicts: list[Conflict]


def _check(store: CalendarStore, events: list[NewEvent], zone: ZoneInfo) -> list[_Check]:
    checks: list[_Check] = []
    for index, event in enumerate(events):
        existing = store.overlapping(event.start, event.end)
        same = next((e for e in existing if _same(e, event)), None)
        conflicts = [
            Conflict(kind="existing", id=e.id, title=e.title, start=local_iso(e.start, zone), end=local_iso(e.end, zone))
            for e in existing
            if e is not same
        ]
        conflicts += [
            Conflict(kind="proposed", index=j, title=o.title, start=local_iso(o.start, zone), end=local_iso(o.end, zone))
            for j, o in enumerate(events)
            if j != index and _overlaps(o, event)
        ]
        checks.append(_Check(existing_id=same.id if same else None, conflicts=conflicts))
    return checks


def _length(start: datetime, end: datetime) -> int:
    """Whole minutes from ``start`` to ``end``."""
    return (end - start) // timedelta(minutes=1)


def _times(event: NewEvent, zone: ZoneInfo) -> dict[str, Any]:
    return {
        "title": event.title,
        "start": local_iso(event.start, zone),
        "end": local_iso(event.end, zone),
        "duration_minutes": _length(event.start, event.end),
        "location": event.location,
        "notes": event.notes,
    }


def _view(event: Event, zone: ZoneInfo) -> EventView:
    return EventView(
        id=event.id,
        title=event.title,
        start=local_iso(event.start, zone),
        end=local_iso(event.end, zone),
        location=event.location,
        notes=event.notes,
    )


# ---- the server ----


class _CalendarServer(MCPServer[Any]):
    """An MCPServer whose argument errors read ``events.0.title: String should have at least 1 character``."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in cause.errors())
            raise ToolError(f"Error executing tool {name}: invalid arguments: {problems}") from cause


def _utc_now() -> datetime:
    return datetime.now(UTC)


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITES_ONCE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

_Clock = Callable[[], datetime]


def build_server(store: CalendarStore, zone: ZoneInfo, clock: _Clock = _utc_now) -> MCPServer[Any]:
    """The MCP server with the four calendar.* tools over ``store``, reading and showing times in ``zone``."""
    server = _CalendarServer(
        name="bruce-calendar",
        instructions=(
            f"A local calendar in {zone.key}. Times without a UTC offset are read in {zone.key}. "
            "Check events with calendar.propose_events (saves nothing) before calendar.create_events saves them."
        ),
    )
    _add_free_busy(server, store, zone, clock)
    _add_list_upcoming(server, store, zone, clock)
    _add_propose_events(server, store, zone)
    _add_create_events(server, store, zone, clock)
    return server


def _add_free_busy(server: MCPServer[Any], store: CalendarStore, zone: ZoneInfo, clock: _Clock) -> None:
    @server.tool(
        name="calendar.free_busy",
        description="Busy events and free 30-minute ranges for each day from today, in the calendar's timezone.",
        annotations=_READ_ONLY,
    )
    def free_busy(
        days: Annotated[int, Field(ge=1, le=14, description="How many days, from today.")] = 7,
        day_start: Annotated[str, Field(pattern=_HHMM, description="Earliest free time, HH:MM.")] = "08:00",
        day_end: Annotated[str, Field(pattern=_HHMM_OR_24, description="Latest free time, HH:MM.")] = "20:00",
    ) -> FreeBusyResult:
        if _minutes(day_end) <= _minutes(day_start):
            raise ToolError(f"day_end: {day_end} is not later than day_start ({day_start})")
        now = clock().replace(microsecond=0)
        horizon = _wall(now.astimezone(zone).date() + timedelta(days=days), 0, zone)
        views = free_busy_days(store.overlapping(now, horizon), zone, now, days, day_start, day_end)
        return FreeBusyResult(timezone=zone.key, now=local_iso(now, zone), slot_minutes=SLOT_MINUTES, days=views)


def _add_list_upcoming(server: MCPServer[Any], store: CalendarStore, zone: ZoneInfo, clock: _Clock) -> None:
    @server.tool(
        name="calendar.list_upcoming",
        description="Events that have not ended yet, soonest first, with local times.",
        annotations=_READ_ONLY,
    )
    def list_upcoming(
        days: Annotated[int, Field(ge=1, le=60, description="How many days ahead to look.")] = 7,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many events.")] = 20,
    ) -> UpcomingResult:
        now = clock().replace(microsecond=0)
        found = store.upcoming(now, now + timedelta(days=days), limit + 1)
        events = [_view(e, zone) for e in found[:limit]]
        return UpcomingResult(timezone=zone.key, now=local_iso(now, zone), events=events, more=len(found) > limit)


def _add_propose_events(server: MCPServer[Any], store: CalendarStore, zone: ZoneInfo) -> None:
    @server.tool(
        name="calendar.propose_events",
        description="Check events before saving: normalized times and conflicts. Writes nothing to the calendar.",
        annotations=_READ_ONLY,
    )
    def propose_events(events: EventList) -> ProposalResult:
        normalized = normalize_events(events, zone)
        checks = _check(store, normalized, zone)
        checked = [
            CheckedEvent(index=i, **_times(e, zone), existing_id=c.existing_id, conflicts=c.conflicts)
            for i, (e, c) in enumerate(zip(normalized, checks, strict=True))
        ]
        return ProposalResult(saved=False, note=NOTHING_SAVED, events=checked)


def _add_create_events(server: MCPServer[Any], store: CalendarStore, zone: ZoneInfo, clock: _Clock) -> None:
    @server.tool(
        name="calendar.create_events",
        description=(
            "Write events to the calendar, all or none. Returns them with their ids; "
            "an identical event (same title, start, end) already saved is returned, not duplicated."
        ),
        annotations=_WRITES_ONCE,
    )
    def create_events(events: EventList) -> CreateResult:
        normalized = normalize_events(events, zone)
        checks = _check(store, normalized, zone)
        stored = store.create(normalized, clock())
        created = [
            CreatedEvent(**_view(e, zone).model_dump(), created=new, conflicts=c.conflicts)
            for (e, new), c in zip(stored, checks, strict=True)
        ]
        added = sum(1 for c in created if c.created)
        return CreateResult(added=added, already_saved=len(created) - added, events=created)
