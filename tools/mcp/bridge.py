"""MCP servers as tool sources: each configured server is one ``ServerLink`` that connects
(stdio: starts the process; HTTP: streamable HTTP, falling back to SSE), lists the server's
tools, registers each as a ``ToolContract`` in the registry, and keeps watch.

Degrade, don't break: a connection and its handshake are bounded by ``connect_timeout_s``; a
server that is down is ``unavailable`` (its tools leave the definitions, and a call already
offered gets a clear ``unavailable`` error); a background loop reconnects with backoff, which
also restarts a stdio server whose process died. Policy comes from the config only: a server's
descriptions and annotations are untrusted text and never lower a tool's risk.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from bruce.actions.registry import ToolRegistry
from bruce.clock import Clock, utc_iso
from bruce.config.schema import MCPServerConfig
from bruce.contracts import Risk, ToolContext, ToolContract
from bruce.errors import ContractError, ToolFailed
from tools.mcp import names

__all__ = ["MCPBridge", "ServerLink", "ServerState"]

log = structlog.get_logger(__name__)

MAX_SCHEMA_CHARS = 20_000  # a server's input schema goes into every prompt; a huge one is refused
MAX_OUTPUT_CHARS = 16_000  # a result's text, and its structured content as JSON
MAX_TOOLS = 128  # per server: a server listing thousands would fill every prompt
MAX_NAME = 128  # the MCP spec's longest tool name
FIRST_BACKOFF_S = 0.5
FAILURE_MODES = ("unavailable", "timeout", "tool_error", "protocol_error")


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


def _python(command: str) -> str:
    """``python`` in the config is the interpreter running Bruce (where tools/ is importable)."""
    return sys.executable if command in ("python", "python3") else command


_Opener = Callable[[], Awaitable[AbstractAsyncContextManager[Any]]]  # a transport, made when it is tried


@dataclass(frozen=True, slots=True)
class _Listed:
    remote: str  # the server's name for the tool
    contract: ToolContract


class ServerLink:
    """One configured MCP server: its connection, its tools in the registry, its state."""

    def __init__(self, name: str, config: MCPServerConfig, registry: ToolRegistry, *, clock: Clock,
                 log_dir: Path | None, zone: str = "UTC") -> None:
        self.name = name
        self._zone = zone  # a stdio server's TZ (the assistant's), unless its env sets one
        self.config = config
        self._registry = registry
        self._clock = clock
        self._log_dir = log_dir
        self.state = ServerState.CONNECTING if config.enabled else ServerState.DISABLED
        self.transport: str | None = None  # the one that worked: stdio, streamable_http or sse
        self.last_error: str | None = None
        self.since: str = utc_iso(clock.now())
        self.attempts = 0
        self.settled = asyncio.Event()  # the first attempt is over, whatever its outcome
        self._listed: dict[str, _Listed] = {}  # remote name -> what is registered for it now
        self.skipped: dict[str, str] = {}  # remote name -> why it is not offered
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
        for label, transport in self._transports(stack):
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

    def _transports(self, stack: AsyncExitStack) -> list[tuple[str, _Opener]]:
        c = self.config
        if c.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            env = {"TZ": self._zone, **{k: v.get_secret_value() for k, v in c.env.items()}}
            params = StdioServerParameters(command=_python(c.command), args=c.args, env=env,
                                           cwd=str(c.cwd) if c.cwd else None)

            async def stdio() -> AbstractAsyncContextManager[Any]:
                return stdio_client(params, errlog=self._server_log())

            return [("stdio", stdio)]
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        url = c.url or ""
        headers = {k: v.get_secret_value() for k, v in c.headers.items()}

        async def streamable() -> AbstractAsyncContextManager[Any]:
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            return streamable_http_client(url, http_client=http)

        async def sse() -> AbstractAsyncContextManager[Any]:
            return sse_client(url, headers=headers, timeout=c.connect_timeout_s)

        chosen: dict[str, list[tuple[str, _Opener]]] = {"auto": [("streamable_http", streamable), ("sse", sse)], "streamable_http": [("streamable_http", streamable)],
                  "sse": [("sse", sse)]}
        return chosen[c.transport]

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
            self._refresh(listing)

    # state --------------------------------------------------------------------------------

    def _up(self, client: Any, listing: list[Any]) -> None:
        self._client = client
        self._broken = asyncio.Event()
        self.state = ServerState.READY
        self.last_error = None
        self.since = utc_iso(self._clock.now())
        self._refresh(listing)
        self.settled.set()
        self._log.info("mcp.connected", transport=self.transport, tools=sorted(self._listed))

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
            if remote not in self._listed:
                return f"the MCP server {self.name} no longer offers {remote}"
            return None
        return why

    # tools --------------------------------------------------------------------------------

    def _wanted(self, remote: str, contract_name: str) -> bool:
        short = contract_name.removeprefix(f"mcp.{self.name}.")
        chosen = self.config.enabled_tools
        if chosen is not None and remote not in chosen and short not in chosen:
            return False
        return remote not in self.config.disabled_tools and short not in self.config.disabled_tools

    def _refresh(self, listing: list[Any]) -> None:
        remotes = [str(t.name) for t in listing]
        listed: dict[str, _Listed] = {}
        self.skipped = {}
        for tool in listing:
            remote = str(tool.name)
            if not remote or len(remote) > MAX_NAME:
                self.skipped[remote[:MAX_NAME] + "…"] = f"its name is empty or longer than {MAX_NAME} characters"
                continue
            name = names.contract_name(self.name, remote, remotes)
            if not self._wanted(remote, name):
                self.skipped[remote] = "left out by enabled_tools / disabled_tools"
                continue
            if len(listed) >= MAX_TOOLS:
                self.skipped[remote] = f"the server lists more than {MAX_TOOLS} tools; use enabled_tools to choose"
                continue
            try:
                contract = self._contract(tool, name)
                self._registry.register(contract, self._handler(remote), unavailable=self.unavailable(remote),
                                        replace=True)
            except (ValueError, ContractError) as exc:
                self.skipped[remote] = str(exc)[:300]
                self._log.warning("mcp.tool_refused", tool=remote[:100], reason=str(exc)[:300])
                continue
            listed[remote] = _Listed(remote, contract)
        self._listed = listed
        self._unknown_names(remotes)

    def _unknown_names(self, remotes: list[str]) -> None:
        """A tool_risk, enabled_tools or disabled_tools entry that names no tool of the server is
        probably a typo that leaves a risk at its default: say so."""
        known = set(remotes) | {names.contract_name(self.name, r, remotes).removeprefix(f"mcp.{self.name}.")
                                for r in remotes}
        c = self.config
        for key, entries in (("tool_risk", list(c.tool_risk)), ("enabled_tools", c.enabled_tools or []),
                             ("disabled_tools", c.disabled_tools)):
            unknown = sorted(set(entries) - known)
            if unknown:
                self._log.warning("mcp.unknown_tool_names", key=f"mcp_servers.{self.name}.{key}", names=unknown[:20])

    def _contract(self, tool: Any, name: str) -> ToolContract:
        schema = _input_schema(tool.input_schema)
        short = name.removeprefix(f"mcp.{self.name}.")
        risk = Risk(self.config.tool_risk.get(str(tool.name)) or self.config.tool_risk.get(short) or self.config.risk)
        acts = risk not in (Risk.LOW, Risk.MEDIUM)
        existing = self._registry.get(name)
        taken = {t.contract.wire_name for t in self._registry.tools()} - (
            {existing.contract.wire_name} if existing is not None else set())
        return ToolContract(
            name=name,
            description=names.description(self.name, tool.description, short),
            category="mcp",
            risk=risk,
            input_schema=schema,
            output_schema={"type": "object"},
            autonomous=not acts,
            confirmation=acts,
            step_up=risk is Risk.CRITICAL,
            side_effects=f"unknown to Bruce: whatever {short} of the MCP server {self.name} does",
            audit_event="mcp.call",
            failure_modes=FAILURE_MODES,
            timeout_s=self.config.timeout_s,
            permissions=(f"mcp:{self.name}",),
            server=self.name,
            untrusted_output=True,
            wire=existing.contract.wire_name if existing is not None else names.wire_name(self.name, short, taken=taken),
        )

    def _handler(self, remote: str) -> Callable[[dict[str, Any], ToolContext], Awaitable[Any]]:
        async def call(arguments: dict[str, Any], _context: ToolContext) -> Any:
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
        return _output(self.name, result)

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
            "tools": [{"name": t.contract.name, "wire_name": t.contract.wire_name, "remote": t.remote,
                       "risk": str(t.contract.risk)} for t in sorted(self._listed.values(), key=lambda t: t.contract.name)],
            "skipped": dict(sorted(self.skipped.items())),
        }


def _input_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("its input schema is not a JSON Schema object")
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        raise ValueError(f"its input schema is longer than {MAX_SCHEMA_CHARS} characters")
    properties = schema.get("properties")
    if isinstance(properties, dict) and "dry_run" in properties:
        raise ValueError("its input has a dry_run field, which Bruce reserves")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"its input schema is not valid JSON Schema: {exc.message[:200]}") from None
    return dict(schema)


def _output(server: str, result: Any) -> Any:
    """A tool's result for the model: its text (capped) and structured content; a tool error
    becomes ``tool_error`` with the server's words."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[link: {block.uri}]")
        else:
            parts.append(f"[{kind or 'content'}: {getattr(block, 'mime_type', '') or 'binary'}, not shown]")
    text = "\n".join(p for p in parts if p)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"… [{len(text) - MAX_OUTPUT_CHARS} more characters cut]"
    if result.is_error:
        raise ToolFailed(f"the MCP server {server} reported an error: {text[:1000] or 'no details'}", code="tool_error")
    out: dict[str, Any] = {"content": text}
    if result.structured_content is not None:
        size = len(json.dumps(result.structured_content, default=str))
        out["structured"] = result.structured_content if size <= MAX_OUTPUT_CHARS else (
            f"[structured content of {size} characters, not shown]")
    return out


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
