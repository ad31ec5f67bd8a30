-- The messages that do not reach the model, now without the replies still streaming
-- (storage/history.rs, `settled_not_reaching()`, whose predicate this is word for word, so the
-- planner uses the index). Every reply starts streaming, and the update that finishes it cannot
-- be heap-only (its status is in this predicate): each reply left a dead entry here until vacuum,
-- and counting a long session's older messages visited all of them.
-- Run once at upgrade: writes to messages wait while the index is built (one pass over the table;
-- the index itself holds few rows).
DROP INDEX messages_not_reaching;
CREATE INDEX messages_not_reaching ON messages (session_id, seq)
WHERE status <> 'streaming' AND NOT (role = 'user' OR (role = 'assistant' AND (status = 'complete' OR (status = 'stopped' AND btrim(content, chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(32) || chr(133) || chr(160) || chr(5760) || chr(8192) || chr(8193) || chr(8194) || chr(8195) || chr(8196) || chr(8197) || chr(8198) || chr(8199) || chr(8200) || chr(8201) || chr(8202) || chr(8232) || chr(8233) || chr(8239) || chr(8287) || chr(12288)) <> ''))));
