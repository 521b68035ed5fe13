"""tools.mcp.names: what a remote tool is called in Bruce and on the wire, and its description."""

from __future__ import annotations

import re

from tools.mcp.names import MAX_DESCRIPTION, contract_name, description, wire_name

WIRE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def test_contract_names_are_prefixed_with_the_server_once() -> None:
    assert contract_name("notes", "find") == "mcp.notes.find"
    assert contract_name("calendar", "calendar.free_busy") == "mcp.calendar.free_busy"
    # the server also has a tool "free_busy": the long one keeps its prefix, so the two differ
    assert contract_name("calendar", "calendar.free_busy", siblings={"free_busy"}) == "mcp.calendar.calendar.free_busy"
    assert contract_name("calendar", "calendar.") == "mcp.calendar.calendar."


def test_a_plain_wire_name_is_kept() -> None:
    assert wire_name("notes", "find") == "mcp_notes_find"


def test_an_unsafe_or_long_name_is_made_safe_and_stays_unique() -> None:
    dotted = wire_name("calendar", "calendar.free_busy")
    assert WIRE.fullmatch(dotted) and dotted.startswith("mcp_calendar_calendar_free_busy_")
    assert dotted != wire_name("calendar", "calendar_free_busy")  # safe twins do not collide
    long = wire_name("a-server-with-a-long-name", "a_tool_" + "x" * 80)
    assert WIRE.fullmatch(long) and len(long) == 64
    assert long != wire_name("a-server-with-a-long-name", "a_tool_" + "x" * 81)
    assert WIRE.fullmatch(wire_name("srv", "ツール"))


def test_a_taken_wire_name_gets_a_longer_hash() -> None:
    first = wire_name("notes", "find", taken={"mcp_notes_find"})
    assert first.startswith("mcp_notes_find_") and WIRE.fullmatch(first)
    second = wire_name("notes", "find", taken={"mcp_notes_find", first})
    assert second not in {"mcp_notes_find", first} and WIRE.fullmatch(second)
    assert wire_name("notes", "find", taken={"mcp_notes_find"}) == first  # the same every time


def test_a_description_is_plain_text_of_bounded_length_naming_its_server() -> None:
    assert description("notes", "Find notes\x1b[31m by\n\ttag.\u200b", "find") == "[MCP server notes] Find notes [31m by tag."
    assert description("notes", None, "find") == "[MCP server notes] The find tool."
    assert description("notes", " \x00 ", "find") == "[MCP server notes] The find tool."
    long = description("notes", "word " * 1000, "find")
    assert len(long) == MAX_DESCRIPTION and long.endswith("…")
