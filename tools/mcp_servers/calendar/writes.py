"""The calendar tools that change the calendar, and the proposal that comes before a write.

``calendar.propose_events`` checks events (times resolved, conflicts found) and keeps them in
this process as a proposal with an id; it writes nothing. ``calendar.create_events`` takes only
that id, so what is written is exactly what was proposed and shown to the owner, never new
arguments. A proposal lives for ``PROPOSAL_TTL`` and at most ``MAX_PROPOSALS`` are kept; a
restarted server has none, and the model is told to propose again. Each proposed event gets
the UID ``<proposal id>.<index>@bruce``, so creating a proposal twice writes each event once.
``calendar.show_proposal`` shows a proposal again by id, and ``create_events`` names it in its
``_meta`` as its preview, so Bruce's approval card shows the events about to be written.
``calendar.update_event`` and ``calendar.delete_event`` work on one event by id (a repeating
event: the whole series); ``calendar.show_change`` and ``calendar.show_event`` preview them.
Bruce's config asks the owner before any of the three writing tools run.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, StringConstraints

from tools.mcp_servers.calendar.backend import CalendarBackend
from tools.mcp_servers.calendar.store import Change, Event, NewEvent
from tools.mcp_servers.calendar.times import (
    EventList,
    EventView,
    length,
    local_iso,
    normalize_events,
    parse_time,
    view,
)

__all__ = ["PROPOSAL_TTL", "Proposals", "add_write_tools"]

PROPOSAL_TTL = timedelta(hours=24)
MAX_PROPOSALS = 200
NOTHING_SAVED = (
    "Nothing was saved. Show these events to the owner; if they agree, call calendar.create_events "
    "with this proposal_id (it writes exactly these events)."
)

SHOWN = "Nothing was saved. calendar.create_events with this proposal_id writes exactly these events."
PREVIEW_META = "bruce/dry_run_tool"  # tools/mcp/catalog.py: names the tool that previews this one

_Clock = Callable[[], datetime]
_EventId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]
_ProposalId = Annotated[str, Field(pattern=r"^pr_[0-9a-f]{16}$", description="The id calendar.propose_events returned.")]


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
    proposal_id: str = Field(description="What calendar.create_events takes, once the owner agrees.")
    saved: bool
    note: str
    events: list[CheckedEvent]


class CreatedEvent(EventView):
    created: bool = Field(description="False when an identical event already existed and was returned instead.")
    conflicts: list[Conflict]


class CreateResult(BaseModel):
    proposal_id: str
    added: int = Field(description="How many events were written.")
    already_saved: int = Field(description="How many were identical to saved events, returned instead.")
    events: list[CreatedEvent]



def _overlaps(a: NewEvent | Event, b: NewEvent | Event) -> bool:
    return a.start < b.end and b.start < a.end


def _same(a: NewEvent | Event, b: NewEvent | Event) -> bool:
    return (a.title, a.start, a.end) == (b.title, b.start, b.end)


@dataclass(frozen=True)
class _Check:
    """What the calendar already holds against one event of a call."""

    existing_id: str | None
    conflicts: list[Conflict]


def _check(store: CalendarBackend, events: list[NewEvent], zone: ZoneInfo) -> list[_Check]:
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



def _times(event: NewEvent, zone: ZoneInfo) -> dict[str, Any]:
    return {
        "title": event.title,
        "start": local_iso(event.start, zone),
        "end": local_iso(event.end, zone),
        "duration_minutes": length(event.start, event.end),
        "location": event.location,
        "notes": event.notes,
    }


class Proposals:
    """Proposed events by id, in memory, oldest dropped first past ``MAX_PROPOSALS``."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[datetime, list[NewEvent]]] = OrderedDict()
        self._lock = threading.Lock()  # the SDK runs synchronous tools on worker threads

    def add(self, events: list[NewEvent], now: datetime) -> str:
        proposal_id = "pr_" + secrets.token_hex(8)
        with self._lock:
            self._held[proposal_id] = (now, [replace(e, uid=f"{proposal_id}.{i}@bruce") for i, e in enumerate(events)])
            while len(self._held) > MAX_PROPOSALS:
                self._held.popitem(last=False)
        return proposal_id

    def get(self, proposal_id: str, now: datetime) -> list[NewEvent]:
        with self._lock:
            held = self._held.get(proposal_id)
        if held is None or now - held[0] > PROPOSAL_TTL:
            raise ToolError(
                f"proposal_id: {proposal_id} is unknown or expired (proposals are kept {PROPOSAL_TTL.total_seconds() / 3600:.0f} h "
                "and lost when the calendar server restarts); call calendar.propose_events again"
            )
        return held[1]


