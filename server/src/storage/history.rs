//! Reading a long session's history in pieces, for a turn that reads only what it can use
//! (docs/context-planning.md, "A turn"): its newest messages a page at a time, the memories
//! (pinned messages, standing instructions) among the older ones, and how many older ones reach
//! the model.

use glassbox_core::context::MessageMark;
use glassbox_core::vocab::{MessageStatus, Role};
use glassbox_core::wire::ChatMessage;

use super::named::name;
use super::rows::PlacedRow;
use super::{Dialect, StorageError, Store, on_db, params};

/// Where a page of history ends.
#[derive(Debug, Clone, Copy)]
pub enum PageEnd<'a> {
    /// Before this position (`i64::MAX`: from the newest).
    Before(i64),
    /// With the message of this id.
    Through(&'a str),
}

/// The messages older than what a turn read that reach the model: how many, and the ids of the
/// oldest and the newest of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub count: i64,
    pub first_id: String,
    pub last_id: String,
}

/// A message's columns as a turn reads history: what the plan and the request use (text, role,
/// status, attachments, tool rounds, mark, page context), not what only the widget shows
/// (receipt, usage, error, approvals), which are read as empty.
const HISTORY_COLUMNS: &str = "id, role, content, status, created_at, client_message_id, \
     reply_to, context_json, attachments_json, NULL AS usage_json, NULL AS context_report_json, \
     tool_rounds_json, NULL AS error_json, mark, NULL AS approvals_json";

/// `ChatMessage::reaches_model` in SQL: user messages, complete replies, stopped replies with
/// text (the names are the store's own, written into the statement). The partial index
/// `messages_not_reaching` (each dialect's migration) has its negation word for word, so the
/// database uses it; a test keeps them equal.
fn reaches(d: Dialect) -> String {
    format!(
        "(role = '{user}' OR (role = '{assistant}' AND (status = '{complete}' \
         OR (status = '{stopped}' AND {trimmed} <> ''))))",
        user = name(Role::User),
        assistant = name(Role::Assistant),
        complete = name(MessageStatus::Complete),
        stopped = name(MessageStatus::Stopped),
        trimmed = d.trimmed("content"),
    )
}

impl Store {
    /// Where message `id` is in its session (`None`: no such message).
    pub async fn position(&self, session_id: &str, id: &str) -> Result<Option<i64>, StorageError> {
        let sql = "SELECT seq FROM messages WHERE session_id = $1 AND id = $2";
        Ok(on_db!(self, read, |db, d| {
            sqlx::query_scalar(sql)
                .bind(session_id)
                .bind(id)
                .fetch_optional(db)
                .await?
        }))
    }

