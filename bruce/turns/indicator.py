"""The indicator: what a chat shows while Bruce works on it.

A channel that implements ``ProgressChannel`` shows the turn's live progress (tool steps, the
answer as it streams); any other shows its typing indicator alone. A channel failing to show
either is logged, and the work goes on: the indicator is a courtesy, never the record.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

import structlog

from bruce.channel import Channel, ProgressChannel
from bruce.turns.progress import Progress, showing
from bruce.values import ConversationId

__all__ = ["Indicator"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")


class Indicator:
    """The channels' progress views and typing indicators, by conversation."""

    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self._channels = channels

    @asynccontextmanager
    async def showing(self, conversation: ConversationId) -> AsyncIterator[Progress]:
        """The channel's live progress while the block runs, or its typing indicator alone. A
        channel failing to show either is logged; the turn goes on."""
        channel = self._channels.get(conversation.channel)
        if channel is None:
            yield Progress()
        elif isinstance(channel, ProgressChannel):
            async with _tolerant(channel.progress(conversation.chat_id)) as sink:
                if sink is None:
                    yield Progress()
                else:
                    async with showing(sink) as progress:
                        yield progress
        else:
            async with _tolerant(channel.thinking(conversation.chat_id)):
                yield Progress()


@asynccontextmanager
async def _tolerant(context: AbstractAsyncContextManager[_T]) -> AsyncIterator[_T | None]:
    """Enter and leave a channel's indicator without letting its failure end the turn: None
    when it could not be entered; an error on leaving is logged, the block's own outcome kept."""
    try:
        value = await context.__aenter__()
    except Exception as exc:
        log.warning("channel.indicator_failed", stage="enter", error=type(exc).__name__)
        yield None
        return
    try:
        yield value
    except BaseException as exc:
        try:
            await context.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception as late:
            log.warning("channel.indicator_failed", stage="exit", error=type(late).__name__)
        raise
    try:
        await context.__aexit__(None, None, None)
    except Exception as exc:
        log.warning("channel.indicator_failed", stage="exit", error=type(exc).__name__)
