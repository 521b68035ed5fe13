"""Decisions on confirmation requests, typed (``/approve ID``, ``/deny ID``) or tapped (a button),
and the approved action's run.

Both ways follow the same single-use, user-bound, expiring rules (``Confirmations``). An approved
action runs in its conversation's order, under the channel's indicator, and is reported by the
approval desk; a denial is recorded in the conversation.
"""

from __future__ import annotations

import asyncio
import re
from typing import Protocol

from bruce.actions.approvals import ApprovalDesk
from bruce.actions.confirmations import Confirmations, Decision, PendingAction
from bruce.channel import DecisionReport
from bruce.records import StoredMessage
from bruce.runtime.outbox import Outbox
from bruce.store import Store
from bruce.texts import command_usage, decision_text
from bruce.turns.commands import Command, CommandName
from bruce.turns.indicator import Indicator
from bruce.values import OWNER, ConversationId, DecisionOutcome, MessageKind

__all__ = ["Decisions", "HistorySource"]

_CONFIRMATION_ID = re.compile(r"[0-9a-fA-F]{8}")


class HistorySource(Protocol):
    """Where an approved action's run reads the conversation so far (the turn runner)."""

    async def history(self, conversation_id: ConversationId, inbound_id: int | None = None) -> list[dict[str, str]]: ...


class Decisions:
    def __init__(
        self, *, store: Store, confirmations: Confirmations, desk: ApprovalDesk, outbox: Outbox,
        indicator: Indicator, history: HistorySource,
    ) -> None:
        self._store = store
        self._confirmations = confirmations
        self._desk = desk
        self._outbox = outbox
        self._indicator = indicator
        self._history = history

    async def typed(
        self, cid: ConversationId, inbound: StoredMessage, command: Command, sender_id: str | None, *,
        person: str = OWNER,
    ) -> None:
        """A typed ``/approve ID`` or ``/deny ID`` (the caller holds the conversation's lock): an
        approved action runs at once, closing the message with its report; anything else is
        answered with what became of the request (or how to write the command)."""
        if command.confirmation_id is None:
            await self._outbox.post(cid, command_usage(command.name), kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return
        decision = await self._confirmations.decide_in_chat(
            command.confirmation_id, conversation_id=str(cid), user_id=sender_id or "",
            approve=command.name is CommandName.APPROVE)
        if decision.outcome is DecisionOutcome.APPROVED and decision.action is not None:
            history = await self._history.history(cid, inbound.id)
            async with self._indicator.showing(cid):
                await self._desk.run(cid, decision.action, history=history, user_id=sender_id, inbound_id=inbound.id,
                                     person=person)
            return
        kind = MessageKind.CHAT if decision.outcome is DecisionOutcome.DENIED else MessageKind.NOTICE
        await self._outbox.post(cid, _decision_text(decision, command.confirmation_id), kind=kind,
                                inbound_id=inbound.id)

    async def decide(
        self, conversation_id: ConversationId, user_id: str, confirmation_id: str, approve: bool,
    ) -> tuple[DecisionReport, PendingAction | None]:
        """A decision from a button: the same single-use, user-bound, expiring rules as
        ``/approve ID``. Returns the report for the channel and, when approved, the action for
        the caller to run (``run_approved``). A denial is stored for the caller to flush."""
        if not _CONFIRMATION_ID.fullmatch(confirmation_id):  # a forged button: nothing to look up
            decision = Decision(DecisionOutcome.NOT_FOUND)
            confirmation_id = confirmation_id[:16]
        else:
            decision = await self._confirmations.decide_in_chat(
                confirmation_id.lower(), conversation_id=str(conversation_id), user_id=user_id, approve=approve)
        report = DecisionReport(decision.outcome, _decision_text(decision, confirmation_id))
        if decision.outcome is DecisionOutcome.DENIED:  # the conversation keeps the record; sent by the caller
            await self._store.outbound.add(str(conversation_id), report.text, turn_id=None)
        approved = decision.outcome is DecisionOutcome.APPROVED
        return report, decision.action if approved else None

    async def run_approved(
        self, conversation: ConversationId, action: PendingAction, user_id: str | None, *, lock: asyncio.Lock,
        person: str = OWNER,
    ) -> None:
        """Run an approved action under ``lock`` (its conversation's order) as ``person``, then report it."""
        async with lock:
            history = await self._history.history(conversation)
            async with self._indicator.showing(conversation):
                await self._desk.run(conversation, action, history=history, user_id=user_id, person=person)


def _decision_text(decision: Decision, confirmation_id: str) -> str:
    action = decision.action
    return decision_text(decision.outcome, confirmation_id.lower(), action.tool_name if action else None,
                         str(action.status) if action else None)
