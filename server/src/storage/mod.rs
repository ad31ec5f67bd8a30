//! Persistence of sessions and messages in SQLite (`glassbox.db`). Handlers call these methods and
//! never write SQL. The SQL is SQLite's, not portable:
//!
//! - `json_each(?)`: a list of ids bound as one JSON array and read as a table, in
//!   [`Store::idle_sessions`] (the live sessions to skip) and [`Store::delete_idle_sessions`] (the
//!   sessions to delete, and the messages whose embeddings go with them);
//! - `instr` with `substr` (`MESSAGE_KEY_ID`): the message id out of an embedding cache key
//!   `{message_id}:{content_hash}`, in [`Store::delete_session`] and [`Store::delete_idle_sessions`];
//! - `?` placeholders throughout, and sqlx's SQLite types: [`Store`]'s two `SqlitePool`s, the rows
//!   read into `sqlx::FromRow` structs (`rows`);
//! - the connection's settings in [`Store::open`]: WAL journal, `synchronous = NORMAL`, foreign
//!   keys, a busy timeout, and one writer connection (SQLite writes one transaction at a time);
//! - the migrations (`server/migrations`): `BLOB` columns, and `json_object` / `json` in 0004.
//!
//! `ON CONFLICT … DO NOTHING / DO UPDATE … excluded.…` and `RETURNING` are PostgreSQL's too. Another
//! database means rewriting the queries above and the pools.

mod files;
mod history;
mod named;
mod rows;
mod users;

pub use files::{FileRow, FileStored, NewFile};
pub use history::{PageEnd, Unread};

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use glassbox_core::context::{MessageMark, Receipt, SessionSettings, SessionTopics};
use glassbox_core::vocab::{Attachment, MessageStatus, PageContext, Role, ToolRound, Usage};
use glassbox_core::wire::{ChatMessage, WireError};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use named::name;
use rows::{
    EmbeddingRow, MESSAGE_COLUMNS, MESSAGE_TEXT_COLUMNS, MessageRow, MessageTextRow, PlacedTextRow,
    Vector,
};
use thiserror::Error;

/// A storage failure.
#[derive(Debug, Error)]
pub enum StorageError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored row is corrupt: {0}")]
    Corrupt(String),
}

/// A stored session's credentials.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub token_hash: String,
    /// The verified user the session belongs to (`None`: anonymous, reachable by token only).
    pub user_id: Option<String>,
}

/// Tokens spent, as the spending caps read them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// By the session, ever.
    pub session: u64,
    /// By the whole server today.
    pub server_day: u64,
    /// By the session's verified user today (0 for an anonymous session).
    pub user_day: u64,
}

/// A user message about to be stored.
#[derive(Debug, Clone)]
pub struct NewUserMessage<'a> {
    pub id: &'a str,
    pub content: &'a str,
    pub client_message_id: Option<&'a str>,
    pub context: Option<&'a PageContext>,
    pub attachments: &'a [Attachment],
    pub created_at: i64,
}

/// The final state of a reply.
#[derive(Debug, Clone)]
pub struct ReplyOutcome<'a> {
    pub content: &'a str,
    pub status: MessageStatus,
    pub usage: Option<Usage>,
    pub receipt: Option<&'a Receipt>,
    pub tool_rounds: &'a [ToolRound],
    pub error: Option<&'a WireError>,
}

/// The message store. Writes go through one connection (SQLite has one writer at a time; queueing in
/// the pool is fairer and faster than SQLite's busy-wait sleeps), reads through a small read-only pool.
#[derive(Debug, Clone)]
pub struct Store {
    writer: SqlitePool,
    reader: SqlitePool,
}

/// The message id of a message embedding's cache key (`{message_id}:{content_hash}`).
const MESSAGE_KEY_ID: &str = "substr(cache_key, 1, instr(cache_key, ':') - 1)";

