"""The calendar server over CalDAV (tools.mcp_servers.calendar.caldav_store): a real Radicale on
127.0.0.1 holds the calendar, the tools are called through the MCP SDK's client, and what the
calendar holds is read back with the caldav library, as the owner's calendar app would see it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from tests.tools.mcp_servers.calendar.radicale import PASSWORD, USER, Radicale, radicale
from tools.mcp_servers.calendar.caldav_store import CalDavStore
from tools.mcp_servers.calendar.server import build_server

REPO = Path(__file__).resolve().parents[4]
SAO_PAULO = ZoneInfo("America/Sao_Paulo")  # UTC-03:00 all year

NEW_YORK_TZ = """BEGIN:VTIMEZONE
TZID:America/New_York
BEGIN:STANDARD
DTSTART:19701101T020000
RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=1SU
TZOFFSETFROM:-0400
TZOFFSETTO:-0500
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:19700308T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=2SU
TZOFFSETFROM:-0500
TZOFFSETTO:-0400
END:DAYLIGHT
END:VTIMEZONE
"""


def ics(*events: str, timezones: str = "") -> str:
    body = "".join(f"BEGIN:VEVENT\nDTSTAMP:20270101T000000Z\n{e.strip()}\nEND:VEVENT\n" for e in events)
    return f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//test//EN\n{timezones}{body}END:VCALENDAR\n"


@pytest.fixture
def dav(tmp_path: Path) -> Any:
    with radicale(tmp_path) as server:
        yield server


@asynccontextmanager
async def calendar(server: Radicale, now: datetime, *, password: str = PASSWORD) -> AsyncIterator[Client]:
    """The calendar MCP server over ``server``'s calendar, in-process, with its clock at ``now``."""
    store = CalDavStore(server.url, SAO_PAULO, USER, password, timeout_s=5)
    async with Client(build_server(store, SAO_PAULO, clock=lambda: now)) as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return _text(result)


def _text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def _busy(day: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(b["title"], b["start"][11:16], b["end"][11:16]) for b in day["busy"]]


async def test_free_busy_follows_each_events_own_zone_across_a_daylight_saving_change(dav: Radicale) -> None:
    # A daily stand-up at 09:00 New York time; New York moves its clocks on Sunday 2027-03-14,
    # Sao Paulo does not: the stand-up moves from 11:00 to 10:00 in the owner's (Sao Paulo) time.
    dav.add(ics("UID:standup@example.org\nSUMMARY:Stand-up\nDTSTART;TZID=America/New_York:20270310T090000\n"
                "DTEND;TZID=America/New_York:20270310T093000\nRRULE:FREQ=DAILY", timezones=NEW_YORK_TZ))
    dav.add(ics("UID:tom@example.org\nSUMMARY:Call Tom\nDTSTART:20270315T140000Z\nDTEND:20270315T150000Z"))
    friday_morning = datetime(2027, 3, 12, 9, 0, tzinfo=SAO_PAULO).astimezone(UTC)
    async with calendar(dav, friday_morning) as client:
        result = await call(client, "calendar.free_busy", {"days": 4, "day_start": "09:00", "day_end": "13:00"})
    assert result["timezone"] == "America/Sao_Paulo"
    days = {d["date"]: d for d in result["days"]}
    assert {day: _busy(d) for day, d in days.items()} == {
        "2027-03-12": [("Stand-up", "11:00", "11:30")],
        "2027-03-13": [("Stand-up", "11:00", "11:30")],
        "2027-03-14": [("Stand-up", "10:00", "10:30")],  # New York is on summer time now
        "2027-03-15": [("Stand-up", "10:00", "10:30"), ("Call Tom", "11:00", "12:00")],
    }
    assert days["2027-03-14"]["busy"][0]["start"] == "2027-03-14T10:00-03:00"
    assert [(r["start"][11:16], r["end"][11:16]) for r in days["2027-03-15"]["free"]] == [
        ("09:00", "10:00"), ("10:30", "11:00"), ("12:00", "13:00")]


