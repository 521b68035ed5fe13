"""Long-term memory: what Bruce keeps about its owner across sessions (docs/memory.md).

A separate store and a separate code path from the conversation's history and its session
summaries. The read path is ``context()``: recent active facts and the latest memory summary,
as the ``<memory>`` part of the prompt. The write path runs in the background and never delays
a reply: after a chat turn, one model call extracts facts from the user's own message (never
from tool output, assistant text or a job's run); once ``summarize_after`` new facts have
arrived, one model call folds them and the previous summary into a new summary, and facts a
summary covers that are older than ``archive_after_days`` are archived. Each model call is a
turn of source ``memory``. Shutdown drains these tasks briefly, then cancels them; every write
is one transaction, so a cancelled task leaves nothing half-written.

Memory is per person (``bruce.values.OWNER`` or a guest's key, ``bruce.runtime.people``): a fact
learnt from a guest's message is the guest's, each person's summary folds only their facts, and
the read path, search and forgetting see only the asking person's facts.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog

from bruce.clock import Clock, utc_iso
from bruce.errors import LLMError
from bruce.media.documents import own_words
from bruce.records import Fact
from bruce.store import Store
from bruce.turns.agent_loop import LLM
from bruce.turns.prompt import memory_part
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import OWNER, ConversationId, Direction, FactType, TurnSource, TurnStatus

__all__ = ["Memory", "MemorySettings", "parse_facts", "EXTRACTION_INSTRUCTIONS", "MAX_FACT_CHARS"]

log = structlog.get_logger(__name__)

MAX_FACT_CHARS = 500
MAX_FACTS_PER_TURN = 10
EXTRACTION_INSTRUCTIONS = (
    "You extract what is worth remembering about the user from their own message, for a personal "
    "assistant's long-term memory. Keep only durable things: preferences, facts about their life and "
    "people, ongoing projects and their progress, insights about how they like to work. Skip small talk, "
    "questions and one-off requests. Answer with a JSON array only, e.g. "
    '[{"type": "preference", "content": "Prefers morning meetings", "confidence": 0.9}]; '
    "type is one of preference, fact, project, progress, insight; content is one short sentence in the "
    "third person; confidence is 0 to 1. Answer [] when there is nothing to keep."
)
SUMMARY_INSTRUCTIONS = (
    "You maintain a long-term memory summary about a user for their personal assistant. Merge the "
    "previous summary with the new facts into one narrative of at most 200 words: who they are, what "
    "they prefer, their projects and where those stand. Use only what is given. Write only the summary."
)


@dataclass(frozen=True, slots=True)
class MemorySettings:
    enabled: bool = True
    recent_limit: int = 20
    recent_days: int = 30
    max_context_chars: int = 4000
    summarize_after: int = 5
    archive_after_days: int = 30
    max_concurrent: int = 2
    model: str | None = None
    drain_s: float = 5.0  # at shutdown, extractions in flight get this long before they are cancelled
    extract_after_s: float = 2.0  # extraction waits for the conversation to pause this long


def parse_facts(text: str | None) -> list[tuple[FactType, str, float]] | None:
    """The model's extraction answer as (type, content, confidence), content capped and confidence
    clamped; None when the answer is not a JSON array at all (malformed: skipped and logged).
    Items that are not usable facts are dropped one by one."""
    raw = (text or "").strip()
    raw = re.sub(r"^```(?:json)?\s*|\s*```$", "", raw)
    start, end = raw.find("["), raw.rfind("]")
    if start < 0 or end < start:
        return None
    try:
        items = json.loads(raw[start:end + 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(items, list):
        return None
    found: list[tuple[FactType, str, float]] = []
    for item in items[:MAX_FACTS_PER_TURN]:
        if not isinstance(item, dict):
            continue
        kind, content, confidence = item.get("type"), item.get("content"), item.get("confidence", 0.5)
        if kind not in FactType._value2member_map_ or not isinstance(content, str) or not content.strip():
            continue
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or confidence != confidence:
            continue
        text_ = " ".join(content.split())[:MAX_FACT_CHARS]
        found.append((FactType(str(kind)), text_, min(1.0, max(0.0, float(confidence)))))
    return found


class Memory:
    def __init__(self, *, store: Store, llm: LLM, clock: Clock, settings: MemorySettings) -> None:
        self._store = store
        self._llm = llm
        self._clock = clock
        self.settings = settings
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        self._per_conversation: dict[ConversationId, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._summarizing: dict[str, asyncio.Task[Any]] = {}  # person -> their summary in the making
        self._pending: dict[ConversationId, list[tuple[int, str]]] = {}  # conversation -> (message, person) not yet read
        self._arrivals: dict[ConversationId, int] = {}
        self._waiting: set[ConversationId] = set()
        self._closing = False

    # read path ----------------------------------------------------------------------------

    async def context(self, person: str = OWNER) -> str:
        """The ``<memory>`` part of ``person``'s turn's prompt ("" when there is nothing to show)."""
        s = self.settings
        since = utc_iso(self._clock.now() - timedelta(days=s.recent_days))
        facts, summary = await self._store.memory.context(limit=s.recent_limit, since=since, person=person)
        return memory_part(facts, summary, max_chars=s.max_context_chars)

    # write path ---------------------------------------------------------------------------

    def after_message(self, conversation_id: ConversationId, message_id: int, person: str = OWNER) -> None:
        """A chat turn answered ``message_id`` (written by ``person``): extract from it in the
        background (fire and forget), into ``person``'s memory, once the conversation has paused
        for ``extract_after_s``, so that extraction never competes with the reply to a message
        that follows at once."""
        if not self.settings.enabled or self._closing:
            return
        self._pending.setdefault(conversation_id, []).append((message_id, person))
        self._arrivals[conversation_id] = self._arrivals.get(conversation_id, 0) + 1
        if conversation_id not in self._waiting:
            self._waiting.add(conversation_id)
            self._spawn(self._after_pause(conversation_id), f"memory:{conversation_id}")

    async def _after_pause(self, conversation_id: ConversationId) -> None:
        try:
            while True:
                seen = self._arrivals[conversation_id]
                await self._clock.sleep(self.settings.extract_after_s)
                if self._arrivals[conversation_id] == seen:
                    break
        finally:
            self._waiting.discard(conversation_id)
        for message_id, person in self._pending.pop(conversation_id, []):
            await self._extract(conversation_id, message_id, person)

    def _spawn(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("memory.task_failed", task=task.get_name(), error=repr(task.exception()))

    async def _extract(self, conversation_id: ConversationId, message_id: int, person: str) -> None:
        lock = self._per_conversation.setdefault(conversation_id, asyncio.Lock())
        new = 0
        async with lock, self._slots:
            message = await self._store.messages.get(message_id)
            words = own_words(message.text, message.attachments) if message is not None else ""  # no document's text
            if message is None or message.direction != Direction.IN or not words.strip() \
                    or message.text.lstrip().startswith("/"):
                return
            source_turn = await self._store.messages.turn_of(message_id)
            answer = await self._ask(conversation_id, "extraction", [
                {"role": "system", "content": EXTRACTION_INSTRUCTIONS},
                {"role": "user", "content": f"The user's message:\n{words[:8000]}"}])
            if answer is None:
                return
            facts = parse_facts(answer)
            if facts is None:
                log.warning("memory.extraction_malformed", conversation=str(conversation_id), answer=answer[:200])
                return
            for kind, content, confidence in facts:
                _, added = await self._store.memory.remember(kind, content, confidence=confidence, origin="extraction",
                                                             conversation_id=str(conversation_id), source_turn_id=source_turn,
                                                             person=person)
                new += added
            log.info("memory.extracted", conversation=str(conversation_id), facts=len(facts), new=new)
        if new:
            await self.maybe_summarize(conversation_id, person)

    async def remember(self, kind: FactType, content: str, *, conversation_id: ConversationId | None,
                       turn_id: str | None, person: str = OWNER) -> tuple[Fact, bool]:
        """``memory.remember``: the model stores what the user (``person``) asked it to keep."""
        fact, new = await self._store.memory.remember(kind, " ".join(content.split())[:MAX_FACT_CHARS], confidence=1.0,
                                                      origin="tool",
                                                      conversation_id=str(conversation_id) if conversation_id else None,
                                                      source_turn_id=turn_id, person=person)
        if new and conversation_id is not None:
            await self.maybe_summarize(conversation_id, person)
        return fact, new

    async def maybe_summarize(self, conversation_id: ConversationId, person: str = OWNER) -> None:
        """Start ``person``'s summary once ``summarize_after`` of their facts arrived since their
        last one (never two at once for one person)."""
        if not self.settings.enabled or self._closing:
            return
        running = self._summarizing.get(person)
        if running is not None and not running.done():
            return
        if len(await self._store.memory.unsummarized(person=person)) >= self.settings.summarize_after:
            self._summarizing[person] = self._spawn(self._summarize(conversation_id, person), f"memory:summary:{person}")

    async def _summarize(self, conversation_id: ConversationId, person: str) -> None:
        facts = await self._store.memory.unsummarized(person=person)
        if len(facts) < self.settings.summarize_after:
            return
        previous = await self._store.memory.latest_summary(person=person)
        listing = "\n".join(f"- [{f.type}] {f.content}" for f in facts)
        prompt = f"Previous summary:\n{previous.content if previous else '(none)'}\n\nNew facts:\n{listing}"
        scope_turn = new_turn_id()
        text = await self._ask(conversation_id, "summary", [
            {"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": prompt}], turn_id=scope_turn)
        if not text or not text.strip():
            return
        start = previous.period_start if previous else min(f.created_at for f in facts)
        stored = await self._store.memory.add_summary(text.strip()[:4000], period_start=start,
                                                      period_end=utc_iso(self._clock.now()),
                                                      fact_ids=[f.id for f in facts], turn_id=scope_turn, person=person)
        if stored is None:  # a fact was forgotten while the model wrote: the summary may mention it
            log.info("memory.summary_dropped", reason="a covered fact was forgotten meanwhile")
            return
        cutoff = utc_iso(self._clock.now() - timedelta(days=self.settings.archive_after_days))
        archived = await self._store.memory.archive(older_than=cutoff)
        log.info("memory.summarized", facts=len(facts), archived=archived)

    async def _ask(self, conversation_id: ConversationId, purpose: str, messages: list[dict[str, Any]], *,
                   turn_id: str | None = None) -> str | None:
        """One background model call under its own turn (source ``memory``); None if it failed."""
        scope = TurnScope(turn_id=turn_id or new_turn_id(), conversation_id=conversation_id, user_id=None,
                          source=TurnSource.MEMORY)
        await self._store.messages.start_turn(scope.turn_id, str(conversation_id), source=TurnSource.MEMORY,
                                              inbound_message_id=None)
        try:
            reply = await self._llm.complete(messages, scope=scope, model=self.settings.model)
        except asyncio.CancelledError:
            await asyncio.shield(self._store.messages.finish_turn(
                scope.turn_id, status=TurnStatus.INTERRUPTED, llm_calls=scope.llm_calls, error="interrupted by shutdown"))
            raise
        except LLMError as exc:
            await self._store.messages.finish_turn(scope.turn_id, status=TurnStatus.FAILED, llm_calls=scope.llm_calls,
                                                   error=type(exc).__name__)
            log.warning("memory.call_failed", purpose=purpose, reason=type(exc).__name__)
            return None
        await self._store.messages.finish_turn(scope.turn_id, status=TurnStatus.OK, llm_calls=scope.llm_calls)
        return reply.text or ""

    # the owner's control -------------------------------------------------------------------

    async def search(self, query: str, person: str = OWNER) -> list[dict[str, Any]]:
        return await self._store.memory.search(query, person=person)

    async def fact(self, fact_id: int, person: str = OWNER) -> Fact | None:
        """``person``'s fact of that id (another person's is no fact for them)."""
        return await self._store.memory.get(fact_id, person=person)

    async def matching(self, query: str, person: str = OWNER) -> list[Fact]:
        return await self._store.memory.matching_facts(query, person=person)

    async def forget(self, fact_ids: list[int]) -> int:
        """Gone for good: the rows, the search index, and the summaries that covered them."""
        count = await self._store.memory.forget(fact_ids)
        log.info("memory.forgotten", facts=count)
        return count

    # life ---------------------------------------------------------------------------------

    async def wait_idle(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """No new work; what is in flight gets ``drain_s``, then is cancelled (its rows are whole)."""
        self._closing = True
        if not self._tasks:
            return
        _, still = await asyncio.wait(set(self._tasks), timeout=self.settings.drain_s)
        for task in still:
            task.cancel()
        if still:
            log.warning("memory.cancelled_at_shutdown", tasks=len(still))
            await asyncio.gather(*still, return_exceptions=True)
