"""The chat commands that answer from Bruce's own state, with no turn: ``/new`` (fold the session
into the summary and start a fresh one), ``/usage``, ``/memory``, ``/forget ID``, ``/jobs`` and
``/help`` and ``/id`` (for a channel that does not answer them itself: the console, the web chat).

Each answer is a notice through the outbox that closes the command's message. ``/memory``,
``/forget`` and ``/jobs`` answer about the asking person's own facts and jobs only (the owner's or
a guest's, ``bruce.runtime.people``); ``/usage`` is the owner's (a guest is told so). The commands are
listed and parsed in ``bruce.turns.commands``; decisions (``/approve``, ``/deny``) are
``bruce.turns.decisions``'.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

import structlog

from bruce.clock import Clock
from bruce.jobs.book import JobView, run_line
from bruce.llm.usage import usage_by_day, usage_text
from bruce.memory.long_term import Memory
from bruce.records import StoredMessage
from bruce.runtime.outbox import Outbox
from bruce.runtime.summarizer import Folded, fold_session
from bruce.store import Store
from bruce.texts import USAGE_IS_THE_OWNERS, jobs_listing, memory_listing, new_session, your_id
from bruce.turns.agent_loop import LLM
from bruce.turns.commands import Command, CommandName, help_text
from bruce.turns.indicator import Indicator
from bruce.values import OWNER, ConversationId, MessageKind, is_owner

__all__ = ["ChatCommands"]

log = structlog.get_logger(__name__)

USAGE_DAYS = 7
RECENT_RUNS = 5  # /jobs shows the conversation's last runs besides its live jobs
ABOUT = "Write to me in plain text. When an action needs your approval I ask first."  # /help, on any channel


class ChatCommands:
    """``assistant``: the name ``/help`` gives; ``summary_model``: the model for ``/new``'s summary
    (None: the chat model); ``memory``: long-term memory (None: ``/memory`` and ``/forget`` say it
    is not available)."""

    def __init__(
        self, *, store: Store, llm: LLM, clock: Clock, zone: ZoneInfo, outbox: Outbox, indicator: Indicator,
        memory: Memory | None, assistant: str, summary_model: str | None = None,
    ) -> None:
        self._assistant = assistant
        self._store = store
        self._llm = llm
        self._clock = clock
        self._zone = zone
        self._outbox = outbox
        self._indicator = indicator
        self._memory = memory
        self._summary_model = summary_model

    async def handle(self, conversation: ConversationId, inbound: StoredMessage, command: Command, *,
                     person: str = OWNER) -> None:
        """Answer ``person``'s command (the caller holds the conversation's lock)."""
        if command.name is CommandName.NEW:
            await self._new_session(conversation, inbound)
            return
        await self._outbox.post(conversation, await self._answer(inbound, command, person),
                                kind=MessageKind.NOTICE, inbound_id=inbound.id)

    async def _answer(self, inbound: StoredMessage, command: Command, person: str) -> str:
        if command.name is CommandName.USAGE:
            if not is_owner(person):
                return USAGE_IS_THE_OWNERS
            rows, hits = await usage_by_day(self._store, self._clock, self._zone, days=USAGE_DAYS)
            return usage_text(rows, hits, USAGE_DAYS)
        if command.name in (CommandName.MEMORY, CommandName.FORGET):
            return await self._memory_command(command, person)
        if command.name is CommandName.HELP:
            return help_text(self._assistant, about=ABOUT)
        if command.name is CommandName.ID:
            return your_id(ConversationId.parse(inbound.conversation_id).channel, inbound.sender_id)
        if command.name is CommandName.JOBS:
            jobs = await self._store.jobs.for_conversation(inbound.conversation_id, person=person)
            runs = await self._store.jobs.recent_runs(inbound.conversation_id, person=person, limit=RECENT_RUNS)
            return jobs_listing([JobView(job).line() for job in jobs],
                                [run_line(run, content, self._zone) for run, content in runs])
        raise ValueError(f"not a chat command with an answer: /{command.name}")

    async def _memory_command(self, command: Command, person: str) -> str:
        if self._memory is None:
            return "Long-term memory is not available here."
        if command.name is CommandName.MEMORY:
            return memory_listing(await self._store.memory.facts(include_archived=False, person=person),
                                  await self._store.memory.latest_summary(person=person), self._zone)
        if command.confirmation_id is None:
            return "Usage: /forget ID (the number /memory shows before a fact)."
        fact = await self._memory.fact(int(command.confirmation_id), person)
        if fact is None:
            return f"There is no fact {command.confirmation_id} in memory; /memory lists them."
        await self._memory.forget([fact.id])
        return f"Forgotten: {fact.content}"

    async def _new_session(self, cid: ConversationId, inbound: StoredMessage) -> None:
        """``/new``: fold the session so far into the summary (one model call; if it fails the
        messages leave the window all the same), start the new session at this message, and
        close it with a notice (kept out of the model's history, like the ``/new`` itself)."""
        async with self._indicator.showing(cid):
            folded = await fold_session(self._store, self._llm, cid, model=self._summary_model)
        await self._store.messages.start_session(str(cid), at_message_id=inbound.id)
        kept = folded is Folded.STORED or (
            folded is Folded.NOTHING and await self._store.messages.latest_summary(str(cid)) is not None)
        log.info("conversation.new_session", conversation=str(cid), summary=str(folded))
        await self._outbox.post(cid, new_session(summary_kept=kept, summary_failed=folded is Folded.FAILED),
                                kind=MessageKind.NOTICE, inbound_id=inbound.id)
