-- The messages that do not reach the model, now without the replies still streaming
-- (storage/history.rs, `settled_not_reaching()`, whose predicate this is word for word, so the
-- database uses the index). Every reply starts streaming; kept alike in both schemas, where on
-- PostgreSQL each finished reply would otherwise leave a dead entry here until vacuum.
DROP INDEX messages_not_reaching;
CREATE INDEX messages_not_reaching ON messages (session_id, seq)
WHERE status <> 'streaming' AND NOT (role = 'user' OR (role = 'assistant' AND (status = 'complete'
  OR (status = 'stopped' AND trim(content, char(9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288)) <> ''))));
