"""Which transports are tried for a server, in order (opening them: tests/tools/mcp/test_bridge.py)."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

import pytest

from bruce.config.schema import MCPServerConfig
from tools.mcp.transports import openers


@pytest.mark.parametrize(("transport", "labels"), [
    ("auto", ["streamable_http", "sse"]), ("streamable_http", ["streamable_http"]), ("sse", ["sse"])])
async def test_an_http_server_tries_its_transports_in_order(transport, labels):
    config = MCPServerConfig(url="http://127.0.0.1:1/mcp", transport=transport)
    async with AsyncExitStack() as stack:
        chosen = openers(config, zone="UTC", stack=stack, errlog=lambda: sys.stderr)
    assert [label for label, _ in chosen] == labels


async def test_a_stdio_server_is_started_with_the_interpreter_and_the_assistants_zone(monkeypatch):
    import mcp.client.stdio

    seen = {}

    def fake_stdio_client(params, errlog):
        seen.update(command=params.command, env=params.env, errlog=errlog)
        return "opened"

    monkeypatch.setattr(mcp.client.stdio, "stdio_client", fake_stdio_client)
    config = MCPServerConfig(command="python", args=["-m", "x"], env={"KEY": "v"})
    async with AsyncExitStack() as stack:
        ((label, opener),) = openers(config, zone="America/Recife", stack=stack, errlog=lambda: sys.stderr)
        assert label == "stdio" and await opener() == "opened"
    assert seen == {"command": sys.executable, "env": {"TZ": "America/Recife", "KEY": "v"}, "errlog": sys.stderr}
