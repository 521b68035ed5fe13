"""``pairing_requests`` and ``paired_users``: strangers asking for access with a short code, and
the senders the owner let in. A request is opened, found again or refused in one transaction,
so the cap on pending requests holds however many strangers write at once; a decision is a
conditional move out of ``pending``, so a code is used once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import aiosqlite

from bruce.records import PairingRequestRecord
from bruce.store.database import Database
from bruce.store.rows import from_row
from bruce.values import DecisionOutcome, PairingOutcome, PairingState

__all__ = ["PairingStore"]

_CODE_TRIES = 8  # a fresh code that collides with a stored one is drawn again (32**8 codes: never, in practice)


class PairingStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def ask(
        self, *, channel: str, sender_id: str, chat_id: str, display_name: str | None, expires_at: str,
        max_pending: int, new_code: Callable[[], str],
    ) -> tuple[PairingOutcome, str | None]:
        """An unknown sender wrote: their pending code if they have one (no new row), else a new
        code, unless their request was denied within its hour or ``max_pending`` unexpired
        requests already wait on this channel (then nothing is stored)."""
        now = self._db.now()
        async with self._db.transaction() as db:
            await db.execute("UPDATE pairing_requests SET status = 'expired' WHERE channel = ? AND status = 'pending'"
                             " AND expires_at <= ?", (channel, now))
            mine = await _one(db, "SELECT code, status FROM pairing_requests WHERE channel = ? AND sender_id = ?"
                                  " AND status IN ('pending', 'denied') AND expires_at > ?"
                                  " ORDER BY created_at DESC LIMIT 1", (channel, sender_id, now))
            if mine is not None:
                if mine["status"] == PairingState.PENDING:
                    return PairingOutcome.STILL_PENDING, str(mine["code"])
                return PairingOutcome.DENIED, None
            waiting = await _one(db, "SELECT COUNT(*) AS n FROM pairing_requests WHERE channel = ?"
                                     " AND status = 'pending'", (channel,))
            if waiting is not None and int(waiting["n"]) >= max_pending:
                return PairingOutcome.FULL, None
            for _ in range(_CODE_TRIES):
                code = new_code()
                if await _one(db, "SELECT 1 FROM pairing_requests WHERE code = ?", (code,)) is None:
                    break
            else:
                raise AssertionError("no unused pairing code")
            await db.execute(
                "INSERT INTO pairing_requests (code, channel, sender_id, chat_id, display_name, status, created_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                (code, channel, sender_id, chat_id, display_name, now, expires_at))
        return PairingOutcome.ISSUED, code

    async def pending(self) -> list[PairingRequestRecord]:
        """Requests still waiting for the owner (not expired), oldest first."""
        rows = await self._db.rows("SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > ?"
                                   " ORDER BY created_at, code", (self._db.now(),))
        return [from_row(PairingRequestRecord, r) for r in rows]

    async def decide(self, code: str, *, approve: bool) -> tuple[DecisionOutcome, PairingRequestRecord | None]:
        """Approve (the sender becomes a paired user) or deny a pending, unexpired request."""
        now = self._db.now()
        async with self._db.transaction() as db:
            row = await _one(db, "SELECT * FROM pairing_requests WHERE code = ?", (code,))
            if row is None:
                return DecisionOutcome.NOT_FOUND, None
            request = from_row(PairingRequestRecord, row)
            if request.status is PairingState.PENDING and request.expires_at <= now:
                await db.execute("UPDATE pairing_requests SET status = 'expired' WHERE code = ?", (code,))
                return DecisionOutcome.EXPIRED, request
            if request.status is PairingState.EXPIRED:
                return DecisionOutcome.EXPIRED, request
            if request.status is not PairingState.PENDING:
                return DecisionOutcome.ALREADY_DECIDED, request
            status = PairingState.APPROVED if approve else PairingState.DENIED
            await db.execute("UPDATE pairing_requests SET status = ?, decided_at = ? WHERE code = ?",
                             (str(status), now, code))
            if approve:
                await db.execute("INSERT INTO paired_users (channel, user_id, paired_at, via) VALUES (?, ?, ?, ?)"
                                 " ON CONFLICT (channel, user_id) DO NOTHING",
                                 (request.channel, request.sender_id, now, code))
        return (DecisionOutcome.APPROVED if approve else DecisionOutcome.DENIED), request

    async def revoke(self, channel: str, user_id: str) -> bool:
        """Forget a paired user; False if they were not paired."""
        return (await self._db.execute("DELETE FROM paired_users WHERE channel = ? AND user_id = ?",
                                       (channel, user_id)))[1] == 1

    async def is_paired(self, channel: str, user_id: str) -> bool:
        return await self._db.row("SELECT 1 FROM paired_users WHERE channel = ? AND user_id = ?",
                                  (channel, user_id)) is not None

    async def paired(self) -> dict[str, frozenset[str]]:
        """Every paired user, by channel."""
        found: dict[str, set[str]] = {}
        for row in await self._db.rows("SELECT channel, user_id FROM paired_users"):
            found.setdefault(str(row["channel"]), set()).add(str(row["user_id"]))
        return {channel: frozenset(users) for channel, users in found.items()}


async def _one(db: aiosqlite.Connection, sql: str, params: tuple[object, ...]) -> sqlite3.Row | None:
    async with db.execute(sql, params) as cursor:
        row: sqlite3.Row | None = await cursor.fetchone()
        return row
