
-- one outbound door: an approval request (with what its buttons need) and a file are outbound rows
-- too, sent by the outbox in the conversation's order with the replies; ``text`` describes them
ALTER TABLE messages ADD COLUMN payload_kind TEXT NOT NULL DEFAULT 'text'
    CHECK (payload_kind IN ('text', 'confirmation', 'file'));
ALTER TABLE messages ADD COLUMN payload TEXT;   -- JSON: the confirmation request, or the file's path and caption