class ChangedEvent(BaseModel):
    event: EventView = Field(description="The event as it is now.")
    before: EventView


class DeletedEvent(BaseModel):
    deleted: EventView = Field(description="The event as it was (a repeating event: every occurrence is gone).")


_PROPOSES = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITES_ONCE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def add_write_tools(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo, clock: _Clock) -> None:
    """``propose_events``, ``show_proposal``, ``create_events``, ``update_event`` and ``delete_event``."""
    proposals = Proposals()
    _add_propose_events(server, store, zone, clock, proposals)
    _add_show_proposal(server, store, zone, clock, proposals)
    _add_create_events(server, store, zone, clock, proposals)
    _add_update_event(server, store, zone)
    _add_delete_event(server, store, zone)


def _add_propose_events(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo, clock: _Clock,
                        proposals: Proposals) -> None:
    @server.tool(
        name="calendar.propose_events",
        description=(
            "Check events before saving: normalized times and conflicts, kept as a proposal with an id. "
            "Writes nothing to the calendar."
        ),
        annotations=_PROPOSES,
    )
    def propose_events(events: EventList) -> ProposalResult:
        normalized = normalize_events(events, zone)
        checked = _checked(store, normalized, zone)
        proposal_id = proposals.add(normalized, clock())
        return ProposalResult(proposal_id=proposal_id, saved=False, note=NOTHING_SAVED, events=checked)


def _checked(store: CalendarBackend, events: list[NewEvent], zone: ZoneInfo) -> list[CheckedEvent]:
    checks = _check(store, events, zone)
    return [CheckedEvent(index=i, **_times(e, zone), existing_id=c.existing_id, conflicts=c.conflicts)
            for i, (e, c) in enumerate(zip(events, checks, strict=True))]


def _add_show_proposal(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo, clock: _Clock,
                       proposals: Proposals) -> None:
    @server.tool(
        name="calendar.show_proposal",
        description="What calendar.create_events would write for a proposal_id, checked again. Writes nothing.",
        annotations=_PROPOSES,
    )
    def show_proposal(proposal_id: _ProposalId) -> ProposalResult:
        events = _checked(store, proposals.get(proposal_id, clock()), zone)
        return ProposalResult(proposal_id=proposal_id, saved=False, note=SHOWN, events=events)


def _add_create_events(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo, clock: _Clock,
                       proposals: Proposals) -> None:
    @server.tool(
        name="calendar.create_events",
        description=(
            "Write the events of a proposal the owner agreed to (from calendar.propose_events), by its id; "
            "nothing else can be written. An event already saved is returned, not duplicated."
        ),
        annotations=_WRITES_ONCE,
        meta={PREVIEW_META: "calendar.show_proposal"},  # Bruce's dry run: the approval card shows the events
    )
    def create_events(proposal_id: _ProposalId) -> CreateResult:
        proposed = proposals.get(proposal_id, clock())
        checks = _check(store, proposed, zone)
        stored = store.create(proposed, clock())
        created = [
            CreatedEvent(**view(e, zone).model_dump(), created=new, conflicts=c.conflicts)
            for (e, new), c in zip(stored, checks, strict=True)
        ]
        added = sum(1 for c in created if c.created)
        return CreateResult(proposal_id=proposal_id, added=added, already_saved=len(created) - added, events=created)


