"""Live progress while a turn runs: what the loop reports, and the seam a channel implements to
show it (Telegram drafts, Discord status edits, server-sent events, console step lines).

Progress is a preview, never the record: the final message is always the grounded text, stored
and sent through the outbox. A channel that cannot show progress keeps its typing indicator.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import structlog

from bruce.values import ToolStatus

__all__ = [
    "Thinking",
    "ToolStarted",
    "ToolFinished",
    "TextDelta",
    "ProgressEvent",
    "ProgressSink",
    "Progress",
    "NO_PROGRESS",
]

log = structlog.get_logger(__name__)

EMIT_TIMEOUT_S = 2.0  # a sink that takes longer is skipped for that event; the turn goes on


@dataclass(frozen=True, slots=True)
class Thinking:
    """A model call is about to be made."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    tool: str  # the contract name, e.g. "web.search"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    tool: str
    status: ToolStatus


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's answer as it streams (not yet grounded)."""

    text: str


ProgressEvent = Thinking | ToolStarted | ToolFinished | TextDelta


@runtime_checkable
class ProgressSink(Protocol):
    """A channel's live view of one turn. A sink may set ``wants_text = False`` when it shows
    only steps (then the answer is not streamed for it)."""

    async def emit(self, event: ProgressEvent) -> None:
        """Show the event; return quickly (throttle inside, never wait on the platform long)."""
        ...


class Progress:
    """What the loop, the LLM service and the registry report to. A failing or slow sink is
    logged and skipped: progress never breaks or stalls a turn."""

    def __init__(self, sink: ProgressSink | None = None) -> None:
        self._sink = sink

    @property
    def streams(self) -> bool:
        """Someone is watching the text: worth streaming the model's answer."""
        return self._sink is not None and getattr(self._sink, "wants_text", True) is not False

    async def emit(self, event: ProgressEvent) -> None:
        if self._sink is None:
            return
        try:
            async with asyncio.timeout(EMIT_TIMEOUT_S):
                await self._sink.emit(event)
        except Exception as exc:  # a preview failed; the turn does not care
            log.warning("progress.emit_failed", progress=type(event).__name__, error=type(exc).__name__)


NO_PROGRESS = Progress()
