-- Files users upload to a session (images, text files), kept with their bytes until the session is
-- deleted. A message names the files it carries by id in its attachments_json.
CREATE TABLE files (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    mime_type  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    size       BIGINT NOT NULL,
    width      BIGINT,
    height     BIGINT,
    bytes      BLOB NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX files_by_session ON files (session_id);