    /// At most `limit` messages (as a turn reads them) that end a page at `end`, newest first,
    /// each with its position. One query either way (`Through` finds the message's position in
    /// it; an unknown id reads nothing).
    pub async fn messages_before(
        &self,
        session_id: &str,
        end: PageEnd<'_>,
        limit: i64,
    ) -> Result<Vec<(i64, ChatMessage)>, StorageError> {
        let (before, through) = match end {
            PageEnd::Before(before) => (before, None),
            PageEnd::Through(id) => (0, Some(id)),
        };
        let sql = format!(
            "SELECT seq, {HISTORY_COLUMNS} FROM messages WHERE session_id = $1 \
             AND seq < COALESCE((SELECT seq + 1 FROM messages WHERE session_id = $1 AND id = $3), $2) \
             ORDER BY seq DESC LIMIT $4"
        );
        let rows: Vec<PlacedRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(before)
                .bind(through)
                .bind(limit)
                .fetch_all(db)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|r| (r.seq, r.message.into()))
            .collect())
    }

    /// The memories before position `before` that reach the model, oldest first: the newest
    /// `limit` pinned messages and those with `standing` ids (standing instructions). Two lookups
    /// by index (`messages_pinned`, then the ids), never a scan of the older messages.
    pub async fn memories_before(
        &self,
        session_id: &str,
        before: i64,
        standing: &[String],
        limit: i64,
    ) -> Result<Vec<ChatMessage>, StorageError> {
        let mut rows: Vec<PlacedRow> = on_db!(self, read, |db, d| {
            let pinned_sql = format!(
                "SELECT seq, {HISTORY_COLUMNS} FROM messages \
                 WHERE session_id = $1 AND seq < $2 AND mark = '{pinned}' AND {reaches} \
                 ORDER BY seq DESC LIMIT $3",
                pinned = name(MessageMark::Pinned),
                reaches = reaches(d),
            );
            sqlx::query_as(&pinned_sql)
                .bind(session_id)
                .bind(before)
                .bind(limit)
                .fetch_all(db)
                .await?
        });
        // Each standing id looked up by its key (few: a session's standing instructions).
        for chunk in standing.chunks(super::IDS_PER_STATEMENT) {
            let found: Vec<PlacedRow> = on_db!(self, read, |db, d| {
                let standing_sql = format!(
                    "SELECT seq, {HISTORY_COLUMNS} FROM messages \
                     WHERE id IN ({ids}) AND session_id = $1 AND seq < $2 AND {reaches}",
                    ids = params(3, chunk.len()),
                    reaches = reaches(d),
                );
                let mut query = sqlx::query_as(&standing_sql).bind(session_id).bind(before);
                for id in chunk {
                    query = query.bind(id);
                }
                query.fetch_all(db).await?
            });
            rows.extend(found);
        }
        // Not cut after merging: the plan protects pinned messages first (at most `limit` of
        // them), and the standing ids are few.
        rows.sort_by_key(|r| r.seq);
        rows.dedup_by_key(|r| r.seq);
        Ok(rows.into_iter().map(|r| r.message.into()).collect())
    }

    /// The messages before position `before` that reach the model (`None`: there are none).
    /// Counted as every message before it (a session's positions run from its first without
    /// gaps: messages are never deleted one by one) less those that do not reach the model
    /// (index `messages_not_reaching`, few): no read grows with the session.
    pub async fn unread_before(
        &self,
        session_id: &str,
        before: i64,
    ) -> Result<Option<Unread>, StorageError> {
        let (first_seq, not_reaching, first, last): (
            Option<i64>,
            i64,
            Option<String>,
            Option<String>,
        ) = on_db!(self, read, |db, d| {
            let reaches = reaches(d);
            let unread = format!("session_id = $1 AND seq < $2 AND {reaches}");
            let sql = format!(
                "SELECT (SELECT MIN(seq) FROM messages WHERE session_id = $1), \
                 (SELECT COUNT(*) FROM messages WHERE session_id = $1 AND seq < $2 \
                   AND NOT {reaches}), \
                 (SELECT id FROM messages WHERE {unread} ORDER BY seq LIMIT 1), \
                 (SELECT id FROM messages WHERE {unread} ORDER BY seq DESC LIMIT 1)"
            );
            sqlx::query_as(&sql)
                .bind(session_id)
                .bind(before)
                .fetch_one(db)
                .await?
        });
        let count = first_seq.map_or(0, |f| (before - f).max(0)) - not_reaching;
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
    use glassbox_core::context::{MessageMark, SessionSettings};
    use glassbox_core::vocab::MessageStatus;

    use super::super::{NewUserMessage, ReplyOutcome, Store};
    use super::Unread;

    /// Each dialect's index predicate is this one's negation, word for word, so the database
    /// uses it.
    #[test]
    fn the_predicate_is_the_index_s() {
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        for (migration, d) in [
            (
                include_str!("../../migrations/sqlite/0012_history_indexes.sql"),
                super::Dialect::Sqlite,
            ),
            (
                include_str!("../../migrations/postgres/0001_schema.sql"),
                super::Dialect::Postgres,
            ),
        ] {
            let reaches = super::reaches(d);
            assert!(
                squash(migration).contains(&format!("WHERE NOT {}", squash(&reaches))),
                "{reaches}"
            );
        }
    }

    /// 40 exchanges; every seventh reply failed and every eleventh stopped with only whitespace (neither
    /// reaches the model); user message 2 pinned.
    async fn session() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        store
            .create_session("s", "h", 0, &SessionSettings::default(), None)
            .await
            .unwrap();
        for i in 0..40 {
            let reply = format!("a{i:02}");
            store
                .insert_turn(
                    "s",
                    &NewUserMessage {
                        id: &format!("u{i:02}"),
                        content: "a question",
                        client_message_id: None,
                        context: None,
                        attachments: &[],
                        created_at: i,
                    },
                    &reply,
                    i,
                )
                .await
                .unwrap();
            let (status, content) = match i {
                _ if i % 7 == 0 => (MessageStatus::Failed, "half"),
                // Only whitespace, some of it beyond ASCII's.
                _ if i % 11 == 0 => (MessageStatus::Stopped, " \u{3000}\u{a0}\n"),
                _ => (MessageStatus::Complete, "an answer"),
            };
            let outcome = ReplyOutcome {
                content,
                status,
                usage: None,
                receipt: None,
                tool_rounds: &[],
                error: None,
            };
            store.finish_reply("s", &reply, outcome).await.unwrap();
        }
        store
            .set_mark("s", "u02", Some(MessageMark::Pinned))
            .await
            .unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn the_unread_count_agrees_with_what_reaches_the_model() {
        let (_dir, store) = session().await;
        let before = store.position("s", "u30").await.unwrap().unwrap();
        let all = store.messages("s").await.unwrap();
        let older: Vec<_> = all[..(before - 1) as usize]
            .iter()
            .filter(|m| m.reaches_model())
            .collect();
        assert_eq!(
            store.unread_before("s", before).await.unwrap(),
            Some(Unread {
                count: older.len() as i64,
                first_id: older[0].id.clone(),
                last_id: older[older.len() - 1].id.clone(),
            })
        );
        assert_eq!(store.unread_before("s", 1).await.unwrap(), None);
        // Pages from the newest end, each message with its position.
        let page = store
            .messages_before("s", super::PageEnd::Before(before), 3)
            .await
            .unwrap();
        let ids: Vec<(i64, &str)> = page.iter().map(|(p, m)| (*p, m.id.as_str())).collect();
        assert_eq!(
            ids,
            [
                (before - 1, "a29"),
                (before - 2, "u29"),
                (before - 3, "a28")
            ]
        );
        // Through a message: the same page, ending with it; an unknown id reads nothing.
        let through = store
            .messages_before("s", super::PageEnd::Through("a29"), 3)
            .await
            .unwrap();
        assert_eq!(through.len(), 3);
        assert_eq!(through[0].1.id, "a29");
        let none = store
            .messages_before("s", super::PageEnd::Through("nope"), 3)
            .await
            .unwrap();
        assert!(none.is_empty());
    }

    #[tokio::test]
    async fn memories_are_the_older_pinned_and_standing_messages_that_reach_the_model() {
        let (_dir, store) = session().await;
        let before = store.position("s", "u30").await.unwrap().unwrap();
        // a07 failed and u35 is newer than `before`: neither is a memory here.
        let standing = ["u10", "a12", "a07", "u35", "nope"].map(String::from);
        let ids = |found: Vec<glassbox_core::wire::ChatMessage>| -> Vec<String> {
            found.into_iter().map(|m| m.id).collect()
        };
        let found = store
            .memories_before("s", before, &standing, 128)
            .await
            .unwrap();
        assert_eq!(ids(found), ["u02", "u10", "a12"]);
        // The newest `limit`, oldest first.
        // `limit` counts pinned messages; the standing ones all come.
        let found = store
            .memories_before("s", before, &standing, 0)
            .await
            .unwrap();
        assert_eq!(ids(found), ["u10", "a12"]);
        let found = store.memories_before("s", before, &[], 128).await.unwrap();
        assert_eq!(ids(found), ["u02"]);
    }

    #[tokio::test]
    async fn a_turn_stores_its_message_and_reply_together_once() {
        let (_dir, store) = session().await;
        let message = NewUserMessage {
            id: "u99",
            content: "again?",
            client_message_id: Some("c1"),
            context: None,
            attachments: &[],
            created_at: 99,
        };
        let (user, reply) = store.insert_turn("s", &message, "a99", 99).await.unwrap();
        let reply = reply.unwrap();
        assert_eq!(
            (user.id.as_str(), reply.reply_to.as_deref()),
            ("u99", Some("u99"))
        );
        assert_eq!(reply.status, MessageStatus::Streaming);
        let (u, r) = (
            store.position("s", "u99").await.unwrap().unwrap(),
            store.position("s", "a99").await.unwrap().unwrap(),
        );
        assert_eq!((u, r), (81, 82));
        // The same clientMessageId again: nothing stored, the first message returned.
        let again = NewUserMessage {
            id: "u100",
            ..message
        };
        let (stored, reply) = store.insert_turn("s", &again, "a100", 100).await.unwrap();
        assert_eq!((stored.id.as_str(), reply), ("u99", None));
        assert_eq!(store.messages("s").await.unwrap().len(), 82);
    }
}
