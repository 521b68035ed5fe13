"""Which tools a scheduled agent run may use: any job's run no ``proactive.*`` tool; the morning
briefing's run only the read tools, each at risk low, whatever else is registered."""

from __future__ import annotations

import pytest

from bruce.contracts import Risk
from bruce.jobs.briefing import BRIEFING_ID
from bruce.jobs.doors import briefing_tools, no_proactive_tools, tools_for
from tests.helpers import contract


def test_a_jobs_run_has_no_proactive_tool_and_the_briefing_has_its_own_filter():
    assert tools_for("0123456789") is no_proactive_tools and tools_for(BRIEFING_ID) is briefing_tools
    assert not no_proactive_tools(contract("proactive.create", Risk.MEDIUM))
    assert no_proactive_tools(contract("web.search"))


@pytest.mark.parametrize("name", ["emails.search", "emails.read", "clock.now", "mcp.calendar.free_busy",
                                  "mcp.calendar.list_upcoming", "mcp.work.calendar.list_upcoming"])
def test_the_briefing_may_read_the_mail_the_calendar_and_the_clock(name):
    assert briefing_tools(contract(name))


@pytest.mark.parametrize(("name", "risk"), [
    ("emails.send_external", Risk.CRITICAL), ("emails.draft", Risk.MEDIUM), ("proactive.create", Risk.MEDIUM),
    ("memory.remember", Risk.LOW), ("memory.search", Risk.LOW), ("web.read_url", Risk.LOW), ("http.post", Risk.CRITICAL),
    ("files.write", Risk.MEDIUM), ("mcp.calendar.propose_events", Risk.LOW), ("mcp.calendar.create_events", Risk.HIGH),
    ("mcp.calendar.list_upcoming", Risk.HIGH),  # the owner did not lower it: it would ask, so it is not offered
    ("calendar.list_upcoming", Risk.LOW),  # not from an MCP server
])
def test_the_briefing_may_use_nothing_else(name, risk):
    assert not briefing_tools(contract(name, risk))


def test_a_read_tool_whose_contract_asks_first_is_not_for_the_briefing():
    assert not briefing_tools(contract("emails.search", confirmation=True, autonomous=False))
