"""Folding old history into a session summary, off the reply's critical path.

The worker keeps the last ``history_limit`` messages verbatim; once at least ``batch``
older messages are not yet covered, one LLM call folds them (with the previous summary)
into a new ``session_summaries`` row. A document's text is never folded (``for_summary``): the
summary is read into the system prompt, and a document is text from outside. ``/new`` folds all of the session at once
(``fold_session``). Its LLM call is recorded under a turn of source ``summary``.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum

import structlog

from bruce.errors import LLMError
from bruce.media.documents import for_summary
from bruce.records import StoredMessage
from bruce.store import Store
from bruce.turns.agent_loop import LLM
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, TurnSource, TurnStatus

__all__ = ["fold_history", "fold_session", "Folded", "SUMMARY_INSTRUCTIONS"]

log = structlog.get_logger(__name__)

SUMMARY_INSTRUCTIONS = (
    "You maintain a running summary of a chat between a user and their assistant. Merge the "
    "previous summary with the new messages into one concise summary (at most 200 words) that "
    "keeps facts about the user, decisions, open tasks and anything promised. Write only the summary."
)


class Folded(StrEnum):
    STORED = "stored"
    NOTHING = "nothing"  # no message was waiting to be folded
    FAILED = "failed"  # the model gave no summary; nothing was stored


async def fold_history(
    store: Store, llm: LLM, conversation_id: ConversationId, *, keep_last: int, batch: int, model: str | None = None,
) -> bool:
    """Fold messages older than the last ``keep_last`` into the summary. Returns True if a new
    summary was stored."""
    older = await store.messages.to_fold(str(conversation_id), keep_last=keep_last)
    if len(older) < batch:
        return False
    return await _summarize(store, llm, conversation_id, older, model)


async def fold_session(store: Store, llm: LLM, conversation_id: ConversationId, *,
                       model: str | None = None) -> Folded:
    """Fold every message of the session not yet in the summary, up to the first one still
    waiting for its turn (the ``/new`` being handled): one model call, or none when nothing waits."""
    older = await store.messages.to_fold(str(conversation_id), keep_last=0)
    if not older:
        return Folded.NOTHING
    return Folded.STORED if await _summarize(store, llm, conversation_id, older, model) else Folded.FAILED


async def _summarize(
    store: Store, llm: LLM, conversation_id: ConversationId, older: list[StoredMessage], model: str | None,
) -> bool:
    previous = await store.messages.latest_summary(str(conversation_id))
    # a document's text stays out: the summary is part of the system prompt (docs/security.md)
    transcript = "\n".join(f"{m.role}: {for_summary(m.text, m.attachments)}" for m in older)
    prompt = (
        f"Previous summary:\n{previous.summary if previous else '(none)'}\n\n"
        f"New messages:\n{transcript}"
    )
    scope = TurnScope(turn_id=new_turn_id(), conversation_id=conversation_id, user_id=None,
                      source=TurnSource.SUMMARY)
    with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=str(conversation_id)):
        return await _fold(store, llm, scope, older, prompt, model)


async def _fold(
    store: Store, llm: LLM, scope: TurnScope, older: list[StoredMessage], prompt: str, model: str | None,
) -> bool:
    conversation_id = str(scope.conversation)  # the store's and the log's form
    await store.messages.start_turn(scope.turn_id, conversation_id, source=TurnSource.SUMMARY, inbound_message_id=None)
    try:
        reply = await llm.complete(
            [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": prompt}],
            scope=scope,
            model=model,
        )
    except asyncio.CancelledError:
        await asyncio.shield(store.messages.finish_turn(scope.turn_id, status=TurnStatus.INTERRUPTED,
                                                        llm_calls=scope.llm_calls, error="interrupted by shutdown"))
        raise
    except LLMError as exc:
        await store.messages.finish_turn(scope.turn_id, status=TurnStatus.FAILED, llm_calls=scope.llm_calls,
                                         error=type(exc).__name__)
        log.warning("summary.failed", conversation=conversation_id, reason=type(exc).__name__)
        return False
    text = (reply.text or "").strip()
    if not text:
        await store.messages.finish_turn(scope.turn_id, status=TurnStatus.FAILED, llm_calls=1, error="empty summary")
        return False
    await store.messages.add_summary(conversation_id, text, up_to_message_id=older[-1].id)
    await store.messages.finish_turn(scope.turn_id, status=TurnStatus.OK, llm_calls=1)
    log.info("summary.stored", conversation=conversation_id, folded=len(older))
    return True
