-- One versioned settings record per session (compression, context sets, later the topic filter),
-- and the tool rounds of each reply.
ALTER TABLE sessions ADD COLUMN settings_json TEXT;
UPDATE sessions
   SET settings_json = json_object('version', 1, 'compression', json(compression_json))
 WHERE compression_json IS NOT NULL;
ALTER TABLE messages ADD COLUMN tool_rounds_json TEXT;
