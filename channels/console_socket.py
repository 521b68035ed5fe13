"""The console socket: ``bruce chat`` and ``bruce approve`` talking to the running daemon.

``bruce run`` serves a Unix socket (``console.socket_path``, default ``data/bruce.sock``, mode
0600 in a folder of the owner's). ``SocketConsole`` is the daemon's side: the ``console``
channel of the same worker, approvals and audit as every other channel. A terminal attached
with ``bruce chat`` is just a view of the ``console:local`` conversation: what it types is
delivered like any message, replies, approval requests and step lines are sent to every
terminal attached. Only the owner gets in: the socket's mode, and the peer's uid checked
(``SO_PEERCRED``) on every connection. Being local and owner-only, it is also the door for the
step-up decision (``bruce approve ID``), which runs at once.

The protocol is JSON, one object per line (``LINE_LIMIT`` bytes at most)::

    terminal -> daemon                          daemon -> terminal
    {"op": "hello", "version": 1}               {"ev": "hello", "version": 1, "name": "Bruce"}
    {"op": "message", "ref": 1, "text": "hi"}   {"ev": "stored", "ref": 1}  (or "store_error")
                                                {"ev": "done", "ref": 1}    (the turn finished)
    {"op": "decide", "ref": 2, "id": "ab12cd34", "approve": true, "local": true}
                                                {"ev": "decided", "ref": 2, "outcome": "queued", ...}
    any time: {"ev": "text", "text": ...}, {"ev": "confirmation", ...}, {"ev": "file", ...},
              {"ev": "progress", "kind": "tool_finished", "tool": ..., "status": ...}
    {"op": "health", "ref": 3}                  {"ev": "health", "ref": 3, "last_receive": {"telegram": "2026-…Z"}}
    {"op": "jobs_changed", "ref": 4}            {"ev": "jobs_synced", "ref": 4}  (the scheduler re-read the jobs)
    {"op": "mcp_status", "ref": 5}              {"ev": "mcp_status", "ref": 5, "servers": [...]}
    a request it cannot read: {"ev": "error", "ref": ..., "error": "what was wrong"}

With no terminal attached a reply is not lost: ``send_text`` raises ``ChannelSendError``, the
outbox keeps it unsent, and it is sent when a terminal attaches again.

``attach`` is the terminal's side: it puts a ``ConsoleChannel`` (the same rendering and input
handling as in-process) in front of a ``RemoteInbound``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import struct
from collections.abc import AsyncIterator, Awaitable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import structlog

from bruce.channel import ConfirmationRequest, DecisionReport, IncomingMessage, LocalDecision, LocalInbound
from bruce.clock import Clock
from bruce.errors import BruceError, ChannelSendError, StoreError
from bruce.turns.progress import ProgressEvent, Thinking, ToolFinished, ToolStarted
from bruce.values import DecisionOutcome, ToolStatus
from channels.console import ConsoleChannel

__all__ = ["SocketConsole", "RemoteInbound", "DaemonGone", "attach", "connect", "daemon_health", "decide_over_socket",
           "jobs_changed_over_socket", "mcp_status_over_socket",
           "PROTOCOL_VERSION"]

log = structlog.get_logger(__name__)

PROTOCOL_VERSION = 1
LINE_LIMIT = 16 * 1024 * 1024  # one JSON line; a reply is at most 100 000 characters, escaped
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with its terminating NUL
CHAT_ID = "local"
USER_ID = "local"
CONNECT_TIMEOUT_S = 2.0
SEND_TIMEOUT_S = 5.0  # a terminal that does not read for this long is dropped


class DaemonGone(BruceError):
    """The daemon closed the console socket (it stopped, or refused us)."""


class NotOurDaemon(BruceError):
    """The socket is there, but its owner is another user."""


def _encode(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, default=str) + "\n").encode("utf-8", "surrogatepass")


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _event(event: ProgressEvent) -> dict[str, Any] | None:
    match event:
        case Thinking():
            return {"ev": "progress", "kind": "thinking"}
        case ToolStarted(tool=tool, activity=activity):
            return {"ev": "progress", "kind": "tool_started", "tool": tool, "activity": activity}
        case ToolFinished(tool=tool, status=status):
            return {"ev": "progress", "kind": "tool_finished", "tool": tool, "status": str(status)}
    return None  # the text streams only to channels that show it live


@dataclass(eq=False)  # one per connection, kept in a set
class _Terminal:
    writer: asyncio.StreamWriter
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, obj: dict[str, Any]) -> None:
        async with self.lock:
            self.writer.write(_encode(obj))
            await asyncio.wait_for(self.writer.drain(), SEND_TIMEOUT_S)


class _Steps:
    wants_text = False

    def __init__(self, console: SocketConsole) -> None:
        self._console = console

    async def emit(self, event: ProgressEvent) -> None:
        shown = _event(event)
        if shown is not None:
            await self._console.broadcast(shown, required=False)


class SocketConsole:
    """The daemon's console channel, served on a Unix socket only its owner can open."""

    name = "console"
    max_message_length = ConsoleChannel.max_message_length

    def __init__(self, *, path: Path, clock: Clock, assistant_name: str = "Bruce",
                 line_limit: int = LINE_LIMIT) -> None:
        self.path = path
        self._line_limit = line_limit
        self._clock = clock
        self._name = assistant_name
        self._inbound: LocalInbound | None = None
        self._server: asyncio.AbstractServer | None = None
        self._terminals: set[_Terminal] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Any) -> None:
        self._inbound = cast(LocalInbound, inbound)
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            raise BruceError(f"console.socket_path is too long for a Unix socket ({len(os.fsencode(self.path))} bytes, "
                             f"at most {MAX_SOCKET_PATH}): {self.path}")
        self._clear_stale()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        old = os.umask(0o177)  # the socket is born owner-only: no moment when others may connect
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=self._line_limit)
        except OSError as exc:
            raise BruceError(f"cannot serve the console socket at {self.path}: {exc.strerror or exc}"
                             " (console.socket_path)") from None
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        log.info("console.listening", path=str(self.path))

    def _clear_stale(self) -> None:
        """A socket left by a daemon that died (this process holds the console lock, so no
        other daemon serves it). Anything else at that path is not ours to remove."""
        try:
            mode = self.path.lstat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise BruceError(f"{self.path} exists and is not a socket; console.socket_path must name a free path")
        self.path.unlink()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for terminal in list(self._terminals):
                terminal.writer.close()
            self._terminals.clear()
            await self._server.wait_closed()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._inbound = None

    # outbound: to every terminal attached ------------------------------------------------

    async def broadcast(self, obj: dict[str, Any], *, required: bool = True) -> None:
        """Send to every attached terminal; with ``required``, no terminal reached is a
        ``ChannelSendError`` (the outbox keeps the reply for the next one)."""
        reached = 0
        for terminal in list(self._terminals):
            try:
                await terminal.send(obj)
                reached += 1
            except (OSError, TimeoutError, RuntimeError):
                self._drop(terminal)
        if required and not reached:
            raise ChannelSendError("no terminal is attached (bruce chat)", retryable=False)

    def _drop(self, terminal: _Terminal) -> None:
        self._terminals.discard(terminal)
        terminal.writer.close()

    async def send_text(self, chat_id: str, text: str) -> None:
        await self.broadcast({"ev": "text", "text": text})

    @contextlib.asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        await self.broadcast({"ev": "progress", "kind": "thinking"}, required=False)
        yield

    @contextlib.asynccontextmanager
    async def progress(self, chat_id: str) -> AsyncIterator[_Steps]:
        yield _Steps(self)

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        await self.broadcast({"ev": "confirmation", **asdict(request)})

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        await self.broadcast({"ev": "file", "path": str(path), "caption": caption})

    # inbound: one task per terminal ------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        terminal = _Terminal(writer)
        uid = _peer_uid(writer)
        if uid is not None and uid != os.getuid():
            log.warning("console.refused", peer_uid=uid)
            writer.close()
            return
        try:
            await self._converse(reader, terminal)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except ValueError:  # a line past LINE_LIMIT: the framing is lost, so is the terminal
            with contextlib.suppress(OSError, TimeoutError, RuntimeError):
                await terminal.send({"ev": "error", "error": f"a request is longer than {self._line_limit} bytes"})
        finally:
            self._terminals.discard(terminal)
            writer.close()

    async def _converse(self, reader: asyncio.StreamReader, terminal: _Terminal) -> None:
        while line := await reader.readline():
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request must be a JSON object")
                await self._answer(request, terminal)
            except (ValueError, KeyError) as exc:  # one bad request, not a bad terminal
                problem = str(exc) if not isinstance(exc, KeyError) else f"missing {exc}"
                await terminal.send({"ev": "error", "ref": _ref(_parsed(line)), "error": problem})

    async def _answer(self, request: dict[str, Any], terminal: _Terminal) -> None:
        inbound = self._inbound
        if inbound is None:
            raise ValueError("the daemon is stopping")
        op, ref = request.get("op"), _ref(request)
        if op == "hello":
            await terminal.send({"ev": "hello", "version": PROTOCOL_VERSION, "name": self._name})
            self._terminals.add(terminal)
            await inbound.resend(f"{self.name}:{CHAT_ID}")
        elif op == "message":
            text = request["text"]
            if not isinstance(text, str):
                raise ValueError("text must be a string")
            await self._deliver(inbound, terminal, ref, text)
        elif op == "decide":
            await self._decide(inbound, terminal, ref, request)
        elif op == "health":
            await terminal.send({"ev": "health", "ref": ref, "last_receive": inbound.health()})
        elif op == "jobs_changed":
            await inbound.jobs_changed()
            await terminal.send({"ev": "jobs_synced", "ref": ref})
        elif op == "mcp_status":
            await terminal.send({"ev": "mcp_status", "ref": ref, "servers": inbound.mcp_status()})
        else:
            raise ValueError(f"unknown op {op!r}")

    async def _deliver(self, inbound: LocalInbound, terminal: _Terminal, ref: Any, text: str) -> None:
        message = IncomingMessage(channel=self.name, chat_id=CHAT_ID, sender_id=USER_ID, text=text,
                                  platform_message_id=None, timestamp=self._clock.now())
        try:
            handle = await inbound.deliver(message)
        except StoreError as exc:
            await terminal.send({"ev": "store_error", "ref": ref, "error": str(exc)})
            return
        await terminal.send({"ev": "stored", "ref": ref})
        task = asyncio.create_task(self._report_done(terminal, ref, handle), name="console.done")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _report_done(self, terminal: _Terminal, ref: Any, handle: Awaitable[None] | None) -> None:
        if handle is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(handle)  # the terminal leaving does not cancel the turn
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            await terminal.send({"ev": "done", "ref": ref})

    async def _decide(self, inbound: LocalInbound, terminal: _Terminal, ref: Any, request: dict[str, Any]) -> None:
        rid, approve = request["id"], request["approve"]
        if not isinstance(rid, str) or not isinstance(approve, bool):
            raise ValueError("id must be a string and approve true or false")
        if request.get("local"):
            decision = await inbound.decide_locally(rid, approve)
            await terminal.send({"ev": "decided", "ref": ref, **asdict(decision)})
        else:  # a decision typed in the chat, under the chat's rules (no step-up)
            report = await inbound.decide(f"{self.name}:{CHAT_ID}", USER_ID, rid, approve)
            await terminal.send({"ev": "decided", "ref": ref, "outcome": str(report.outcome), "text": report.text})


