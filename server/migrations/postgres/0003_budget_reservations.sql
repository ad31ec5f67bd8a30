-- As sqlite/0014: tokens held for provider calls under way, counted against the budgets with what
-- was spent, so concurrent calls (on any instance) cannot together spend past a budget.
CREATE TABLE budget_reservations (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id     TEXT,
    day         BIGINT NOT NULL,
    tokens      BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX budget_reservations_by_expiry ON budget_reservations (expires_at);
