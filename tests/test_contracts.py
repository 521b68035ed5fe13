"""bruce.contracts: what the model is shown of a tool and what a result tells it, the plain-data
form of a contract (an MCP server's, a plugin's; every problem of plain data at once:
tests/actions/test_registry.py), and the tool's user-facing label: every built-in tool names what
it is doing; a tool that does not (an MCP tool) gets one from its name, and so does an event built
without one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bruce.contracts import DryRun, Risk, ToolContract, ToolResult, contract_from_dict, default_activity, wire_name
from bruce.errors import ContractError
from bruce.turns.progress import ToolStarted
from bruce.values import ToolStatus


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


SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


def plain(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "web.search", "description": "Search the web.", "category": "web", "risk": "low",
        "input_schema": SCHEMA, "output_schema": {"type": "object"}, "autonomous": True, "confirmation": False,
        "step_up": False, "dry_run": "none", "idempotent": False, "permissions": ["network"],
        "side_effects": "none", "audit_event": "web.search", "failure_modes": ["timeout", "http_error"],
    }
    return data | overrides


def test_the_model_sees_dots_as_underscores() -> None:
    assert wire_name("web.search") == "web_search"
    assert wire_name("calendar.events.list") == "calendar_events_list"
    assert contract_from_dict(plain()).wire_name == "web_search"
    assert contract_from_dict(plain(name="mcp.notes.find", wire="notes__find")).wire_name == "notes__find"


def test_definition_is_the_openai_function_with_the_contracts_schema_or_an_extended_one() -> None:
    contract = contract_from_dict(plain())
    assert contract.definition() == {"type": "function", "function": {
        "name": "web_search", "description": "Search the web.", "parameters": SCHEMA}}
    extended = {**SCHEMA, "properties": {**SCHEMA["properties"], "dry_run": {"type": "boolean"}}}
    assert contract.definition(extended)["function"]["parameters"] is extended


def test_plain_data_becomes_a_typed_contract_with_defaults_for_the_optional_fields() -> None:
    contract = contract_from_dict(plain(risk="high", dry_run="optional"))
    assert isinstance(contract, ToolContract)
    assert contract.risk is Risk.HIGH and contract.dry_run is DryRun.OPTIONAL
    assert contract.permissions == ("network",) and contract.failure_modes == ("timeout", "http_error")
    assert (contract.timeout_s, contract.cache_ttl_s, contract.server, contract.confirm_if) == (None, 0.0, None, ())
    assert contract.idempotency_window_s == 0.0
    assert contract.url_args == ()
    assert contract_from_dict(plain(url_args=["query"])).url_args == ("query",)  # a list from JSON, kept as a tuple


def test_an_idempotent_tool_must_state_its_window() -> None:
    with pytest.raises(ContractError, match="tool web.search: missing field 'idempotency_window_s'"):
        contract_from_dict(plain(idempotent=True))
    assert contract_from_dict(plain(idempotent=True, idempotency_window_s=60)).idempotency_window_s == 60


def test_an_unnamed_contract_is_called_unnamed() -> None:
    data = plain()
    del data["name"]
    with pytest.raises(ContractError, match=r"tool <unnamed>: missing field 'name'"):
        contract_from_dict(data)


def test_a_good_result_gives_the_model_its_output() -> None:
    result = ToolResult(call_id="c1", name="web_search", status=ToolStatus.OK, output=[{"title": "Otters"}])
    assert result.ok
    assert result.for_model() == {"ok": True, "result": [{"title": "Otters"}]}


def test_a_failed_result_gives_the_model_its_status_and_error() -> None:
    result = ToolResult(call_id="c1", name="web_read", status=ToolStatus.TIMEOUT, error="timed out after 15s")
    assert not result.ok
    assert result.for_model() == {"ok": False, "status": "timeout", "error": "timed out after 15s"}


def test_a_parked_call_tells_the_model_it_awaits_approval_and_its_id() -> None:
    result = ToolResult(call_id="c1", name="files_write", status=ToolStatus.AWAITING_CONFIRMATION,
                        output={"confirmation_id": "ab12cd34"}, error="waiting for the user's approval")
    assert result.for_model() == {"ok": False, "status": "awaiting_confirmation",
                                  "message": "waiting for the user's approval", "confirmation_id": "ab12cd34"}
    bare = ToolResult(call_id="c1", name="files_write", status=ToolStatus.AWAITING_CONFIRMATION, error="waiting")
    assert bare.for_model() == {"ok": False, "status": "awaiting_confirmation", "message": "waiting"}
