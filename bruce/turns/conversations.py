"""Conversations: the doors of the turn engine, and the order within each conversation.

One conversation is served one thing at a time (``lock``): a chat message (the worker holds the
lock around ``answer`` or ``handle_command``), a scheduled turn (``run_proactive``) and an
approved action (``run_approved``) wait for whatever runs before them; different conversations
run concurrently. Its chat messages are answered in the order they arrived (``order``, an
``ArrivalOrder``: a message's turn waits for every older message of the conversation, including
those a crash left pending). The work itself is done by the parts this class is given:

* ``TurnRunner`` (``bruce.turns.runner``): a turn, with a model;
* ``ChatCommands`` (``bruce.turns.chat_commands``): ``/new``, ``/jobs``, ``/usage``, ``/memory``, ``/forget``;
* ``Decisions`` (``bruce.turns.decisions``): ``/approve``, ``/deny``, buttons, approved runs.
"""

from __future__ import annotations

import asyncio

from bruce.actions.confirmations import PendingAction
from bruce.channel import DecisionReport
from bruce.records import StoredMessage
from bruce.runtime.outbox import Outbox
from bruce.store import Store
from bruce.turns.arrival import ArrivalOrder
from bruce.turns.chat_commands import ChatCommands
from bruce.turns.commands import Command, CommandName
from bruce.turns.decisions import Decisions
from bruce.turns.runner import TurnOutcome, TurnRunner
from bruce.turns.scope import ToolFilter
from bruce.values import OWNER, ConversationId, TurnSource

__all__ = ["Conversations"]

_DECISIONS = (CommandName.APPROVE, CommandName.DENY)


class Conversations:
    def __init__(
        self, *, store: Store, outbox: Outbox, runner: TurnRunner, commands: ChatCommands, decisions: Decisions,
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._runner = runner
        self._commands = commands
        self._decisions = decisions
        self._locks: dict[ConversationId, asyncio.Lock] = {}
        self.order = ArrivalOrder()  # which chat message of a conversation is due (the worker's queue)

    def lock(self, conversation_id: ConversationId) -> asyncio.Lock:
        """One turn at a time per conversation."""
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    async def answer(self, conversation: ConversationId, inbound: StoredMessage, sender_id: str | None, *,
                     person: str = OWNER) -> TurnOutcome:
        """A chat turn for a stored message of ``conversation`` written by ``person`` (the owner
        or a guest, ``bruce.runtime.people``; the caller holds the conversation's lock)."""
        return await self._runner.answer(conversation, inbound, sender_id, person=person)

    async def handle_command(
        self, conversation: ConversationId, inbound: StoredMessage, command: Command, sender_id: str | None, *,
        person: str = OWNER,
    ) -> None:
        """A typed command of ``person`` in ``conversation`` (the caller holds its lock)."""
        if command.name in _DECISIONS:
            await self._decisions.typed(conversation, inbound, command, sender_id, person=person)
        else:
            await self._commands.handle(conversation, inbound, command, person=person)

    async def decide(
        self, conversation_id: ConversationId, user_id: str, confirmation_id: str, approve: bool,
    ) -> tuple[DecisionReport, PendingAction | None]:
        """A decision from a button (``Decisions.decide``)."""
        return await self._decisions.decide(conversation_id, user_id, confirmation_id, approve)

    async def run_approved(self, action: PendingAction, user_id: str | None, *, person: str = OWNER) -> None:
        """Run an approved action in its conversation's order, as ``person`` (who asked), then report it."""
        conversation = ConversationId.parse(action.conversation_id)  # a stored request
        await self._decisions.run_approved(conversation, action, user_id, lock=self.lock(conversation), person=person)

    async def run_proactive(
        self, conversation_id: ConversationId, prompt: str, *, source: TurnSource = TurnSource.PROACTIVE,
        job_id: str | None = None, tools: ToolFilter | None = None, quiet_token: str | None = None,
        owner_text: str | None = None, person: str = OWNER, tainted: bool = False,
    ) -> TurnOutcome:
        """A turn with no inbound message (``TurnRunner.run_proactive``), in the conversation's order."""
        await self._ensure(conversation_id)
        return await self._runner.run_proactive(conversation_id, prompt, lock=self.lock(conversation_id),
                                                source=source, job_id=job_id, tools=tools, quiet_token=quiet_token,
                                                owner_text=owner_text, person=person, tainted=tainted)

    async def post(self, conversation_id: ConversationId, text: str) -> int:
        """A message that needs no model (a reminder): stored, then sent through the outbox."""
        if not text.strip():
            raise ValueError("post: the text is empty")
        await self._ensure(conversation_id)
        return await self._outbox.post(conversation_id, text)

    async def _ensure(self, conversation_id: ConversationId) -> None:
        await self._store.messages.ensure_conversation(str(conversation_id), conversation_id.channel,
                                                       conversation_id.chat_id)