def _new_times(old: Event, start: str | None, end: str | None, minutes: int | None, zone: ZoneInfo
               ) -> tuple[datetime | None, datetime | None]:
    """The new start and end (``None``: unchanged); a new start alone keeps the event's length."""
    if end is not None and minutes is not None:
        raise ToolError("give end or duration_minutes, not both")
    new_start = parse_time(start, zone, "start") if start is not None else None
    first = new_start or old.start
    new_end: datetime | None = None
    if end is not None:
        new_end = parse_time(end, zone, "end")
    elif minutes is not None:
        new_end = first + timedelta(minutes=minutes)
    elif new_start is not None:
        new_end = first + (old.end - old.start)
    if (new_end or old.end) <= first:
        raise ToolError(f"end: {local_iso(new_end or old.end, zone)} is not after start ({local_iso(first, zone)})")
    return new_start, new_end


_Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
_Time = Annotated[str, StringConstraints(max_length=64)]
_Minutes = Annotated[int, Field(ge=1, le=1440)]
_Location = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]
_Notes = Annotated[str, StringConstraints(max_length=2000)]


@dataclass(frozen=True)
class _Edit:
    """An update_event call's arguments (show_change takes the same)."""

    title: str | None
    start: str | None
    end: str | None
    duration_minutes: int | None
    location: str | None
    notes: str | None

    def change(self, old: Event, zone: ZoneInfo) -> Change:
        new_start, new_end = _new_times(old, self.start, self.end, self.duration_minutes, zone)
        change = Change(title=self.title, start=new_start, end=new_end, location=self.location, notes=self.notes)
        if change == Change():
            raise ToolError("nothing to change: give at least one of title, start, end, duration_minutes, location, notes")
        return change


def _applied(old: Event, change: Change) -> Event:
    """``old`` as ``change`` would leave it (an empty location or notes clears it)."""
    def text(new: str | None, was: str | None) -> str | None:
        return was if new is None else new or None

    return replace(old, title=change.title or old.title, start=change.start or old.start, end=change.end or old.end,
                   location=text(change.location, old.location), notes=text(change.notes, old.notes))


def _add_update_event(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo) -> None:
    @server.tool(
        name="calendar.show_change",
        description="What calendar.update_event would change, with the same arguments. Writes nothing.",
        annotations=_PROPOSES,
    )
    def show_change(id: _EventId, title: _Title | None = None, start: _Time | None = None, end: _Time | None = None,
                    duration_minutes: _Minutes | None = None, location: _Location | None = None,
                    notes: _Notes | None = None) -> ChangedEvent:
        old = store.get(id)
        change = _Edit(title, start, end, duration_minutes, location, notes).change(old, zone)
        return ChangedEvent(event=view(_applied(old, change), zone), before=view(old, zone))

    @server.tool(
        name="calendar.update_event",
        description=(
            "Change one event by id (from list_upcoming or free_busy): only the fields given. "
            "A repeating event changes as a whole series."
        ),
        annotations=_CHANGES,
        meta={PREVIEW_META: "calendar.show_change"},
    )
    def update_event(id: _EventId, title: _Title | None = None, start: _Time | None = None, end: _Time | None = None,
                     duration_minutes: _Minutes | None = None, location: _Location | None = None,
                     notes: _Notes | None = None) -> ChangedEvent:
        old = store.get(id)
        change = _Edit(title, start, end, duration_minutes, location, notes).change(old, zone)
        return ChangedEvent(event=view(store.update(id, change), zone), before=view(old, zone))


def _add_delete_event(server: MCPServer[Any], store: CalendarBackend, zone: ZoneInfo) -> None:
    @server.tool(
        name="calendar.show_event",
        description="One event by id, as calendar.delete_event would delete it. Writes nothing.",
        annotations=_PROPOSES,
    )
    def show_event(id: _EventId) -> DeletedEvent:
        return DeletedEvent(deleted=view(store.get(id), zone))

    @server.tool(
        name="calendar.delete_event",
        description="Delete one event by id (from list_upcoming or free_busy); a repeating event goes as a whole series.",
        annotations=_CHANGES,
        meta={PREVIEW_META: "calendar.show_event"},
    )
    def delete_event(id: _EventId) -> DeletedEvent:
        return DeletedEvent(deleted=view(store.delete(id), zone))
