"""The terminal's side of the console socket (``channels/console_socket.py`` serves it in
``bruce run``; the wire is ``bruce.runtime.console_wire``): ``bruce chat`` attaches a console to
the running daemon, and ``bruce approve``, ``bruce jobs``, ``bruce doctor`` and ``bruce mcp
status`` ask it one thing each (its ``Control``). Each returns None (or False) when no daemon
answers, and the command falls back to working on the database itself.

``attach`` puts a console (the same rendering and input handling as in-process) in front of a
``RemoteInbound``: the worker's doors, over the socket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol

from bruce.channel import ConfirmationRequest, DecisionReport, Inbound, IncomingMessage, LocalDecision
from bruce.config.schema import Config
from bruce.errors import BruceError, StoreError
from bruce.runtime.console_wire import (
    CHAT_ID,
    CONNECT_TIMEOUT_S,
    LINE_LIMIT,
    PROTOCOL_VERSION,
    encode,
    read_confirmation,
    read_progress,
)
from bruce.turns.progress import ProgressEvent
from bruce.values import ConversationId, DecisionOutcome

__all__ = ["DaemonGone", "RemoteInbound", "Terminal", "attach", "attach_console", "connect", "daemon_health",
           "decide_on_daemon", "decide_over_socket", "jobs_changed_on_daemon", "jobs_changed_over_socket",
           "mcp_status_on_daemon", "mcp_status_over_socket"]


class DaemonGone(BruceError):
    """The daemon closed the console socket (it stopped, or refused us)."""


class NotOurDaemon(BruceError):
    """The socket is there, but its owner is another user."""


class Terminal(Protocol):
    """The console a user types in (``channels/console.py``'s ``ConsoleChannel``), as ``attach``
    drives it: started with the daemon's doors, shown what the daemon sends."""

    busy: bool  # a line is being stored or answered

    async def start(self, inbound: Inbound) -> None: ...

    async def stop(self) -> None: ...

    async def interact(self) -> None: ...

    def notice(self, text: str) -> None: ...

    def show(self, event: ProgressEvent) -> None: ...

    async def send_text(self, chat_id: str, text: str) -> None: ...

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None: ...

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None: ...


# the commands' questions, by config ----------------------------------------------------------


async def attach_console(config: Config, console: Terminal, stop: asyncio.Event) -> int | None:
    """``bruce chat`` through the running daemon's console socket; None when no daemon answers."""
    return await attach(config.console.socket_path, console, stop)


async def decide_on_daemon(config: Config, confirmation_id: str, approve: bool) -> LocalDecision | None:
    """``bruce approve`` / ``deny`` delivered to the running daemon; None when no daemon answers."""
    return await decide_over_socket(config.console.socket_path, confirmation_id, approve)


async def jobs_changed_on_daemon(config: Config) -> bool:
    """``bruce jobs`` changed a job: the running daemon re-arms at once. False when none answers."""
    return await jobs_changed_over_socket(config.console.socket_path)


async def daemon_health(config: Config) -> dict[str, str | None] | None:
    """The running daemon's channels and when each last received; None when none answers."""
    return await _health_over_socket(config.console.socket_path)


async def mcp_status_on_daemon(config: Config) -> list[dict[str, Any]] | None:
    """The running daemon's MCP servers and their state; None when none answers."""
    return await mcp_status_over_socket(config.console.socket_path)


# over the socket ------------------------------------------------------------------------------


async def connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]] | None:
    """Open the daemon's console socket and say hello; None when no daemon answers there."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=LINE_LIMIT), CONNECT_TIMEOUT_S)
    except (FileNotFoundError, ConnectionRefusedError, TimeoutError):
        return None
    except PermissionError:
        raise NotOurDaemon(f"the Bruce daemon at {path} belongs to another user; run this as that user") from None
    except OSError as exc:  # e.g. a path too long for a socket, or not a socket
        raise BruceError(f"cannot reach the console socket {path}: {exc.strerror or exc}") from None
    try:
        writer.write(encode({"op": "hello", "version": PROTOCOL_VERSION}))
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), CONNECT_TIMEOUT_S)
        hello = json.loads(line) if line else None
    except (OSError, TimeoutError, ValueError):
        hello = None
    if not isinstance(hello, dict) or hello.get("ev") != "hello":
        writer.close()
        return None  # not a Bruce daemon (or one that refused us): nobody to talk to
    return reader, writer, hello


async def _ask(path: Path, request: dict[str, Any], *, timeout_s: float | None = None) -> dict[str, Any] | None:
    """One request to our own daemon and its answer (the first event with ``ref`` 1); None when
    no daemon answers at ``path``, or it is another user's (the caller falls back)."""
    try:
        connected = await connect(path)
    except NotOurDaemon:
        return None
    if connected is None:
        return None
    reader, writer, _ = connected
    try:
        writer.write(encode({**request, "ref": 1}))
        await writer.drain()
        while line := await asyncio.wait_for(reader.readline(), timeout_s):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("ref") == 1:
                return event
        raise DaemonGone("the daemon closed the connection before answering")
    finally:
        writer.close()


async def decide_over_socket(path: Path, confirmation_id: str, approve: bool) -> LocalDecision | None:
    """``bruce approve`` / ``deny`` delivered to the running daemon; None when none runs, or
    when it is another user's (whoever may write the database decides there; the daemon polls)."""
    event = await _ask(path, {"op": "decide", "id": confirmation_id, "approve": approve, "local": True})
    if event is None:
        return None
    if event.get("ev") != "decided":
        raise BruceError(f"the daemon refused the decision: {event.get('error')}")
    return LocalDecision(DecisionOutcome(event["outcome"]), event.get("tool_name"), event.get("conversation_id"),
                         event.get("status"), bool(event.get("runs_here")))


