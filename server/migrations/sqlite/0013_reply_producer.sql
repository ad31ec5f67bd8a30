-- The instance producing a streaming reply (several instances share a PostgreSQL database; one
-- SQLite process leaves it NULL). Kept in both schemas so the two stay alike.
ALTER TABLE messages ADD COLUMN producer TEXT;
