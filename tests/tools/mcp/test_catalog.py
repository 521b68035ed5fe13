"""Which of a server's tools are offered, and as what contract, from a listing (no server running;
the whole path over real servers: tests/tools/mcp/test_bridge.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from structlog.testing import capture_logs

from bruce.actions.confirmations import Confirmations
from bruce.actions.registry import ToolRegistry
from bruce.config.schema import MCPServerConfig
from bruce.store import Store
from tools.mcp.catalog import MAX_NAME, MAX_SCHEMA_CHARS, PREVIEW_META, ServerTools, input_schema, url_arguments

OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}}


def tool(name: str, schema: Any = OBJECT, description: str = "Does a thing.", meta: Any = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, input_schema=schema, description=description, meta=meta)


@pytest.fixture
async def registry(tmp_path, clock):
    store = await Store.open(tmp_path / "catalog.db", clock)
    yield ToolRegistry(store=store, clock=clock, zone=ZoneInfo("UTC"), confirmations=Confirmations(store, clock))
    await store.close()


def catalog(registry: ToolRegistry, **config: Any) -> ServerTools:
    async def handler(arguments: dict[str, Any], context: Any) -> Any:
        return {}

    return ServerTools("srv", MCPServerConfig(command="python", **config), registry,
                       handler=lambda remote: handler, unavailable=lambda remote: lambda: None)


async def test_listed_tools_are_registered_with_the_configured_risk(registry):
    tools = catalog(registry, tool_risk={"echo": "low"})
    tools.refresh([tool("echo"), tool("wipe")])
    assert tools.remotes() == ["echo", "wipe"] and tools.offers("echo") and tools.skipped == {}
    echo, wipe = registry.get("mcp.srv.echo"), registry.get("mcp.srv.wipe")
    assert echo is not None and wipe is not None
    assert (echo.contract.risk, wipe.contract.risk) == ("low", "high")  # high: the server's default
    assert wipe.contract.confirmation and not wipe.contract.autonomous and wipe.contract.untrusted_output
    assert [t["name"] for t in tools.status()] == ["mcp.srv.echo", "mcp.srv.wipe"]


async def test_a_tool_previewed_by_a_low_risk_tool_gets_a_required_dry_run_and_only_then(registry):
    tools = catalog(registry, tool_risk={"show": "low", "peek": "medium"})
    previewed = {PREVIEW_META: "show"}
    tools.refresh([tool("show"), tool("peek"), tool("write", meta=previewed),
                   tool("poke", meta={PREVIEW_META: "peek"}),  # the preview is not low risk
                   tool("self", meta={PREVIEW_META: "self"}), tool("ghost", meta={PREVIEW_META: "missing"})])
    assert tools.previews == {"write": "show"}
    dry = {n: registry.get(f"mcp.srv.{n}").contract.dry_run for n in ("write", "poke", "self", "ghost", "show")}
    assert dry == {"write": "required", "poke": "none", "self": "none", "ghost": "none", "show": "none"}
    assert registry.get("mcp.srv.write").contract.risk == "high"  # a preview never lowers a risk
    tools = catalog(registry, tool_risk={"show": "low"}, disabled_tools=["show"])
    tools.refresh([tool("show"), tool("write", meta=previewed)])
    assert tools.previews == {}  # a tool you turned off previews nothing


async def test_a_tool_keeps_its_wire_name_across_listings(registry):
    tools = catalog(registry)
    tools.refresh([tool("echo")])
    wire = registry.get("mcp.srv.echo").contract.wire_name
    tools.refresh([tool("echo", description="Changed.")])
    assert registry.get("mcp.srv.echo").contract.wire_name == wire


async def test_what_is_left_out_says_why(registry):
    tools = catalog(registry, disabled_tools=["off"])
    long_name = "x" * (MAX_NAME + 1)
    tools.refresh([tool("off"), tool(long_name), tool(""), tool("dry", {"type": "object", "properties": {
        "dry_run": {"type": "boolean"}}}), tool("list", {"type": "array"}), tool("ok")])
    assert tools.remotes() == ["ok"]
    assert tools.skipped == {
        "off": "left out by enabled_tools / disabled_tools",
        "x" * MAX_NAME + "…": f"its name is empty or longer than {MAX_NAME} characters",
        "…": f"its name is empty or longer than {MAX_NAME} characters",
        "dry": "its input has a dry_run field, which Bruce reserves",
        "list": "its input schema is not a JSON Schema object",
    }


async def test_enabled_tools_chooses_and_an_unknown_name_is_logged(registry):
    tools = catalog(registry, enabled_tools=["echo", "ecko"])
    with capture_logs() as logs:
        tools.refresh([tool("echo"), tool("wipe")])
    assert tools.remotes() == ["echo"]
    (warning,) = [e for e in logs if e["event"] == "mcp.unknown_tool_names"]
    assert warning["key"] == "mcp_servers.srv.enabled_tools" and warning["names"] == ["ecko"]


def test_an_input_schema_must_be_a_valid_bounded_object():
    assert input_schema(OBJECT) == OBJECT
    with pytest.raises(ValueError, match="not valid JSON Schema"):
        input_schema({"type": "object", "properties": {"a": {"type": 5}}})
    with pytest.raises(ValueError, match=f"longer than {MAX_SCHEMA_CHARS}"):
        input_schema({"type": "object", "description": "x" * MAX_SCHEMA_CHARS})


@pytest.mark.parametrize(("name", "schema", "is_url"), [
    ("url", {"type": "string"}, True),
    ("uri", {"type": "string"}, True),
    ("link", {}, True),  # no type: it may hold a string
    ("href", {"type": ["string", "null"]}, True),
    ("endpoint", {"type": "string"}, True),
    ("webhook", {"type": "string"}, True),
    ("callback", {"type": "string"}, True),
    ("urls", {"type": "array", "items": {"type": "string"}}, True),
    ("image_url", {"type": "string"}, True),
    ("imageUrl", {"type": "string"}, True),
    ("redirect-uri", {"type": "string"}, True),
    ("api.endpoint", {"type": "string"}, True),
    ("webhookurl", {"type": "string"}, True),
    ("permalink", {"type": "string"}, True),
    ("target", {"type": "string", "format": "uri"}, True),
    ("source", {"type": "string", "format": "iri-reference"}, True),
    ("pages", {"type": "array", "items": {"type": "string", "format": "uri"}}, True),
    ("callback", {"type": "boolean"}, False),  # cannot hold a URL
    ("url", {"type": "integer"}, False),
    ("callback_id", {"type": "string"}, False),
    ("link_text", {"type": "string"}, False),
    ("urgent", {"type": "string"}, False),
    ("text", {"type": "string"}, False),
    ("query", {"type": "string", "format": "date"}, False),
])
def test_a_url_like_argument_of_a_remote_tool_is_one_of_its_url_args(name, schema, is_url):
    assert url_arguments({"type": "object", "properties": {name: schema}}) == ((name,) if is_url else ())


async def test_a_remote_tools_contract_carries_its_url_args(registry):
    schema = {"type": "object", "properties": {"url": {"type": "string"}, "text": {"type": "string"}}}
    catalog(registry, tool_risk={"fetch": "low"}).refresh([tool("fetch", schema)])
    assert registry.get("mcp.srv.fetch").contract.url_args == ("url",)
