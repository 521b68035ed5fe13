
-- a turn is one exchange: it counts model calls (llm_calls), may be left 'interrupted' by a
-- stopped process, names the proactive job that started it, and counts unbacked action claims
CREATE TABLE turns_v3 (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    inbound_message_id  INTEGER REFERENCES messages(id),
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation', 'summary')),
    status              TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'interrupted')),
    llm_calls           INTEGER NOT NULL DEFAULT 0,
    tool_calls          INTEGER NOT NULL DEFAULT 0,
    hit_ceiling         INTEGER NOT NULL DEFAULT 0,
    stopped_repeat      INTEGER NOT NULL DEFAULT 0,
    unbacked_claims     INTEGER NOT NULL DEFAULT 0,
    job_id              TEXT,
    error               TEXT,
    started_at          TEXT NOT NULL,
    finished_at         TEXT
);
INSERT INTO turns_v3 (id, conversation_id, inbound_message_id, source, status, llm_calls, tool_calls, hit_ceiling,
    stopped_repeat, error, started_at, finished_at)
    SELECT id, conversation_id, inbound_message_id, source, status, llm_turns, tool_calls, hit_ceiling,
    stopped_repeat, error, started_at, finished_at FROM turns;
DROP TABLE turns;
ALTER TABLE turns_v3 RENAME TO turns;
CREATE INDEX turns_by_conversation ON turns (conversation_id, started_at);
CREATE INDEX turns_open ON turns (status) WHERE status = 'running';

-- the outbox: how far a reply got, and why it is still unsent
ALTER TABLE messages ADD COLUMN parts_sent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN send_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN send_error TEXT;
ALTER TABLE messages ADD COLUMN retry_at TEXT;  -- the platform asked us to wait until then
-- replies an older Bruce failed to send are given one more chance if recent, else stay failed
UPDATE messages SET status = 'unsent', send_error = 'failed before an upgrade'
    WHERE direction = 'out' AND status = 'failed' AND created_at > strftime('%Y-%m-%dT%H:%M:%f', 'now', '-1 day');
CREATE INDEX messages_unsent ON messages (conversation_id, id) WHERE direction = 'out' AND status IN ('pending', 'unsent');

-- a proactive turn skips tools that need approval: status 'skipped'
CREATE TABLE tool_executions_v3 (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id             TEXT REFERENCES turns(id),
    conversation_id     TEXT REFERENCES conversations(id),
    call_id             TEXT,
    tool_name           TEXT NOT NULL,
    risk                TEXT,
    input               TEXT NOT NULL,
    output              TEXT,
    status              TEXT NOT NULL CHECK (status IN ('ok', 'error', 'timeout', 'invalid_args',
                            'unknown_tool', 'denied', 'awaiting_confirmation', 'skipped')),
    error               TEXT,
    latency_ms          REAL NOT NULL,
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation')),
    idempotency_key     TEXT,
    created_at          TEXT NOT NULL
);
INSERT INTO tool_executions_v3 SELECT id, turn_id, conversation_id, call_id, tool_name, risk, input, output,
    status, error, latency_ms, source, idempotency_key, created_at FROM tool_executions;
DROP TABLE tool_executions;
ALTER TABLE tool_executions_v3 RENAME TO tool_executions;
CREATE INDEX tool_executions_by_turn ON tool_executions (turn_id);
CREATE INDEX tool_executions_by_time ON tool_executions (created_at);
