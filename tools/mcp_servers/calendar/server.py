"""The calendar.* tools: an MCPServer over a calendar backend (the SQLite file or a CalDAV
collection), in one IANA timezone.

Times go out as local ISO 8601 with their UTC offset (``2026-03-14T15:00-03:00``). Argument
shapes are checked by the input schema (pydantic) and reported one line per field, without
echoing the values; the rest (dates that do not parse, an end before its start) raises
:class:`ToolError`. Either way the caller gets an error result naming the field, never a crash.
A calendar that does not answer gives an error result that starts with ``unavailable:``; an
unknown event id, one that starts with ``id:``. The reading tools are here; the writing ones,
and the proposal before a write, are in ``writes``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from tools.mcp_servers.calendar.backend import CalendarBackend, CalendarUnavailable
from tools.mcp_servers.calendar.store import Event, EventNotFound
from tools.mcp_servers.calendar.times import EventView, length, local_iso, view
from tools.mcp_servers.calendar.writes import add_write_tools

__all__ = ["build_server", "free_busy_days"]

SLOT_MINUTES = 30
SLOT = timedelta(minutes=SLOT_MINUTES)

_HHMM = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_HHMM_OR_24 = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"


# ---- output ----


class BusyEvent(BaseModel):
    id: str
    title: str
    start: str
    end: str
    all_day: bool = False


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
                busy=[BusyEvent(id=e.id, title=e.title, start=local_iso(e.start, zone), end=local_iso(e.end, zone),
                                all_day=e.all_day) for e in busy],
                free=[FreeRange(start=local_iso(a, zone), end=local_iso(b, zone), minutes=length(a, b))
                      for a, b in free],
            )
        )
    return views



# ---- the server ----


class _CalendarServer(MCPServer[Any]):
    """An MCPServer whose argument errors read ``events.0.title: String should have at least 1 character``,
    whose calendar being down reads ``unavailable: ...`` and an unknown event ``id: ...``."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, CalendarUnavailable):
                raise ToolError(f"unavailable: {cause}; nothing was read or written") from cause
            if isinstance(cause, EventNotFound):
                raise ToolError(f"id: no event {str(cause)[:300]!r} in the calendar; list_upcoming shows the ids") from cause
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in cause.errors())
            raise ToolError(f"Error executing tool {name}: invalid arguments: {problems}") from cause


def _utc_now() -> datetime:
    return datetime.now(UTC)


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

_Clock = Callable[[], datetime]


def build_server(store: CalendarBackend, zone: ZoneInfo, clock: _Clock = _utc_now) -> MCPServer[Any]:
    """The MCP server with the calendar.* tools over ``store``, reading and showing times in ``zone``."""
    server = _CalendarServer(
        name="bruce-calendar",
        instructions=(
            f"A calendar shown in {zone.key}. Times without a UTC offset are read in {zone.key}. "
            "To add events, call calendar.propose_events (saves nothing), show the owner the proposal, and "
            "only when they agree call calendar.create_events with its proposal_id."
        ),
    )
    _add_free_busy(server, store, zone, clock)
    _add_list_upcoming(server, store, zone, clock)
    add_write_tools(server, store, zone, clock)
    return server


def _add_free_busy(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo, clock: _Clock) -> None:
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


def _add_list_upcoming(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo, clock: _Clock) -> None:
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
        events = [view(e, zone) for e in found[:limit]]
        return UpcomingResult(timezone=zone.key, now=local_iso(now, zone), events=events, more=len(found) > limit)
