"""``bruce mcp serve``: Bruce's own tools for another MCP client (a desktop assistant, an IDE).

What is exposed is decided from each tool's policy, never from the client: ``forbidden`` tools
never; tools that need the user's confirmation only with ``mcp_serve.trusted: true`` (the
client then asks its own user, and every such call is audited with source ``mcp``); step-up
(critical) tools never, since their approval is the owner's, on this machine; and not the
tools Bruce itself takes from other MCP servers. Every call goes through the registry like a
model's: validation, time-out, idempotency, audit. A client's call counts as untrusted text in the
turn (``TurnScope.tainted``): a job it makes is stored untrusted, and a tool that asks after
untrusted text (``memory.remember``, an agent-mode ``proactive.create``) is skipped for an untrusted
client and runs for a trusted one (its user was asked).

stdio speaks MCP on stdin/stdout (logs go to stderr). HTTP binds 127.0.0.1 only and answers 401
to a request without ``Authorization: Bearer <the admin token>``.
"""

from __future__ import annotations

import hmac
import json
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import structlog

from bruce.actions.provenance import strings_in
from bruce.actions.registry import RegisteredTool, ToolRegistry
from bruce.contracts import ToolCall
from bruce.turns.scope import TurnScope
from bruce.values import ConversationId, TurnSource

if TYPE_CHECKING:  # the SDK is imported when a server is built, not with this module
    from mcp import types

__all__ = ["exposed", "build_server", "serve_stdio", "serve_http", "bearer_only", "bind_loopback"]

log = structlog.get_logger(__name__)

ASGIApp = Callable[[MutableMapping[str, Any], Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]],
                   Awaitable[None]]


def exposed(registry: ToolRegistry, *, trusted: bool) -> dict[str, RegisteredTool]:
    """The tools an MCP client may see and call, by contract name (``proactive.create``)."""
    return {t.contract.name: t for t in registry.tools()
            if t.contract.server is None and t.policy.visible and not t.policy.step_up
            and (trusted or not t.policy.needs_confirmation)}


def build_server(
    registry: ToolRegistry, *, trusted: bool, conversation_id: ConversationId | None, version: str = "",
) -> Any:
    """The SDK's low-level ``Server`` with Bruce's tools: list and call, nothing else."""
    from mcp import types
    from mcp.server import Server

    tools = exposed(registry, trusted=trusted)

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.contract.name, description=t.contract.description, input_schema=t.schema_for_model)
            for t in tools.values()])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            return _result({"ok": False, "status": "unknown_tool",
                            "error": f"Bruce offers no tool {params.name[:80]!r} here; list_tools shows what it offers"},
                           error=True)
        # untrusted: nobody here can approve, so a call that needs a yes this time (memory.forget by
        # query) is skipped, never parked; trusted: the client asked its own user. The client's arguments
        # are its own words (it sees every result anyway): a URL it sends is not one Bruce's model composed.
        # Yet the client is not the owner: the call starts tainted (a job it makes is untrusted)
        scope = TurnScope(turn_id="", conversation_id=conversation_id, user_id=None, source=TurnSource.MCP,
                          confirmed_by_caller=trusted, unattended=not trusted, tainted=True,
                          owner_text="\n".join(strings_in(params.arguments or {})))
        call = ToolCall(id=f"mcp:{uuid.uuid4().hex[:12]}", name=tool.contract.wire_name,
                        arguments=json.dumps(params.arguments or {}, ensure_ascii=False, default=str))
        result = await registry.execute(call, scope)
        log.info("mcp_serve.called", tool=tool.contract.name, status=str(result.status))
        return _result(result.for_model(), error=not result.ok)

    return Server("bruce", version=version, instructions="Bruce's own tools: clock, calculator, web, artifacts, "
                  "reminders and scheduled jobs.", on_list_tools=list_tools, on_call_tool=call_tool)


def _result(payload: dict[str, Any], *, error: bool) -> types.CallToolResult:
    from mcp import types

    text = json.dumps(payload, ensure_ascii=False, default=str)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=json.loads(text), is_error=error)


async def serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def bearer_only(app: ASGIApp, token: str) -> ASGIApp:
    """Every HTTP request needs ``Authorization: Bearer <token>`` (compared in constant time)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: MutableMapping[str, Any], receive: Callable[..., Awaitable[Any]],
                      send: Callable[..., Awaitable[Any]]) -> None:
        if scope["type"] == "http":
            given = b""
            for name, value in scope.get("headers", []):
                if name.lower() == b"authorization":
                    given = value
            if not hmac.compare_digest(given, expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <the admin token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def bind_loopback(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: a free one). OSError when it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(server: Any, *, sock: socket.socket, token: str) -> None:
    import uvicorn

    app = bearer_only(server.streamable_http_app(host="127.0.0.1"), token)
    port = sock.getsockname()[1]
    print(f"bruce mcp serve: listening on http://127.0.0.1:{port}/mcp (send Authorization: Bearer <admin token>)",
          file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