async def _health_over_socket(path: Path) -> dict[str, str | None] | None:
    """The running daemon's channels and when each last received (``bruce doctor``); None when
    no daemon answers at ``path`` (or it is another user's, or it does not answer in time)."""
    try:
        event = await _ask(path, {"op": "health"}, timeout_s=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError, DaemonGone):
        return None
    return dict(event.get("last_receive") or {}) if event is not None and event.get("ev") == "health" else None


async def jobs_changed_over_socket(path: Path) -> bool:
    """``bruce jobs`` changed a job: the running daemon re-reads the jobs now. False when no
    daemon answers at ``path`` (the change waits in the database for the next start)."""
    try:
        event = await _ask(path, {"op": "jobs_changed"}, timeout_s=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError, DaemonGone):
        return False
    return event is not None and event.get("ev") == "jobs_synced"


async def mcp_status_over_socket(path: Path) -> list[dict[str, Any]] | None:
    """The running daemon's MCP servers (``bruce mcp status``); None when no daemon answers."""
    try:
        event = await _ask(path, {"op": "mcp_status"}, timeout_s=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError, DaemonGone):
        return None
    if event is None or event.get("ev") != "mcp_status" or not isinstance(event.get("servers"), list):
        return None
    return list(event["servers"])


class RemoteInbound:
    """The worker's doors, over the socket: what a ``ConsoleChannel`` delivers goes to the daemon,
    and what the daemon sends is shown by that console."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, console: Terminal) -> None:
        self._reader = reader
        self._writer = writer
        self._console = console
        self._next_ref = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._done: dict[int, asyncio.Future[None]] = {}
        self.closed = asyncio.Event()

    async def _request(self, obj: dict[str, Any]) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        if self.closed.is_set():
            raise DaemonGone("the Bruce daemon is gone")
        self._next_ref += 1
        ref = self._next_ref
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ref] = answer
        self._writer.write(encode({**obj, "ref": ref}))
        await self._writer.drain()
        return ref, answer

    async def deliver(self, message: IncomingMessage) -> Awaitable[None] | None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ref, answer = await self._request({"op": "message", "text": message.text})
        self._done[ref] = done
        event = await answer
        if event["ev"] == "store_error":
            self._done.pop(ref, None)
            raise StoreError(str(event.get("error")))
        if event["ev"] == "error":
            self._done.pop(ref, None)
            self._console.notice(f"(the daemon could not take that: {event.get('error')})")
            return None
        return done

    async def decide(
        self, conversation_id: ConversationId, user_id: str, confirmation_id: str, approve: bool,
    ) -> DecisionReport:
        _, answer = await self._request({"op": "decide", "id": confirmation_id, "approve": approve})
        event = await answer
        return DecisionReport(DecisionOutcome(event["outcome"]), str(event.get("text", "")))

    async def run(self) -> None:
        """Read the daemon's events until it closes the connection."""
        try:
            while line := await self._reader.readline():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    await self._show(event)
        except (ConnectionError, ValueError):
            pass
        finally:
            self.closed.set()
            futures: list[asyncio.Future[Any]] = [*self._waiting.values(), *self._done.values()]
            for future in futures:
                if not future.done():
                    future.set_exception(DaemonGone("the Bruce daemon is gone"))
                    future.exception()  # nobody may be waiting any more: not an unretrieved error

    async def _show(self, event: dict[str, Any]) -> None:
        kind, ref = event.get("ev"), event.get("ref")
        if kind in ("stored", "store_error", "decided", "error") and ref in self._waiting:
            self._waiting.pop(ref).set_result(event)
        elif kind == "error":
            self._console.notice(f"(the daemon says: {event.get('error')})")
        elif kind == "done" and ref in self._done:
            future = self._done.pop(ref)
            if not future.done():
                future.set_result(None)
        elif kind == "text":
            await self._console.send_text(CHAT_ID, str(event.get("text", "")))
        elif kind == "confirmation":
            await self._console.send_confirmation(CHAT_ID, read_confirmation(event))
        elif kind == "file":
            await self._console.send_file(CHAT_ID, Path(str(event.get("path"))), event.get("caption"))
        elif kind == "progress":
            shown = read_progress(event)
            if shown is not None:
                self._console.show(shown)

    def close(self) -> None:
        self._writer.close()


async def attach(path: Path, console: Terminal, stop: asyncio.Event) -> int | None:
    """Chat with the running daemon through ``console`` until the user leaves (0), ``stop`` is
    set (a signal: 0; a turn in flight goes on in the daemon) or the daemon goes away (1).
    None when no daemon answers at ``path``."""
    connected = await connect(path)
    if connected is None:
        return None
    reader, writer, _ = connected
    remote = RemoteInbound(reader, writer, console)
    events = asyncio.create_task(remote.run(), name="console.events")
    await console.start(remote)
    session = asyncio.create_task(console.interact(), name="console")
    stopping = asyncio.create_task(stop.wait(), name="console.stop")
    try:
        await asyncio.wait({session, events, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if events.done():
            console.notice("(the Bruce daemon stopped; leaving)")
            return 1
        if session.done():
            session.result()  # /quit or end of input (or what interact raised)
        elif console.busy:
            console.notice("(left; the daemon finishes the reply in progress, shown the next time you attach)")
        return 0
    finally:
        for task in (session, events, stopping):
            task.cancel()
        await asyncio.gather(session, events, stopping, return_exceptions=True)
        remote.close()
        await console.stop()
