"""The worker: the one owner of conversation tasks.

For each ``IncomingMessage``: allow-list check (strangers cost nothing), store it as pending,
then - one conversation at a time, different conversations concurrently - build the prompt,
run the agent loop, check grounding, store the reply, send it, mark the message done.
Folding old history into a summary runs in the background afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import structlog

from bruce.agent import LLM, Tools, TurnResult, run_agent_loop
from bruce.approvals import ApprovalDesk, DeskReply
from bruce.channel import Channel, ConfirmationRequest, IncomingMessage, split_text
from bruce.clock import Clock, parse_iso, utc_iso
from bruce.commands import Command, parse_command
from bruce.confirmations import Confirmations, PendingAction
from bruce.errors import LLMError, LLMNotConfigured
from bruce.grounding import check_links, produced_urls
from bruce.prompt import build_system_prompt
from bruce.store import Store, StoredMessage
from bruce.summarizer import fold_history
from bruce.turn import TurnScope, new_turn_id

__all__ = ["Worker", "WorkerSettings", "LLM_DOWN_MESSAGE", "INTERNAL_ERROR_MESSAGE"]

log = structlog.get_logger(__name__)

LLM_DOWN_MESSAGE = (
    "I can't reach the language model right now, so I couldn't answer. Please try again in a few minutes."
)
INTERNAL_ERROR_MESSAGE = "Something went wrong on my side while answering. Please try again."
EXPIRED_MESSAGE = (
    "Sorry: I was offline when you sent this ({when}) and did not answer it: \"{snippet}\". "
    "Nothing was done about it; please send it again if it still matters."
)


def _actions_note(done: list[str], waiting: list[str]) -> str:
    """What did happen, in words: a failure notice must never hide an action, nor an approval
    request the user has not seen."""
    parts = []
    if done:
        parts.append(f"These actions completed: {', '.join(done)}.")
    if waiting:
        parts.append("Waiting for your approval: " + ", ".join(f"/approve {w}" for w in waiting) + ".")
    return " ".join(parts) if parts else "Nothing was done."


def _with_actions(notice: str, scope: TurnScope) -> str:
    return f"{notice} {_actions_note(scope.completed_actions(), [r.id for r in scope.confirmations])}"


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    name: str
    system_prompt: str
    zone: ZoneInfo
    max_turns: int = 5
    history_limit: int = 15
    summary_batch: int = 4
    recovery_max_age_s: float = 3600.0
    admin_base_url: str = "http://127.0.0.1:8765"
    approval_poll_s: float = 2.0
    max_message_chars: int = 16000
    summary_model: str | None = None  # None: the chat model (and its fallbacks)


class Worker:
    def __init__(
        self,
        *,
        store: Store,
        llm: LLM,
        registry: Tools,
        clock: Clock,
        settings: WorkerSettings,
        channels: Mapping[str, Channel],
        confirmations: Confirmations,
        desk: ApprovalDesk,
        allow_lists: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self._store = store
        self._confirmations = confirmations
        self._desk = desk
        self._watcher: asyncio.Task[None] | None = None
        self._llm = llm
        self._registry = registry
        self._clock = clock
        self._settings = settings
        self._channels = dict(channels)
        self._allow_lists = dict(allow_lists or {})
        self._locks: dict[str, asyncio.Lock] = {}
        self._turns: set[asyncio.Task[None]] = set()
        self._background: dict[str, asyncio.Task[bool]] = {}
        self._accepting = True

    # inbound ---------------------------------------------------------------------------

    def is_allowed(self, message: IncomingMessage) -> bool:
        allowed = self._allow_lists.get(message.channel)
        return allowed is None or message.sender_id in allowed

    async def deliver(self, message: IncomingMessage) -> Awaitable[None] | None:
        """Store the message and start its turn. Returns the turn's task (await it to know the
        reply was sent), or None when the message was refused or already handled."""
        if not self.is_allowed(message):
            log.warning("access.denied", channel=message.channel, sender=message.sender_id)
            return None
        await self._store.ensure_conversation(message.conversation_id, message.channel, message.chat_id)
        if not message.text.strip():
            return None
        limit = self._settings.max_message_chars
        if len(message.text) > limit:
            log.info("worker.message_too_long", conversation=message.conversation_id, chars=len(message.text))
            notice = (f"Your message is {len(message.text)} characters long; I accept at most {limit}. "
                      "Nothing was done with it. Please send it in shorter parts.")
            await self._reply(message.conversation_id, DeskReply(notice, "notice"))
            return None
        message_id, is_new = await self._store.add_inbound(
            message.conversation_id,
            sender_id=message.sender_id,
            text=message.text,
            platform_message_id=message.platform_message_id,
            received_at=utc_iso(message.timestamp),
        )
        if not is_new:
            log.info("worker.duplicate_ignored", conversation=message.conversation_id, message_id=message_id)
            return None
        if not self._accepting:  # shutting down: kept pending, answered at the next start
            log.info("worker.deferred_until_restart", conversation=message.conversation_id, message_id=message_id)
            return None
        return self._spawn(message.conversation_id, message_id, message.sender_id)

    def _spawn(self, conversation_id: str, message_id: int, sender_id: str | None) -> asyncio.Task[None]:
        return self._spawn_task(self._process(conversation_id, message_id, sender_id), f"turn:{conversation_id}")

    def _spawn_task(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)
        return task

    async def _process(self, conversation_id: str, message_id: int, sender_id: str | None) -> None:
        try:
            await self._process_in_order(conversation_id, message_id, sender_id)
        except Exception:  # the message stays pending and is retried at the next start
            log.exception("worker.process_failed", conversation=conversation_id, message_id=message_id)

    async def _process_in_order(self, conversation_id: str, message_id: int, sender_id: str | None) -> None:
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        async with lock:
            stored = await self._store.message(message_id)
            if stored is None or stored.status != "pending":
                return
            command = parse_command(stored.text)
            if command is not None:
                await self._decide(stored, command, sender_id)
                return
            await self._answer(stored, sender_id)
        self._maybe_fold(conversation_id)

    # decisions on pending confirmations ------------------------------------------------

    async def _chat_history(self, conversation_id: str, up_to_id: int) -> list[dict[str, str]]:
        """Every message not yet in the summary, at most ``history_limit + summary_batch - 1``:
        folding keeps ``history_limit - 1`` and waits for ``summary_batch`` more, so no message
        is ever in neither the summary nor the history."""
        s = self._settings
        summary = await self._store.latest_summary(conversation_id)
        rows = await self._store.history(
            conversation_id, limit=s.history_limit + s.summary_batch - 1, up_to_id=up_to_id,
            after_id=summary.up_to_message_id if summary else 0,
        )
        return [{"role": m.role, "content": m.text} for m in rows]

    async def _decide(self, inbound: StoredMessage, command: Command, sender_id: str | None) -> None:
        history = await self._chat_history(inbound.conversation_id, inbound.id)
        async with self._thinking(inbound.conversation_id):
            reply = await self._desk.handle(command, conversation_id=inbound.conversation_id,
                                            user_id=sender_id or "", history=history, inbound_id=inbound.id,
                                            send=self._send)
        if reply is not None:
            await self._reply(inbound.conversation_id, reply, inbound_id=inbound.id)

    def _thinking(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        channel_name, chat_id = conversation_id.split(":", 1)
        channel = self._channels.get(channel_name)
        return channel.thinking(chat_id) if channel is not None else nullcontext()

    async def _reply(self, conversation_id: str, reply: DeskReply, *, inbound_id: int | None = None) -> None:
        reply_id = await asyncio.shield(self._store.add_outbound(
            conversation_id, reply.text, turn_id=reply.turn_id, kind=reply.kind, inbound_id=inbound_id))
        await self._send(reply_id, conversation_id, reply.text)

    async def _run_queued(self, action: PendingAction) -> None:
        """A request the owner approved locally: run it in its conversation's order, then report."""
        lock = self._locks.setdefault(action.conversation_id, asyncio.Lock())
        try:
            async with lock:
                last_id = await self._store.last_message_id(action.conversation_id)
                history = await self._chat_history(action.conversation_id, last_id)
                await self._desk.run(action, history=history, user_id=action.user_id, send=self._send)
        except Exception:  # left 'running': reported as interrupted at the next start
            log.exception("approvals.run_failed", confirmation=action.id)

    async def _watch_approvals(self) -> None:
        while True:
            try:
                for action in await self._confirmations.claim_queued(self._channels.keys()):
                    self._spawn_task(self._run_queued(action), f"approved:{action.id}")
            except Exception:
                log.exception("approvals.watch_failed")
            await asyncio.sleep(self._settings.approval_poll_s)

    async def _send_confirmations(self, conversation_id: str, requests: list[ConfirmationRequest]) -> None:
        channel_name, chat_id = conversation_id.split(":", 1)
        channel = self._channels.get(channel_name)
        for request in requests:
            if channel is None:
                log.warning("confirmation.no_channel", confirmation=request.id)
                continue
            try:
                await channel.send_confirmation(chat_id, request)
            except Exception:
                log.exception("confirmation.send_failed", confirmation=request.id)

    # one turn --------------------------------------------------------------------------

    async def _answer(self, inbound: StoredMessage, sender_id: str | None) -> None:
        conversation_id = inbound.conversation_id
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=conversation_id, user_id=sender_id)
        with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=conversation_id):
            await self._answer_in_scope(inbound, scope)

    async def _answer_in_scope(self, inbound: StoredMessage, scope: TurnScope) -> None:
        await self._store.start_turn(scope.turn_id, inbound.conversation_id, source="chat", inbound_message_id=inbound.id)
        log.info("turn.started")
        try:
            async with self._thinking(inbound.conversation_id):
                result = await self._run_loop(inbound, scope)
        except asyncio.CancelledError:
            await asyncio.shield(self._interrupted(inbound, scope))
            raise
        except LLMNotConfigured as exc:
            await self._fail_turn(inbound, scope, exc.hint, error="llm not configured")
        except LLMError as exc:
            await self._fail_turn(inbound, scope, LLM_DOWN_MESSAGE, error=str(exc))
        except Exception as exc:
            log.exception("turn.crashed")
            await self._fail_turn(inbound, scope, INTERNAL_ERROR_MESSAGE, error=type(exc).__name__)
        else:
            await self._deliver_reply(inbound, scope, result)

    async def _run_loop(self, inbound: StoredMessage, scope: TurnScope) -> TurnResult:
        conversation_id = inbound.conversation_id
        summary = await self._store.latest_summary(conversation_id)
        previous = await self._store.previous_message_time(conversation_id, inbound.id)
        s = self._settings
        system_prompt = build_system_prompt(
            system_prompt=s.system_prompt,
            name=s.name,
            summary=summary.summary if summary else None,
            now=self._clock.now(),
            zone=s.zone,
            previous_message_at=parse_iso(previous) if previous else None,
        )
        history = await self._chat_history(conversation_id, inbound.id)
        return await run_agent_loop(self._llm, self._registry, system_prompt, history, s.max_turns, scope=scope)

    async def _deliver_reply(self, inbound: StoredMessage, scope: TurnScope, result: TurnResult) -> None:
        existing = await self._store.existing_artifact_paths(produced_urls(result.tool_results))
        report = check_links(result.text, result.tool_results, admin_base=self._settings.admin_base_url,
                             existing=existing)
        reply_id = await asyncio.shield(self._store.complete_turn(
            scope.turn_id, inbound_id=inbound.id, conversation_id=inbound.conversation_id, reply=report.text,
            llm_turns=result.llm_turns, tool_calls=len(result.tool_results), hit_ceiling=result.hit_ceiling,
            stopped_repeat=result.stopped_repeat,
        ))
        await self._send(reply_id, inbound.conversation_id, report.text)
        await self._send_confirmations(inbound.conversation_id, scope.confirmations)
        log.info("turn.finished", llm_turns=result.llm_turns, tools=len(result.tool_results), ceiling=result.hit_ceiling)

    async def _interrupted(self, inbound: StoredMessage, scope: TurnScope) -> None:
        """The turn was cancelled (shutdown). If nothing acted yet, the message stays pending and
        is answered at the next start; otherwise answering again could act twice, so the user
        is told what completed instead."""
        log.warning("turn.interrupted", tools=len(scope.results))
        if not scope.results:
            await self._store.finish_turn(scope.turn_id, status="failed", llm_turns=scope.llm_calls,
                                          error="interrupted by shutdown")
            return
        notice = _with_actions("I was stopped while answering this, so I could not finish.", scope) + (
            " Ask again if you still need the rest.")
        await self._store.complete_turn(  # the notice is sent at the next start
            scope.turn_id, inbound_id=inbound.id, conversation_id=inbound.conversation_id, reply=notice,
            llm_turns=scope.llm_calls, tool_calls=len(scope.results), error="interrupted by shutdown",
        )

    async def _fail_turn(self, inbound: StoredMessage, scope: TurnScope, notice: str, *, error: str) -> None:
        log.warning("turn.failed", reason=error)
        notice = _with_actions(notice, scope)
        reply_id = await asyncio.shield(self._store.complete_turn(
            scope.turn_id, inbound_id=inbound.id, conversation_id=inbound.conversation_id, reply=notice,
            llm_turns=scope.llm_calls, tool_calls=len(scope.results), error=error,
        ))
        await self._send(reply_id, inbound.conversation_id, notice)
        await self._send_confirmations(inbound.conversation_id, scope.confirmations)

    async def _send(self, reply_id: int, conversation_id: str, text: str) -> None:
        channel_name, chat_id = conversation_id.split(":", 1)
        channel = self._channels.get(channel_name)
        if channel is None:
            log.warning("reply.no_channel", channel=channel_name, message_id=reply_id)
            return
        try:
            for piece in split_text(text, channel.max_message_length):
                await channel.send_text(chat_id, piece)
        except Exception:
            log.exception("reply.send_failed", message_id=reply_id)
            await self._store.set_message_status(reply_id, "failed")
            return
        await self._store.set_message_status(reply_id, "sent")

    # background summaries ------------------------------------------------------------

    def _maybe_fold(self, conversation_id: str) -> None:
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
        task.add_done_callback(self._summary_done)

    def _summary_done(self, task: asyncio.Task[bool]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("summary.crashed", error=type(task.exception()).__name__)

    # start-up and shutdown -----------------------------------------------------------

    async def close_interrupted_actions(self) -> None:
        """Before the channels start: approved actions left ``running`` by the previous process
        are closed as failed (we cannot know whether they finished) and the user is told. Done
        first, so that an approval of this run can never be mistaken for one of them."""
        for action in await self._confirmations.interrupted(self._channels.keys()):
            note = (f"Request {action.id} ({action.tool_name}) was interrupted by a restart while running; "
                    "it may or may not have completed. Please check before asking again.")
            await self._store.add_outbound(action.conversation_id, note, turn_id=None, kind="notice")

    async def recover(self, *, up_to_id: int) -> None:
        """Finish what a crash left: resend stored but unsent replies, answer pending messages
        (or apologize for those older than ``recovery_max_age_s``)."""
        for reply in await self._store.messages_with_status("out", "pending", up_to_id=up_to_id):
            log.info("recovery.resend", message_id=reply.id)
            await self._send(reply.id, reply.conversation_id, reply.text)
        now = self._clock.now()
        max_age = timedelta(seconds=self._settings.recovery_max_age_s)
        for message in await self._store.messages_with_status("in", "pending", up_to_id=up_to_id):
            channel_name = message.conversation_id.split(":", 1)[0]
            if channel_name not in self._channels:
                log.info("recovery.channel_off", message_id=message.id, channel=channel_name)
                continue
            acted = await self._store.actions_for_message(message.id)
            if acted:
                await self._close_interrupted(message, acted)
            elif now - parse_iso(message.created_at) > max_age:
                await self._expire(message)
            else:
                log.info("recovery.process", message_id=message.id)
                self._spawn(message.conversation_id, message.id, message.sender_id)
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch_approvals(), name="approvals")

    async def _expire(self, message: StoredMessage) -> None:
        local = parse_iso(message.created_at).astimezone(self._settings.zone)
        snippet = message.text if len(message.text) <= 80 else message.text[:77] + "..."
        notice = EXPIRED_MESSAGE.format(when=f"{local:%Y-%m-%d %H:%M}", snippet=snippet)
        reply_id = await self._store.add_outbound(message.conversation_id, notice, turn_id=None, kind="notice",
                                                  inbound_id=message.id, inbound_status="expired")
        log.info("recovery.expired", message_id=message.id)
        await self._send(reply_id, message.conversation_id, notice)

    async def _close_interrupted(self, message: StoredMessage, acted: list[dict[str, Any]]) -> None:
        """A crash cut off a turn after tools had acted: answering again could act twice, so
        tell the user what happened instead."""
        done = [a["tool_name"] for a in acted if a["status"] == "ok"]
        waiting = [a["confirmation_id"] for a in acted if a["status"] == "awaiting_confirmation" and a["confirmation_id"]]
        snippet = message.text if len(message.text) <= 80 else message.text[:77] + "..."
        notice = (f"I was interrupted while answering \"{snippet}\". {_actions_note(done, waiting)} "
                  "Ask again if you still need the rest.")
        await self._store.fail_running_turns(message.id, error="interrupted by a crash")
        reply_id = await self._store.add_outbound(message.conversation_id, notice, turn_id=None, kind="notice",
                                                  inbound_id=message.id, inbound_status="failed")
        log.info("recovery.interrupted_turn", message_id=message.id, actions=len(acted))
        await self._send(reply_id, message.conversation_id, notice)

    async def wait_idle(self) -> None:
        """Wait until every turn in flight and every background summary has finished."""
        while self._turns or any(not t.done() for t in self._background.values()):
            await asyncio.gather(*self._turns, *self._background.values(), return_exceptions=True)

    async def close(self, timeout_s: float) -> None:
        """Stop taking messages, let in-flight turns finish for up to ``timeout_s``, cancel the
        rest (their messages stay pending and are recovered at the next start)."""
        self._accepting = False
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
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
