-- taint survives scheduling (issue 30): a job made or changed after untrusted text entered the turn (a web
-- page, a search result, an MCP client) is ``untrusted``, and every run of it starts tainted; once set, never
-- cleared. ``held_told_at``: when the owner was told that a run of the job stopped at a tool that needs their
-- yes; NULL again after any change of the job (the owner decided), so they are told once until then.
ALTER TABLE proactive_jobs ADD COLUMN untrusted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE proactive_jobs ADD COLUMN held_told_at TEXT;

-- a request asked in a tainted turn: the approved action runs tainted too (a job it makes is untrusted)
ALTER TABLE pending_confirmations ADD COLUMN untrusted INTEGER NOT NULL DEFAULT 0;

-- a run of an untrusted job that reached a tool needing the owner's yes: stopped there, status 'held'
CREATE TABLE job_runs_v12 (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id              TEXT NOT NULL REFERENCES proactive_jobs(id),
    scheduled_for       TEXT NOT NULL,
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    status              TEXT NOT NULL CHECK (status IN ('running', 'delivered', 'unsent', 'quiet', 'failed',
                                                         'interrupted', 'missed', 'over_budget', 'held')),
    turn_id             TEXT,
    message_id          INTEGER,
    delivered_text      TEXT,
    error               TEXT,
    lateness_ms         INTEGER,
    UNIQUE (job_id, scheduled_for)
);
INSERT INTO job_runs_v12 SELECT * FROM job_runs;
DROP TABLE job_runs;
ALTER TABLE job_runs_v12 RENAME TO job_runs;
