"""Turns: one exchange for one conversation, run under that conversation's lock.

A turn builds the prompt and the history, runs the agent loop, checks grounding, stores the
reply (closing the message it answers, in one transaction) and hands it to the outbox; on
failure it sends a notice that names every action that completed. The same machinery serves a
chat message (``answer``), a decision typed or tapped (``handle_command``, ``decide``), an
approved action (``run_approved``), and a turn with no inbound message (``run_proactive``).
``/new`` (``handle_command``) folds the session into the summary and starts a fresh one. After a
turn's reply, each document its ``artifact.save`` calls saved is sent as a file.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

import structlog

from bruce.actions.approvals import ApprovalDesk
from bruce.actions.confirmations import Confirmations, Decision, PendingAction
from bruce.channel import Channel, ConfirmationRequest, DecisionReport, ProgressChannel
from bruce.clock import Clock, parse_iso
from bruce.contracts import ToolContract
from bruce.errors import LLMError, LLMNotConfigured, StoreError
from bruce.jobs.book import JobView
from bruce.llm.budget import Budget
from bruce.llm.usage import usage_by_day, usage_text
from bruce.memory.long_term import Memory
from bruce.records import StoredMessage, TurnView
from bruce.runtime.outbox import Outbox
from bruce.runtime.summarizer import Folded, fold_session
from bruce.store import Store
from bruce.texts import (
    EMPTY_ANSWER,
    INTERNAL_ERROR,
    LLM_DOWN,
    NOT_FINISHED,
    budget_reached,
    budget_warning,
    claim_note,
    command_usage,
    decision_text,
    interrupted_by_shutdown,
    jobs_listing,
    memory_listing,
    new_session,
    proactive_failed,
    skipped_note,
    with_actions,
)
from bruce.turns.agent_loop import LLM, Tools, TurnResult, run_agent_loop
from bruce.turns.claims import CORRECTION_NOTE, unbacked_claims
from bruce.turns.commands import Command, CommandName
from bruce.turns.grounding import check_links, produced_urls
from bruce.turns.progress import Progress, showing
from bruce.turns.prompt import ScheduledRun, build_system_prompt
from bruce.turns.scope import ToolFilter, TurnScope, new_turn_id
from bruce.values import ConversationId, DecisionOutcome, MessageKind, TurnSource, TurnStatus

__all__ = ["Conversations", "TurnSettings", "TurnOutcome", "TurnTools"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")
_CONFIRMATION_ID = re.compile(r"[0-9a-fA-F]{8}")
_ARTIFACT_SAVE = "artifact.save"  # its successful results name a saved document, sent after the reply

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
    summary_model: str | None = None  # for /new's summary; None: the chat model
    artifacts_dir: Path | None = None  # tools.artifacts.dir: only files inside it are sent; None: none are


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a turn did: its id, whether it answered, and the text the user was sent."""

    turn_id: str
    ok: bool
    text: str
    result: TurnResult | None = None
    quiet: bool = False  # a scheduled run with nothing to report: nothing was sent


