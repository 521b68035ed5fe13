-- The overview page: one indexed query per panel.
CREATE INDEX turns_by_time ON turns (started_at, status);
CREATE INDEX turns_failed ON turns (started_at) WHERE status IN ('failed', 'interrupted');
CREATE INDEX tool_executions_by_time_status ON tool_executions (created_at, status);
CREATE INDEX tool_executions_failed ON tool_executions (created_at) WHERE status IN ('error', 'timeout');
CREATE INDEX llm_calls_failed ON llm_calls (created_at) WHERE status <> 'ok';
CREATE INDEX messages_by_time ON messages (created_at, direction);
CREATE INDEX llm_calls_by_time_usage ON llm_calls (created_at, prompt_tokens, completion_tokens, cost_usd);
CREATE INDEX proactive_jobs_next ON proactive_jobs (status, next_run_at);