async def test_a_repeating_event_is_expanded_within_the_range_with_its_exceptions(dav: Radicale) -> None:
    dav.add(ics(
        "UID:yoga@example.org\nSUMMARY:Yoga\nDTSTART;TZID=America/Sao_Paulo:20270302T180000\n"
        "DTEND;TZID=America/Sao_Paulo:20270302T190000\nRRULE:FREQ=WEEKLY;COUNT=8\n"
        "EXDATE;TZID=America/Sao_Paulo:20270309T180000",
        "UID:yoga@example.org\nSUMMARY:Yoga (late)\nRECURRENCE-ID;TZID=America/Sao_Paulo:20270316T180000\n"
        "DTSTART;TZID=America/Sao_Paulo:20270316T193000\nDTEND;TZID=America/Sao_Paulo:20270316T203000",
    ))
    dav.add(ics("UID:holiday@example.org\nSUMMARY:Holiday\nDTSTART;VALUE=DATE:20270305\nDTEND;VALUE=DATE:20270306"))
    monday = datetime(2027, 3, 1, 8, 0, tzinfo=SAO_PAULO).astimezone(UTC)
    async with calendar(dav, monday) as client:
        upcoming = await call(client, "calendar.list_upcoming", {"days": 21})
    assert [(e["title"], e["start"], e["end"], e["recurring"], e["all_day"]) for e in upcoming["events"]] == [
        ("Yoga", "2027-03-02T18:00-03:00", "2027-03-02T19:00-03:00", True, False),
        ("Holiday", "2027-03-05T00:00-03:00", "2027-03-06T00:00-03:00", False, True),
        # 03-09 was cancelled (EXDATE); 03-16 was moved to 19:30
        ("Yoga (late)", "2027-03-16T19:30-03:00", "2027-03-16T20:30-03:00", True, False),
        # 03-23 and later are past the 21 days asked for
    ]
    assert {e["id"] for e in upcoming["events"] if e["recurring"]} == {"yoga@example.org"}
    assert upcoming["more"] is False


async def test_propose_writes_nothing_and_create_writes_only_the_confirmed_proposal_once(dav: Radicale) -> None:
    now = datetime(2027, 3, 1, 8, 0, tzinfo=SAO_PAULO).astimezone(UTC)
    async with calendar(dav, now) as client:
        schema = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        assert set(schema["calendar.create_events"]["properties"]) == {"proposal_id"}  # no way to pass new events

        dentist = await call(client, "calendar.propose_events", {"events": [
            {"title": "Dentist", "start": "2027-03-03T10:00", "duration_minutes": 60, "location": "Rua A, 10"}]})
        gym = await call(client, "calendar.propose_events", {"events": [{"title": "Gym", "start": "2027-03-03T10:30"}]})
        assert dentist["saved"] is False and dentist["proposal_id"] != gym["proposal_id"]
        assert dav.events() == []  # a proposal writes nothing

        created = await call(client, "calendar.create_events", {"proposal_id": dentist["proposal_id"]})
        assert (created["added"], created["already_saved"]) == (1, 0)
        assert dav.titles() == ["Dentist"]  # the Gym proposal, never confirmed, is not there
        (stored,) = dav.events()
        assert stored.decoded("DTSTART") == datetime(2027, 3, 3, 13, 0, tzinfo=UTC)
        assert (str(stored["LOCATION"]), created["events"][0]["id"]) == ("Rua A, 10", str(stored["UID"]))

        again = await call(client, "calendar.create_events", {"proposal_id": dentist["proposal_id"]})
        assert (again["added"], again["already_saved"]) == (0, 1)
        assert dav.titles() == ["Dentist"]  # a repeated create adds nothing

        unknown = await error(client, "calendar.create_events", {"proposal_id": "pr_0123456789abcdef"})
        assert "unknown or expired" in unknown and "calendar.propose_events" in unknown
        conflict = await call(client, "calendar.propose_events", {"events": [{"title": "Gym", "start": "2027-03-03T10:30"}]})
        assert [c["title"] for c in conflict["events"][0]["conflicts"]] == ["Dentist"]


