"""The turn runner: one exchange for one conversation.

A turn builds the prompt and the history, runs the agent loop, checks grounding, stores the
reply (closing the message it answers, in one transaction) and hands it to delivery; on failure
(the model down, the day's budget spent between two calls) it sends a notice that names every
action that completed. It serves a chat message
(``answer``) and a turn with no inbound message (``run_proactive``). The ordering of a
conversation is its caller's: ``answer`` runs under the lock the caller holds, ``run_proactive``
takes the lock it is given.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import structlog

from bruce.clock import Clock, parse_iso
from bruce.contracts import ToolContract
from bruce.errors import LLMError, LLMNotConfigured, MediaError, MediaFetchError, OverBudget, StoreError
from bruce.llm.budget import Budget
from bruce.media.intake import MediaIntake, Prepared
from bruce.media.rules import MEDIA_OFF
from bruce.memory.long_term import Memory
from bruce.records import StoredMessage, TurnView
from bruce.runtime.outbox import Outbox
from bruce.store import Store
from bruce.texts import (
    EMPTY_ANSWER,
    INTERNAL_ERROR,
    LLM_DOWN,
    NOT_FINISHED,
    budget_reached,
    budget_warning,
    claim_note,
    interrupted_by_shutdown,
    proactive_failed,
    skipped_note,
    with_actions,
)
from bruce.turns.agent_loop import LLM, Tools, TurnResult, run_agent_loop
from bruce.turns.carried import Carried, carried_taint
from bruce.turns.claims import CORRECTION_NOTE, unbacked_claims
from bruce.turns.delivery import Delivery
from bruce.turns.grounding import check_links, produced_urls
from bruce.turns.indicator import Indicator
from bruce.turns.prompt import ScheduledRun, build_system_prompt
from bruce.turns.scope import HeldCall, ToolFilter, TurnScope, new_turn_id
from bruce.values import OWNER, ConversationId, MessageKind, TurnSource, TurnStatus

__all__ = ["TurnRunner", "TurnSettings", "TurnOutcome", "TurnTools"]

log = structlog.get_logger(__name__)


class TurnTools(Tools, Protocol):
    """The tools as a turn uses them: the loop's, plus the contracts offered (for the prompt)."""

    def offered(self, scope: TurnScope | None = None) -> list[ToolContract]: ...


