"""The worker: admission, and the one owner of the daemon's tasks.

For each ``IncomingMessage``: admission (``bruce.runtime.access``: strangers cost no model call and
no stored message; in a private chat they may be told how to pair), store it as pending,
then start its turn (``Conversations``: one conversation at a time and its messages in the
order they arrived, those a crash left pending first; different conversations concurrently). The worker also owns the background work: folding old history into summaries,
running locally approved actions, re-sending unsent replies; and the drain at shutdown.
It is the ``Inbound`` a channel is started with (``deliver``, ``decide``, ``resend``), the door
the scheduler uses (``run_proactive``, ``post``), and the owner's ``Control`` decides through it
(``decide_locally``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import structlog

from bruce.actions.confirmations import Confirmations, PendingAction
from bruce.channel import ConfirmationRequest, DecisionReport, IncomingMessage, LocalDecision
from bruce.clock import Clock, utc_iso
from bruce.errors import ShuttingDown, StoreError
from bruce.limits import Admission, RateLimiter
from bruce.runtime.access import Access
from bruce.runtime.outbox import Outbox
from bruce.runtime.recovery import Recovery
from bruce.runtime.summarizer import fold_history
from bruce.store import Store
from bruce.texts import approval_arrived_late, decision_text, message_too_long, rate_limited
from bruce.turns.agent_loop import LLM
from bruce.turns.commands import CommandName, parse_command
from bruce.turns.conversations import Conversations
from bruce.turns.runner import TurnOutcome
from bruce.turns.scope import ToolFilter
from bruce.values import OWNER, ConversationId, DecisionOutcome, Direction, MessageKind, MessageStatus, TurnSource

__all__ = ["Worker", "WorkerSettings"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    max_message_chars: int = 16000
    approval_poll_s: float = 2.0
    history_limit: int = 15
    summary_batch: int = 8
    summary_model: str | None = None  # None: the chat model (and its fallbacks)
    store_retries: int = 4  # a message whose turn failed on the database is tried again this often
    store_backoff_s: float = 1.0


class Worker:
    def __init__(
        self, *, store: Store, llm: LLM, clock: Clock, conversations: Conversations, outbox: Outbox,
        recovery: Recovery, confirmations: Confirmations, served: Mapping[str, object], settings: WorkerSettings,
        access: Access, limiter: RateLimiter | None = None, zone: ZoneInfo | None = None,
        on_answered: Callable[[ConversationId, int, str], None] | None = None,
    ) -> None:
        """``on_answered(conversation_id, message_id, person)``: told after each message's turn
        (long-term memory's extraction, into that person's memory); None: nobody is."""
        self._limiter = limiter
        self._zone = zone or ZoneInfo("UTC")
        self._on_answered = on_answered
        self._store = store
        self._clock = clock
        self._llm = llm
        self.conversations = conversations
        self._outbox = outbox
        self._recovery = recovery
        self._confirmations = confirmations
        self._served = served
        self._settings = settings
        self._access = access
        self._turns: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._background: dict[ConversationId, asyncio.Task[bool]] = {}
        self._left_over: list[tuple[ConversationId, int]] = []  # queued by queue_left_over, for recover
        self._accepting = True
        self._approvals_due = asyncio.Event()  # a local approval arrived: claim it now, not at the next poll

    # inbound ---------------------------------------------------------------------------

    async def is_allowed(self, channel: str, sender_id: str) -> bool:
        """In the channel's allow-list, or paired (``bruce.runtime.access``). May read the database."""
        return await self._access.admits(channel, sender_id)

    async def deliver(self, message: IncomingMessage) -> Awaitable[None] | None:
        """Store the message and start its turn. Returns the turn's task (await it to know the
        reply was sent), or None when the message was refused or already handled. Raises
        ``StoreError`` when the message could not be stored: the channel keeps it (does not
        acknowledge the platform's update, or tries again) and tells the user."""
        if not await self.is_allowed(message.channel, message.sender_id):
            log.warning("access.denied", channel=message.channel, sender=message.sender_id)
            if message.private and self._accepting:  # a pairing code or a refusal, never in a group
                self._spawn(self._access.answer_stranger(message), f"stranger:{message.channel}")
            return None
        conversation = message.conversation_id
        cid = str(conversation)  # the store's and the log's form
        if not message.text.strip() and not message.attachments:
            return None
        limit = self._settings.max_message_chars
        if len(message.text) > limit:
            log.info("worker.message_too_long", conversation=cid, chars=len(message.text))
            await self._store.messages.ensure_conversation(cid, conversation.channel, conversation.chat_id)
            await self._store.outbound.add(cid, message_too_long(len(message.text), limit), turn_id=None,
                                           kind=MessageKind.NOTICE)
            self._spawn(self._outbox.flush(conversation), f"outbox:{cid}")  # the channel is not kept waiting
            return None
        admission = self._admit(message)
        message_id, is_new = await self._store.messages.add_inbound(
            cid, sender_id=message.sender_id, text=message.text, platform_message_id=message.platform_message_id,
            received_at=utc_iso(message.timestamp),
            status=MessageStatus.PENDING if admission is None or admission.admitted else MessageStatus.RATE_LIMITED,
            attachments=json.dumps([a.to_json() for a in message.attachments]) if message.attachments else None,
            where=(conversation.channel, conversation.chat_id),  # a chat's first message makes its row too
        )
        if not is_new:
            if admission is not None and self._limiter is not None:
                self._limiter.give_back(admission)
            log.info("worker.duplicate_ignored", conversation=cid, message_id=message_id)
            return None
        if admission is not None and not admission.admitted:
            log.warning("worker.rate_limited", conversation=cid, sender=message.sender_id, message_id=message_id,
                        retry_at=utc_iso(admission.retry_at) if admission.retry_at else None)
            if admission.notify and admission.retry_at is not None:
                await self._store.outbound.add(cid, rate_limited(admission.retry_at, self._zone),
                                               turn_id=None, kind=MessageKind.NOTICE)
                self._spawn(self._outbox.flush(conversation), f"outbox:{cid}")
            return None
        if not self._accepting:  # shutting down: kept pending, answered at the next start
            log.info("worker.deferred_until_restart", conversation=cid, message_id=message_id)
            return None
        return self._spawn(self._process(conversation, message_id, message.sender_id), f"turn:{cid}")

    def _admit(self, message: IncomingMessage) -> Admission | None:
        """The rate limits (``bruce.limits``); None: not counted (no limiter, or an approval)."""
        if self._limiter is None:
            return None
        command = parse_command(message.text)
        if command is not None and command.name in (CommandName.APPROVE, CommandName.DENY):
            return None  # deciding on a request is never throttled
        keys = (f"sender:{message.channel}:{message.sender_id}", f"conversation:{message.conversation_id}")
        return self._limiter.take(keys, self._clock.now())

    async def decide(
        self, conversation_id: ConversationId, user_id: str, confirmation_id: str, approve: bool,
    ) -> DecisionReport:
        """A button press (Telegram callback, Discord interaction, web chat) on a pending request.
        An approved action runs in the background, in its conversation's order; its report
        follows in the conversation."""
        if not await self.is_allowed(conversation_id.channel, user_id):
            log.warning("access.denied", conversation=str(conversation_id), sender=user_id)
            return DecisionReport(DecisionOutcome.WRONG_USER, "You are not allowed to decide on this request.")
        if not self._accepting:
            text = decision_text(DecisionOutcome.UNAVAILABLE, confirmation_id[:16], None, None)
            return DecisionReport(DecisionOutcome.UNAVAILABLE, text)
        report, action = await self.conversations.decide(conversation_id, user_id, confirmation_id, approve)
        if action is not None:
            self._spawn(self._run_approved(action, user_id), f"approved:{action.id}")
        elif report.outcome is DecisionOutcome.DENIED:
            self._spawn(self._outbox.flush(conversation_id), f"outbox:{conversation_id}")
        return report

    async def decide_locally(self, confirmation_id: str, approve: bool) -> LocalDecision:
        """The owner's decision from the machine (``bruce approve``, through ``Control``):
        the same decision as from the database (``Confirmations.decide_locally``), run at once
        when this process serves the request's conversation."""
        decision = await self._confirmations.decide_locally(confirmation_id.lower(), approve=approve)
        action = decision.action
        if action is None:
            return LocalDecision(decision.outcome)
        runs_here = (decision.outcome is DecisionOutcome.QUEUED and self._accepting  # (stopping: at the next start)
                     and ConversationId.parse(action.conversation_id).channel in self._served)
        if runs_here:
            self._approvals_due.set()
        log.info("confirmation.decided_locally", confirmation=action.id, outcome=str(decision.outcome))
        return LocalDecision(decision.outcome, action.tool_name, action.conversation_id, str(action.status), runs_here)

    async def resend(self, conversation_id: ConversationId) -> None:
        """Send what is stored and unsent for the conversation (a terminal attached again)."""
        self._spawn(self._outbox.flush(conversation_id), f"outbox:{conversation_id}")

    async def pending_requests(self, conversation_id: ConversationId) -> list[ConfirmationRequest]:
        """The conversation's approval requests still waiting for a decision (a page opened again)."""
        return await self._outbox.pending_requests(conversation_id)

    # the scheduler's doors -------------------------------------------------------------

    async def run_proactive(
        self, conversation_id: ConversationId, prompt: str, *, source: TurnSource = TurnSource.PROACTIVE,
        job_id: str | None = None, tools: ToolFilter | None = None, quiet_token: str | None = None,
        owner_text: str | None = None, person: str = OWNER, tainted: bool = False,
    ) -> TurnOutcome:
        """A turn without a message (see ``Conversations.run_proactive``) as ``person`` (whose job
        it runs), owned like a chat turn: drained or cancelled at shutdown; tainted when someone
        else wrote in the conversation (``Access.others_wrote``). Raises ``ShuttingDown`` once stopping."""
        tainted = tainted or await self._access.others_wrote(person, conversation_id)  # their words are in its history
        work = self.conversations.run_proactive(conversation_id, prompt, source=source, job_id=job_id, tools=tools,
                                                quiet_token=quiet_token, owner_text=owner_text, person=person,
                                                tainted=tainted)
        return await self._owned(work, f"proactive:{conversation_id}")

    async def admitted(self, person: str, conversation_id: ConversationId) -> bool:
        """Whether a job of ``person`` in that conversation may still run (``Access.still_admits``)."""
        return await self._access.still_admits(person, conversation_id)

    async def post(self, conversation_id: ConversationId, text: str) -> int:
        """Store and send a text with no model call. Raises ``ShuttingDown`` once stopping."""
        return await self._owned(self.conversations.post(conversation_id, text), f"post:{conversation_id}")

    # tasks -----------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, _T], name: str) -> asyncio.Task[_T]:
        task = asyncio.create_task(work, name=name)
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)
        return task

    async def _owned(self, work: Coroutine[Any, Any, _T], name: str) -> _T:
        if not self._accepting:
            work.close()
            raise ShuttingDown("Bruce is shutting down; nothing was started")
        return await self._spawn(work, name)

    async def _process(self, conversation_id: ConversationId, message_id: int, sender_id: str | None) -> None:
        """Handle one stored message once every older message of its conversation has been
        handled (``ArrivalOrder``: the queue holds the message through its retries, so a newer
        one never overtakes it)."""
        async with self.conversations.order.turn(conversation_id, message_id):
            handled = await self._attempts(conversation_id, message_id, sender_id)
        if handled:
            self._maybe_fold(conversation_id)

    async def _attempts(self, conversation_id: ConversationId, message_id: int, sender_id: str | None) -> bool:
        """A database failure (locked past the busy timeout, disk full) is tried again with
        backoff; a retry never redoes a tool that already acted: such a message is closed with
        what completed, as after a crash. False: the message stays pending (answered at the next
        start)."""
        s = self._settings
        person = self._access.person(conversation_id.channel, sender_id)  # the sender decides, even in a group
        for attempt in range(s.store_retries + 1):
            try:
                async with self.conversations.lock(conversation_id):
                    await self._handle(conversation_id, message_id, sender_id, person, retry=attempt > 0)
                if self._on_answered is not None:
                    self._on_answered(conversation_id, message_id, person)
                return True
            except StoreError as exc:
                log.warning("worker.store_failed", conversation=str(conversation_id), message_id=message_id,
                            attempt=attempt + 1, error=str(exc))
                if attempt == s.store_retries:  # still pending: answered at the next start
                    log.error("worker.process_failed", conversation=str(conversation_id), message_id=message_id)
                    return False
                await self._clock.sleep(min(s.store_backoff_s * 2.0**attempt, 30.0))
            except Exception:  # the message stays pending and is retried at the next start
                log.exception("worker.process_failed", conversation=str(conversation_id), message_id=message_id)
                return False
        return False

    async def _handle(
        self, conversation: ConversationId, message_id: int, sender_id: str | None, person: str, *, retry: bool,
    ) -> None:
        stored = await self._store.messages.get(message_id)
        if stored is None or stored.status is not MessageStatus.PENDING:
            return
        if retry:
            await self._store.messages.interrupt_turns_of(message_id, error="the database failed during the turn")
            if await self._recovery.cut_off(stored):  # a tool acted, or may have: never blindly redone
                return
        command = parse_command(stored.text)
        if command is not None:
            await self.conversations.handle_command(conversation, stored, command, sender_id, person=person)
        else:
            await self.conversations.answer(conversation, stored, sender_id, person=person)

    async def _run_approved(self, action: PendingAction, user_id: str | None) -> None:
        """Run as the person who asked for it (``user_id`` in its conversation's channel)."""
        person = self._access.person(ConversationId.parse(action.conversation_id).channel, action.user_id)
        try:
            await self.conversations.run_approved(action, user_id, person=person)
        except Exception:  # left 'running': reported as interrupted at the next start
            log.exception("approvals.run_failed", confirmation=action.id)

    async def _watch_approvals(self) -> None:
        """Run what the owner approved on the machine (``bruce approve``)."""
        while True:
            try:
                for late in await self._confirmations.expire_late(self._served.keys()):
                    log.info("confirmation.expired_before_running", confirmation=late.id)
                    await self._outbox.post(ConversationId.parse(late.conversation_id),
                                            approval_arrived_late(late.id, late.tool_name),
                                            kind=MessageKind.NOTICE)
                for action in await self._confirmations.claim_queued(self._served.keys()):
                    self._spawn(self._run_approved(action, action.user_id), f"approved:{action.id}")
            except Exception:
                log.exception("approvals.watch_failed")
            try:
                await asyncio.wait_for(self._approvals_due.wait(), self._settings.approval_poll_s)
            except TimeoutError:
                pass
            self._approvals_due.clear()

    async def _resend_unsent(self) -> None:
        while True:
            await asyncio.sleep(self._outbox.resend_interval_s)
            try:
                await self._outbox.resend_all()
            except Exception:
                log.exception("outbox.resend_failed")

    def _maybe_fold(self, conversation_id: ConversationId) -> None:
        running = self._background.get(conversation_id)
        if running is not None and not running.done():
            return
        s = self._settings
        task = asyncio.create_task(
            # keep one fewer than the history limit: the next turn's history is its new message plus
            # these, so every message is either in the summary or in the history, never in neither
            fold_history(self._store, self._llm, conversation_id, keep_last=s.history_limit - 1,
                         batch=s.summary_batch, model=s.summary_model),
            name=f"summary:{conversation_id}",
        )
        self._background[conversation_id] = task
        task.add_done_callback(_summary_done)

    # start-up and shutdown -----------------------------------------------------------

    async def close_interrupted_actions(self) -> None:
        await self._recovery.close_interrupted_actions()

    async def queue_left_over(self) -> int:
        """Before the channels start: queue the messages a stopped process left pending, oldest
        first, in their conversations' order, so that no message arriving from now on is answered
        before them. Returns the newest stored message id (what ``recover`` is to handle)."""
        up_to_id = await self._store.messages.max_id()
        for message in await self._store.messages.with_status(Direction.IN, MessageStatus.PENDING, up_to_id=up_to_id):
            conversation = ConversationId.parse(message.conversation_id)  # a stored row
            if conversation.channel in self._served:
                self.conversations.order.queue(conversation, message.id)
                self._left_over.append((conversation, message.id))
        return up_to_id

    async def recover(self, *, up_to_id: int) -> None:
        """Finish what the previous process left (messages with id <= ``up_to_id``), send what
        it left unsent, then start the background loops. A left-over message is answered before
        any newer one of its conversation; one closed instead (a tool had acted, too old) lets
        the newer ones go once its notice is stored."""
        left_over, self._left_over = self._left_over, []
        to_answer = []
        try:
            await self._outbox.resend_all()
            to_answer = await self._recovery.unanswered(up_to_id=up_to_id)
        finally:
            answering = {message.id for message in to_answer}
            for conversation, message_id in left_over:
                if message_id not in answering:
                    self.conversations.order.leave(conversation, message_id)
        for message in to_answer:
            self._spawn(self._process(ConversationId.parse(message.conversation_id), message.id, message.sender_id),
                        f"turn:{message.conversation_id}")
        if not self._loops:
            self._loops = [asyncio.create_task(self._watch_approvals(), name="approvals"),
                           asyncio.create_task(self._resend_unsent(), name="outbox")]

    async def wait_idle(self) -> None:
        """Wait until every turn in flight and every background summary has finished."""
        while self._turns or any(not t.done() for t in self._background.values()):
            await asyncio.gather(*self._turns, *self._background.values(), return_exceptions=True)

    async def close(self, timeout_s: float) -> None:
        """Stop taking messages, let in-flight turns finish for up to ``timeout_s``, cancel the
        rest (their messages stay pending and are recovered at the next start)."""
        self._accepting = False
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        pending = set(self._turns)
        if pending:
            log.info("worker.draining", turns=len(pending))
            _, still = await asyncio.wait(pending, timeout=timeout_s)
            for task in still:
                task.cancel()
            if still:
                log.warning("worker.cancelled_turns", turns=len(still))
                await asyncio.gather(*still, return_exceptions=True)
        for summary in self._background.values():
            summary.cancel()
        await asyncio.gather(*self._background.values(), return_exceptions=True)


def _summary_done(task: asyncio.Task[bool]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("summary.crashed", error=type(task.exception()).__name__)
