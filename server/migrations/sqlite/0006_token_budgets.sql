-- Tokens (input + output) each session has spent, and the whole server per UTC day, for the
-- spending caps (GLASSBOX_BUDGET_SESSION_TOKENS, GLASSBOX_BUDGET_DAILY_TOKENS).
ALTER TABLE sessions ADD COLUMN tokens_used BIGINT NOT NULL DEFAULT 0;
CREATE TABLE usage_days (
    day     BIGINT PRIMARY KEY, -- days since the Unix epoch (UTC)
    tokens  BIGINT NOT NULL
);