@dataclass(frozen=True, slots=True)
class TurnSettings:
    name: str
    system_prompt: str
    zone: ZoneInfo
    max_model_calls: int = 5
    max_turn_tokens: int | None = 60000
    history_limit: int = 15
    summary_batch: int = 8
    admin_base_url: str = "http://127.0.0.1:8765"


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a turn did: its id, whether it answered, and the text the user was sent."""

    turn_id: str
    ok: bool
    text: str
    result: TurnResult | None = None
    quiet: bool = False  # a scheduled run with nothing to report: nothing was sent
    held: HeldCall | None = None  # a run of an untrusted job stopped at this call (it needed a yes): nothing sent


class TurnRunner:
    """Runs turns. ``budget``: the daily LLM budget (None: no limit); ``memory``: long-term
    memory's read path (None: nothing remembered); ``media``: what makes a message's attachments
    into text and pictures (``bruce.media``; None: attachments are not read, and the user is told)."""

    def __init__(
        self, *, store: Store, llm: LLM, registry: TurnTools, clock: Clock, settings: TurnSettings, outbox: Outbox,
        indicator: Indicator, delivery: Delivery, budget: Budget | None, memory: Memory | None,
        media: MediaIntake | None = None,
    ) -> None:
        self._store = store
        self._llm = llm
        self._registry = registry
        self._clock = clock
        self._settings = settings
        self._outbox = outbox
        self._indicator = indicator
        self._delivery = delivery
        self._budget = budget
        self._memory = memory
        self._media = media

    async def history(self, conversation_id: ConversationId, inbound_id: int | None = None) -> list[dict[str, str]]:
        """Every message of the session (since the last ``/new``) that the summary does not cover, at most
        ``history_limit + summary_batch - 1`` (folding keeps ``history_limit - 1`` and waits for
        ``summary_batch`` more, so no message is ever in neither the summary nor the history).
        With ``inbound_id``, the conversation as it stood when that message arrived: it comes
        last; replies to earlier messages stored meanwhile are included, nothing that came after
        it is (a later message, a reply to one, a reminder posted since)."""
        return _as_history((await self._turn_view(conversation_id, inbound_id)).history)

    async def _turn_view(self, conversation_id: ConversationId, inbound_id: int | None) -> TurnView:
        s = self._settings
        return await self._store.messages.turn_view(str(conversation_id), limit=s.history_limit + s.summary_batch - 1,
                                                    inbound_id=inbound_id)

    # entries -----------------------------------------------------------------------------

    async def answer(self, cid: ConversationId, inbound: StoredMessage, sender_id: str | None, *,
                     person: str = OWNER) -> TurnOutcome:
        """A chat turn for a stored message of ``person`` (the caller holds the conversation's lock).
        With the day's LLM budget spent, a notice with the reset time instead, and no model call;
        likewise for attachments that will not be read (``bruce.media.rules``), before any download."""
        refused = await self._refused(inbound)
        if refused is not None:
            await self._outbox.post(cid, refused, kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return TurnOutcome("", False, refused)
        over = await self._budget.reached() if self._budget is not None else None
        if over is not None:
            log.warning("turn.over_budget", conversation=str(cid), tokens=over.tokens, usd=round(over.usd, 4))
            text = budget_reached(over, self._settings.zone)
            await self._outbox.post(cid, text, kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return TurnOutcome("", False, text)
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=cid, user_id=sender_id, owner_text=inbound.text,
                          person=person)
        with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=str(cid)):
            outcome = await self._turn(scope, inbound=inbound)
        await self._budget_warning(cid)
        return outcome

    async def _refused(self, inbound: StoredMessage) -> str | None:
        if not inbound.attachments:
            return None
        return await self._media.refused(inbound) if self._media is not None else MEDIA_OFF

    async def _budget_warning(self, conversation_id: ConversationId) -> None:
        """80 % of the day's budget: told once a day, in the conversation whose turn crossed it."""
        if self._budget is None:
            return
        spend = await self._budget.warning_due(str(conversation_id))
        if spend is not None:
            log.warning("budget.warning", conversation=str(conversation_id), fraction=round(spend.fraction, 3))
            await self._outbox.post(conversation_id, budget_warning(spend, self._settings.zone),
                                    kind=MessageKind.NOTICE)

    async def run_proactive(
        self, conversation_id: ConversationId, prompt: str, *, lock: asyncio.Lock, source: TurnSource = TurnSource.PROACTIVE,
        job_id: str | None = None, tools: ToolFilter | None = None, quiet_token: str | None = None,
        owner_text: str | None = None, person: str = OWNER, tainted: bool = False,
    ) -> TurnOutcome:
        """A turn with no inbound message (a scheduled briefing), run under ``lock`` (the
        conversation's) as ``person`` (whose job it is: their memory, their tools): ``prompt`` is
        its user-role instruction, the system prompt says it is a scheduled run; tools limited by
        ``tools``, never one that needs approval; the answer goes through the outbox. An answer
        that is exactly ``quiet_token`` is not sent (the outcome is ``quiet``). ``owner_text``: the
        words that stand for the asker's in this run (a job's content, written when it was made);
        None: the prompt itself (a briefing's configured text). ``tainted``: a run of an untrusted
        job; it starts tainted (tools that ask after untrusted text are skipped), and the first call
        that needs a yes ends it: nothing is sent, the outcome is ``held`` (the caller tells the owner)."""
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=conversation_id, user_id=None, source=source,
                          unattended=True, tool_filter=tools, scheduled=ScheduledRun(job_id, quiet_token),
                          owner_text=prompt if owner_text is None else owner_text, person=person,
                          tainted=tainted, stops_at_held=tainted)
        async with lock:
            with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=str(conversation_id),
                                                         job=job_id):
                outcome = await self._turn(scope, prompt=prompt, job_id=job_id)
        await self._budget_warning(conversation_id)
        return outcome

    # one turn -------------------------------------------------------------------------------

    async def _turn(self, scope: TurnScope, *, inbound: StoredMessage | None = None, prompt: str | None = None,
                    job_id: str | None = None) -> TurnOutcome:
        await self._store.messages.start_turn(scope.turn_id, str(scope.conversation), source=scope.source,
                                              inbound_message_id=inbound.id if inbound else None, job_id=job_id)
        log.info("turn.started", source=str(scope.source))
        try:
            async with self._indicator.showing(scope.conversation) as progress:
                scope.progress = progress
                media = await self._prepare_media(scope, inbound)
                result, context = await self._run_loop(scope, inbound, prompt, media)
                if result.text:
                    result, unbacked = await self._check_claims(scope, result, context)
                else:
                    unbacked = 0
        except asyncio.CancelledError:
            await asyncio.shield(self._interrupted(scope, inbound))
            raise
        except StoreError:  # the database, not the answer, failed: the caller tries the message again
            raise
        except (MediaError, MediaFetchError) as exc:  # an attachment could not be used: the reason is the reply
            return await self._fail(scope, inbound, str(exc), error=f"media: {exc}")
        except LLMNotConfigured as exc:
            return await self._fail(scope, inbound, exc.hint, error="llm not configured")
        except OverBudget as exc:  # spent between two calls of the turn: none more, what was done is told
            return await self._fail(scope, inbound, await self._budget_notice(exc), error="over budget")
        except LLMError as exc:
            return await self._fail(scope, inbound, LLM_DOWN, error=str(exc))
        except Exception as exc:
            log.exception("turn.crashed")
            return await self._fail(scope, inbound, INTERNAL_ERROR, error=type(exc).__name__)
        return await self._finish(scope, inbound, result, unbacked, heard=media.heard if media else "")

    async def _prepare_media(self, scope: TurnScope, inbound: StoredMessage | None) -> Prepared | None:
        """The inbound message's attachments made into text (stored) and pictures (this turn only)."""
        if inbound is None or not inbound.attachments or self._media is None:
            return None
        return await self._media.prepare(scope, inbound)

    async def _budget_notice(self, exc: OverBudget) -> str:
        spend = exc.spend if exc.spend is not None else await self._budget.spend() if self._budget else None
        return budget_reached(spend, self._settings.zone) if spend is not None else LLM_DOWN

    async def _check_claims(
        self, scope: TurnScope, result: TurnResult, context: list[dict[str, Any]],
    ) -> tuple[TurnResult, int]:
        """An answer claiming an action no tool did this turn gets one correction call (tools
        off); if the new answer still claims it, code says so. Returns the answer to send and
        how many claims were unbacked."""
        claims = unbacked_claims(result.text, result.tool_results)
        if not claims:
            return result, 0
        log.warning("grounding.claim_unbacked", claims=[c.phrase for c in claims])
        note = CORRECTION_NOTE.format(claims=" and ".join(c.action for c in claims),
                                      done=", ".join(scope.completed_actions()) or "none")
        messages = [*context, {"role": "assistant", "content": result.text}, {"role": "system", "content": note}]
        try:
            reply = await self._llm.complete(messages, scope=scope, tools=None)
            text = (reply.text or "").strip() or result.text
        except LLMError:
            text = result.text
        still = unbacked_claims(text, result.tool_results)
        if still:
            text = f"{text}\n\n{claim_note([c.action for c in still])}"
        return replace(result, text=text), len(claims)

    async def _run_loop(
        self, scope: TurnScope, inbound: StoredMessage | None, prompt: str | None, media: Prepared | None = None,
    ) -> tuple[TurnResult, list[dict[str, Any]]]:
        """The loop's result, and the context it started from (system prompt and history). With
        ``media``, the inbound message is shown to the model with its pictures, and a document's
        text taints the turn (text from outside, docs/security.md)."""
        s = self._settings
        view, memory, carried = await asyncio.gather(  # reads queued at once: one wait for the database thread
            self._turn_view(scope.conversation, inbound.id if inbound else None),
            self._memory.context(scope.person) if self._memory is not None else _nothing_remembered(),
            self._carried(scope))
        if scope.user_id is not None and view.senders - {scope.user_id}:  # someone else wrote in this session:
            scope.tainted = True  # their words steer the model as a page's would (docs/security.md, "People")
        scope.tainted = scope.tainted or carried.tainted  # an answer written after untrusted text is in the history
        scope.carried = carried.sources
        if media is not None:
            scope.tainted = scope.tainted or media.tainted
            scope.owner_text = media.owner_text
        system_prompt = build_system_prompt(
            system_prompt=s.system_prompt, name=s.name, summary=view.summary.summary if view.summary else None,
            now=self._clock.now(), zone=s.zone,
            previous_message_at=parse_iso(view.previous_at) if view.previous_at else None,
            tools=self._registry.offered(scope), scheduled=scope.scheduled, memory=memory,
        )
        history: list[dict[str, Any]] = list(_as_history(view.history))
        if media is not None and inbound is not None and view.history and view.history[-1].id == inbound.id:
            history[-1] = {"role": "user", "content": media.content}
        if prompt is not None:
            history.append({"role": "user", "content": prompt})
        result = await run_agent_loop(self._llm, self._registry, system_prompt, history, s.max_model_calls,
                                      max_turn_tokens=s.max_turn_tokens,
                                      scope=scope)
        return result, [{"role": "system", "content": system_prompt}, *history]

    async def _carried(self, scope: TurnScope) -> Carried:
        """The taint the session's history carries (``bruce.turns.carried``): a tool is from outside
        unless it is one of ours whose output is not (``untrusted_output``)."""
        ours = frozenset(c.name for c in self._registry.offered() if not c.untrusted_output)
        return await carried_taint(self._store, str(scope.conversation), ours=ours)

    async def _finish(
        self, scope: TurnScope, inbound: StoredMessage | None, result: TurnResult, unbacked: int = 0, *,
        heard: str = "",
    ) -> TurnOutcome:
        if scope.held is not None:  # an untrusted job's run stopped at a call that needs a yes: nothing sent
            await asyncio.shield(self._store.messages.finish_turn(
                scope.turn_id, status=TurnStatus.FAILED, llm_calls=scope.llm_calls, tool_calls=len(result.tool_results),
                error=f"held: {scope.held.tool} needs the owner's yes (a run of an untrusted job)"))
            log.warning("turn.held", tool=scope.held.tool)
            return TurnOutcome(scope.turn_id, False, "", result, held=scope.held)
        if not result.text:  # nothing to say is not an answer: a clear note, and the turn is not ok
            notice = NOT_FINISHED if result.hit_ceiling or result.stopped_repeat else EMPTY_ANSWER
            return await self._fail(scope, inbound, notice, error="empty answer")
        quiet = scope.scheduled.quiet_token if scope.scheduled else None
        if quiet and result.text.strip() == quiet:  # notify if_actionable, nothing to report: nothing sent
            await asyncio.shield(self._store.messages.finish_turn(
                scope.turn_id, status=TurnStatus.OK, llm_calls=scope.llm_calls, tool_calls=len(result.tool_results)))
            log.info("turn.quiet", llm_calls=scope.llm_calls)
            return TurnOutcome(scope.turn_id, True, "", result, quiet=True)
        text = await self._grounded_text(scope, result)
        text = f"{heard}\n{text}" if heard else text  # what was heard, so a mishearing shows (not the model's)
        await asyncio.shield(self._store.messages.complete_turn(
            scope.turn_id, inbound_id=inbound.id if inbound else None, conversation_id=str(scope.conversation),
            reply=text, llm_calls=scope.llm_calls, tool_calls=len(result.tool_results),
            hit_ceiling=result.hit_ceiling, stopped_repeat=result.stopped_repeat, unbacked_claims=unbacked,
        ))
        await self._delivery.after_reply(scope)
        log.info("turn.finished", llm_calls=scope.llm_calls, tools=len(result.tool_results), ceiling=result.hit_ceiling)
        return TurnOutcome(scope.turn_id, True, text, result)

    async def _grounded_text(self, scope: TurnScope, result: TurnResult) -> str:
        """The answer with links no tool produced taken out, and a note of what was skipped."""
        existing = await self._store.artifacts.existing_paths(produced_urls(result.tool_results))
        text = check_links(result.text, result.tool_results, admin_base=self._settings.admin_base_url,
                           existing=existing).text
        if scope.skipped_actions():
            text = f"{text}\n\n{skipped_note(scope.skipped_actions())}"
        return text

    async def _fail(self, scope: TurnScope, inbound: StoredMessage | None, notice: str, *, error: str) -> TurnOutcome:
        log.warning("turn.failed", reason=error)
        notice = with_actions(notice, scope.completed_actions(), [r.id for r in scope.confirmations])
        if scope.unattended:
            notice = proactive_failed(notice)
        await asyncio.shield(self._store.messages.complete_turn(
            scope.turn_id, inbound_id=inbound.id if inbound else None, conversation_id=str(scope.conversation),
            reply=notice, llm_calls=scope.llm_calls, tool_calls=len(scope.results), error=error,
        ))
        await self._delivery.after_reply(scope)
        return TurnOutcome(scope.turn_id, False, notice)

    async def _interrupted(self, scope: TurnScope, inbound: StoredMessage | None) -> None:
        """The turn was cancelled (shutdown). If nothing acted yet, the message stays pending and
        is answered at the next start; otherwise answering again could act twice, so the user
        is told what completed instead (the notice is sent at the next start)."""
        log.warning("turn.interrupted", tools=len(scope.results))
        if not scope.results:
            await self._store.messages.finish_turn(scope.turn_id, status=TurnStatus.INTERRUPTED,
                                                   llm_calls=scope.llm_calls, error="interrupted by shutdown")
            return
        notice = interrupted_by_shutdown(scope.completed_actions(), [r.id for r in scope.confirmations])
        await self._store.messages.complete_turn(
            scope.turn_id, inbound_id=inbound.id if inbound else None, conversation_id=str(scope.conversation),
            reply=notice, llm_calls=scope.llm_calls, tool_calls=len(scope.results), error="interrupted by shutdown",
        )


def _as_history(messages: list[StoredMessage]) -> list[dict[str, str]]:
    """Stored messages as the model reads them: text only (an attachment is its stored text)."""
    return [{"role": m.role, "content": m.text} for m in messages]


async def _nothing_remembered() -> str:
    return ""
