-- The messages that reach the model, by position: a long session's turn counts the older ones it
-- does not read from this index alone (storage/history.rs, `unread_before`; its predicate is this
-- one, written the same way, so SQLite uses the index).
CREATE INDEX messages_reaching ON messages (session_id, seq)
WHERE (role = 'user' OR (role = 'assistant' AND (status = 'complete'
  OR (status = 'stopped' AND trim(content, ' ' || char(9, 10, 13)) <> ''))));