def _ref(request: Any) -> Any:
    return request.get("ref") if isinstance(request, dict) else None


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


# the terminal's side -----------------------------------------------------------------------


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
        writer.write(_encode({"op": "hello", "version": PROTOCOL_VERSION}))
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
        writer.write(_encode({**request, "ref": 1}))
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


async def daemon_health(path: Path) -> dict[str, str | None] | None:
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

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, console: ConsoleChannel) -> None:
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
        self._writer.write(_encode({**obj, "ref": ref}))
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

    async def decide(self, conversation_id: str, user_id: str, confirmation_id: str, approve: bool) -> DecisionReport:
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
            await self._console.send_confirmation(CHAT_ID, _confirmation(event))
        elif kind == "file":
            await self._console.send_file(CHAT_ID, Path(str(event.get("path"))), event.get("caption"))
        elif kind == "progress":
            shown = _progress(event)
            if shown is not None:
                self._console.show(shown)

    def close(self) -> None:
        self._writer.close()


def _confirmation(event: dict[str, Any]) -> ConfirmationRequest:
    return ConfirmationRequest(
        id=str(event["id"]), tool_name=str(event["tool_name"]), risk=str(event["risk"]),
        summary=str(event["summary"]), side_effects=str(event["side_effects"]),
        preview=None if event.get("preview") is None else str(event["preview"]),
        expires_at=datetime.fromisoformat(str(event["expires_at"])), step_up=bool(event["step_up"]))


def _progress(event: dict[str, Any]) -> ProgressEvent | None:
    kind = event.get("kind")
    if kind == "thinking":
        return Thinking()
    if kind == "tool_started":
        return ToolStarted(str(event.get("tool")), str(event.get("activity") or ""))
    if kind == "tool_finished":
        try:
            return ToolFinished(str(event.get("tool")), ToolStatus(str(event.get("status"))))
        except ValueError:
            return None
    return None


async def attach(path: Path, console: ConsoleChannel, stop: asyncio.Event) -> int | None:
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
