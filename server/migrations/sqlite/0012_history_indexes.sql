-- What a long session's turn reads besides its newest messages (storage/history.rs), from indexes
-- rather than every older row.
-- The messages that do not reach the model (failed or streaming replies, stopped ones without
-- text, approvals), by position: the older messages a turn does not read are counted as all of
-- them (positions have no gaps) less these (`unread_before`; the predicate is `reaches()`'s,
-- written the same way, so SQLite uses the index).
CREATE INDEX messages_not_reaching ON messages (session_id, seq)
WHERE NOT (role = 'user' OR (role = 'assistant' AND (status = 'complete'
  OR (status = 'stopped' AND trim(content, char(9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288)) <> ''))));
-- Pinned messages by position: the memories among the older ones (`memories_before`).
CREATE INDEX messages_pinned ON messages (session_id, seq) WHERE mark = 'pinned';
