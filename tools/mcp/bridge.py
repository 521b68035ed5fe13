"""MCP servers as tool sources: each configured server is one ``ServerLink`` that connects
(stdio: starts the process; HTTP: streamable HTTP, falling back to SSE), lists the server's
tools, registers each as a ``ToolContract`` in the registry (``tools/mcp/catalog.py``), and
keeps watch. The transports are in ``tools/mcp/transports.py``; a result as the model reads it,
in ``tools/mcp/results.py``.

Degrade, don't break: a connection and its handshake are bounded by ``connect_timeout_s``; a
server that is down is ``unavailable`` (its tools leave the definitions, and a call already
offered gets a clear ``unavailable`` error); a background loop reconnects with backoff, which
also restarts a stdio server whose process died. Policy comes from the config only: a server's
descriptions and annotations are untrusted text and never lower a tool's risk.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, NoReturn, TextIO

import structlog

from bruce.actions.registry import ToolRegistry
from bruce.clock import Clock, utc_iso
from bruce.config.schema import MCPServerConfig
from bruce.contracts import ToolContext, ToolHandler
from bruce.errors import ToolFailed
from tools.mcp.catalog import ServerTools
from tools.mcp.results import tool_output
from tools.mcp.transports import openers

__all__ = ["MCPBridge", "ServerLink", "ServerState"]

log = structlog.get_logger(__name__)

FIRST_BACKOFF_S = 0.5


class ServerState:
    CONNECTING = "connecting"  # the first attempt is under way
    READY = "ready"
    UNAVAILABLE = "unavailable"  # down; reconnection is tried in the background
    DISABLED = "disabled"  # enabled: false in the config


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """One line for the status and the log: what went wrong, without a traceback."""
    leaf = _leaf(exc)
    if isinstance(leaf, TimeoutError):
        return "timed out"
    text = str(leaf).strip().splitlines()[0] if str(leaf).strip() else ""
    return f"{type(leaf).__name__}: {text}"[:300] if text else type(leaf).__name__


class ServerLink:
    """One configured MCP server: its connection, its tools in the registry, its state."""

    def __init__(self, name: str, config: MCPServerConfig, registry: ToolRegistry, *, clock: Clock,
                 log_dir: Path | None, zone: str = "UTC") -> None:
        self.name = name
        self._zone = zone  # a stdio server's TZ (the assistant's), unless its env sets one
        self.config = config
        self.tools = ServerTools(name, config, registry, handler=self._handler, unavailable=self.unavailable)
        self._clock = clock
        self._log_dir = log_dir
        self.state = ServerState.CONNECTING if config.enabled else ServerState.DISABLED
        self.transport: str | None = None  # the one that worked: stdio, streamable_http or sse
        self.last_error: str | None = None
        self.since: str = utc_iso(clock.now())
        self.attempts = 0
        self.settled = asyncio.Event()  # the first attempt is over, whatever its outcome
        self._client: Any = None
        self._broken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._life: Any = None  # anyio.CancelScope around the supervisor, cancelled by stop()
        self._errlog: TextIO | None = None
        self._log = log.bind(server=name)

    # life ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self.config.enabled and self._task is None:
            import anyio

            self._life = anyio.CancelScope()
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")
        else:
            self.settled.set()

    async def stop(self) -> None:
        """End the link through anyio's cancellation, which the SDK's clean-up is shielded from
        (a native ``task.cancel()`` can cut that clean-up short and leave a stdio server running)."""
        if self._task is not None:
            self._stopping = True
            self._life.cancel()
            done, _ = await asyncio.wait({self._task}, timeout=10)
            if not done:  # the clean-up itself hangs: the last resort
                self._log.warning("mcp.stop_slow")
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=5)
            self._task = None
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None

    async def _supervise(self) -> None:
        import anyio

        backoff = FIRST_BACKOFF_S
        with self._life:
            while True:
                self.attempts += 1
                try:
                    await self._session()
                    backoff = FIRST_BACKOFF_S
                except Exception as exc:  # the server's failure is reported, never ours to crash on
                    self._down(describe(exc))
                self.settled.set()
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self.config.reconnect_max_s)
        self._down("Bruce is stopping")

    async def _session(self) -> None:
        """One connection, from the handshake (bounded) to the moment it breaks."""
        import anyio

        loop = asyncio.get_running_loop()
        handshake = anyio.CancelScope()
        with handshake:
            timer = loop.call_later(self.config.connect_timeout_s, handshake.cancel)
            try:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    listing = await self._list(client)
                    timer.cancel()
                    self._up(client, listing)
                    await self._watch(client)
                    self._down(self.last_error or "the connection ended")
            finally:
                timer.cancel()
        if handshake.cancelled_caught:
            raise TimeoutError

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp import Client

        failure: Exception | None = None
        for label, transport in openers(self.config, zone=self._zone, stack=stack, errlog=self._server_log):
            try:
                client = await stack.enter_async_context(Client(await transport()))
            except TimeoutError:
                raise
            except Exception as exc:  # try the next transport (auto: SSE after streamable HTTP)
                failure = exc
                self._log.info("mcp.transport_failed", transport=label, error=describe(exc))
                continue
            self.transport = label
            return client
        assert failure is not None
        raise failure

    def _server_log(self) -> TextIO:
        """A stdio server's stderr: ``<data>/mcp/<name>.log`` (the daemon's own stderr if none)."""
        if self._log_dir is None:
            return sys.stderr
        if self._errlog is None:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            self._errlog = (self._log_dir / f"{self.name}.log").open("a", encoding="utf-8")
        return self._errlog

    async def _list(self, client: Any) -> list[Any]:
        found: list[Any] = []
        cursor = None
        for _ in range(20):  # a paginator that never ends cannot hang the link
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return found

    async def _watch(self, client: Any) -> None:
        """Until the connection breaks: a call saw it fail, or a periodic listing did not answer
        (which also picks up a changed tool list)."""
        import anyio

        while True:
            try:
                await asyncio.wait_for(self._broken.wait(), self.config.ping_interval_s)
                return
            except TimeoutError:
                pass
            with anyio.fail_after(max(self.config.connect_timeout_s, 5.0)):
                listing = await self._list(client)
            self.tools.refresh(listing)

    # state --------------------------------------------------------------------------------

    def _up(self, client: Any, listing: list[Any]) -> None:
        self._client = client
        self._broken = asyncio.Event()
        self.state = ServerState.READY
        self.last_error = None
        self.since = utc_iso(self._clock.now())
        self.tools.refresh(listing)
        self.settled.set()
        self._log.info("mcp.connected", transport=self.transport, tools=self.tools.remotes())

    def _down(self, reason: str) -> None:
        if self._stopping:
            self._log.info("mcp.closed")
        elif self.state == ServerState.READY:
            self._log.warning("mcp.disconnected", error=reason)
        elif self.attempts <= 1 or self.last_error != reason:
            self._log.warning("mcp.unavailable", error=reason, attempt=self.attempts)
        self._client = None
        if self.state != ServerState.UNAVAILABLE:
            self.since = utc_iso(self._clock.now())
        self.state = ServerState.UNAVAILABLE
        self.last_error = reason

    def unavailable(self, remote: str) -> Callable[[], str | None]:
        def why() -> str | None:
            if self.state != ServerState.READY:
                return f"the MCP server {self.name} is {self.state} ({self.last_error or 'connecting'}); try again later"
            if not self.tools.offers(remote):
                return f"the MCP server {self.name} no longer offers {remote}"
            return None
        return why

    # calls --------------------------------------------------------------------------------

    def _handler(self, remote: str) -> ToolHandler:
        async def call(arguments: dict[str, Any], context: ToolContext) -> Any:
            if context.dry_run:  # only a tool whose listing names a preview tool has a dry run
                preview = self.tools.previews.get(remote)
                if preview is None:
                    raise ToolFailed(f"the MCP server {self.name} no longer previews {remote}", code="tool_error")
                return await self.call(preview, arguments)
            return await self.call(remote, arguments)
        return call

    async def call(self, remote: str, arguments: Mapping[str, Any]) -> Any:
        import anyio
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        client = self._client
        if client is None:
            raise ToolFailed(f"the MCP server {self.name} is not connected ({self.last_error})", code="unavailable")
        try:
            result = await client.call_tool(remote, dict(arguments))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:  # the process died, the stream ended: reconnect
                return self._gone(exc)
            raise ToolFailed(f"the MCP server {self.name} refused the call: {str(exc)[:300]}",
                             code="protocol_error") from None
        except ValidationError:
            raise ToolFailed(f"the MCP server {self.name} sent an answer that is not valid MCP",
                             code="protocol_error") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
            return self._gone(exc)
        return tool_output(self.name, result)

    def _gone(self, exc: BaseException) -> NoReturn:
        """The connection broke under a call: the link reconnects; the call says so."""
        self.last_error = f"went away during a call ({describe(exc)})"
        self._broken.set()
        raise ToolFailed(f"the MCP server {self.name} went away during the call ({describe(exc)}); "
                         "Bruce is reconnecting to it", code="unavailable")

    # report -------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "server": self.name,
            "transport": self.transport or ("stdio" if self.config.command else self.config.transport),
            "state": self.state,
            "since": self.since,
            "last_error": self.last_error,
            "tools": self.tools.status(),
            "skipped": dict(sorted(self.tools.skipped.items())),
        }


_preloading: asyncio.Future[Any] | None = None


def preload() -> asyncio.Future[Any]:
    """Import the SDK (about two seconds of CPU) in a thread, once, so that it overlaps the rest
    of start-up instead of adding to it and never stalls the event loop."""
    global _preloading
    if _preloading is None or (_preloading.done() and _preloading.exception() is not None):
        _preloading = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, "mcp"))
    return _preloading


class MCPBridge:
    """Every configured server. ``start`` connects them concurrently and returns once each has
    connected or used up its ``connect_timeout_s`` (never later): a healthy server's tools are
    offered from the first turn, a dead one delays nothing beyond its bound."""

    def __init__(self, servers: Mapping[str, MCPServerConfig], registry: ToolRegistry, *, clock: Clock,
                 log_dir: Path | None = None, zone: str = "UTC") -> None:
        self.links = {name: ServerLink(name, cfg, registry, clock=clock, log_dir=log_dir, zone=zone)
                      for name, cfg in servers.items()}

    async def start(self) -> None:
        enabled = [link for link in self.links.values() if link.config.enabled]
        if enabled:
            await preload()
        for link in self.links.values():
            link.start()

        async def settled(link: ServerLink) -> None:
            try:
                await asyncio.wait_for(link.settled.wait(), link.config.connect_timeout_s)
            except TimeoutError:
                pass

        await asyncio.gather(*(settled(link) for link in enabled))
        for link in enabled:
            if link.state != ServerState.READY:
                link.state = ServerState.UNAVAILABLE
                link.last_error = link.last_error or f"no handshake within {link.config.connect_timeout_s:g} s"

    async def stop(self) -> None:
        await asyncio.gather(*(link.stop() for link in self.links.values()))

    def status(self) -> list[dict[str, Any]]:
        return [link.status() for _, link in sorted(self.links.items())]
