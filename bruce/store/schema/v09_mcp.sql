
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
