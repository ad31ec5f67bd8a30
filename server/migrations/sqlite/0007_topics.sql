-- A user's mark on a message: 'pinned' (always sent) or 'excluded' (never sent); NULL for none.
ALTER TABLE messages ADD COLUMN mark TEXT;

-- The topics last extracted for a session (JSON: topics with counts, the sticky message ids),
-- replaced whole by each extraction. `generation` only grows: an extraction writes only when it
-- is newer than what is stored, so a late result never overwrites a newer one.
CREATE TABLE session_topics (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    generation  BIGINT NOT NULL,
    topics_json TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);
