-- media (docs/media.md): what a user's message carried besides its text, as a JSON list of
-- attachments (kind, ref, mime, size, name, ...; what the core made of each is added to its
-- entry: a transcript, the kept image's path, a document's text length); NULL: text only.
ALTER TABLE messages ADD COLUMN attachments TEXT;

-- what a model call was for: 'chat' (a completion) or 'transcription' (a voice note turned into text)
ALTER TABLE llm_calls ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
