-- one holder per database for what must run in one process only: the scheduler and each chat
-- channel's polling (name 'scheduler', 'channel:<name>'). A holder renews its heartbeat; another
-- process takes the lease over only once it has expired or its holder is known dead
-- (bruce/runtime/leases.py). Kept in the database, so every path to the file finds the same row.
CREATE TABLE leases (
    name                TEXT PRIMARY KEY,
    owner               TEXT NOT NULL,   -- <host>:<pid>:<random>, one per running process
    taken_at            TEXT NOT NULL,
    heartbeat_at        TEXT NOT NULL,
    expires_at          TEXT NOT NULL
);

-- the process that claimed the run (its lease owner id); NULL: claimed before owners were recorded,
-- or by a scheduler without a lease. Only a run whose owner is dead or expired is settled by another.
ALTER TABLE job_runs ADD COLUMN owner TEXT;
