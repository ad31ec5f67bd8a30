-- Several instances on one database (docs/instances.md).

-- The instance producing a streaming reply: when that instance stops answering, another marks
-- the reply failed and retryable.
ALTER TABLE messages ADD COLUMN producer TEXT;
CREATE INDEX messages_streaming ON messages (producer) WHERE status = 'streaming';

-- Each running instance, as it last said it was alive (milliseconds since the Unix epoch).
CREATE TABLE instances (
    id       TEXT PRIMARY KEY,
    seen_at  BIGINT NOT NULL
);

-- A session's frame numbering: the last number given. Taken in the transaction that writes the
-- frames, so numbers commit in order (a reader never skips a frame a slower writer commits later).
CREATE TABLE frame_counters (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    last_seq    BIGINT NOT NULL
);

-- The frames a reconnecting client may need, numbered per session. `kind` and `message_id` let
-- the text of a reply in flight be rebuilt; `event` is the frame's JSON.
CREATE TABLE frames (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    message_id  TEXT,
    event       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX frames_by_age ON frames (created_at);

-- Whose turn it is in a session: the instance streaming its reply, until `expires_at` (renewed
-- while it streams). `epoch` grows with each new holder and fences a stalled one.
CREATE TABLE turn_leases (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    holder      TEXT NOT NULL,
    reply_id    TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
