-- Glassbox's schema on PostgreSQL: the same tables, columns and indexes as SQLite's migrations
-- 0001 to 0012 (server/migrations/sqlite) end with, written at once. A later change is a new
-- migration here and one in sqlite/. JSON is stored as text, as on SQLite (the server reads and
-- writes it whole); times are milliseconds since the Unix epoch.

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    token_hash        TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    compression_json  TEXT,
    settings_json     TEXT,
    last_active_at    BIGINT NOT NULL DEFAULT 0,
    tokens_used       BIGINT NOT NULL DEFAULT 0,
    user_id           TEXT,
    title             TEXT
);
CREATE INDEX sessions_by_last_active ON sessions (last_active_at);
CREATE INDEX sessions_by_user ON sessions (user_id) WHERE user_id IS NOT NULL;

CREATE TABLE messages (
    id                   TEXT PRIMARY KEY,
    session_id           TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq                  BIGINT NOT NULL,
    role                 TEXT NOT NULL,
    content              TEXT NOT NULL,
    status               TEXT NOT NULL,
    client_message_id    TEXT,
    reply_to             TEXT,
    context_json         TEXT,
    attachments_json     TEXT,
    usage_json           TEXT,
    error_json           TEXT,
    created_at           BIGINT NOT NULL,
    context_report_json  TEXT,
    tool_rounds_json     TEXT,
    mark                 TEXT,
    approvals_json       TEXT,
    UNIQUE (session_id, seq),
    UNIQUE (session_id, client_message_id)
);
-- The messages that do not reach the model (few), and the pinned ones: a long session's turn
-- counts and finds them without reading the rest (storage/history.rs).
CREATE INDEX messages_not_reaching ON messages (session_id, seq)
WHERE NOT (role = 'user' OR (role = 'assistant' AND (status = 'complete' OR (status = 'stopped' AND btrim(content, chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(32) || chr(133) || chr(160) || chr(5760) || chr(8192) || chr(8193) || chr(8194) || chr(8195) || chr(8196) || chr(8197) || chr(8198) || chr(8199) || chr(8200) || chr(8201) || chr(8202) || chr(8232) || chr(8233) || chr(8239) || chr(8287) || chr(12288)) <> ''))));
CREATE INDEX messages_pinned ON messages (session_id, seq) WHERE mark = 'pinned';

CREATE TABLE embedding_cache (
    model      TEXT NOT NULL,
    cache_key  TEXT NOT NULL,
    -- Little-endian f32 values.
    vector     BYTEA NOT NULL,
    PRIMARY KEY (model, cache_key)
);

CREATE TABLE summaries (
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    first_message_id  TEXT NOT NULL,
    last_message_id   TEXT NOT NULL,
    content_hash      TEXT NOT NULL,
    summary           TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    PRIMARY KEY (session_id, first_message_id, last_message_id, content_hash)
);

CREATE TABLE usage_days (
    day     BIGINT PRIMARY KEY, -- days since the Unix epoch (UTC)
    tokens  BIGINT NOT NULL
);

CREATE TABLE user_usage_days (
    user_id  TEXT NOT NULL,
    day      BIGINT NOT NULL, -- days since the Unix epoch (UTC)
    tokens   BIGINT NOT NULL,
    PRIMARY KEY (user_id, day)
);

CREATE TABLE session_topics (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    generation  BIGINT NOT NULL,
    topics_json TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE files (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    mime_type  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    size       BIGINT NOT NULL,
    width      BIGINT,
    height     BIGINT,
    bytes      BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX files_by_session ON files (session_id);
CREATE INDEX files_by_size ON files (size);
