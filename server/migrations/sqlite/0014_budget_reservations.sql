-- Tokens held for provider calls under way (the prompt plus the reply's cap), counted against the
-- budgets with what was spent, so concurrent calls cannot together spend past a budget. A call
-- settles its own when it ends; one whose process ended expires.
CREATE TABLE budget_reservations (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id     TEXT,
    day         INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX budget_reservations_by_expiry ON budget_reservations (expires_at);
