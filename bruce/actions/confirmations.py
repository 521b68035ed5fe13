"""Pending confirmations: a risky call waits here for its user's explicit decision.

A request is bound to one conversation and the user who caused it, expires (default 10
minutes), and is decided once: every transition is a conditional UPDATE, so two clicks, two
processes or a click after expiry cannot run a tool twice or late.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bruce.channel import ConfirmationRequest
from bruce.clock import Clock, local_time, parse_iso, utc_iso
from bruce.contracts import ToolContract
from bruce.log import Redactor
from bruce.records import ConfirmationRecord
from bruce.store import Store
from bruce.values import ConfirmationState, ConversationId, DecidedVia, DecisionOutcome

__all__ = ["COMPOSED_NOTICE", "Confirmations", "Decision", "PendingAction"]

_S = ConfirmationState

COMPOSED_NOTICE = (
    "Note: the model composed this URL itself: it is not in your message or in anything a tool returned "
    "from outside (a page, a search result, an MCP result) in this turn or earlier in this conversation "
    "since /new, and such text was read. A composed URL can carry data out in its path or query. "
    "Approve only if you expect it: {url}"
)


@dataclass(frozen=True, slots=True)
class PendingAction:
    id: str
    conversation_id: str
    user_id: str | None
    tool_name: str
    arguments: dict[str, Any]
    status: ConfirmationState
    expires_at: str
    preview: Any = None  # the dry-run preview the user saw, when the tool has one
    untrusted: bool = False  # asked in a tainted turn: the approved call runs tainted too

    @classmethod
    def from_record(cls, record: ConfirmationRecord) -> PendingAction:
        preview = json.loads(record.preview) if record.preview else None
        return cls(record.id, record.conversation_id, record.user_id, record.tool_name,
                   json.loads(record.arguments), record.status, record.expires_at, preview, record.untrusted)


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: DecisionOutcome
    action: PendingAction | None = None


def _summary(contract: ToolContract, arguments: dict[str, Any]) -> str:
    shown = json.dumps(arguments, ensure_ascii=False)
    if len(shown) > 300:
        shown = shown[:297] + "..."
    return f"Bruce wants to run {contract.name} with {shown}"


class Confirmations:
    def __init__(self, store: Store, clock: Clock, *, ttl_s: float = 600.0, redactor: Redactor | None = None,
                 zone: ZoneInfo | None = None) -> None:
        """``zone``: the owner's (``assistant.timezone``), in which a request says when it expires."""
        self._zone = zone or ZoneInfo("UTC")
        self._redactor = redactor or Redactor()
        self._store = store
        self._clock = clock
        self._ttl = timedelta(seconds=ttl_s)

    async def request(
        self, contract: ToolContract, arguments: dict[str, Any], *, conversation_id: str, user_id: str | None,
        turn_id: str | None, call_id: str | None, preview: Any, step_up: bool, composed: Sequence[str] = (),
        untrusted: bool = False,
    ) -> ConfirmationRequest:
        """Store a pending request and return what the channel shows. ``composed``: URL arguments
        the model composed in a turn with untrusted text; the shown preview names them (the stored
        preview, which an approval compares with a fresh one, does not)."""
        confirmation_id = secrets.token_hex(4)
        expires_at = self._clock.now() + self._ttl
        await self._store.confirmations.add(
            confirmation_id=confirmation_id, conversation_id=conversation_id, user_id=user_id, turn_id=turn_id,
            call_id=call_id, tool_name=contract.name, arguments=arguments, preview=preview, step_up=step_up,
            expires_at=utc_iso(expires_at), untrusted=untrusted,
        )
        return ConfirmationRequest(
            id=confirmation_id,
            tool_name=contract.name,
            risk=str(contract.risk),
            summary=_summary(contract, self._redactor.value(arguments)),
            side_effects=contract.side_effects,
            preview=_with_notice(None if preview is None else _render_preview(preview), composed, self._redactor),
            expires_at=expires_at,
            step_up=step_up,
            expires_shown=local_time(expires_at, self._zone, date=False),
        )

    async def decide_in_chat(self, confirmation_id: str, *, conversation_id: str, user_id: str, approve: bool) -> Decision:
        """A decision typed or tapped in a conversation. Approval moves the request straight to
        ``running``; the caller must then run it."""
        row = await self._store.confirmations.get(confirmation_id)
        if row is None or row.conversation_id != conversation_id:
            return Decision(DecisionOutcome.NOT_FOUND)
        action = PendingAction.from_record(row)
        if row.user_id is not None and row.user_id != user_id:
            return Decision(DecisionOutcome.WRONG_USER, action)
        if approve and row.step_up:
            live = row.status is _S.PENDING and row.expires_at > utc_iso(self._clock.now())
            return Decision(DecisionOutcome.NEEDS_STEP_UP, action) if live else await self._why_not(action)
        target = _S.RUNNING if approve else _S.DENIED
        moved = await self._store.confirmations.move(
            confirmation_id, from_status=_S.PENDING, to_status=target, via=DecidedVia.CHAT,
            unexpired_at=utc_iso(self._clock.now()),
        )
        if not moved:
            return await self._why_not(action)
        return Decision(DecisionOutcome.APPROVED if approve else DecisionOutcome.DENIED, replace(action, status=target))

    async def decide_locally(self, confirmation_id: str, *, approve: bool) -> Decision:
        """The owner's decision from the machine itself (``bruce approve``): the step-up path.
        An approval is queued for the daemon, which runs it and tells the user."""
        row = await self._store.confirmations.get(confirmation_id)
        if row is None:
            return Decision(DecisionOutcome.NOT_FOUND)
        action = PendingAction.from_record(row)
        moved = await self._store.confirmations.move(
            confirmation_id, from_status=_S.PENDING, to_status=_S.APPROVED if approve else _S.DENIED,
            via=DecidedVia.CLI, unexpired_at=utc_iso(self._clock.now()),
        )
        if not moved:
            return await self._why_not(action)
        return Decision(DecisionOutcome.QUEUED if approve else DecisionOutcome.DENIED, action)

    async def expire_late(self, channels: Collection[str]) -> list[PendingAction]:
        """Locally approved requests of conversations on ``channels`` that no process picked up
        within the request's lifetime (the daemon was down): expired, never run late. Returned
        so that the user can be told."""
        expired = []
        now = self._clock.now()
        for row in await self._store.confirmations.with_status(_S.APPROVED):
            decided = parse_iso(row.decided_at) if row.decided_at else now
            if _on(row, channels) and now - decided > self._ttl and await self._store.confirmations.move(
                    row.id, from_status=_S.APPROVED, to_status=_S.EXPIRED):
                expired.append(replace(PendingAction.from_record(row), status=_S.EXPIRED))
        return expired

    async def claim_queued(self, channels: Collection[str]) -> list[PendingAction]:
        """Take locally approved requests of conversations on ``channels`` for running (each is
        returned to one caller only; another process serving other channels leaves them be).
        Approvals older than the request's lifetime are expired instead of run late."""
        claimed = []
        now = self._clock.now()
        for row in await self._store.confirmations.with_status(_S.APPROVED):
            if not _on(row, channels):
                continue
            decided = parse_iso(row.decided_at) if row.decided_at else now
            if now - decided > self._ttl:
                await self._store.confirmations.move(row.id, from_status=_S.APPROVED, to_status=_S.EXPIRED)
                continue
            if await self._store.confirmations.move(row.id, from_status=_S.APPROVED, to_status=_S.RUNNING):
                claimed.append(replace(PendingAction.from_record(row), status=_S.RUNNING))
        return claimed

    async def interrupted(self, channels: Collection[str]) -> list[PendingAction]:
        """Requests of conversations on ``channels`` that were running when the process serving
        them died: we cannot know if they finished."""
        rows = [r for r in await self._store.confirmations.with_status(_S.RUNNING) if _on(r, channels)]
        for row in rows:
            await self._store.confirmations.finish(row.id, status=_S.FAILED, result={"error": "interrupted by a restart"})
        return [PendingAction.from_record(r) for r in rows]

    async def finish(self, action: PendingAction, *, ok: bool, result: Any, report: str | None = None,
                     turn_id: str | None = None, inbound_id: int | None = None) -> int | None:
        """Record the outcome (and store the user's report of it, atomically); returns the
        report's message id."""
        return await self._store.confirmations.finish(
            action.id, status=_S.EXECUTED if ok else _S.FAILED, result=self._redactor.value(result), report=report,
            conversation_id=action.conversation_id, turn_id=turn_id, inbound_id=inbound_id,
        )

    async def _why_not(self, action: PendingAction) -> Decision:
        row = await self._store.confirmations.get(action.id)
        assert row is not None
        if row.status is _S.PENDING and row.expires_at <= utc_iso(self._clock.now()):
            await self._store.confirmations.move(action.id, from_status=_S.PENDING, to_status=_S.EXPIRED)
            return Decision(DecisionOutcome.EXPIRED, action)
        if row.status is _S.EXPIRED:
            return Decision(DecisionOutcome.EXPIRED, action)
        return Decision(DecisionOutcome.ALREADY_DECIDED, PendingAction.from_record(row))


def _on(row: ConfirmationRecord, channels: Collection[str]) -> bool:
    return ConversationId.parse(row.conversation_id).channel in channels


def _with_notice(preview: str | None, composed: Sequence[str], redactor: Redactor) -> str | None:
    """The shown preview, with a note naming each URL the model composed (first, so it is seen)."""
    if not composed:
        return preview
    notes = [COMPOSED_NOTICE.format(url=redactor.text(url)[:500]) for url in composed]
    return "\n".join(notes) + ("" if preview is None else "\n\n" + preview)


def _render_preview(preview: Any) -> str:
    if isinstance(preview, str):
        return preview
    if isinstance(preview, dict) and isinstance(preview.get("diff"), str):
        rest = {k: v for k, v in preview.items() if k != "diff"}
        diff: str = preview["diff"]
        return json.dumps(rest, ensure_ascii=False, default=str) + "\n" + diff
    return json.dumps(preview, ensure_ascii=False, indent=2, default=str)
