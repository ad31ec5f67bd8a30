-- The user's decisions about tool calls (role `approval`): a JSON list per message.
ALTER TABLE messages ADD COLUMN approvals_json TEXT;
