"""How to reach an MCP server: the transports to try, in order, each opened only when tried.

stdio starts the server's process (``python`` in the config is the interpreter running Bruce,
where tools/ is importable), with the assistant's time zone unless its env sets one; HTTP is
streamable HTTP, or SSE, or (``auto``) streamable HTTP falling back to SSE.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, TextIO

from bruce.config.schema import MCPServerConfig

__all__ = ["Opener", "openers"]

Opener = Callable[[], Awaitable[AbstractAsyncContextManager[Any]]]  # a transport, made when it is tried


def _python(command: str) -> str:
    """``python`` in the config is the interpreter running Bruce (where tools/ is importable)."""
    return sys.executable if command in ("python", "python3") else command


def openers(config: MCPServerConfig, *, zone: str, stack: AsyncExitStack,
            errlog: Callable[[], TextIO]) -> list[tuple[str, Opener]]:
    """(label, opener) for each transport to try; ``errlog`` gives a stdio server's stderr."""
    if config.command is not None:
        return [("stdio", _stdio(config, zone=zone, errlog=errlog))]
    streamable, sse = _http(config, stack)
    chosen: dict[str, list[tuple[str, Opener]]] = {
        "auto": [("streamable_http", streamable), ("sse", sse)],
        "streamable_http": [("streamable_http", streamable)],
        "sse": [("sse", sse)],
    }
    return chosen[config.transport]


def _stdio(config: MCPServerConfig, *, zone: str, errlog: Callable[[], TextIO]) -> Opener:
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    assert config.command is not None
    env = {"TZ": zone, **{k: v.get_secret_value() for k, v in config.env.items()}}
    params = StdioServerParameters(command=_python(config.command), args=config.args, env=env,
                                   cwd=str(config.cwd) if config.cwd else None)

    async def stdio() -> AbstractAsyncContextManager[Any]:
        return stdio_client(params, errlog=errlog())

    return stdio


def _http(config: MCPServerConfig, stack: AsyncExitStack) -> tuple[Opener, Opener]:
    """Openers for streamable HTTP (its client closed with ``stack``) and for SSE."""
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = config.url or ""
    headers = {k: v.get_secret_value() for k, v in config.headers.items()}

    async def streamable() -> AbstractAsyncContextManager[Any]:
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        return streamable_http_client(url, http_client=http)

    async def sse() -> AbstractAsyncContextManager[Any]:
        return sse_client(url, headers=headers, timeout=config.connect_timeout_s)

    return streamable, sse
