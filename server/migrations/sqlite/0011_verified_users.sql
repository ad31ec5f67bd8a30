-- Verified users (GLASSBOX_IDENTITY_SECRET): the user a session belongs to (NULL: anonymous, reachable
-- only with its token), the title the user gave it (NULL: its first user message), and what each
-- user spent per UTC day (GLASSBOX_BUDGET_USER_DAILY_TOKENS).
ALTER TABLE sessions ADD COLUMN user_id TEXT;
ALTER TABLE sessions ADD COLUMN title TEXT;
CREATE INDEX sessions_by_user ON sessions (user_id) WHERE user_id IS NOT NULL;
CREATE TABLE user_usage_days (
    user_id  TEXT NOT NULL,
    day      BIGINT NOT NULL, -- days since the Unix epoch (UTC)
    tokens   BIGINT NOT NULL,
    PRIMARY KEY (user_id, day)
);
