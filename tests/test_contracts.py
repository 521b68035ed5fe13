"""The tool contract's user-facing label: every built-in tool names what it is doing; a tool
that does not (an MCP tool) gets one from its name, and so does an event built without one."""

from __future__ import annotations

from dataclasses import replace

from bruce.contracts import default_activity
from bruce.turns.progress import ToolStarted


async def test_every_built_in_tool_says_what_it_is_doing(app):
    built_in = [t.contract for t in app.registry.tools() if t.contract.server is None]
    assert built_in and all(c.activity and c.activity_label == c.activity for c in built_in)
    assert not any(c.activity.endswith(("…", ".")) for c in built_in)  # channels add their own ellipsis


async def test_a_tool_without_a_label_gets_one_from_its_name(app):
    contract = replace(app.registry.get("clock.now").contract, name="mcp.weather.forecast", activity="")
    assert contract.activity_label == default_activity("mcp.weather.forecast") == "Using mcp.weather.forecast"
    assert app.registry.activity("no_such_tool") == "Using no_such_tool"


def test_the_label_is_carried_on_the_event_but_is_not_its_identity():
    assert ToolStarted("web.search").activity == "Using web.search"
    assert ToolStarted("web.search", "Searching the web") == ToolStarted("web.search")
