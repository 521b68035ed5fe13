"""What ``MessageStore`` and ``OutboundStore`` share of the ``messages`` table: the columns a
``StoredMessage`` is read from, and closing the inbound message a reply answers (inside the
reply's own ``Database.write``)."""

from __future__ import annotations

import sqlite3

from bruce.values import MessageStatus

__all__ = ["MESSAGE_COLUMNS", "close_inbound"]

MESSAGE_COLUMNS = (
    "id, conversation_id, direction, role, kind, sender_id, text, platform_message_id, status, created_at,"
    " turn_id, parts_sent, send_attempts, send_error, retry_at, payload_kind, payload"
)


def close_inbound(
    db: sqlite3.Connection, *, now: str, inbound_id: int, status: MessageStatus, turn_id: str | None,
) -> None:
    db.execute(
        "UPDATE messages SET status = ?, updated_at = ?, turn_id = COALESCE(?, turn_id) WHERE id = ?",
        (str(status), now, turn_id, inbound_id),
    )
