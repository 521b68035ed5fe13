"""What a previous process left: closed or finished at start-up, before anything new happens.

- Turns left ``running`` (chat, summary, confirmation, proactive) are closed as ``interrupted``.
- Approved actions left ``running`` are closed as failed (we cannot know whether they ran) and
  the user is told; done before the channels start, so an approval of this run can never be
  mistaken for one of them.
- Calls of tools with side effects left started without a result (``tool_starts``): their
  outcome is unknown. Outside a pending message (a scheduled turn's), the user is told they may
  or may not have happened; nothing runs them again.
- Messages left ``pending``: answered again if nothing acted in their turn, or if the only calls
  cut off are idempotent ones (answering again replays their key: the same artifact, not a
  second); if a tool had acted, or a non-idempotent call was cut off, the user is told what
  completed and what may or may not have happened instead (answering again could act twice);
  older than ``max_age_s``, the user gets an apology instead of a late answer.
Unsent replies are the outbox's (``Outbox.resend_all``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import timedelta
from zoneinfo import ZoneInfo

import structlog

from bruce.actions.confirmations import Confirmations
from bruce.clock import Clock, local_time, parse_iso
from bruce.records import ActedTool, StoredMessage, UnfinishedTool
from bruce.runtime.outbox import Outbox
from bruce.store import Store
from bruce.texts import (
    expired_while_offline,
    interrupted_action,
    interrupted_by_crash,
    interrupted_with_unknown,
    unknown_outcome,
)
from bruce.values import ConversationId, Direction, MessageKind, MessageStatus, ToolStatus, TurnSource

__all__ = ["Recovery"]

log = structlog.get_logger(__name__)


class Recovery:
    def __init__(self, *, store: Store, confirmations: Confirmations, outbox: Outbox, clock: Clock, zone: ZoneInfo,
                 served: Collection[str], max_age_s: float) -> None:
        self._messages = store.messages
        self._audit = store.audit
        self._outbound = store.outbound
        self._confirmations = confirmations
        self._outbox = outbox
        self._clock = clock
        self._zone = zone
        self._served = served
        self._max_age = timedelta(seconds=max_age_s)

    async def close_interrupted_actions(self) -> None:
        """Turns and approved actions the previous process left running: closed (turns as
        ``interrupted``), the user told of the actions (the notice is sent once the outbox runs)."""
        closed = await self._messages.interrupt_open_turns(self._served, error="the process stopped during the turn")
        if closed:
            log.info("recovery.turns_interrupted", turns=closed)
        for action in await self._confirmations.interrupted(self._served):
            await self._outbound.add(action.conversation_id, interrupted_action(action.id, action.tool_name),
                                     turn_id=None, kind=MessageKind.NOTICE)
        await self._report_unknown_elsewhere()

    async def _report_unknown_elsewhere(self) -> None:
        """Calls of this daemon's conversations cut off outside a pending message (a scheduled
        turn's): each conversation is told once. An approved run's was told above; an MCP
        client's has no conversation (and may be running in ``bruce mcp serve``): left alone."""
        left = [c for c in await self._audit.unfinished_elsewhere()
                if c.conversation_id and ConversationId.parse(c.conversation_id).channel in self._served]
        by_conversation: dict[str, list[UnfinishedTool]] = {}
        for call in left:
            log.warning("recovery.outcome_unknown", tool=call.tool_name, start=call.id, conversation=call.conversation_id)
            if call.source is not TurnSource.CONFIRMATION and call.conversation_id:
                by_conversation.setdefault(call.conversation_id, []).append(call)
        for conversation, calls in by_conversation.items():
            await self._outbound.add(conversation, unknown_outcome([(c.tool_name, c.summary) for c in calls]),
                                     turn_id=None, kind=MessageKind.NOTICE)
        await self._audit.settle_starts([call.id for call in left])

    async def cut_off(self, message: StoredMessage, *, expired: bool = False) -> bool:
        """Close a message whose turn was cut off after a tool acted, or while a non-idempotent
        one ran (its outcome unknown); True when closed. Cut-off idempotent calls are settled
        (answering again replays their key) unless the message is not answered again."""
        acted = await self._messages.actions_for_message(message.id)
        unknown = await self._audit.unfinished_for_message(message.id)
        if acted or any(not u.idempotent for u in unknown) or (unknown and expired):
            await self.close_interrupted(message, acted, unknown)
            return True
        await self._audit.settle_starts([u.id for u in unknown])
        return False

    async def unanswered(self, *, up_to_id: int) -> list[StoredMessage]:
        """Close what cannot be answered again; return the pending messages to answer now."""
        now = self._clock.now()
        to_answer = []
        for message in await self._messages.with_status(Direction.IN, MessageStatus.PENDING, up_to_id=up_to_id):
            if ConversationId.parse(message.conversation_id).channel not in self._served:  # a stored row
                log.info("recovery.channel_off", message_id=message.id)
                continue
            expired = now - parse_iso(message.created_at) > self._max_age
            if await self.cut_off(message, expired=expired):
                continue
            if expired:
                await self._expire(message)
            else:
                log.info("recovery.process", message_id=message.id)
                to_answer.append(message)
        return to_answer

    async def _expire(self, message: StoredMessage) -> None:
        notice = expired_while_offline(local_time(message.created_at, self._zone), message.text)
        log.info("recovery.expired", message_id=message.id)
        await self._outbox.post(ConversationId.parse(message.conversation_id), notice, kind=MessageKind.NOTICE, inbound_id=message.id,
                                inbound_status=MessageStatus.EXPIRED)

    async def close_interrupted(self, message: StoredMessage, acted: list[ActedTool],
                                unknown: Sequence[UnfinishedTool] = ()) -> None:
        """A crash (or a failed database) cut off a turn after tools had acted, or while one ran:
        answering again could act twice, so tell the user what happened (and what may have) instead."""
        done = [a.tool_name for a in acted if a.status is ToolStatus.OK]
        waiting = [a.confirmation_id for a in acted
                   if a.status is ToolStatus.AWAITING_CONFIRMATION and a.confirmation_id]
        await self._messages.interrupt_turns_of(message.id, error="interrupted by a crash")
        log.info("recovery.interrupted_turn", message_id=message.id, actions=len(acted), unknown=len(unknown))
        text = (interrupted_with_unknown(message.text, done, waiting, [(u.tool_name, u.summary) for u in unknown])
                if unknown else interrupted_by_crash(message.text, done, waiting))
        await self._outbox.post(ConversationId.parse(message.conversation_id), text,
                                kind=MessageKind.NOTICE, inbound_id=message.id, inbound_status=MessageStatus.FAILED)
        await self._audit.settle_starts([u.id for u in unknown])
