"""Running what the user approved, and telling them.

An approved request (already moved to ``running``, single use) runs with its stored arguments,
audited with source ``confirmation``. The first report line is written by code and stored with
the outcome in one transaction, then sent; one short model call, without tools, may add a
sentence of its own (not when the day's LLM budget is spent). If the model is down the user still
has the plain report: an action that ran is never left unreported.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import structlog

from bruce.actions.confirmations import Confirmations, PendingAction
from bruce.actions.registry import ToolRegistry
from bruce.contracts import ToolResult
from bruce.errors import LLMError
from bruce.runtime.outbox import Outbox
from bruce.store import Store
from bruce.texts import action_outcome
from bruce.turns.agent_loop import LLM
from bruce.turns.grounding import check_links, produced_urls
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import OWNER, ConversationId, TurnSource, TurnStatus

__all__ = ["ApprovalDesk"]

log = structlog.get_logger(__name__)

FOLLOW_UP_NOTE = (
    "The user decided on a pending action. Outcome, from the system (not from the user): {outcome}. "
    "Tell the user in one or two sentences what happened. Report only this outcome."
)


class ApprovalDesk:
    def __init__(self, *, store: Store, llm: LLM, registry: ToolRegistry, confirmations: Confirmations,
                 outbox: Outbox, admin_base_url: str) -> None:
        self._store = store
        self._llm = llm
        self._registry = registry
        self._confirmations = confirmations
        self._outbox = outbox
        self._admin_base_url = admin_base_url

    async def run(self, conversation: ConversationId, action: PendingAction, *, history: list[dict[str, Any]],
                  user_id: str | None, inbound_id: int | None = None, person: str = OWNER) -> None:
        """Run an approved action (already ``running``) as ``person`` (who asked for it: a guest's
        runs on the guest's memory, with the guest's tools), then report it. With ``inbound_id``
        (a typed ``/approve``), that message is closed with the report."""
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=conversation, user_id=user_id,
                          source=TurnSource.CONFIRMATION, person=person,
                          tainted=action.untrusted)  # asked in a tainted turn: its action runs tainted
        with structlog.contextvars.bound_contextvars(turn_id=scope.turn_id, conversation=action.conversation_id):
            await self._store.messages.start_turn(scope.turn_id, action.conversation_id,
                                                  source=TurnSource.CONFIRMATION, inbound_message_id=inbound_id)
            result = await self._registry.run_approved(action, scope)
            plain = action_outcome(action.id, action.tool_name, result.ok, result.error)
            await asyncio.shield(self._confirmations.finish(
                action, ok=result.ok, result=result.for_model(), report=plain, turn_id=scope.turn_id,
                inbound_id=inbound_id))
            log.info("confirmation.executed", confirmation=action.id, tool=action.tool_name, status=result.status)
            await self._outbox.flush(conversation)
            text = await self._follow_up(action, result, history, scope)
            if text:
                await self._outbox.post(conversation, text, turn_id=scope.turn_id)
            await self._store.messages.finish_turn(
                scope.turn_id, status=TurnStatus.OK if result.ok else TurnStatus.FAILED,
                llm_calls=scope.llm_calls, tool_calls=1, error=None if result.ok else str(result.status))

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
        existing = await self._store.artifacts.existing_paths(produced_urls([result]))
        return check_links((reply.text or "").strip(), [result], admin_base=self._admin_base_url,
                           existing=existing).text