impl Store {
    /// Opens (creating if needed) `glassbox.db` in `data_dir`, in WAL mode, and applies migrations.
    pub async fn open(data_dir: &Path) -> Result<Self, StorageError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StorageError::DataDir {
            path: data_dir.display().to_string(),
            source,
        })?;
        let url = format!("sqlite://{}", data_dir.join("glassbox.db").display());
        let options = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations").run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self { writer, reader })
    }

    /// Marks replies left `streaming` by a previous process as failed, so they can be retried.
    pub async fn fail_interrupted(&self, error: &WireError) -> Result<u64, StorageError> {
        let res = sqlx::query("UPDATE messages SET status = ?, error_json = ? WHERE status = ?")
            .bind(name(MessageStatus::Failed))
            .bind(to_json(error))
            .bind(name(MessageStatus::Streaming))
            .execute(&self.writer)
            .await?;
        Ok(res.rows_affected())
    }

    /// Stores a new session (of verified user `user_id`, when given).
    pub async fn create_session(
        &self,
        id: &str,
        token_hash: &str,
        now: i64,
        settings: &SessionSettings,
        user_id: Option<&str>,
    ) -> Result<(), StorageError> {
        sqlx::query(
            "INSERT INTO sessions (id, token_hash, created_at, last_active_at, settings_json, \
             user_id) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(token_hash)
        .bind(now)
        .bind(now)
        .bind(to_json(settings))
        .bind(user_id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Tokens spent by `session_id`, by the whole server on `day` (days since the epoch, UTC), and
    /// by the session's verified user on `day` (0 for an anonymous session).
    pub async fn tokens_spent(&self, session_id: &str, day: i64) -> Result<Spent, StorageError> {
        let (session, server, user): (Option<i64>, Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT tokens_used FROM sessions WHERE id = ?1) AS session, \
                    (SELECT tokens FROM usage_days WHERE day = ?2) AS day, \
                    (SELECT u.tokens FROM user_usage_days u JOIN sessions s \
                       ON s.user_id = u.user_id WHERE s.id = ?1 AND u.day = ?2) AS user",
        )
        .bind(session_id)
        .bind(day)
        .fetch_one(&self.writer)
        .await?;
        let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
        Ok(Spent {
            session: n(session),
            server_day: n(server),
            user_day: n(user),
        })
    }

    /// Adds `tokens` to what `session_id`, the server and the session's verified user (if any)
    /// spent on `day`; returns the session's total.
    pub async fn spend_tokens(
        &self,
        session_id: &str,
        day: i64,
        tokens: u64,
    ) -> Result<u64, StorageError> {
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT INTO usage_days (day, tokens) VALUES (?, ?) \
             ON CONFLICT (day) DO UPDATE SET tokens = tokens + excluded.tokens",
        )
        .bind(day)
        .bind(tokens)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO user_usage_days (user_id, day, tokens) \
             SELECT user_id, ?, ? FROM sessions WHERE id = ? AND user_id IS NOT NULL \
             ON CONFLICT (user_id, day) DO UPDATE SET tokens = tokens + excluded.tokens",
        )
        .bind(day)
        .bind(tokens)
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
        let used: Option<i64> = sqlx::query_scalar(
            "UPDATE sessions SET tokens_used = tokens_used + ? WHERE id = ? RETURNING tokens_used",
        )
        .bind(tokens)
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(used.unwrap_or(0).max(0) as u64)
    }

    /// Marks a session used at `now` (written at most once a minute per session).
    pub async fn touch_session(&self, id: &str, now: i64) -> Result<(), StorageError> {
        touch(&self.writer, id, now).await
    }

    /// Deletes a session with its messages, summaries and cached message embeddings; returns the
    /// cache keys of the embeddings deleted, or `None` when there was no such session.
    pub async fn delete_session(&self, id: &str) -> Result<Option<Vec<String>>, StorageError> {
        let mut tx = self.writer.begin().await?;
        let keys: Vec<String> = sqlx::query_scalar(&format!(
            "DELETE FROM embedding_cache WHERE {MESSAGE_KEY_ID} IN \
             (SELECT id FROM messages WHERE session_id = ?) RETURNING cache_key"
        ))
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let gone = sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok((gone > 0).then_some(keys))
    }

    /// Up to `limit` sessions not used since `before` (ms), except those in `keep` (live ones), in
    /// the order of their ids (the order their gates are taken in).
    pub async fn idle_sessions(
        &self,
        before: i64,
        keep: &[String],
        limit: i64,
    ) -> Result<Vec<String>, StorageError> {
        let keep = serde_json::to_string(keep).unwrap_or_else(|_| "[]".to_owned());
        Ok(sqlx::query_scalar(
            "SELECT id FROM sessions WHERE last_active_at < ? \
             AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?",
        )
        .bind(before)
        .bind(&keep)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?)
    }

    /// Deletes those of `ids` still not used since `before` (ms), like [`Store::delete_session`],
    /// in one transaction; returns the ids deleted and the cache keys of their embeddings.
    pub async fn delete_idle_sessions(
        &self,
        ids: &[String],
        before: i64,
    ) -> Result<(Vec<String>, Vec<String>), StorageError> {
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned());
        let mut tx = self.writer.begin().await?;
        // Used since they were chosen: kept.
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM sessions WHERE id IN (SELECT value FROM json_each(?)) \
             AND last_active_at < ?",
        )
        .bind(&list)
        .bind(before)
        .fetch_all(&mut *tx)
        .await?;
        let list = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".to_owned());
        let keys: Vec<String> = sqlx::query_scalar(&format!(
            "DELETE FROM embedding_cache WHERE {MESSAGE_KEY_ID} IN \
             (SELECT m.id FROM messages m WHERE m.session_id IN (SELECT value FROM json_each(?))) \
             RETURNING cache_key"
        ))
        .bind(&list)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sessions WHERE id IN (SELECT value FROM json_each(?))")
            .bind(&list)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((ids, keys))
    }

    /// Looks a session up.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRow>, StorageError> {
        Ok(
            sqlx::query_as("SELECT token_hash, user_id FROM sessions WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.reader)
                .await?,
        )
    }

    /// Stores a user message without a reply (an imported one). If its `client_message_id` was
    /// stored before, returns that message and `true` instead of storing a second one.
    pub async fn insert_user_message(
        &self,
        session_id: &str,
        m: &NewUserMessage<'_>,
    ) -> Result<(ChatMessage, bool), StorageError> {
        match insert_user_row(&self.writer, session_id, m).await? {
            Some(row) => Ok((row.into(), false)),
            None => Ok((self.stored_instead(session_id, m).await?, true)),
        }
    }

    /// Starts a turn: marks the session used at `now` (as [`Store::touch_session`]), then stores
    /// user message `m` and after it an empty, streaming reply `reply_id` to it — one statement,
    /// so both or neither are stored. When `m`'s `client_message_id` was stored before, stores
    /// nothing and returns that message without a reply.
    pub async fn insert_turn(
        &self,
        session_id: &str,
        m: &NewUserMessage<'_>,
        reply_id: &str,
        now: i64,
    ) -> Result<(ChatMessage, Option<ChatMessage>), StorageError> {
        touch(&self.writer, session_id, now).await?;
        // One writer connection: nothing is inserted between the check and the insert.
        let sql = format!(
            "WITH next AS (SELECT COALESCE(MAX(seq), 0) AS seq FROM messages WHERE session_id = ?1), \
             fresh AS (SELECT 1 WHERE ?4 IS NULL OR NOT EXISTS \
               (SELECT 1 FROM messages WHERE session_id = ?1 AND client_message_id = ?4)) \
             INSERT INTO messages (id, session_id, seq, role, content, status, client_message_id, \
               reply_to, context_json, attachments_json, created_at) \
             SELECT ?2, ?1, next.seq + 1, '{user}', ?3, '{complete}', ?4, NULL, ?5, ?6, ?7 \
               FROM next, fresh \
             UNION ALL \
             SELECT ?8, ?1, next.seq + 2, '{assistant}', '', '{streaming}', NULL, ?2, NULL, NULL, ?7 \
               FROM next, fresh \
             RETURNING {MESSAGE_COLUMNS}",
            user = name(Role::User),
            complete = name(MessageStatus::Complete),
            assistant = name(Role::Assistant),
            streaming = name(MessageStatus::Streaming),
        );
        let rows: Vec<MessageRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(m.id)
            .bind(m.content)
            .bind(m.client_message_id)
            .bind(m.context.map(to_json))
            .bind((!m.attachments.is_empty()).then(|| to_json(&m.attachments)))
            .bind(m.created_at)
            .bind(reply_id)
            .fetch_all(&self.writer)
            .await?;
        let (mut message, mut reply) = (None, None);
        for row in rows {
            let row = ChatMessage::from(row);
            match row.role {
                Role::User => message = Some(row),
                _ => reply = Some(row),
            }
        }
        match (message, reply) {
            (Some(message), Some(reply)) => Ok((message, Some(reply))),
            (None, None) => Ok((self.stored_instead(session_id, m).await?, None)),
            _ => Err(StorageError::Corrupt(format!(
                "message {} stored without its reply",
                m.id
            ))),
        }
    }

    /// The message stored before with `m`'s `client_message_id` (an insert found it there).
    async fn stored_instead(
        &self,
        session_id: &str,
        m: &NewUserMessage<'_>,
    ) -> Result<ChatMessage, StorageError> {
        let cid = m
            .client_message_id
            .ok_or_else(|| StorageError::Corrupt(format!("message {} not inserted", m.id)))?;
        let stored = self.message_by_client_id(session_id, cid).await?;
        stored.ok_or_else(|| StorageError::Corrupt(format!("message {cid} vanished")))
    }

    /// Stores an `approval` message (the user's decisions about tool calls of the reply it answers
    /// to) after every message stored so far.
    pub async fn insert_approval(
        &self,
        session_id: &str,
        message: &ChatMessage,
    ) -> Result<(), StorageError> {
        let approvals = serde_json::to_string(&message.approvals)
            .map_err(|e| StorageError::Corrupt(e.to_string()))?;
        sqlx::query(
            "INSERT INTO messages (id, session_id, seq, role, content, status, reply_to, \
             approvals_json, created_at) \
             SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, ? FROM messages WHERE session_id = ?",
        )
        .bind(&message.id)
        .bind(session_id)
        .bind(name(Role::Approval))
        .bind(&message.content)
        .bind(name(MessageStatus::Complete))
        .bind(&message.reply_to)
        .bind(approvals)
        .bind(message.created_at)
        .bind(session_id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Resets a failed or stopped reply to empty and streaming, for a retry.
    pub async fn restart_reply(&self, session_id: &str, id: &str) -> Result<bool, StorageError> {
        let res = sqlx::query(
            "UPDATE messages SET content = '', status = ?, error_json = NULL, usage_json = NULL, \
             tool_rounds_json = NULL \
             WHERE session_id = ? AND id = ? AND role = ? AND status IN (?, ?)",
        )
        .bind(name(MessageStatus::Streaming))
        .bind(session_id)
        .bind(id)
        .bind(name(Role::Assistant))
        .bind(name(MessageStatus::Failed))
        .bind(name(MessageStatus::Stopped))
        .execute(&self.writer)
        .await?;
        Ok(res.rows_affected() == 1)
    }

    /// Writes a streaming reply's text and tool rounds so far (a crash keeps them); a reply that
    /// is no longer streaming is left as it is.
    pub async fn checkpoint_reply(
        &self,
        id: &str,
        content: &str,
        tool_rounds: &[ToolRound],
    ) -> Result<(), StorageError> {
        sqlx::query(
            "UPDATE messages SET content = ?, tool_rounds_json = ? WHERE id = ? AND status = ?",
        )
        .bind(content)
        .bind((!tool_rounds.is_empty()).then(|| to_json(&tool_rounds)))
        .bind(id)
        .bind(name(MessageStatus::Streaming))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Stores the final state of a reply and returns it.
    pub async fn finish_reply(
        &self,
        session_id: &str,
        id: &str,
        outcome: ReplyOutcome<'_>,
    ) -> Result<ChatMessage, StorageError> {
        let sql = format!(
            "UPDATE messages SET content = ?, status = ?, usage_json = ?, context_report_json = ?, \
             tool_rounds_json = ?, error_json = ? WHERE session_id = ? AND id = ? \
             RETURNING {MESSAGE_COLUMNS}"
        );
        let row: Option<MessageRow> = sqlx::query_as(&sql)
            .bind(outcome.content)
            .bind(name(outcome.status))
            .bind(outcome.usage.as_ref().map(to_json))
            .bind(outcome.receipt.map(to_json))
            .bind((!outcome.tool_rounds.is_empty()).then(|| to_json(outcome.tool_rounds)))
            .bind(outcome.error.map(to_json))
            .bind(session_id)
            .bind(id)
            .fetch_optional(&self.writer)
            .await?;
        row.map(ChatMessage::from)
            .ok_or_else(|| StorageError::Corrupt(format!("reply {id} vanished")))
    }

    /// A session's settings record (defaults when it never changed any).
    pub async fn settings(&self, session_id: &str) -> Result<SessionSettings, StorageError> {
        let raw: Option<Option<String>> =
            sqlx::query_scalar("SELECT settings_json FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&self.reader)
                .await?;
        Ok(from_json("settings_json", raw.flatten())?.unwrap_or_default())
    }

    /// Changes a session's settings record: `change` sees the stored record and edits it; when it
    /// returns `Ok`, the record is written in the same transaction (no change is lost to a
    /// concurrent one). Returns `change`'s value and the record as stored.
    pub async fn update_settings<R, E>(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut SessionSettings) -> Result<R, E>,
    ) -> Result<(R, SessionSettings), E>
    where
        E: From<StorageError>,
    {
        let mut tx = self.writer.begin().await.map_err(StorageError::from)?;
        let raw: Option<Option<String>> =
            sqlx::query_scalar("SELECT settings_json FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StorageError::from)?;
        let mut settings: SessionSettings =
            from_json("settings_json", raw.flatten())?.unwrap_or_default();
        let value = change(&mut settings)?;
        settings.version = glassbox_core::context::settings::SETTINGS_VERSION;
        sqlx::query("UPDATE sessions SET settings_json = ? WHERE id = ?")
            .bind(to_json(&settings))
            .bind(session_id)
            .execute(&mut *tx)
            .await
            .map_err(StorageError::from)?;
        tx.commit().await.map_err(StorageError::from)?;
        Ok((value, settings))
    }

    /// A cached summary of messages `first..=last` whose contents hash to `content_hash`.
    pub async fn summary(
        &self,
        session_id: &str,
        first: &str,
        last: &str,
        content_hash: &str,
    ) -> Result<Option<String>, StorageError> {
        Ok(sqlx::query_scalar(
            "SELECT summary FROM summaries WHERE session_id = ? AND first_message_id = ? \
             AND last_message_id = ? AND content_hash = ?",
        )
        .bind(session_id)
        .bind(first)
        .bind(last)
        .bind(content_hash)
        .fetch_optional(&self.reader)
        .await?)
    }

    /// Caches a summary (a concurrent identical write is a no-op).
    pub async fn put_summary(
        &self,
        session_id: &str,
        (first, last, content_hash): (&str, &str, &str),
        summary: &str,
        created_at: i64,
    ) -> Result<(), StorageError> {
        sqlx::query(
            "INSERT INTO summaries (session_id, first_message_id, last_message_id, content_hash, \
             summary, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(session_id)
        .bind(first)
        .bind(last)
        .bind(content_hash)
        .bind(summary)
        .bind(created_at)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Every message of a session, oldest first.
    pub async fn messages(&self, session_id: &str) -> Result<Vec<ChatMessage>, StorageError> {
        let sql =
            format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq");
        let rows: Vec<MessageRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(ChatMessage::from).collect())
    }

    /// The session's messages, oldest first, with only what topics and the filter read: id, role,
    /// text, status, time and mark (the JSON parts, receipts among them, are left at their
    /// defaults and not decoded).
    pub async fn message_texts(&self, session_id: &str) -> Result<Vec<ChatMessage>, StorageError> {
        let sql = format!(
            "SELECT {MESSAGE_TEXT_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq"
        );
        let rows: Vec<MessageTextRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(ChatMessage::from).collect())
    }

    /// A page of [`Store::message_texts`] read from the newest end: at most `limit` messages
    /// before position `before` (`i64::MAX`: from the newest), newest first, each with its
    /// position (the next page ends before the last one).
    pub async fn message_texts_before(
        &self,
        session_id: &str,
        before: i64,
        limit: i64,
    ) -> Result<Vec<(i64, ChatMessage)>, StorageError> {
        let sql = format!(
            "SELECT seq, {MESSAGE_TEXT_COLUMNS} FROM messages \
             WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?"
        );
        let rows: Vec<PlacedTextRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(before)
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(|r| (r.seq, r.text.into())).collect())
    }

    /// Sets or clears a message's mark; false when the session has no such message.
    pub async fn set_mark(
        &self,
        session_id: &str,
        message_id: &str,
        mark: Option<MessageMark>,
    ) -> Result<bool, StorageError> {
        let done = sqlx::query("UPDATE messages SET mark = ? WHERE session_id = ? AND id = ?")
            .bind(mark.map(name))
            .bind(session_id)
            .bind(message_id)
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(done > 0)
    }

    /// The session's topics as last extracted.
    pub async fn topics(&self, session_id: &str) -> Result<Option<SessionTopics>, StorageError> {
        let raw: Option<String> =
            sqlx::query_scalar("SELECT topics_json FROM session_topics WHERE session_id = ?")
                .bind(session_id)
                .fetch_optional(&self.reader)
                .await?;
        from_json("topics_json", raw)
    }

    /// Stores an extraction's topics unless a newer one (a higher generation) is stored already;
    /// true when written. One statement, so two extractions finishing together cannot both win.
    pub async fn put_topics(
        &self,
        session_id: &str,
        topics: &SessionTopics,
    ) -> Result<bool, StorageError> {
        insert_topics(&self.writer, session_id, topics).await
    }

    /// Stores an extraction's topics as [`Store::put_topics`] does and, when they are written,
    /// changes the session's settings in the same transaction: `change` sees the topics they
    /// replace (`None`: the first) and the settings record, which is written after it. A turn
    /// therefore never reads the new topics with a filter that names the old ones. Returns
    /// `change`'s value when the topics were written.
    pub async fn put_topics_and_settings<R>(
        &self,
        session_id: &str,
        topics: &SessionTopics,
        change: impl FnOnce(Option<&SessionTopics>, &mut SessionSettings) -> R,
    ) -> Result<Option<R>, StorageError> {
        let mut tx = self.writer.begin().await?;
        let replaced: Option<String> =
            sqlx::query_scalar("SELECT topics_json FROM session_topics WHERE session_id = ?")
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
        let replaced: Option<SessionTopics> = from_json("topics_json", replaced)?;
        if !insert_topics(&mut *tx, session_id, topics).await? {
            return Ok(None);
        }
        let raw: Option<Option<String>> =
            sqlx::query_scalar("SELECT settings_json FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
        let mut settings: SessionSettings =
            from_json("settings_json", raw.flatten())?.unwrap_or_default();
        let value = change(replaced.as_ref(), &mut settings);
        settings.version = glassbox_core::context::settings::SETTINGS_VERSION;
        sqlx::query("UPDATE sessions SET settings_json = ? WHERE id = ?")
            .bind(to_json(&settings))
            .bind(session_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(value))
    }

    /// The messages of a session up to and including `last_id`, oldest first.
    pub async fn history_through(
        &self,
        session_id: &str,
        last_id: &str,
    ) -> Result<Vec<ChatMessage>, StorageError> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? \
             AND seq <= (SELECT seq FROM messages WHERE session_id = ? AND id = ?) ORDER BY seq"
        );
        let rows: Vec<MessageRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(session_id)
            .bind(last_id)
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(ChatMessage::from).collect())
    }

    /// One message of a session.
    pub async fn message(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<ChatMessage>, StorageError> {
        let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id = ?");
        let row: Option<MessageRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(ChatMessage::from))
    }

    async fn message_by_client_id(
        &self,
        session_id: &str,
        cid: &str,
    ) -> Result<Option<ChatMessage>, StorageError> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND client_message_id = ?"
        );
        let row: Option<MessageRow> = sqlx::query_as(&sql)
            .bind(session_id)
            .bind(cid)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(ChatMessage::from))
    }
}