async def test_update_and_delete_change_the_calendar_and_an_unknown_id_is_named(dav: Radicale) -> None:
    dav.add(ics("UID:lunch@example.org\nSUMMARY:Lunch\nDTSTART:20270303T150000Z\nDTEND:20270303T160000Z"))
    now = datetime(2027, 3, 1, 8, 0, tzinfo=SAO_PAULO).astimezone(UTC)
    async with calendar(dav, now) as client:
        moved = await call(client, "calendar.update_event", {"id": "lunch@example.org", "start": "2027-03-03T13:00",
                                                             "title": "Lunch with Ana"})
        assert (moved["before"]["start"], moved["event"]["start"], moved["event"]["end"]) == (
            "2027-03-03T12:00-03:00", "2027-03-03T13:00-03:00", "2027-03-03T14:00-03:00")  # the length is kept
        assert dav.titles() == ["Lunch with Ana"]
        bad = await error(client, "calendar.update_event", {"id": "lunch@example.org", "end": "2027-03-03T12:00"})
        assert "is not after start" in bad

        deleted = await call(client, "calendar.delete_event", {"id": "lunch@example.org"})
        assert deleted["deleted"]["title"] == "Lunch with Ana"
        assert dav.events() == []
        missing = await error(client, "calendar.delete_event", {"id": "lunch@example.org"})
        assert "id: no event 'lunch@example.org'" in missing


async def test_a_calendar_that_is_down_or_refuses_the_login_answers_unavailable(dav: Radicale) -> None:
    now = datetime(2027, 3, 1, 8, 0, tzinfo=SAO_PAULO).astimezone(UTC)
    async with calendar(dav, now, password="wrong") as client:
        refused = await error(client, "calendar.list_upcoming", {})
    assert refused.startswith("unavailable: ") and "refused the login" in refused and "wrong" not in refused
    async with calendar(dav, now) as client:
        assert (await call(client, "calendar.list_upcoming", {}))["events"] == []
        dav.stop()
        down = await error(client, "calendar.free_busy", {})
        assert down.startswith(f"unavailable: the CalDAV server {dav.base[7:-1]} did not answer")
        assert "nothing was read or written" in down


@pytest.mark.parametrize(("url", "problem"), [
    ("http://dav.example.org/ana/work/", "use https"),
    ("https://ana:pw@dav.example.org/ana/work/", "CALDAV_USERNAME"),
    ("dav.example.org/ana", "not an http(s) URL"),
])
def test_a_caldav_url_that_would_leak_the_password_is_refused_at_start(url: str, problem: str) -> None:
    run = subprocess.run([sys.executable, "-m", "tools.mcp_servers.calendar", "--caldav", url], cwd=REPO,
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert run.returncode == 2
    assert problem in run.stderr and "pw@" not in run.stderr
    assert run.stdout == ""


def test_an_event_the_libraries_cannot_read_is_left_out_not_fatal() -> None:
    store = CalDavStore("https://dav.example.org/ana/work/", SAO_PAULO)  # not contacted: only parsing here
    window = (datetime(2027, 3, 1, tzinfo=UTC), datetime(2027, 3, 8, tzinfo=UTC))
    assert store._expand(ics("UID:nostart@example.org\nSUMMARY:No start"), *window) == []
    (good,) = store._expand(ics("UID:ok@example.org\nSUMMARY:Fine\nDTSTART:20270302T100000Z\nDURATION:PT45M"), *window)
    assert (good.title, good.end - good.start) == ("Fine", timedelta(minutes=45))
