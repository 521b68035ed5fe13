"""Live progress while a turn runs: what the loop reports, and the seam a channel implements to
show it (Telegram drafts, Discord status edits, server-sent events, console step lines).

Progress is a preview, never the record: the final message is always the grounded text, stored
and sent through the outbox. A channel that cannot show progress keeps its typing indicator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import structlog

from bruce.contracts import default_activity
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
    "showing",
]

log = structlog.get_logger(__name__)

EMIT_TIMEOUT_S = 2.0  # a sink that takes longer is skipped for that event; the turn goes on
QUEUE_SIZE = 1000  # events waiting for a slow sink; past that, new ones are dropped (a preview)


@dataclass(frozen=True, slots=True)
class Thinking:
    """A model call (or another attempt at one, after a failure) is about to be made: text
    streamed by an earlier attempt is void."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool is about to run. ``activity`` is its contract's label for the user ("Searching the
    web"; ``ToolContract.activity_label``), what a channel shows; it is presentation, so two
    events of the same tool are equal whatever their labels. Left out: the default for the name."""

    tool: str  # the contract name, e.g. "web.search"
    activity: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.activity:
            object.__setattr__(self, "activity", default_activity(self.tool))


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
    """What the loop, the LLM service and the registry report to. Within ``showing(sink)``
    events are queued and shown by a task of their own, so a slow sink never holds up the turn
    (nor counts against a model call's time-out); a failing or slow sink is logged and skipped."""

    def __init__(self, sink: ProgressSink | None = None) -> None:
        self._sink = sink
        self._queue: asyncio.Queue[ProgressEvent | None] | None = None

    @property
    def streams(self) -> bool:
        """Someone is watching the text: worth streaming the model's answer."""
        return self._sink is not None and getattr(self._sink, "wants_text", True) is not False

    async def emit(self, event: ProgressEvent) -> None:
        if self._sink is None:
            return
        if self._queue is None:
            await self._show(event)
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            log.info("progress.dropped", progress=type(event).__name__)

    async def _show(self, event: ProgressEvent) -> None:
        assert self._sink is not None
        try:
            async with asyncio.timeout(EMIT_TIMEOUT_S):
                await self._sink.emit(event)
        except Exception as exc:  # a preview failed; the turn does not care
            log.warning("progress.emit_failed", progress=type(event).__name__, error=type(exc).__name__)

    async def _pump(self, queue: asyncio.Queue[ProgressEvent | None]) -> None:
        while (event := await queue.get()) is not None:
            await self._show(event)


@asynccontextmanager
async def showing(sink: ProgressSink) -> AsyncIterator[Progress]:
    """Progress for one turn, shown by its own task; what is still queued at the end gets
    ``EMIT_TIMEOUT_S`` to be shown, then the rest is dropped."""
    progress = Progress(sink)
    queue: asyncio.Queue[ProgressEvent | None] = asyncio.Queue(QUEUE_SIZE + 1)
    progress._queue = queue
    pump = asyncio.create_task(progress._pump(queue), name="progress")
    try:
        yield progress
    finally:
        progress._queue = None
        while queue.full():  # make room for the end marker
            queue.get_nowait()
        queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(pump), EMIT_TIMEOUT_S)
        except TimeoutError:
            log.info("progress.abandoned", waiting=queue.qsize())
        finally:
            pump.cancel()


NO_PROGRESS = Progress()
