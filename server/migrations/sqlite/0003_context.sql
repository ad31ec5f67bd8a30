-- Per-session compression settings, what each reply's request contained, and cached summaries.
ALTER TABLE sessions ADD COLUMN compression_json TEXT;
ALTER TABLE messages ADD COLUMN context_report_json TEXT;

-- A summary of messages first..last of a session, valid while their content hash is unchanged.
CREATE TABLE summaries (
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    first_message_id  TEXT NOT NULL,
    last_message_id   TEXT NOT NULL,
    content_hash      TEXT NOT NULL,
    summary           TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    PRIMARY KEY (session_id, first_message_id, last_message_id, content_hash)
);
