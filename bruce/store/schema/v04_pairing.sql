
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