class Conversations:
    def __init__(
        self, *, store: Store, llm: LLM, registry: TurnTools, clock: Clock, settings: TurnSettings,
        channels: Mapping[str, Channel], confirmations: Confirmations, desk: ApprovalDesk, outbox: Outbox,
    ) -> None:
        self._store = store
        self._llm = llm
        self._registry = registry
        self._clock = clock
        self._settings = settings
        self._channels = channels
        self._confirmations = confirmations
        self._desk = desk
        self._outbox = outbox
        self._locks: dict[str, asyncio.Lock] = {}
        self.budget: Budget | None = None  # the daily LLM budget (app wiring); None: no limit
        self.memory: Memory | None = None  # long-term memory's read path (app wiring)

    def lock(self, conversation_id: str) -> asyncio.Lock:
        """One turn at a time per conversation."""
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    async def history(self, conversation_id: str, inbound_id: int | None = None) -> list[dict[str, str]]:
        """Every message of the session (since the last ``/new``) that the summary does not cover, at most
        ``history_limit + summary_batch - 1`` (folding keeps ``history_limit - 1`` and waits for
        ``summary_batch`` more, so no message is ever in neither the summary nor the history).
        With ``inbound_id``, the turn's own message comes last and later user messages of a
        burst are left to their own turns; replies stored meanwhile are included."""
        return _as_history((await self._turn_view(conversation_id, inbound_id)).history)

    async def _turn_view(self, conversation_id: str, inbound_id: int | None) -> TurnView:
        s = self._settings
        return await self._store.messages.turn_view(conversation_id, limit=s.history_limit + s.summary_batch - 1,
                                                    inbound_id=inbound_id)

    # entries -----------------------------------------------------------------------------

    async def answer(self, inbound: StoredMessage, sender_id: str | None) -> TurnOutcome:
        """A chat turn for a stored message (the caller holds the conversation's lock). With the
        day's LLM budget spent, a notice with the reset time instead, and no model call."""
        cid = inbound.conversation_id
        over = await self.budget.reached() if self.budget is not None else None
        if over is not None:
            log.warning("turn.over_budget", conversation=cid, tokens=over.tokens, usd=round(over.usd, 4))
            text = budget_reached(over, self._settings.zone)
            await self._outbox.post(cid, text, kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return TurnOutcome("", False, text)
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=cid, user_id=sender_id)
        with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=cid):
            outcome = await self._turn(scope, inbound=inbound)
        await self._budget_warning(cid)
        return outcome

    async def _budget_warning(self, conversation_id: str) -> None:
        """80 % of the day's budget: told once a day, in the conversation whose turn crossed it."""
        if self.budget is None:
            return
        spend = await self.budget.warning_due(conversation_id)
        if spend is not None:
            log.warning("budget.warning", conversation=conversation_id, fraction=round(spend.fraction, 3))
            await self._outbox.post(conversation_id, budget_warning(spend, self._settings.zone),
                                    kind=MessageKind.NOTICE)

    async def run_proactive(
        self, conversation_id: str, prompt: str, *, source: TurnSource = TurnSource.PROACTIVE,
        job_id: str | None = None, tools: ToolFilter | None = None, quiet_token: str | None = None,
    ) -> TurnOutcome:
        """A turn with no inbound message (a scheduled briefing): ``prompt`` is its user-role
        instruction, the system prompt says it is a scheduled run; tools limited by ``tools``,
        never one that needs approval; the answer goes through the outbox. An answer that is
        exactly ``quiet_token`` is not sent (the outcome is ``quiet``)."""
        await self._ensure(conversation_id)
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=conversation_id, user_id=None, source=source,
                          unattended=True, tool_filter=tools, scheduled=ScheduledRun(job_id, quiet_token))
        async with self.lock(conversation_id):
            with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=conversation_id,
                                                         job=job_id):
                outcome = await self._turn(scope, prompt=prompt, job_id=job_id)
        await self._budget_warning(conversation_id)
        return outcome

    async def post(self, conversation_id: str, text: str) -> int:
        """A message that needs no model (a reminder): stored, then sent through the outbox."""
        if not text.strip():
            raise ValueError("post: the text is empty")
        await self._ensure(conversation_id)
        return await self._outbox.post(conversation_id, text)

    async def _memory_command(self, command: Command) -> str:
        if self.memory is None:
            return "Long-term memory is not available here."
        if command.name is CommandName.MEMORY:
            return memory_listing(await self._store.memory.facts(include_archived=False),
                                  await self._store.memory.latest_summary())
        if command.confirmation_id is None:
            return "Usage: /forget ID (the number /memory shows before a fact)."
        fact = await self.memory.fact(int(command.confirmation_id))
        if fact is None:
            return f"There is no fact {command.confirmation_id} in memory; /memory lists them."
        await self.memory.forget([fact.id])
        return f"Forgotten: {fact.content}"

    async def handle_command(self, inbound: StoredMessage, command: Command, sender_id: str | None) -> None:
        """A typed ``/approve ID``, ``/deny ID``, ``/new`` or ``/jobs`` (the caller holds the conversation's lock)."""
        cid = inbound.conversation_id
        if command.name is CommandName.NEW:
            await self._new_session(inbound)
            return
        if command.name is CommandName.USAGE:
            rows, hits = await usage_by_day(self._store, self._clock, self._settings.zone, days=7)
            await self._outbox.post(cid, usage_text(rows, hits, 7), kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return
        if command.name in (CommandName.MEMORY, CommandName.FORGET):
            await self._outbox.post(cid, await self._memory_command(command), kind=MessageKind.NOTICE,
                                    inbound_id=inbound.id)
            return
        if command.name is CommandName.JOBS:
            listing = jobs_listing([JobView(job).line() for job in await self._store.jobs.for_conversation(cid)])
            await self._outbox.post(cid, listing, kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return
        if command.confirmation_id is None:
            await self._outbox.post(cid, command_usage(command.name), kind=MessageKind.NOTICE, inbound_id=inbound.id)
            return
        decision = await self._confirmations.decide_in_chat(
            command.confirmation_id, conversation_id=cid, user_id=sender_id or "",
            approve=command.name is CommandName.APPROVE)
        if decision.outcome is DecisionOutcome.APPROVED and decision.action is not None:
            history = await self.history(cid, inbound.id)
            async with self._indicator(cid):
                await self._desk.run(decision.action, history=history, user_id=sender_id, inbound_id=inbound.id)
            return
        kind = MessageKind.CHAT if decision.outcome is DecisionOutcome.DENIED else MessageKind.NOTICE
        await self._outbox.post(cid, _decision_text(decision, command.confirmation_id), kind=kind,
                                inbound_id=inbound.id)

    async def _new_session(self, inbound: StoredMessage) -> None:
        """``/new``: fold the session so far into the summary (one model call; if it fails the
        messages leave the window all the same), start the new session at this message, and
        close it with a notice (kept out of the model's history, like the ``/new`` itself)."""
        cid = inbound.conversation_id
        async with self._indicator(cid):
            folded = await fold_session(self._store, self._llm, cid, model=self._settings.summary_model)
        await self._store.messages.start_session(cid, at_message_id=inbound.id)
        kept = folded is Folded.STORED or (
            folded is Folded.NOTHING and await self._store.messages.latest_summary(cid) is not None)
        log.info("conversation.new_session", conversation=cid, summary=str(folded))
        await self._outbox.post(cid, new_session(summary_kept=kept, summary_failed=folded is Folded.FAILED),
                                kind=MessageKind.NOTICE, inbound_id=inbound.id)

    async def decide(
        self, conversation_id: str, user_id: str, confirmation_id: str, approve: bool,
    ) -> tuple[DecisionReport, PendingAction | None]:
        """A decision from a button: the same single-use, user-bound, expiring rules as
        ``/approve ID``. Returns the report for the channel and, when approved, the action for
        the caller to run (``run_approved``). A denial is stored for the caller to flush."""
        if not _CONFIRMATION_ID.fullmatch(confirmation_id):  # a forged button: nothing to look up
            decision = Decision(DecisionOutcome.NOT_FOUND)
            confirmation_id = confirmation_id[:16]
        else:
            decision = await self._confirmations.decide_in_chat(
                confirmation_id.lower(), conversation_id=conversation_id, user_id=user_id, approve=approve)
        report = DecisionReport(decision.outcome, _decision_text(decision, confirmation_id))
        if decision.outcome is DecisionOutcome.DENIED:  # the conversation keeps the record; sent by the caller
            await self._store.messages.add_outbound(conversation_id, report.text, turn_id=None)
        approved = decision.outcome is DecisionOutcome.APPROVED
        return report, decision.action if approved else None

    async def run_approved(self, action: PendingAction, user_id: str | None) -> None:
        """Run an approved action in its conversation's order, then report it."""
        async with self.lock(action.conversation_id):
            history = await self.history(action.conversation_id)
            async with self._indicator(action.conversation_id):
                await self._desk.run(action, history=history, user_id=user_id)

    # one turn -------------------------------------------------------------------------------

    async def _turn(self, scope: TurnScope, *, inbound: StoredMessage | None = None, prompt: str | None = None,
                    job_id: str | None = None) -> TurnOutcome:
        await self._store.messages.start_turn(scope.turn_id, scope.conversation_id, source=scope.source,
                                              inbound_message_id=inbound.id if inbound else None, job_id=job_id)
        log.info("turn.started", source=str(scope.source))
        try:
            async with self._indicator(scope.conversation_id) as progress:
                scope.progress = progress
                result, context = await self._run_loop(scope, inbound, prompt)
                if result.text:
                    result, unbacked = await self._check_claims(scope, result, context)
                else:
                    unbacked = 0
        except asyncio.CancelledError:
            await asyncio.shield(self._interrupted(scope, inbound))
            raise
        except StoreError:  # the database, not the answer, failed: the caller tries the message again
            raise
        except LLMNotConfigured as exc:
            return await self._fail(scope, inbound, exc.hint, error="llm not configured")
        except LLMError as exc:
            return await self._fail(scope, inbound, LLM_DOWN, error=str(exc))
        except Exception as exc:
            log.exception("turn.crashed")
            return await self._fail(scope, inbound, INTERNAL_ERROR, error=type(exc).__name__)
        return await self._finish(scope, inbound, result, unbacked)

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
        self, scope: TurnScope, inbound: StoredMessage | None, prompt: str | None,
    ) -> tuple[TurnResult, list[dict[str, Any]]]:
        """The loop's result, and the context it started from (system prompt and history)."""
        s = self._settings
        view, memory = await asyncio.gather(  # two reads queued at once: one wait for the database thread
            self._turn_view(scope.conversation_id, inbound.id if inbound else None),
            self.memory.context() if self.memory is not None else _nothing_remembered())
        system_prompt = build_system_prompt(
            system_prompt=s.system_prompt, name=s.name, summary=view.summary.summary if view.summary else None,
            now=self._clock.now(), zone=s.zone,
            previous_message_at=parse_iso(view.previous_at) if view.previous_at else None,
            tools=self._registry.offered(scope), scheduled=scope.scheduled, memory=memory,
        )
        history: list[dict[str, Any]] = list(_as_history(view.history))
        if prompt is not None:
            history.append({"role": "user", "content": prompt})
        result = await run_agent_loop(self._llm, self._registry, system_prompt, history, s.max_model_calls,
                                      max_turn_tokens=s.max_turn_tokens,
                                      scope=scope)
        return result, [{"role": "system", "content": system_prompt}, *history]

    async def _finish(
        self, scope: TurnScope, inbound: StoredMessage | None, result: TurnResult, unbacked: int = 0,
    ) -> TurnOutcome:
        if not result.text:  # nothing to say is not an answer: a clear note, and the turn is not ok
            notice = NOT_FINISHED if result.hit_ceiling or result.stopped_repeat else EMPTY_ANSWER
            return await self._fail(scope, inbound, notice, error="empty answer")
        quiet = scope.scheduled.quiet_token if scope.scheduled else None
        if quiet and result.text.strip() == quiet:  # notify if_actionable, nothing to report: nothing sent
            await asyncio.shield(self._store.messages.finish_turn(
                scope.turn_id, status=TurnStatus.OK, llm_calls=scope.llm_calls, tool_calls=len(result.tool_results)))
            log.info("turn.quiet", llm_calls=scope.llm_calls)
            return TurnOutcome(scope.turn_id, True, "", result, quiet=True)
        existing = await self._store.artifacts.existing_paths(produced_urls(result.tool_results))
        text = check_links(result.text, result.tool_results, admin_base=self._settings.admin_base_url,
                           existing=existing).text
        if scope.skipped_actions():
            text = f"{text}\n\n{skipped_note(scope.skipped_actions())}"
        await asyncio.shield(self._store.messages.complete_turn(
            scope.turn_id, inbound_id=inbound.id if inbound else None, conversation_id=scope.conversation_id,
            reply=text, llm_calls=scope.llm_calls, tool_calls=len(result.tool_results),
            hit_ceiling=result.hit_ceiling, stopped_repeat=result.stopped_repeat, unbacked_claims=unbacked,
        ))
        await self._outbox.flush(scope.conversation_id)
        await self._send_artifacts(scope)
        await self._send_confirmations(scope.conversation_id, scope.confirmations)
        log.info("turn.finished", llm_calls=scope.llm_calls, tools=len(result.tool_results), ceiling=result.hit_ceiling)
        return TurnOutcome(scope.turn_id, True, text, result)

    async def _fail(self, scope: TurnScope, inbound: StoredMessage | None, notice: str, *, error: str) -> TurnOutcome:
        log.warning("turn.failed", reason=error)
        notice = with_actions(notice, scope.completed_actions(), [r.id for r in scope.confirmations])
        if scope.unattended:
            notice = proactive_failed(notice)
        await asyncio.shield(self._store.messages.complete_turn(
            scope.turn_id, inbound_id=inbound.id if inbound else None, conversation_id=scope.conversation_id,
            reply=notice, llm_calls=scope.llm_calls, tool_calls=len(scope.results), error=error,
        ))
        await self._outbox.flush(scope.conversation_id)
        await self._send_artifacts(scope)
        await self._send_confirmations(scope.conversation_id, scope.confirmations)
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
            scope.turn_id, inbound_id=inbound.id if inbound else None, conversation_id=scope.conversation_id,
            reply=notice, llm_calls=scope.llm_calls, tool_calls=len(scope.results), error="interrupted by shutdown",
        )

    # helpers ---------------------------------------------------------------------------------

    async def _ensure(self, conversation_id: str) -> None:
        conversation = ConversationId.parse(conversation_id)
        await self._store.messages.ensure_conversation(conversation_id, conversation.channel, conversation.chat_id)

    @asynccontextmanager
    async def _indicator(self, conversation_id: str) -> AsyncIterator[Progress]:
        """The channel's live progress while the block runs, or its typing indicator alone. A
        channel failing to show either is logged; the turn goes on."""
        conversation = ConversationId.parse(conversation_id)
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

    async def _send_artifacts(self, scope: TurnScope) -> None:
        """Send each document this turn's ``artifact.save`` calls saved, once, after the reply,
        through the outbox. A file the platform refuses is logged: the turn and its reply (which
        has the link) stand."""
        for path, caption in await self._artifact_files(scope):
            await self._outbox.post_file(scope.conversation_id, path, caption)

    async def _artifact_files(self, scope: TurnScope) -> list[tuple[Path, str | None]]:
        """The files (and captions) of the artifacts this turn saved: stored for this
        conversation, inside the artifacts folder, each once."""
        if self._settings.artifacts_dir is None:
            return []
        root = self._settings.artifacts_dir.resolve()
        files: dict[Path, str | None] = {}
        for result in scope.results:
            output = result.output
            if result.name != _ARTIFACT_SAVE or not result.ok or not isinstance(output, dict):
                continue
            artifact_id = output.get("artifact_id")  # a dry run saved nothing and has none
            record = await self._store.artifacts.get(artifact_id) if isinstance(artifact_id, str) else None
            if record is None or record.conversation_id != scope.conversation_id:
                continue
            path = (root / record.path).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                log.warning("artifact.not_sent", artifact=record.id, reason="not a file in the artifacts folder")
                continue
            files.setdefault(path, record.title or None)
        return list(files.items())

    async def _send_confirmations(self, conversation_id: str, requests: list[ConfirmationRequest]) -> None:
        """Each approval request with its buttons, through the outbox: stored, then sent in order."""
        for request in requests:
            await self._outbox.post_confirmation(conversation_id, request)


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


def _decision_text(decision: Decision, confirmation_id: str) -> str:
    action = decision.action
    return decision_text(decision.outcome, confirmation_id.lower(), action.tool_name if action else None,
                         str(action.status) if action else None)


def _as_history(messages: list[StoredMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.text} for m in messages]


async def _nothing_remembered() -> str:
    return ""
