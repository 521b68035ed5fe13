"""``media``: what the core made of the attachments of users' messages (``bruce.media``): the text
the model and history see, and the attachments' JSON with what was kept, on the ``messages`` row."""

from __future__ import annotations

from bruce.store.database import Database

__all__ = ["MediaStore"]


class MediaStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def set_media(self, message_id: int, *, text: str, attachments: str) -> None:
        """A pending inbound message's text for the model and history (a transcript, a document's
        text, a photo's placeholder) and its attachments' JSON with what was kept. Written once,
        before the model sees the message."""
        await self._db.execute(
            "UPDATE messages SET text = ?, attachments = ?, updated_at = ? WHERE id = ? AND direction = 'in'",
            (text, attachments, self._db.now(), message_id),
        )

    async def attachments_of(self, message_id: int) -> str | None:
        """An inbound message's attachments' JSON as stored (None: no such message, or text only)."""
        row = await self._db.row("SELECT attachments FROM messages WHERE id = ? AND direction = 'in'", (message_id,))
        return row["attachments"] if row else None
