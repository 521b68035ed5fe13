
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
