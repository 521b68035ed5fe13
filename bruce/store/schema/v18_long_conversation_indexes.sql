-- What a turn reads at its start no longer grows with the conversation (docs/benchmarks.md,
-- "Long conversations"): each read below is a lookup, not a scan of every message or turn.
-- The turn that wrote a reply (the session's answered turns, the admin page's trace).
CREATE INDEX messages_by_turn ON messages (turn_id) WHERE direction = 'out';
-- Who wrote in a conversation: one step per sender.
CREATE INDEX messages_senders ON messages (conversation_id, sender_id) WHERE direction = 'in' AND sender_id IS NOT NULL;
-- The messages that carried attachments (a document read taints the turn that answered it).
CREATE INDEX messages_with_attachments ON messages (conversation_id) WHERE attachments IS NOT NULL;
-- The turn that answered a message (long-term memory's extraction, every message).
CREATE INDEX turns_by_inbound ON turns (inbound_message_id) WHERE inbound_message_id IS NOT NULL;
-- The runs of a job.
CREATE INDEX turns_by_job ON turns (job_id) WHERE job_id IS NOT NULL;
-- The tool calls of a conversation that returned an output.
CREATE INDEX tool_executions_with_output ON tool_executions (conversation_id) WHERE output IS NOT NULL;
-- Each is the first column of a wider index from v17 (llm_calls_by_time_usage,
-- tool_executions_by_time_status), which serves the same queries: one index less to write.
DROP INDEX llm_calls_by_time;
DROP INDEX tool_executions_by_time;
