"""Pending confirmations: a risky call waits here for its user's explicit decision.

A request is bound to one conversation and the user who caused it, expires (default 10
minutes), and is decided once: every transition is a conditional UPDATE, so two clicks, two
processes or a click after expiry cannot run a tool twice or late.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from bruce.channel import ConfirmationRequest
from bruce.clock import Clock, parse_iso, utc_iso
from bruce.contracts import ToolContract
from bruce.log import Redactor
from bruce.store import Store

__all__ = ["Confirmations", "Decision", "Outcome", "PendingAction"]


class Outcome(StrEnum):
    APPROVED = "approved"  # chat approval: the caller runs it now
    QUEUED = "queued"  # local approval: the daemon runs it
    DENIED = "denied"
    NOT_FOUND = "not_found"
    EXPIRED = "expired"
    ALREADY_DECIDED = "already_decided"
    WRONG_USER = "wrong_user"
    NEEDS_STEP_UP = "needs_step_up"


@dataclass(frozen=True, slots=True)
class PendingAction:
    id: str
    conversation_id: str
    user_id: str | None
    tool_name: str
    arguments: dict[str, Any]
    status: str
    expires_at: str
    preview: Any = None  # the dry-run preview the user saw, when the tool has one

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PendingAction:
        preview = json.loads(row["preview"]) if row.get("preview") else None
        return cls(row["id"], row["conversation_id"], row["user_id"], row["tool_name"],
                   json.loads(row["arguments"]), row["status"], row["expires_at"], preview)


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    action: PendingAction | None = None


def _summary(contract: ToolContract, arguments: dict[str, Any]) -> str:
    shown = json.dumps(arguments, ensure_ascii=False)
    if len(shown) > 300:
        shown = shown[:297] + "..."
    return f"Bruce wants to run {contract.name} with {shown}"


class Confirmations:
    def __init__(self, store: Store, clock: Clock, *, ttl_s: float = 600.0, redactor: Redactor | None = None) -> None:
        self._redactor = redactor or Redactor()
        self._store = store
        self._clock = clock
        self._ttl = timedelta(seconds=ttl_s)

    async def request(
        self, contract: ToolContract, arguments: dict[str, Any], *, conversation_id: str, user_id: str | None,
        turn_id: str | None, call_id: str | None, preview: Any, step_up: bool,
    ) -> ConfirmationRequest:
        confirmation_id = secrets.token_hex(4)
        expires_at = self._clock.now() + self._ttl
        await self._store.add_confirmation(
            confirmation_id=confirmation_id, conversation_id=conversation_id, user_id=user_id, turn_id=turn_id,
            call_id=call_id, tool_name=contract.name, arguments=arguments, preview=preview, step_up=step_up,
            expires_at=utc_iso(expires_at),
        )
        return ConfirmationRequest(
            id=confirmation_id,
            tool_name=contract.name,
            risk=str(contract.risk),
            summary=_summary(contract, arguments),
            side_effects=contract.side_effects,
            preview=None if preview is None else _render_preview(preview),
            expires_at=expires_at,
            step_up=step_up,
        )

    async def decide_in_chat(self, confirmation_id: str, *, conversation_id: str, user_id: str, approve: bool) -> Decision:
        """A decision typed or tapped in a conversation. Approval moves the request straight to
        ``running``; the caller must then run it."""
        row = await self._store.confirmation(confirmation_id)
        if row is None or row["conversation_id"] != conversation_id:
            return Decision(Outcome.NOT_FOUND)
        action = PendingAction.from_row(row)
        if row["user_id"] is not None and row["user_id"] != user_id:
            return Decision(Outcome.WRONG_USER, action)
        if approve and row["step_up"]:
            live = row["status"] == "pending" and row["expires_at"] > utc_iso(self._clock.now())
            return Decision(Outcome.NEEDS_STEP_UP, action) if live else await self._why_not(action)
        target = "running" if approve else "denied"
        moved = await self._store.move_confirmation(
            confirmation_id, from_status="pending", to_status=target, via="chat", unexpired_at=utc_iso(self._clock.now()),
        )
        if not moved:
            return await self._why_not(action)
        return Decision(Outcome.APPROVED if approve else Outcome.DENIED, action)

    async def decide_locally(self, confirmation_id: str, *, approve: bool) -> Decision:
        """The owner's decision from the machine itself (``bruce approve``): the step-up path.
        An approval is queued for the daemon, which runs it and tells the user."""
        row = await self._store.confirmation(confirmation_id)
        if row is None:
            return Decision(Outcome.NOT_FOUND)
        action = PendingAction.from_row(row)
        moved = await self._store.move_confirmation(
            confirmation_id, from_status="pending", to_status="approved" if approve else "denied", via="cli",
            unexpired_at=utc_iso(self._clock.now()),
        )
        if not moved:
            return await self._why_not(action)
        return Decision(Outcome.QUEUED if approve else Outcome.DENIED, action)

    async def claim_queued(self, channels: Collection[str]) -> list[PendingAction]:
        """Take locally approved requests of conversations on ``channels`` for running (each is
        returned to one caller only; another process serving other channels leaves them be).
        Approvals older than the request's lifetime are expired instead of run late."""
        claimed = []
        now = self._clock.now()
        for row in await self._store.confirmations_with_status("approved"):
            if not _on(row, channels):
                continue
            decided = parse_iso(row["decided_at"]) if row["decided_at"] else now
            if now - decided > self._ttl:
                await self._store.move_confirmation(row["id"], from_status="approved", to_status="expired")
                continue
            if await self._store.move_confirmation(row["id"], from_status="approved", to_status="running"):
                claimed.append(PendingAction.from_row({**row, "status": "running"}))
        return claimed

    async def interrupted(self, channels: Collection[str]) -> list[PendingAction]:
        """Requests of conversations on ``channels`` that were running when the process serving
        them died: we cannot know if they finished."""
        rows = [r for r in await self._store.confirmations_with_status("running") if _on(r, channels)]
        for row in rows:
            await self._store.finish_confirmation(row["id"], status="failed",
                                                  result={"error": "interrupted by a restart"})
        return [PendingAction.from_row(r) for r in rows]

    async def finish(self, action: PendingAction, *, ok: bool, result: Any, report: str | None = None,
                     turn_id: str | None = None, inbound_id: int | None = None) -> int | None:
        """Record the outcome (and store the user's report of it, atomically); returns the
        report's message id."""
        return await self._store.finish_confirmation(
            action.id, status="executed" if ok else "failed", result=self._redactor.value(result), report=report,
            conversation_id=action.conversation_id, turn_id=turn_id, inbound_id=inbound_id,
        )

    async def _why_not(self, action: PendingAction) -> Decision:
        row = await self._store.confirmation(action.id)
        assert row is not None
        if row["status"] == "pending" and row["expires_at"] <= utc_iso(self._clock.now()):
            await self._store.move_confirmation(action.id, from_status="pending", to_status="expired")
            return Decision(Outcome.EXPIRED, action)
        if row["status"] == "expired":
            return Decision(Outcome.EXPIRED, action)
        return Decision(Outcome.ALREADY_DECIDED, PendingAction.from_row(row))


def _on(row: dict[str, Any], channels: Collection[str]) -> bool:
    return str(row["conversation_id"]).split(":", 1)[0] in channels


def _render_preview(preview: Any) -> str:
    if isinstance(preview, str):
        return preview
    if isinstance(preview, dict) and isinstance(preview.get("diff"), str):
        rest = {k: v for k, v in preview.items() if k != "diff"}
        return json.dumps(rest, ensure_ascii=False) + "\n" + preview["diff"]
    return json.dumps(preview, ensure_ascii=False, indent=2)