impl Store {
    /// Cached vectors of `model` for those of `keys` that have one.
    pub async fn cached_embeddings(
        &self,
        model: &str,
        keys: &[String],
    ) -> Result<std::collections::HashMap<String, Vec<f32>>, StorageError> {
        let mut found = std::collections::HashMap::new();
        // Bounded IN lists keep every statement well under the databases' parameter limits.
        for chunk in keys.chunks(200) {
            let placeholders = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT cache_key, vector FROM embedding_cache WHERE model = ? AND cache_key IN ({placeholders})"
            );
            let mut query = sqlx::query_as::<_, EmbeddingRow>(&sql).bind(model);
            for key in chunk {
                query = query.bind(key);
            }
            for row in query.fetch_all(&self.reader).await? {
                found.insert(row.cache_key, row.vector.0);
            }
        }
        Ok(found)
    }

    /// Stores vectors of `model` under their keys (an existing key keeps its vector).
    pub async fn put_embeddings(
        &self,
        model: &str,
        items: &[(String, Vec<f32>)],
    ) -> Result<(), StorageError> {
        let mut tx = self.writer.begin().await?;
        for (key, vector) in items {
            sqlx::query(
                "INSERT INTO embedding_cache (model, cache_key, vector) VALUES (?, ?, ?) \
                 ON CONFLICT (model, cache_key) DO NOTHING",
            )
            .bind(model)
            .bind(key)
            .bind(Vector::to_bytes(vector))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

impl Store {
    /// Deletes the cached vectors of `model` under `keys` (an agent item that changed).
    pub async fn delete_embeddings(
        &self,
        model: &str,
        keys: &[String],
    ) -> Result<(), StorageError> {
        let mut tx = self.writer.begin().await?;
        for chunk in keys.chunks(200) {
            let placeholders = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "DELETE FROM embedding_cache WHERE model = ? AND cache_key IN ({placeholders})"
            );
            let mut query = sqlx::query(&sql).bind(model);
            for key in chunk {
                query = query.bind(key);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Writes a session's topics unless a newer generation is stored (or the session is gone); true
/// when written.
async fn insert_topics<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Sqlite>,
    session_id: &str,
    topics: &SessionTopics,
) -> Result<bool, StorageError> {
    let generation = i64::try_from(topics.generation).unwrap_or(i64::MAX);
    let done = sqlx::query(
        "INSERT INTO session_topics (session_id, generation, topics_json, updated_at) \
         SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1) \
         ON CONFLICT (session_id) DO UPDATE SET generation = excluded.generation, \
         topics_json = excluded.topics_json, updated_at = excluded.updated_at \
         WHERE excluded.generation > session_topics.generation",
    )
    .bind(session_id)
    .bind(generation)
    .bind(to_json(topics))
    .bind(crate::ids::now_ms())
    .execute(db)
    .await?
    .rows_affected();
    Ok(done > 0)
}

fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn from_json<T: serde::de::DeserializeOwned>(
    col: &str,
    raw: Option<String>,
) -> Result<Option<T>, StorageError> {
    raw.map(|s| serde_json::from_str(&s).map_err(|e| StorageError::Corrupt(format!("{col}: {e}"))))
        .transpose()
}

/// Marks session `id` used at `now`, at most once a minute.
async fn touch<'c>(
    exec: impl sqlx::SqliteExecutor<'c>,
    id: &str,
    now: i64,
) -> Result<(), StorageError> {
    sqlx::query("UPDATE sessions SET last_active_at = ? WHERE id = ? AND last_active_at < ?")
        .bind(now)
        .bind(id)
        .bind(now - 60_000)
        .execute(exec)
        .await?;
    Ok(())
}

/// Inserts user message `m` after the session's last; `None` when its `client_message_id` was
/// stored before (nothing inserted).
async fn insert_user_row<'c>(
    exec: impl sqlx::SqliteExecutor<'c>,
    session_id: &str,
    m: &NewUserMessage<'_>,
) -> Result<Option<MessageRow>, StorageError> {
    let sql = format!(
        "INSERT INTO messages (id, session_id, seq, role, content, status, client_message_id, reply_to, \
         context_json, attachments_json, created_at) \
         SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, NULL, ?, ?, ? FROM messages WHERE session_id = ? \
         ON CONFLICT (session_id, client_message_id) DO NOTHING RETURNING {MESSAGE_COLUMNS}"
    );
    Ok(sqlx::query_as(&sql)
        .bind(m.id)
        .bind(session_id)
        .bind(name(Role::User))
        .bind(m.content)
        .bind(name(MessageStatus::Complete))
        .bind(m.client_message_id)
        .bind(m.context.map(to_json))
        .bind((!m.attachments.is_empty()).then(|| to_json(&m.attachments)))
        .bind(m.created_at)
        .bind(session_id)
        .fetch_optional(exec)
        .await?)
}
