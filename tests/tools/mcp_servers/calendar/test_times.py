"""Times in and out of the calendar tools (tools.mcp_servers.calendar.times)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from tools.mcp_servers.calendar.store import Event
from tools.mcp_servers.calendar.times import local_iso, parse_time, view

LISBON = ZoneInfo("Europe/Lisbon")


def test_a_time_without_an_offset_is_read_in_the_calendars_zone() -> None:
    assert parse_time("2030-07-01T09:00", LISBON, "start") == datetime(2030, 7, 1, 8, 0, tzinfo=UTC)  # summer: +01
    assert parse_time("2030-07-01T09:00Z", LISBON, "start") == datetime(2030, 7, 1, 9, 0, tzinfo=UTC)
    with pytest.raises(ToolError, match="start: '2030-07-01' is a date without a time of day"):
        parse_time("2030-07-01", LISBON, "start")


def test_an_all_day_event_is_shown_from_local_midnight_and_says_so() -> None:
    start = datetime(2030, 1, 5, tzinfo=LISBON).astimezone(UTC)
    event = Event(id="h", title="Holiday", start=start, end=datetime(2030, 1, 6, tzinfo=LISBON).astimezone(UTC),
                  location=None, notes=None, created_at=start, all_day=True)
    shown = view(event, LISBON)
    assert (shown.start, shown.end, shown.all_day, shown.recurring) == (
        "2030-01-05T00:00+00:00", "2030-01-06T00:00+00:00", True, False)
    assert local_iso(datetime(2030, 1, 5, 12, 0, 30, tzinfo=UTC), LISBON) == "2030-01-05T12:00:30+00:00"
