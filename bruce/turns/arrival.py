"""The order inbound messages are answered in: within a conversation, by arrival (message id).

A message waits in its conversation's queue until every older message queued there has been
handled; only then does its turn start. Messages a stopped process left pending are queued at
start-up before any channel receives (``Worker.queue_left_over``), so a message arriving while
recovery is still going waits for them; a message whose turn ends in any way (answered,
failed, cancelled) leaves the queue and lets the next one go.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bruce.values import ConversationId

__all__ = ["ArrivalOrder"]


class ArrivalOrder:
    def __init__(self) -> None:
        self._queues: dict[ConversationId, dict[int, asyncio.Event]] = {}  # message id -> "its turn now"

    def queue(self, conversation: ConversationId, message_id: int) -> None:
        """Put a stored message in its conversation's queue (again: nothing changes)."""
        waiting = self._queues.setdefault(conversation, {})
        waiting.setdefault(message_id, asyncio.Event())
        self._wake(conversation)

    def leave(self, conversation: ConversationId, message_id: int) -> None:
        """The message is handled (or will not be, in this process): the next one may go."""
        waiting = self._queues.get(conversation)
        if waiting is None or waiting.pop(message_id, None) is None:
            return
        if waiting:
            self._wake(conversation)
        else:
            del self._queues[conversation]

    def waiting(self, conversation: ConversationId) -> list[int]:
        """The messages queued in the conversation, oldest first."""
        return sorted(self._queues.get(conversation, {}))

    @asynccontextmanager
    async def turn(self, conversation: ConversationId, message_id: int) -> AsyncIterator[None]:
        """Queue the message (if it is not yet), wait until it is the oldest queued in its
        conversation, and keep it there until the block ends; then the next one goes."""
        self.queue(conversation, message_id)
        try:
            await self._queues[conversation][message_id].wait()
            yield
        finally:
            self.leave(conversation, message_id)

    def _wake(self, conversation: ConversationId) -> None:
        waiting = self._queues[conversation]
        waiting[min(waiting)].set()
