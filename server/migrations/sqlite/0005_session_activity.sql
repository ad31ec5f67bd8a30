-- When a session was last used (opened or written to), so idle ones can be purged after
-- GLASSBOX_SESSION_TTL; existing sessions count from their newest message.
ALTER TABLE sessions ADD COLUMN last_active_at BIGINT NOT NULL DEFAULT 0;
UPDATE sessions
   SET last_active_at = COALESCE(
         (SELECT MAX(m.created_at) FROM messages m WHERE m.session_id = sessions.id),
         created_at);
CREATE INDEX sessions_by_last_active ON sessions (last_active_at);
