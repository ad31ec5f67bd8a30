-- Sessions are reachable only with their token; only its SHA-256 is stored.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE messages (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq                BIGINT NOT NULL,
    role               TEXT NOT NULL,
    content            TEXT NOT NULL,
    status             TEXT NOT NULL,
    client_message_id  TEXT,
    reply_to           TEXT,
    context_json       TEXT,
    attachments_json   TEXT,
    usage_json         TEXT,
    error_json         TEXT,
    created_at         BIGINT NOT NULL,
    UNIQUE (session_id, seq),
    UNIQUE (session_id, client_message_id)
);
-- UNIQUE (session_id, seq) is also the index that lists a session's messages in order.
