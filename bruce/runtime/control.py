"""The owner's control of the running daemon: what ``bruce`` commands ask of it from the same
machine, over the console socket (``channels/console_socket.py``), which alone serves it.

    request (the command that asks)          answered by
    health (``bruce doctor``)                 each served channel's last receive
    jobs_changed (``bruce jobs``, MCP)        the scheduler re-reads the jobs now
    mcp_status (``bruce mcp status``)         the MCP bridge's servers
    decide_locally (``bruce approve``)        the worker: the step-up decision, run at once
    resend (a terminal attached)              the worker: what waited for the console is sent

Built once, in the assembly (``bruce/app.py``), from the parts it answers for; it holds no
state of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog

from bruce.channel import LocalDecision
from bruce.clock import utc_iso
from bruce.values import ConversationId

__all__ = ["Control", "Doors", "JobSync", "ServerStatus"]

log = structlog.get_logger(__name__)


class Doors(Protocol):
    """The worker's doors the owner's decisions and terminals go through."""

    async def decide_locally(self, confirmation_id: str, approve: bool) -> LocalDecision: ...

    async def resend(self, conversation_id: ConversationId) -> None: ...


class JobSync(Protocol):
    """The scheduler, re-reading the jobs table."""

    async def sync(self) -> None: ...


class ServerStatus(Protocol):
    """The MCP bridge, reporting its servers."""

    def status(self) -> list[dict[str, Any]]: ...


class Control:
    def __init__(self, *, doors: Doors, channels: Mapping[str, object], scheduler: JobSync | None = None,
                 mcp: ServerStatus | None = None) -> None:
        """``scheduler`` None: jobs are not fired by this process; ``mcp`` None: no MCP server is configured."""
        self._doors = doors
        self._channels = channels
        self._scheduler = scheduler
        self._mcp = mcp

    def health(self) -> dict[str, str | None]:
        """Each channel served, with the time it last received from its platform (ISO, UTC),
        where the channel keeps one (``last_receive``; None: nothing received yet)."""
        found: dict[str, str | None] = {}
        for name, channel in self._channels.items():
            if hasattr(channel, "last_receive"):
                when = channel.last_receive
                found[name] = utc_iso(when) if when is not None else None
        return found

    async def jobs_changed(self) -> None:
        """``bruce jobs`` changed the table: the scheduler re-reads it now. A read that fails (a
        locked database) is logged: the scheduler's own sync picks the change up within
        ``sync_interval_s``, and the terminal still gets its answer."""
        if self._scheduler is None:
            return
        try:
            await self._scheduler.sync()
        except Exception:
            log.exception("scheduler.sync_failed", source="bruce jobs")

    def mcp_status(self) -> list[dict[str, Any]]:
        """Each MCP server's state, last error and tools (``bruce mcp status``)."""
        return self._mcp.status() if self._mcp is not None else []

    async def decide_locally(self, confirmation_id: str, approve: bool) -> LocalDecision:
        """The owner's decision from the machine (``Worker.decide_locally``)."""
        return await self._doors.decide_locally(confirmation_id, approve)

    async def resend(self, conversation_id: ConversationId) -> None:
        """Send what is stored and unsent for the conversation (a terminal attached again)."""
        await self._doors.resend(conversation_id)
