
-- the read-tool cache: a call answered from memory is audited with status 'cached'
CREATE TABLE tool_executions_v7 (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id             TEXT REFERENCES turns(id),
    conversation_id     TEXT REFERENCES conversations(id),
    call_id             TEXT,
    tool_name           TEXT NOT NULL,
    risk                TEXT,
    input               TEXT NOT NULL,
    output              TEXT,
    status              TEXT NOT NULL CHECK (status IN ('ok', 'error', 'timeout', 'invalid_args',
                            'unknown_tool', 'denied', 'awaiting_confirmation', 'skipped', 'cached')),
    error               TEXT,
    latency_ms          REAL NOT NULL,
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation')),
    idempotency_key     TEXT,
    created_at          TEXT NOT NULL
);
INSERT INTO tool_executions_v7 SELECT id, turn_id, conversation_id, call_id, tool_name, risk, input, output,
    status, error, latency_ms, source, idempotency_key, created_at FROM tool_executions;
DROP TABLE tool_executions;
ALTER TABLE tool_executions_v7 RENAME TO tool_executions;
CREATE INDEX tool_executions_by_turn ON tool_executions (turn_id);
CREATE INDEX tool_executions_by_time ON tool_executions (created_at);

-- an agent-mode run skipped because the day's LLM budget is spent: status 'over_budget'
CREATE TABLE job_runs_v7 (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id              TEXT NOT NULL REFERENCES proactive_jobs(id),
    scheduled_for       TEXT NOT NULL,
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    status              TEXT NOT NULL CHECK (status IN ('running', 'delivered', 'unsent', 'quiet', 'failed',
                                                         'interrupted', 'missed', 'over_budget')),
    turn_id             TEXT,
    message_id          INTEGER,
    delivered_text      TEXT,
    error               TEXT,
    lateness_ms         INTEGER,
    UNIQUE (job_id, scheduled_for)
);
INSERT INTO job_runs_v7 SELECT * FROM job_runs;
DROP TABLE job_runs;
ALTER TABLE job_runs_v7 RENAME TO job_runs;
