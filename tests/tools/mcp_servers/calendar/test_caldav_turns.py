"""A CalDAV calendar as the owner meets it through Bruce: Radicale on 127.0.0.1 holds the calendar,
the calendar server runs as config.yml starts it (with ``--caldav`` and the login in its env), the
agent loop talks to the fake LLM, and every write waits for the owner's /approve."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tests.tools.mcp_servers.calendar.radicale import Radicale, radicale

ROOT = Path(__file__).resolve().parents[4]
SLOW_START_S = 20.0  # the server imports the MCP SDK and caldav (seconds on a loaded 2-core machine)
WEEK_AHEAD = "2030-03-13"  # the calendar's own clock is real: events are put far enough ahead


@pytest.fixture
def dav(tmp_path: Path) -> Any:
    with radicale(tmp_path) as server:
        yield server


def caldav_calendar(server: Radicale) -> dict[str, Any]:
    """The calendar server as config.yml enables it, pointed at ``server`` the way the README says."""
    from bruce.config.loader import load_config

    calendar = load_config(ROOT / "config.yml", environ={}).mcp_servers["calendar"]
    return {"command": sys.executable, "args": ["-m", "tools.mcp_servers.calendar", "--caldav", server.url,
                                                "--timezone", "America/Sao_Paulo"],
            "cwd": str(calendar.cwd), "env": server.env, "risk": calendar.risk,
            "tool_risk": dict(calendar.tool_risk), "connect_timeout_s": SLOW_START_S}


def tool_feedback(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_only_the_proposal_the_owner_approved_is_written(app_factory, channel, fake_llm, dav) -> None:
    app = await app_factory(mcp_servers={"calendar": caldav_calendar(dav)})
    asks = sorted(t.contract.name for t in app.registry.tools()
                  if t.contract.server == "calendar" and t.policy.needs_confirmation)
    assert asks == ["mcp.calendar.create_events", "mcp.calendar.delete_event", "mcp.calendar.update_event"]
    lunch = {"title": "Lunch with Ana", "start": f"{WEEK_AHEAD}T12:30", "duration_minutes": 60}
    gym = {"title": "Gym", "start": f"{WEEK_AHEAD}T18:00"}
    fake_llm.add(Step.tool_calls(("mcp_calendar_propose_events", {"events": [lunch]}),
                                 ("mcp_calendar_propose_events", {"events": [gym]})),
                 Step.text("Lunch with Ana at 12:30 and the gym at 18:00: which shall I add?"))
    await say(app, "plan lunch with Ana and the gym on Wednesday")
    lunch_offer, gym_offer = (f["result"]["structured"] for f in tool_feedback(fake_llm.requests[1]))
    assert lunch_offer["events"][0]["start"] == f"{WEEK_AHEAD}T12:30-03:00" and gym_offer["saved"] is False
    assert dav.events() == []  # proposing wrote nothing

    fake_llm.add(Step.tool_calls(("mcp_calendar_create_events", {"proposal_id": lunch_offer["proposal_id"]})),
                 Step.text("I asked for your approval to add the lunch."))
    await say(app, "just the lunch")
    ((_, request),) = channel.confirmations
    assert request.tool_name == "mcp.calendar.create_events"
    assert "Lunch with Ana" in request.preview and f"{WEEK_AHEAD}T12:30-03:00" in request.preview  # what you approve
    assert "Gym" not in request.preview
    assert dav.events() == []  # waiting for the yes: nothing written

    fake_llm.add(Step.text("Lunch with Ana is in your calendar."))
    await say(app, f"/approve {request.id}")
    assert dav.titles() == ["Lunch with Ana"]  # the gym was never confirmed
    assert channel.texts()[-1] == "Lunch with Ana is in your calendar."
    audit = await rows(app, "SELECT tool_name, status, source FROM tool_executions ORDER BY id")
    assert [(a["tool_name"], a["status"], a["source"]) for a in audit] == [
        ("mcp.calendar.propose_events", "ok", "chat"),
        ("mcp.calendar.propose_events", "ok", "chat"),
        ("mcp.calendar.create_events", "awaiting_confirmation", "chat"),
        ("mcp.calendar.create_events", "ok", "confirmation"),
    ]


async def test_an_event_is_deleted_only_after_the_owners_approval(app_factory, channel, fake_llm, dav) -> None:
    dav.add("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//test//EN\nBEGIN:VEVENT\nUID:dentist@example.org\n"
            f"DTSTAMP:20270101T000000Z\nSUMMARY:Dentist\nDTSTART:{WEEK_AHEAD.replace('-', '')}T130000Z\n"
            f"DTEND:{WEEK_AHEAD.replace('-', '')}T140000Z\nEND:VEVENT\nEND:VCALENDAR\n")
    app = await app_factory(mcp_servers={"calendar": caldav_calendar(dav)})
    fake_llm.add(Step.tool_calls(("mcp_calendar_delete_event", {"id": "dentist@example.org"})),
                 Step.text("I asked for your approval to cancel the dentist."))
    await say(app, "cancel the dentist")
    ((_, request),) = channel.confirmations
    assert request.tool_name == "mcp.calendar.delete_event"
    assert "Dentist" in request.preview and f"{WEEK_AHEAD}T10:00-03:00" in request.preview  # not just a UID
    assert dav.titles() == ["Dentist"]  # still there until the yes

    fake_llm.add(Step.text("The dentist is cancelled."))
    await say(app, f"/approve {request.id}")
    assert dav.events() == []
    assert channel.texts()[-1] == "The dentist is cancelled."


async def test_the_calendar_going_down_mid_turn_is_unavailable_and_the_owner_still_gets_an_answer(
        app_factory, channel, fake_llm, dav) -> None:
    app = await app_factory(mcp_servers={"calendar": caldav_calendar(dav)})
    fake_llm.add(Step.tool_calls(("mcp_calendar_list_upcoming", {"days": 7})),
                 Step.delay(2.0, Step.tool_calls(("mcp_calendar_free_busy", {"days": 2}))),
                 Step.text("Your calendar server is not answering right now, so I cannot check your free time."))
    turn = asyncio.create_task(say(app, "when am I free?"))
    deadline = time.monotonic() + 30
    while len(fake_llm.requests) < 2:  # the first call has been answered: now the calendar goes away
        assert time.monotonic() < deadline and not turn.done()
        await asyncio.sleep(0.05)
    dav.stop()
    await asyncio.wait_for(turn, timeout=60)

    (listed,) = tool_feedback(fake_llm.requests[1])
    assert listed["ok"] is True and listed["result"]["structured"]["events"] == []
    down = tool_feedback(fake_llm.requests[2])[-1]
    assert down["status"] == "error" and "unavailable: the CalDAV server" in down["error"]
    assert channel.texts()[-1].startswith("Your calendar server is not answering")
    audit = await rows(app, "SELECT tool_name, status FROM tool_executions ORDER BY id")
    assert [(a["tool_name"], a["status"]) for a in audit] == [
        ("mcp.calendar.list_upcoming", "ok"), ("mcp.calendar.free_busy", "error")]


async def test_an_approval_after_the_calendar_changed_writes_nothing_and_says_why(
        app_factory, channel, fake_llm, dav) -> None:
    app = await app_factory(mcp_servers={"calendar": caldav_calendar(dav)})
    lunch = {"title": "Lunch with Ana", "start": f"{WEEK_AHEAD}T12:30", "duration_minutes": 60}
    fake_llm.add(Step.tool_calls(("mcp_calendar_propose_events", {"events": [lunch]})), Step.text("Shall I?"))
    await say(app, "lunch with Ana on Wednesday")
    proposal_id = tool_feedback(fake_llm.requests[1])[0]["result"]["structured"]["proposal_id"]
    fake_llm.add(Step.tool_calls(("mcp_calendar_create_events", {"proposal_id": proposal_id})), Step.text("Asked."))
    await say(app, "yes")
    ((_, request),) = channel.confirmations
    assert "Lunch with Ana" in request.preview and "Board meeting" not in request.preview

    # meanwhile, on the phone: a meeting at the same time
    day = WEEK_AHEAD.replace("-", "")
    dav.add("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//test//EN\nBEGIN:VEVENT\nUID:board@example.org\n"
            f"DTSTAMP:20270101T000000Z\nSUMMARY:Board meeting\nDTSTART:{day}T150000Z\nDTEND:{day}T160000Z\n"
            "END:VEVENT\nEND:VCALENDAR\n")
    fake_llm.add(Step.text("Your calendar changed since; I did not add the lunch."))
    await say(app, f"/approve {request.id}")
    assert dav.titles() == ["Board meeting"]  # the lunch was not written over a conflict you never saw
    assert any("did not succeed" in t and "conflict: what this would do has changed" in t for t in channel.texts())
    assert channel.texts()[-1] == "Your calendar changed since; I did not add the lunch."
    audit = await rows(app, "SELECT tool_name, status, source FROM tool_executions ORDER BY id")
    assert audit[-1] == {"tool_name": "mcp.calendar.create_events", "status": "error", "source": "confirmation"}
