"""The calendar MCP server (tools.mcp_servers.calendar), mostly through a real subprocess and the SDK client."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from tools.mcp_servers.calendar.server import free_busy_days
from tools.mcp_servers.calendar.store import Event

REPO = Path(__file__).resolve().parents[4]
ZONE = ZoneInfo("America/Sao_Paulo")  # UTC-03:00 all year (no DST since 2019)
TOOLS = {"calendar.free_busy", "calendar.list_upcoming", "calendar.propose_events", "calendar.create_events",
         "calendar.show_proposal", "calendar.update_event", "calendar.delete_event", "calendar.show_change",
         "calendar.show_event"}


def _server_args(db: Path, timezone: str = "America/Sao_Paulo") -> list[str]:
    return ["-m", "tools.mcp_servers.calendar", "--db", str(db), "--timezone", timezone]


@asynccontextmanager
async def calendar(tmp_path: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=_server_args(tmp_path / "cal.db"), cwd=str(REPO))
    async with Client(params) as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def _tomorrow() -> date:
    return (datetime.now(ZONE) + timedelta(days=1)).date()


async def test_lists_the_nine_tools_with_object_schemas_and_rejects_bad_arguments(tmp_path: Path) -> None:
    day = _tomorrow().isoformat()
    bad_calls: list[tuple[str, dict[str, Any], list[str]]] = [
        ("calendar.propose_events", {"events": [{"title": "", "start": f"{day}T10:00"}]}, ["events.0.title"]),
        ("calendar.propose_events", {"events": [{"title": "X", "start": "next friday"}]}, ["events.0.start", "ISO 8601"]),
        (
            "calendar.propose_events",
            {"events": [{"title": "X", "start": f"{day}T10:00", "end": f"{day}T09:00"}]},
            ["events.0.end", "not after start"],
        ),
        (
            "calendar.propose_events",
            {"events": [{"title": "X", "start": f"{day}T10:00", "end": f"{day}T11:00", "duration_minutes": 5}]},
            ["events.0", "not both"],
        ),
        ("calendar.propose_events", {"events": [{"title": "X", "start": f"{day}T10:00"}] * 21}, ["events", "20"]),
        ("calendar.create_events", {"events": [{"title": "X", "start": f"{day}T10:00"}]}, ["proposal_id"]),
        ("calendar.create_events", {"proposal_id": "pr_0000000000000000"}, ["unknown or expired"]),
        ("calendar.update_event", {"id": "ev_nope", "title": "X"}, ["id: no event 'ev_nope'"]),
        ("calendar.delete_event", {"id": "ev_nope"}, ["id: no event 'ev_nope'"]),
        ("calendar.free_busy", {"days": 15}, ["days", "14"]),
        ("calendar.free_busy", {"day_start": "18:00", "day_end": "09:00"}, ["day_end", "day_start"]),
    ]
    async with calendar(tmp_path) as client:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        for tool in listed.tools:
            assert tool.input_schema["type"] == "object"
            assert tool.description
        descriptions = {tool.name: tool.description or "" for tool in listed.tools}
        assert "writes nothing" in descriptions["calendar.propose_events"].lower()
        assert "write" in descriptions["calendar.create_events"].lower()

        for tool_name, arguments, expected in bad_calls:
            result = await client.call_tool(tool_name, arguments)
            assert result.is_error, (tool_name, arguments)
            for word in expected:
                assert word in _text(result), (word, _text(result))

        # the server is still up, and none of those calls wrote anything
        assert (await call(client, "calendar.list_upcoming", {}))["events"] == []


async def test_propose_saves_nothing_create_saves_the_proposal_once_and_free_busy_shows_it(tmp_path: Path) -> None:
    day = _tomorrow().isoformat()
    dentist = {"title": "Dentist", "start": f"{day}T10:00", "duration_minutes": 60, "location": "Rua A, 10"}
    call_ana = {"title": "Call Ana", "start": f"{day}T10:30"}
    async with calendar(tmp_path) as client:
        proposal = await call(client, "calendar.propose_events", {"events": [dentist, call_ana]})
        assert proposal["saved"] is False
        first, second = proposal["events"]
        assert (first["start"], first["end"]) == (f"{day}T10:00-03:00", f"{day}T11:00-03:00")
        assert second["end"] == f"{day}T11:00-03:00"  # 30 minutes by default
        assert [(c["kind"], c["index"]) for c in first["conflicts"]] == [("proposed", 1)]
        assert (await call(client, "calendar.list_upcoming", {}))["events"] == []

        just_dentist = await call(client, "calendar.propose_events", {"events": [dentist]})
        created = await call(client, "calendar.create_events", {"proposal_id": just_dentist["proposal_id"]})
        assert created["added"] == 1
        event_id = created["events"][0]["id"]

        again = await call(client, "calendar.propose_events", {"events": [call_ana]})
        assert [(c["kind"], c["id"]) for c in again["events"][0]["conflicts"]] == [("existing", event_id)]

        # the same event again, written as UTC: returned, not duplicated
        same = {"title": "Dentist", "start": f"{day}T13:00Z", "end": f"{day}T14:00Z"}
        proposal = await call(client, "calendar.propose_events", {"events": [same]})
        assert proposal["events"][0]["existing_id"] == event_id
        repeat = await call(client, "calendar.create_events", {"proposal_id": proposal["proposal_id"]})
        assert (repeat["added"], repeat["already_saved"]) == (0, 1)
        assert repeat["events"][0]["id"] == event_id

        upcoming = (await call(client, "calendar.list_upcoming", {"days": 3}))["events"]
        assert [(e["id"], e["title"], e["start"], e["location"]) for e in upcoming] == [
            (event_id, "Dentist", f"{day}T10:00-03:00", "Rua A, 10")
        ]

        free_busy = await call(client, "calendar.free_busy", {"days": 3})
        tomorrow = next(d for d in free_busy["days"] if d["date"] == day)
        assert [b["id"] for b in tomorrow["busy"]] == [event_id]
        assert [(r["start"][11:16], r["end"][11:16]) for r in tomorrow["free"]] == [("08:00", "10:00"), ("11:00", "20:00")]

        edit = {"id": event_id, "start": f"{day}T15:00", "notes": "fasting"}
        shown = await call(client, "calendar.show_change", edit)
        assert (shown["before"]["start"], shown["event"]["start"]) == (f"{day}T10:00-03:00", f"{day}T15:00-03:00")
        assert (await call(client, "calendar.list_upcoming", {}))["events"][0]["start"] == f"{day}T10:00-03:00"
        moved = await call(client, "calendar.update_event", edit)
        assert moved == shown  # the preview is what happened
        assert (moved["event"]["start"], moved["event"]["end"], moved["event"]["notes"]) == (
            f"{day}T15:00-03:00", f"{day}T16:00-03:00", "fasting")
        assert (await call(client, "calendar.delete_event", {"id": event_id}))["deleted"]["title"] == "Dentist"
        assert (await call(client, "calendar.list_upcoming", {}))["events"] == []


def test_a_bad_timezone_is_a_clear_error_with_exit_status_2(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, *_server_args(tmp_path / "cal.db", timezone="Mars/Olympus")],
        cwd=REPO, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2
    assert "unknown timezone 'Mars/Olympus'" in run.stderr
    assert run.stdout == ""


def _event(title: str, start: datetime, minutes: int) -> Event:
    return Event(id=title, title=title, start=start, end=start + timedelta(minutes=minutes), location=None,
                 notes=None, created_at=start)


def test_free_ranges_skip_past_and_busy_slots() -> None:
    now = datetime(2026, 12, 2, 9, 10, tzinfo=ZONE).astimezone(UTC)  # the 09:00 slot has begun: not free
    lunch = _event("Lunch", datetime(2026, 12, 2, 12, 0, tzinfo=ZONE), 90)
    (today,) = free_busy_days([lunch], ZONE, now, 1, "08:00", "18:00")
    assert [b.title for b in today.busy] == ["Lunch"]
    assert [(r.start, r.end, r.minutes) for r in today.free] == [
        ("2026-12-02T09:30-03:00", "2026-12-02T12:00-03:00", 150),
        ("2026-12-02T13:30-03:00", "2026-12-02T18:00-03:00", 270),
    ]


def test_free_ranges_follow_the_wall_clock_across_a_dst_change() -> None:
    zone = ZoneInfo("America/New_York")  # 2026-03-08: 02:00 EST becomes 03:00 EDT
    now = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
    _, change_day = free_busy_days([], zone, now, 2, "00:00", "24:00")
    assert [(r.start, r.end, r.minutes) for r in change_day.free] == [
        ("2026-03-08T00:00-05:00", "2026-03-09T00:00-04:00", 23 * 60)
    ]
