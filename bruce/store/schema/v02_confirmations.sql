
CREATE TABLE pending_confirmations (
    id                  TEXT PRIMARY KEY,            -- short code the user types or taps
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    user_id             TEXT,                        -- who asked; only they may decide
    turn_id             TEXT REFERENCES turns(id),
    call_id             TEXT,
    tool_name           TEXT NOT NULL,
    arguments           TEXT NOT NULL,               -- validated arguments, JSON
    preview             TEXT,                        -- dry-run preview, JSON
    step_up             INTEGER NOT NULL DEFAULT 0,  -- 1: only a local approval counts
    -- pending -> running (approved in chat) | approved (approved locally, the daemon picks it up)
    --         | denied | expired;  approved -> running;  running -> executed | failed
    status              TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'running', 'denied',
                            'expired', 'executed', 'failed')),
    created_at          TEXT NOT NULL,
    expires_at          TEXT NOT NULL,
    decided_at          TEXT,
    decided_via         TEXT CHECK (decided_via IN ('chat', 'cli', 'admin')),
    result              TEXT                         -- JSON outcome once executed
);
CREATE INDEX confirmations_by_status ON pending_confirmations (status, expires_at);

CREATE TABLE idempotency_keys (
    key                 TEXT PRIMARY KEY,
    tool_name           TEXT NOT NULL,
    output              TEXT NOT NULL,               -- the first result, JSON, replayed on repeats
    created_at          TEXT NOT NULL,
    expires_at          TEXT NOT NULL
);

CREATE TABLE artifacts (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT REFERENCES conversations(id),
    turn_id             TEXT,
    title               TEXT,
    filename            TEXT NOT NULL,
    format              TEXT NOT NULL CHECK (format IN ('html', 'markdown', 'text')),
    path                TEXT NOT NULL,               -- relative to the artifacts folder
    size_bytes          INTEGER NOT NULL,
    sha256              TEXT NOT NULL,
    created_at          TEXT NOT NULL
);
CREATE INDEX artifacts_by_conversation ON artifacts (conversation_id, created_at);
