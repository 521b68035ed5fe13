"""Turning a user's decision into action and a reply.

Approve in chat: the request moves to ``running`` (single use), the tool runs with the stored
arguments (audited with source ``confirmation``), the outcome is recorded on the request, and
one short model call, without tools, tells the user what happened. If the model is down the
user still gets a plain report: an action that ran is never left unreported.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from bruce.agent import LLM
from bruce.commands import Command
from bruce.confirmations import Confirmations, Outcome, PendingAction
from bruce.contracts import ToolResult
from bruce.errors import LLMError
from bruce.grounding import check_links, produced_urls
from bruce.registry import ToolRegistry
from bruce.store import Store
from bruce.turn import TurnScope, new_turn_id

__all__ = ["ApprovalDesk", "DeskReply", "SendStored"]

SendStored = Callable[[int, str, str], Awaitable[None]]  # (stored message id, conversation id, text)

log = structlog.get_logger(__name__)

FOLLOW_UP_NOTE = (
    "The user decided on a pending action. Outcome, from the system (not from the user): {outcome}. "
    "Tell the user in one or two sentences what happened. Report only this outcome."
)


@dataclass(frozen=True, slots=True)
class DeskReply:
    text: str
    kind: str = "chat"  # "notice" replies stay out of the model's history
    turn_id: str | None = None


def _plain_outcome(action: PendingAction, result: ToolResult) -> str:
    if result.ok:
        return f"Done: {action.tool_name} ran (request {action.id})."
    return f"{action.tool_name} did not succeed (request {action.id}): {result.error}"


class ApprovalDesk:
    def __init__(self, *, store: Store, llm: LLM, registry: ToolRegistry, confirmations: Confirmations,
                 admin_base_url: str) -> None:
        self._admin_base_url = admin_base_url
        self._store = store
        self._llm = llm
        self._registry = registry
        self._confirmations = confirmations

    async def handle(self, command: Command, *, conversation_id: str, user_id: str,
                     history: list[dict[str, Any]], inbound_id: int, send: SendStored) -> DeskReply | None:
        """Decide on a request. Returns the reply to store and send, or None when the action ran:
        its report was then stored and sent already (``send``)."""
        if command.confirmation_id is None:
            return DeskReply(f"Usage: /{command.name} ID, with the 8-character id shown in the request.", "notice")
        approve = command.name == "approve"
        decision = await self._confirmations.decide_in_chat(
            command.confirmation_id, conversation_id=conversation_id, user_id=user_id, approve=approve,
        )
        cid = command.confirmation_id
        action = decision.action
        match decision.outcome:
            case Outcome.NOT_FOUND:
                return DeskReply(f"There is no request {cid} in this conversation. Nothing was run.", "notice")
            case Outcome.WRONG_USER:
                return DeskReply(f"Only the person who asked can decide on request {cid}. Nothing was run.", "notice")
            case Outcome.EXPIRED:
                return DeskReply(f"Request {cid} has expired; nothing was run. Ask again if you still want it.", "notice")
            case Outcome.ALREADY_DECIDED:
                status = action.status if action else "decided"
                return DeskReply(f"Request {cid} was already handled ({status}); nothing more was run.", "notice")
            case Outcome.NEEDS_STEP_UP:
                assert action is not None
                return DeskReply(
                    f"Request {cid} ({action.tool_name}) is critical: it can only be approved by the owner on "
                    f"the machine running Bruce, with `bruce approve {cid}`. Nothing has run yet.", "notice")
            case Outcome.DENIED:
                assert action is not None
                return DeskReply(f"Denied: {action.tool_name} will not run (request {cid}).")
        assert action is not None
        await self.run(action, history=history, user_id=user_id, inbound_id=inbound_id, send=send)
        return None

    async def run(self, action: PendingAction, *, history: list[dict[str, Any]], user_id: str | None,
                  send: SendStored, inbound_id: int | None = None) -> None:
        """Run an approved action (already moved to ``running``), then report it: first a line
        written by code, stored with the outcome in one transaction and sent at once; then, if
        the model answers, one sentence of its own."""
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=action.conversation_id, user_id=user_id,
                          source="confirmation")
        with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=action.conversation_id):
            await self._store.start_turn(scope.turn_id, action.conversation_id, source="confirmation",
                                         inbound_message_id=inbound_id)
            result = await self._registry.run_approved(action, scope)
            plain = _plain_outcome(action, result)
            report_id = await asyncio.shield(self._confirmations.finish(
                action, ok=result.ok, result=result.for_model(), report=plain, turn_id=scope.turn_id,
                inbound_id=inbound_id))
            log.info("confirmation.executed", confirmation=action.id, tool=action.tool_name, status=result.status)
            assert report_id is not None
            await send(report_id, action.conversation_id, plain)
            text = await self._follow_up(action, result, history, scope)
            if text:
                follow_id = await self._store.add_outbound(action.conversation_id, text, turn_id=scope.turn_id)
                await send(follow_id, action.conversation_id, text)
            await self._store.finish_turn(scope.turn_id, status="ok" if result.ok else "failed",
                                          llm_turns=scope.llm_calls, tool_calls=1,
                                          error=None if result.ok else result.status)

    async def _follow_up(self, action: PendingAction, result: ToolResult, history: list[dict[str, Any]],
                         scope: TurnScope) -> str:
        """The model's short sentence about the outcome; empty if it has nothing or is down."""
        outcome = json.dumps({"request": action.id, "tool": action.tool_name, **result.for_model()},
                             ensure_ascii=False, default=str)
        messages = [*history, {"role": "system", "content": FOLLOW_UP_NOTE.format(outcome=outcome[:4000])}]
        try:
            reply = await self._llm.complete(messages, scope=scope, tools=None)
        except LLMError:
            return ""  # the code-written line already told the user
        existing = await self._store.existing_artifact_paths(produced_urls([result]))
        return check_links((reply.text or "").strip(), [result], admin_base=self._admin_base_url,
                           existing=existing).text
