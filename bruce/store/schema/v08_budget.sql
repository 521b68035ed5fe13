
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
