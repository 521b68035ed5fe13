"""What ``MessageStore``, ``OutboundStore`` and ``AuditStore`` share of the ``messages`` table: the
columns a ``StoredMessage`` is read from, closing the inbound message a reply answers (inside the
reply's own ``Database.write``), which messages the model sees and where the session starts."""

from __future__ import annotations

import sqlite3

from bruce.values import MessageStatus

__all__ = ["MESSAGE_COLUMNS", "close_inbound", "in_conversation", "session_start"]

MESSAGE_COLUMNS = (
    "id, conversation_id, direction, role, kind, sender_id, text, platform_message_id, status, created_at,"
    " turn_id, parts_sent, send_attempts, send_error, retry_at, payload_kind, payload, attachments"
)


def close_inbound(
    db: sqlite3.Connection, *, now: str, inbound_id: int, status: MessageStatus, turn_id: str | None,
) -> None:
    db.execute(
        "UPDATE messages SET status = ?, updated_at = ?, turn_id = COALESCE(?, turn_id) WHERE id = ?",
        (str(status), now, turn_id, inbound_id),
    )


def in_conversation(alias: str) -> str:
    """What the model sees of a conversation: notices, approval requests, files, expired messages
    and replies given up on stay out; a user's message stays even if its turn failed. ``alias``:
    the table's, with its dot (``"m."``), or ''."""
    a = alias
    return (f"{a}kind = 'chat' AND {a}payload_kind = 'text' AND {a}status NOT IN ('expired', 'rate_limited')"
            f" AND NOT ({a}direction = 'out' AND {a}status = 'failed')")


def session_start(db: sqlite3.Connection, conversation_id: str) -> int:
    """The id of the message the conversation's current session starts at (``/new``); 0: none yet."""
    row = db.execute("SELECT session_start_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    return int(row["session_start_id"]) if row else 0
