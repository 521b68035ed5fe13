
CREATE TABLE conversations (
    id              TEXT PRIMARY KEY,            -- '<channel>:<chat id>'
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    created_at      TEXT NOT NULL
);

CREATE TABLE messages (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    direction           TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    kind                TEXT NOT NULL DEFAULT 'chat' CHECK (kind IN ('chat', 'notice')),
    sender_id           TEXT,
    text                TEXT NOT NULL,
    platform_message_id TEXT,
    turn_id             TEXT,
    -- in:  pending -> done | failed | expired     out: pending -> sent | failed
    status              TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, id);
CREATE INDEX messages_by_status ON messages (direction, status);
CREATE UNIQUE INDEX messages_platform_id
    ON messages (conversation_id, platform_message_id)
    WHERE direction = 'in' AND platform_message_id IS NOT NULL;

CREATE TABLE session_summaries (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    summary             TEXT NOT NULL,
    up_to_message_id    INTEGER NOT NULL,       -- every message with id <= this is folded in
    created_at          TEXT NOT NULL
);
CREATE INDEX summaries_by_conversation ON session_summaries (conversation_id, id);

CREATE TABLE turns (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    inbound_message_id  INTEGER REFERENCES messages(id),
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation', 'summary')),
    status              TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed')),
    llm_turns           INTEGER NOT NULL DEFAULT 0,
    tool_calls          INTEGER NOT NULL DEFAULT 0,
    hit_ceiling         INTEGER NOT NULL DEFAULT 0,
    stopped_repeat      INTEGER NOT NULL DEFAULT 0,
    error               TEXT,
    started_at          TEXT NOT NULL,
    finished_at         TEXT
);
CREATE INDEX turns_by_conversation ON turns (conversation_id, started_at);

CREATE TABLE llm_calls (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id             TEXT NOT NULL REFERENCES turns(id),
    seq                 INTEGER NOT NULL,
    model               TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('ok', 'error', 'timeout')),
    latency_ms          REAL NOT NULL,
    prompt_tokens       INTEGER,
    completion_tokens   INTEGER,
    cost_usd            REAL,
    error               TEXT,
    created_at          TEXT NOT NULL
);
CREATE INDEX llm_calls_by_turn ON llm_calls (turn_id, seq);

CREATE TABLE tool_executions (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id             TEXT REFERENCES turns(id),
    conversation_id     TEXT REFERENCES conversations(id),
    call_id             TEXT,
    tool_name           TEXT NOT NULL,
    risk                TEXT,
    input               TEXT NOT NULL,          -- JSON, secrets redacted
    output              TEXT,                   -- JSON, truncated to tools.audit_output_max_chars
    status              TEXT NOT NULL CHECK (status IN ('ok', 'error', 'timeout', 'invalid_args',
                            'unknown_tool', 'denied', 'awaiting_confirmation')),
    error               TEXT,
    latency_ms          REAL NOT NULL,
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation')),
    idempotency_key     TEXT,
    created_at          TEXT NOT NULL
);
CREATE INDEX tool_executions_by_turn ON tool_executions (turn_id);
CREATE INDEX tool_executions_by_time ON tool_executions (created_at);
