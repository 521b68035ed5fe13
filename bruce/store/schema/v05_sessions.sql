
-- /new starts a fresh session: the model's history holds only messages after this id (the /new
-- message itself); what came before is folded into the summary. 0: the session began with the chat
ALTER TABLE conversations ADD COLUMN session_start_id INTEGER NOT NULL DEFAULT 0;
