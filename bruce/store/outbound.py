"""The outbox's rows: outbound messages (replies, approval requests, files) stored pending, the
ones not (completely) sent yet, and how far each got (pieces sent, attempts, the last error, a
platform's ``retry_at``). ``bruce.runtime.outbox`` is their one sender."""

from __future__ import annotations

import sqlite3

from bruce.records import StoredMessage
from bruce.store.database import Database
from bruce.store.message_rows import MESSAGE_COLUMNS, close_inbound
from bruce.store.rows import from_row
from bruce.values import MessageKind, MessageStatus, PayloadKind

__all__ = ["OutboundStore", "insert_outbound"]

_UNSENT = "direction = 'out' AND status IN ('pending', 'unsent')"
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))


def insert_outbound(
    db: sqlite3.Connection, *, now: str, conversation_id: str, text: str, turn_id: str | None, kind: MessageKind,
    payload_kind: PayloadKind = PayloadKind.TEXT, payload: str | None = None,
) -> int:
    """The one way an outbound row (a reply, an approval request, a file) is written: pending,
    for the outbox to send (inside ``Database.write``)."""
    cur = db.execute(
        "INSERT INTO messages (conversation_id, direction, role, kind, text, turn_id, status,"
        " created_at, updated_at, payload_kind, payload) VALUES (?, 'out', 'assistant', ?, ?, ?, 'pending', ?, ?, ?, ?)",
        (conversation_id, str(kind), text, turn_id, now, now, str(payload_kind), payload),
    )
    return int(cur.lastrowid or 0)


class OutboundStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(
        self, conversation_id: str, text: str, *, turn_id: str | None, kind: MessageKind = MessageKind.CHAT,
        inbound_id: int | None = None, inbound_status: MessageStatus = MessageStatus.DONE,
        payload_kind: PayloadKind = PayloadKind.TEXT, payload: str | None = None,
    ) -> int:
        """Store a reply (or, with ``payload_kind``, an approval request or a file) as pending, to
        be sent. With ``inbound_id``, the message it answers is closed in the same transaction: a
        crash can neither lose the reply nor answer twice."""
        now = self._db.now()

        def work(db: sqlite3.Connection) -> int:
            reply_id = insert_outbound(db, now=now, conversation_id=conversation_id, text=text, turn_id=turn_id,
                                       kind=kind, payload_kind=payload_kind, payload=payload)
            if inbound_id is not None:
                close_inbound(db, now=now, inbound_id=inbound_id, status=inbound_status, turn_id=turn_id)
            return reply_id

        return await self._db.write(work)

    async def unsent(self, conversation_id: str) -> list[StoredMessage]:
        """Outbound rows of this conversation (replies, approval requests, files) not (completely)
        sent yet, oldest first."""
        rows = await self._db.rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND {_UNSENT} ORDER BY id",
            (conversation_id,),
        )
        return [from_row(StoredMessage, r) for r in rows]

    async def pending_confirmations(self, conversation_id: str, *, now: str) -> list[StoredMessage]:
        """The approval requests of this conversation still waiting for a decision (pending, not
        expired at ``now``), oldest first: what a page opened again shows as cards."""
        rows = await self._db.rows(
            f"SELECT {_M_COLUMNS} FROM pending_confirmations c JOIN messages m ON m.conversation_id = c.conversation_id"
            " AND m.direction = 'out' AND m.payload_kind = 'confirmation' AND json_extract(m.payload, '$.id') = c.id"
            " WHERE c.conversation_id = ? AND c.status = 'pending' AND c.expires_at > ? ORDER BY m.id",
            (conversation_id, now),
        )
        return [from_row(StoredMessage, r) for r in rows]

    async def conversations_with_unsent(self) -> list[str]:
        rows = await self._db.rows(f"SELECT DISTINCT conversation_id FROM messages WHERE {_UNSENT} ORDER BY id")
        return [str(r["conversation_id"]) for r in rows]

    async def record_send(
        self, message_id: int, *, status: MessageStatus, parts_sent: int, attempts: int, error: str | None,
        retry_at: str | None = None,
    ) -> None:
        await self._db.execute(
            "UPDATE messages SET status = ?, parts_sent = ?, send_attempts = send_attempts + ?, send_error = ?,"
            " retry_at = ?, updated_at = ? WHERE id = ?",
            (str(status), parts_sent, attempts, error, retry_at, self._db.now(), message_id),
        )

    async def record_part_sent(self, message_id: int, parts_sent: int) -> None:
        """A piece went out: remembered at once, so a resend never repeats it."""
        await self._db.execute("UPDATE messages SET parts_sent = ?, updated_at = ? WHERE id = ?",
                               (parts_sent, self._db.now(), message_id))
