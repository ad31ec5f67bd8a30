//! Reading a long session's history in pieces, for a turn that reads only what it can use
//! (docs/context-planning.md, "A turn"): its newest messages a page at a time, the memories
//! (pinned messages, standing instructions) among the older ones, and how many older ones reach
//! the model.

use glassbox_core::context::MessageMark;
use glassbox_core::vocab::{MessageStatus, Role};
use glassbox_core::wire::ChatMessage;

use super::named::name;
use super::rows::{MESSAGE_COLUMNS, PlacedRow};
use super::{StorageError, Store};

/// The messages older than what a turn read that reach the model: how many, and the ids of the
/// oldest and the newest of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub count: i64,
    pub first_id: String,
    pub last_id: String,
}

/// `ChatMessage::reaches_model` in SQL: user messages, complete replies, stopped replies with
/// text (the names are the store's own, written into the statement). The partial index
/// `messages_reaching` (migration 0012) has this predicate word for word, so a count uses it
/// alone; a test keeps the two equal.
fn reaches() -> String {
    format!(
        "(role = '{user}' OR (role = '{assistant}' AND (status = '{complete}' \
         OR (status = '{stopped}' AND trim(content, ' ' || char(9, 10, 13)) <> ''))))",
        user = name(Role::User),
        assistant = name(Role::Assistant),
        complete = name(MessageStatus::Complete),
        stopped = name(MessageStatus::Stopped),
    )
}

impl Store {
    /// Where message `id` is in its session (`None`: no such message).
    pub async fn position(&self, session_id: &str, id: &str) -> Result<Option<i64>, StorageError> {
        Ok(
            sqlx::query_scalar("SELECT seq FROM messages WHERE session_id = ? AND id = ?")
                .bind(session_id)
                .bind(id)
                .fetch_optional(&self.reader)
                .await?,
        )
    }

    /// At most `limit` whole messages before position `before` (`i64::MAX`: from the newest),
    /// newest first, each with its position.
    pub async fn messages_before(
        &self,
        session_id: &str,
        before: i64,
        limit: i64,
    ) -> Result<Vec<(i64, ChatMessage)>, StorageError> {
        let sql = format!(
            "SELECT seq, {MESSAGE_COLUMNS} FROM messages \
             WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?"
        );
        let rows: Vec<PlacedRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(before)
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(|r| (r.seq, r.message.into())).collect())
    }

    /// The memories before position `before` that reach the model: pinned messages and those
    /// with `standing` ids (standing instructions), the newest `limit`, oldest first.
    pub async fn memories_before(
        &self,
        session_id: &str,
        before: i64,
        standing: &[String],
        limit: i64,
    ) -> Result<Vec<ChatMessage>, StorageError> {
        let standing = serde_json::to_string(standing)
            .map_err(|e| StorageError::Corrupt(e.to_string()))?;
        let sql = format!(
            "SELECT seq, {MESSAGE_COLUMNS} FROM messages \
             WHERE session_id = ? AND seq < ? AND {reaches} \
             AND (mark = ? OR id IN (SELECT value FROM json_each(?))) \
             ORDER BY seq DESC LIMIT ?",
            reaches = reaches()
        );
        let rows: Vec<PlacedRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(before)
            .bind(name(MessageMark::Pinned))
            .bind(standing)
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().rev().map(|r| r.message.into()).collect())
    }

    /// The messages before position `before` that reach the model (`None`: there are none).
    pub async fn unread_before(
        &self,
        session_id: &str,
        before: i64,
    ) -> Result<Option<Unread>, StorageError> {
        let reaches = reaches();
        let unread = format!("session_id = ? AND seq < ? AND {reaches}");
        let sql = format!(
            "SELECT COUNT(*), \
             (SELECT id FROM messages WHERE {unread} ORDER BY seq LIMIT 1), \
             (SELECT id FROM messages WHERE {unread} ORDER BY seq DESC LIMIT 1) \
             FROM messages WHERE {unread}"
        );
        let (count, first, last): (i64, Option<String>, Option<String>) = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(before)
            .bind(session_id)
            .bind(before)
            .bind(session_id)
            .bind(before)
            .fetch_one(&self.reader)
            .await?;
        Ok(match (first, last) {
            (Some(first_id), Some(last_id)) if count > 0 => Some(Unread {
                count,
                first_id,
                last_id,
            }),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    /// The predicate is the partial index's, so SQLite can count from the index alone.
    #[test]
    fn the_predicate_is_the_index_s() {
        let migration = include_str!("../../migrations/0012_history_reaching.sql");
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            squash(migration).contains(&squash(&super::reaches())),
            "{}",
            super::reaches()
        );
    }
}
