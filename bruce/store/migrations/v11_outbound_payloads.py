"""Schema version 11: One outbound door: approval requests and files are outbound rows with a payload."""

from __future__ import annotations

__all__ = ["SCRIPT"]

SCRIPT = """
-- one outbound door: an approval request (with what its buttons need) and a file are outbound rows
-- too, sent by the outbox in the conversation's order with the replies; ``text`` describes them
ALTER TABLE messages ADD COLUMN payload_kind TEXT NOT NULL DEFAULT 'text'
    CHECK (payload_kind IN ('text', 'confirmation', 'file'));
ALTER TABLE messages ADD COLUMN payload TEXT;   -- JSON: the confirmation request, or the file's path and caption
"""
