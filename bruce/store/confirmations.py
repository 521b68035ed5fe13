"""``pending_confirmations``: every state change is a conditional UPDATE, so a decision is
single use across clicks, coroutines and processes."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from bruce.records import ConfirmationRecord
from bruce.store.database import Database
from bruce.store.outbound import insert_outbound
from bruce.store.rows import from_row, to_json
from bruce.values import ConfirmationState, DecidedVia, MessageKind

__all__ = ["ConfirmationStore"]


class ConfirmationStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(
        self, *, confirmation_id: str, conversation_id: str, user_id: str | None, turn_id: str | None,
        call_id: str | None, tool_name: str, arguments: Any, preview: Any, step_up: bool, expires_at: str,
        untrusted: bool = False,
    ) -> None:
        await self._db.execute(
            "INSERT INTO pending_confirmations (id, conversation_id, user_id, turn_id, call_id, tool_name,"
            " arguments, preview, step_up, status, created_at, expires_at, untrusted)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (confirmation_id, conversation_id, user_id, turn_id, call_id, tool_name, to_json(arguments),
             None if preview is None else json.dumps(preview, ensure_ascii=False, default=str), int(step_up), self._db.now(), expires_at, int(untrusted)),
        )

    async def get(self, confirmation_id: str) -> ConfirmationRecord | None:
        row = await self._db.row("SELECT * FROM pending_confirmations WHERE id = ?", (confirmation_id,))
        return from_row(ConfirmationRecord, row) if row else None

    async def move(
        self, confirmation_id: str, *, from_status: ConfirmationState, to_status: ConfirmationState,
        via: DecidedVia | None = None, unexpired_at: str | None = None,
    ) -> bool:
        """Atomically move a confirmation between states; False if it was not in ``from_status``
        (or, with ``unexpired_at``, had expired by then). This is what makes a decision single use."""
        sql = (
            "UPDATE pending_confirmations SET status = ?, decided_at = COALESCE(decided_at, ?),"
            " decided_via = COALESCE(?, decided_via) WHERE id = ? AND status = ?"
        )
        params: list[Any] = [str(to_status), self._db.now(), None if via is None else str(via), confirmation_id,
                             str(from_status)]
        if unexpired_at is not None:
            sql += " AND expires_at > ?"
            params.append(unexpired_at)
        return (await self._db.execute(sql, params))[1] == 1

    async def finish(
        self, confirmation_id: str, *, status: ConfirmationState, result: Any, report: str | None = None,
        conversation_id: str | None = None, turn_id: str | None = None, inbound_id: int | None = None,
    ) -> int | None:
        """Record what an approved action did. With ``report``, the user's report of it is stored
        (pending, to be sent) in the same transaction, and the decision message is closed: once
        the action is recorded, its report can no longer be lost to a crash."""
        now = self._db.now()

        def work(db: sqlite3.Connection) -> int | None:
            db.execute("UPDATE pending_confirmations SET status = ?, result = ? WHERE id = ?",
                       (str(status), to_json(result), confirmation_id))
            if report is None or conversation_id is None:
                return None
            report_id = insert_outbound(db, now=now, conversation_id=conversation_id, text=report, turn_id=turn_id,
                                        kind=MessageKind.CHAT)
            if inbound_id is not None:
                db.execute("UPDATE messages SET status = 'done', updated_at = ?, turn_id = ? WHERE id = ?",
                           (now, turn_id, inbound_id))
            return report_id

        return await self._db.write(work)

    async def with_status(self, status: ConfirmationState) -> list[ConfirmationRecord]:
        rows = await self._db.rows(
            "SELECT * FROM pending_confirmations WHERE status = ? ORDER BY created_at", (str(status),))
        return [from_row(ConfirmationRecord, r) for r in rows]
