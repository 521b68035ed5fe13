-- people (docs/security.md, "People"): every fact, memory summary and proactive job belongs to a
-- person, 'owner' or a guest as '<channel>:<user id>' ('telegram:123'); what exists is the owner's.
-- Columns are added, no table is rebuilt, so this applies the same with or without v12.
ALTER TABLE memory_facts ADD COLUMN person TEXT NOT NULL DEFAULT 'owner';
ALTER TABLE memory_summaries ADD COLUMN person TEXT NOT NULL DEFAULT 'owner';
ALTER TABLE proactive_jobs ADD COLUMN person TEXT NOT NULL DEFAULT 'owner';

-- "the same fact again" is the same person's: a guest's fact never refreshes the owner's
DROP INDEX memory_facts_one_active;
CREATE UNIQUE INDEX memory_facts_one_active ON memory_facts (person, type, normalized) WHERE status = 'active';
DROP INDEX memory_facts_recent;
CREATE INDEX memory_facts_recent ON memory_facts (person, status, last_seen_at);
CREATE INDEX memory_summaries_by_person ON memory_summaries (person, id);
