-- a tool with side effects is recorded as started before its handler runs, in its own committed
-- write (docs/operations.md, "Side effects and crashes"). The row is finished, in the same
-- transaction as its tool_executions row, when the handler returns; one still 'started' after a
-- crash is an outcome nobody knows. Recovery settles it: 'interrupted' (the owner was told it may
-- or may not have happened, or an idempotent call was run again to replay its key).
CREATE TABLE tool_starts (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id             TEXT REFERENCES turns(id),
    conversation_id     TEXT,                   -- NULL for an MCP client's call
    call_id             TEXT,
    tool_name           TEXT NOT NULL,
    summary             TEXT NOT NULL,          -- a short, redacted view of the arguments, for the owner
    source              TEXT NOT NULL,
    idempotent          INTEGER NOT NULL CHECK (idempotent IN (0, 1)),
    idempotency_key     TEXT,
    status              TEXT NOT NULL DEFAULT 'started' CHECK (status IN ('started', 'finished', 'interrupted')),
    execution_id        INTEGER REFERENCES tool_executions(id),  -- its audit row, once finished
    started_at          TEXT NOT NULL,
    settled_at          TEXT
);
CREATE INDEX tool_starts_by_turn ON tool_starts (turn_id);
CREATE INDEX tool_starts_open ON tool_starts (status) WHERE status = 'started';
