"""The console socket: ``bruce chat`` and ``bruce approve`` talking to the running daemon.

``bruce run`` serves a Unix socket (``console.socket_path``, default ``data/bruce.sock``, mode
0600 in a folder of the owner's). ``SocketConsole`` is the daemon's side: the ``console``
channel of the same worker, approvals and audit as every other channel. A terminal attached
with ``bruce chat`` is just a view of the ``console:local`` conversation: what it types is
delivered like any message, replies, approval requests and step lines are sent to every
terminal attached. Only the owner gets in: the socket's mode, and the peer's uid checked
(``SO_PEERCRED``) on every connection. Being local and owner-only, it is also the door for the
step-up decision (``bruce approve ID``), which runs at once.

The protocol (JSON lines) is ``bruce.runtime.console_wire``; the terminal's side, ``bruce.cli.daemon``.

With no terminal attached a reply is not lost: ``send_text`` raises ``ChannelSendError``, the
outbox keeps it unsent, and it is sent when a terminal attaches again.
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
from pathlib import Path
from typing import Any, cast

import structlog

from bruce.channel import ConfirmationRequest, Inbound, IncomingMessage, Operator
from bruce.clock import Clock
from bruce.errors import BruceError, ChannelSendError, StoreError
from bruce.runtime.console_wire import (
    CHAT_ID,
    LINE_LIMIT,
    PROTOCOL_VERSION,
    USER_ID,
    confirmation_event,
    encode,
    progress_event,
)
from bruce.turns.progress import ProgressEvent
from bruce.values import ConversationId
from channels.console import ConsoleChannel

__all__ = ["SocketConsole", "CHAT_ID"]

log = structlog.get_logger(__name__)

MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with its terminating NUL
SEND_TIMEOUT_S = 5.0  # a terminal that does not read for this long is dropped


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


@dataclass(eq=False)  # one per connection, kept in a set
class _Terminal:
    writer: asyncio.StreamWriter
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, obj: dict[str, Any]) -> None:
        async with self.lock:
            self.writer.write(encode(obj))
            await asyncio.wait_for(self.writer.drain(), SEND_TIMEOUT_S)


class _Steps:
    wants_text = False

    def __init__(self, console: SocketConsole) -> None:
        self._console = console

    async def emit(self, event: ProgressEvent) -> None:
        shown = progress_event(event)
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
        self._inbound: Inbound | None = None
        self._operator: Operator | None = None
        self._server: asyncio.AbstractServer | None = None
        self._terminals: set[_Terminal] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Any) -> None:
        """Serve chat only: the owner's requests (health, jobs, MCP status, local decisions) and
        resending on attach need ``start_operated``."""
        await self._start(cast(Inbound, inbound), None)

    async def start_operated(self, inbound: Inbound, operator: Operator) -> None:
        """Serve chat to ``inbound`` (the worker) and the owner's requests to ``operator``."""
        await self._start(inbound, operator)

    async def _start(self, inbound: Inbound, operator: Operator | None) -> None:
        self._inbound, self._operator = inbound, operator
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
        self._inbound = self._operator = None

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
        await self.broadcast(confirmation_event(request))

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
            if self._operator is not None:
                await self._operator.resend(ConversationId(self.name, CHAT_ID))
        elif op == "message":
            text = request["text"]
            if not isinstance(text, str):
                raise ValueError("text must be a string")
            await self._deliver(inbound, terminal, ref, text)
        elif op == "decide":
            await self._decide(inbound, terminal, ref, request)
        elif op == "health":
            await terminal.send({"ev": "health", "ref": ref, "last_receive": self._operated().health()})
        elif op == "jobs_changed":
            await self._operated().jobs_changed()
            await terminal.send({"ev": "jobs_synced", "ref": ref})
        elif op == "mcp_status":
            await terminal.send({"ev": "mcp_status", "ref": ref, "servers": self._operated().mcp_status()})
        else:
            raise ValueError(f"unknown op {op!r}")

    def _operated(self) -> Operator:
        if self._operator is None:
            raise ValueError("this console serves chat only")
        return self._operator

    async def _deliver(self, inbound: Inbound, terminal: _Terminal, ref: Any, text: str) -> None:
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

    async def _decide(self, inbound: Inbound, terminal: _Terminal, ref: Any, request: dict[str, Any]) -> None:
        rid, approve = request["id"], request["approve"]
        if not isinstance(rid, str) or not isinstance(approve, bool):
            raise ValueError("id must be a string and approve true or false")
        if request.get("local"):
            decision = await self._operated().decide_locally(rid, approve)
            await terminal.send({"ev": "decided", "ref": ref, **asdict(decision)})
        else:  # a decision typed in the chat, under the chat's rules (no step-up)
            report = await inbound.decide(ConversationId(self.name, CHAT_ID), USER_ID, rid, approve)
            await terminal.send({"ev": "decided", "ref": ref, "outcome": str(report.outcome), "text": report.text})


def _ref(request: Any) -> Any:
    return request.get("ref") if isinstance(request, dict) else None


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None
