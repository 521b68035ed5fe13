"""The database schema, as an ordered list of migrations keyed by ``PRAGMA user_version``.

Append a new entry to change the schema; never edit one that has shipped. Migrations run with
foreign keys off (so a table can be rebuilt, SQLite's way to change a CHECK) and are checked with
``PRAGMA foreign_key_check`` before they commit.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1 = """
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
"""

MIGRATIONS: list[str] = [_V1]

_V2 = """
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
"""

MIGRATIONS.append(_V2)

_V3 = """
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
"""

MIGRATIONS.append(_V3)

_V4 = """
-- pairing: a stranger asks for access with a short code; the owner approves it on the machine
CREATE TABLE pairing_requests (
    code                TEXT PRIMARY KEY,            -- 8 characters, no look-alikes (0/O, 1/I)
    channel             TEXT NOT NULL,
    sender_id           TEXT NOT NULL,
    chat_id             TEXT NOT NULL,
    display_name        TEXT,
    -- pending -> approved | denied | expired
    status              TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    created_at          TEXT NOT NULL,
    expires_at          TEXT NOT NULL,
    decided_at          TEXT
);
CREATE INDEX pairing_requests_open ON pairing_requests (channel, status, expires_at);
CREATE INDEX pairing_requests_by_sender ON pairing_requests (channel, sender_id, created_at);

CREATE TABLE paired_users (
    channel             TEXT NOT NULL,
    user_id             TEXT NOT NULL,
    paired_at           TEXT NOT NULL,
    via                 TEXT,                        -- the pairing code that was approved
    PRIMARY KEY (channel, user_id)
);
"""

MIGRATIONS.append(_V4)

_V5 = """
-- /new starts a fresh session: the model's history holds only messages after this id (the /new
-- message itself); what came before is folded into the summary. 0: the session began with the chat
ALTER TABLE conversations ADD COLUMN session_start_id INTEGER NOT NULL DEFAULT 0;
"""

MIGRATIONS.append(_V5)

_V6 = """
-- proactive jobs: the one record of what is scheduled (APScheduler is re-loaded from it at start-up)
CREATE TABLE proactive_jobs (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    execution_mode      TEXT NOT NULL CHECK (execution_mode IN ('message', 'agent')),
    content             TEXT NOT NULL,
    -- at: a UTC instant; cron: a 5-field expression; every: seconds
    schedule_kind       TEXT NOT NULL CHECK (schedule_kind IN ('at', 'cron', 'every')),
    schedule_value      TEXT NOT NULL,
    timezone            TEXT NOT NULL,
    notify              TEXT NOT NULL DEFAULT 'always' CHECK (notify IN ('always', 'if_actionable')),
    description         TEXT NOT NULL,
    -- active -> done | missed | cancelled; active <-> paused
    status              TEXT NOT NULL CHECK (status IN ('active', 'paused', 'done', 'missed', 'cancelled')),
    next_run_at         TEXT,
    anchor_at           TEXT NOT NULL,
    failures            INTEGER NOT NULL DEFAULT 0,
    flagged             TEXT,
    dedup_key           TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX proactive_jobs_by_conversation ON proactive_jobs (conversation_id, created_at);
CREATE INDEX proactive_jobs_by_dedup ON proactive_jobs (dedup_key, created_at);

-- one row per firing; the unique (job_id, scheduled_for) makes a second delivery impossible
CREATE TABLE job_runs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id              TEXT NOT NULL REFERENCES proactive_jobs(id),
    scheduled_for       TEXT NOT NULL,
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    -- running -> delivered | unsent | quiet | failed | interrupted; missed when never fired
    status              TEXT NOT NULL CHECK (status IN ('running', 'delivered', 'unsent', 'quiet', 'failed',
                                                         'interrupted', 'missed')),
    turn_id             TEXT,
    message_id          INTEGER,
    delivered_text      TEXT,
    error               TEXT,
    lateness_ms         INTEGER,
    UNIQUE (job_id, scheduled_for)
);
"""

MIGRATIONS.append(_V6)

_V7 = """
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
"""

MIGRATIONS.append(_V7)

_V8 = """
-- the daily LLM budget: spending is summed from llm_calls by time; the owner may raise one day's
-- budget once (bruce budget allow), and each warning is given once a day
CREATE INDEX llm_calls_by_time ON llm_calls (created_at);
CREATE TABLE budget_allowances (
    day                 TEXT PRIMARY KEY,   -- the owner's local day, YYYY-MM-DD
    extra_usd           REAL NOT NULL DEFAULT 0,
    extra_tokens        INTEGER NOT NULL DEFAULT 0,
    created_at          TEXT NOT NULL
);
CREATE TABLE budget_notices (
    day                 TEXT NOT NULL,
    level               TEXT NOT NULL,      -- 'warning' (80 %), 'over' (100 %)
    conversation_id     TEXT,
    created_at          TEXT NOT NULL,
    PRIMARY KEY (day, level)
);
"""

MIGRATIONS.append(_V8)

_V9 = """
-- MCP: a remote tool's call records the server it went to (``server``; NULL for a built-in
-- tool), and a call made by an MCP client through ``bruce mcp serve`` has source 'mcp'
CREATE TABLE tool_executions_v9 (
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
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation', 'mcp')),
    idempotency_key     TEXT,
    created_at          TEXT NOT NULL,
    server              TEXT                    -- the MCP server of a remote tool
);
INSERT INTO tool_executions_v9 (id, turn_id, conversation_id, call_id, tool_name, risk, input, output, status,
    error, latency_ms, source, idempotency_key, created_at)
    SELECT id, turn_id, conversation_id, call_id, tool_name, risk, input, output,
    status, error, latency_ms, source, idempotency_key, created_at FROM tool_executions;
