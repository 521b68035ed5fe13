
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
