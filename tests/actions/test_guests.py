"""What a guest may use: ``access.guest_tools`` patterns, never a tool of risk high or critical
(an MCP tool of risk high included), never the owner's artifacts or notes."""

from __future__ import annotations

from dataclasses import replace

from bruce.actions.guests import GuestTools, guest_tool_problems
from bruce.contracts import Risk
from tests.helpers import contract


def test_the_default_patterns_allow_the_everyday_tools_only():
    guests = GuestTools()
    assert guests.allows(contract("clock.now")) and guests.allows(contract("proactive.cancel", Risk.MEDIUM))
    assert not guests.allows(contract("http.post", Risk.CRITICAL))
    assert not guests.allows(contract("calendar.read"))  # not named


def test_a_tool_of_risk_high_or_the_owners_things_is_never_a_guests_whatever_the_patterns():
    guests = GuestTools(["*"])
    assert not guests.allows(contract("mcp.calendar.delete", Risk.HIGH, server="calendar"))
    assert not guests.allows(contract("files.write", Risk.MEDIUM))  # even made less risky
    assert not guests.allows(contract("artifact.save", Risk.LOW))
    assert guests.allows(contract("mcp.calendar.read", Risk.LOW, server="calendar"))


def test_the_check_names_each_bad_entry_and_leaves_mcp_entries_for_later():
    known = [contract("clock.now"), contract("files.write", Risk.HIGH),
             replace(contract("http.post"), risk=Risk.CRITICAL)]
    problems = guest_tool_problems(["clock.now", "*", "mcp.x.*", "nothing.here"], known)
    assert problems == [
        "access.guest_tools: '*' names files.write (risk high): a guest never gets a tool of risk high or critical",
        "access.guest_tools: '*' names http.post (risk critical): a guest never gets a tool of risk high or critical",
        "access.guest_tools: 'nothing.here' names no tool (known tools: clock.now, files.write, http.post)",
    ]