DROP TABLE tool_executions;
ALTER TABLE tool_executions_v9 RENAME TO tool_executions;
CREATE INDEX tool_executions_by_turn ON tool_executions (turn_id);
CREATE INDEX tool_executions_by_time ON tool_executions (created_at);
"""

MIGRATIONS.append(_V9)

_V10 = """
-- long-term memory (bruce/memory/long_term.py): facts about the owner, and narrative summaries of them;
-- kept apart from the conversation's history and session summaries
CREATE TABLE memory_summaries (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    content             TEXT NOT NULL,
    period_start        TEXT NOT NULL,               -- the oldest fact it covers (or the previous summary's start)
    period_end          TEXT NOT NULL,
    turn_id             TEXT,                        -- the turn (source 'memory') whose model call wrote it
    created_at          TEXT NOT NULL
);
CREATE TABLE memory_facts (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    type                TEXT NOT NULL CHECK (type IN ('preference', 'fact', 'project', 'progress', 'insight')),
    content             TEXT NOT NULL,
    normalized          TEXT NOT NULL,               -- for "the same fact again": lower case, words only
    confidence          REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    status              TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    origin              TEXT NOT NULL CHECK (origin IN ('extraction', 'tool', 'owner')),
    conversation_id     TEXT,
    source_turn_id      TEXT,                        -- the chat turn it was learnt from
    created_at          TEXT NOT NULL,
    last_seen_at        TEXT NOT NULL,               -- refreshed when it comes up again
    summarized_in       INTEGER REFERENCES memory_summaries(id)
);
CREATE UNIQUE INDEX memory_facts_one_active ON memory_facts (type, normalized) WHERE status = 'active';
CREATE INDEX memory_facts_recent ON memory_facts (status, last_seen_at);
CREATE VIRTUAL TABLE memory_fts USING fts5(content, kind UNINDEXED, ref UNINDEXED, tokenize = 'unicode61');

-- a memory extraction or summary call is a turn of source 'memory'
CREATE TABLE turns_v10 (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id),
    inbound_message_id  INTEGER REFERENCES messages(id),
    source              TEXT NOT NULL CHECK (source IN ('chat', 'proactive', 'confirmation', 'summary', 'memory')),
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
INSERT INTO turns_v10 SELECT id, conversation_id, inbound_message_id, source, status, llm_calls, tool_calls,
    hit_ceiling, stopped_repeat, unbacked_claims, job_id, error, started_at, finished_at FROM turns;
DROP TABLE turns;
ALTER TABLE turns_v10 RENAME TO turns;
CREATE INDEX turns_by_conversation ON turns (conversation_id, started_at);
CREATE INDEX turns_open ON turns (status) WHERE status = 'running';
"""

MIGRATIONS.append(_V10)

_V11 = """
-- one outbound door: an approval request (with what its buttons need) and a file are outbound rows
-- too, sent by the outbox in the conversation's order with the replies; ``text`` describes them
ALTER TABLE messages ADD COLUMN payload_kind TEXT NOT NULL DEFAULT 'text'
    CHECK (payload_kind IN ('text', 'confirmation', 'file'));
ALTER TABLE messages ADD COLUMN payload TEXT;   -- JSON: the confirmation request, or the file's path and caption
"""

MIGRATIONS.append(_V11)
