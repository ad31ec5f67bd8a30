//! Verified users' sessions: the list the session drawer shows, and titles.

use glassbox_core::vocab::Role;
use glassbox_core::wire::{SessionSummary, session_title};
use serde::Deserialize;

use super::named::name;
use super::{StorageError, Store, from_json, on_db};

/// The most sessions a list holds (the newest).
pub const MAX_LISTED_SESSIONS: i64 = 200;

/// A listed session as read: the title is made from its first user message unless renamed.
#[derive(sqlx_macros::FromRow)]
struct SummaryRow {
    id: String,
    title: Option<String>,
    first_message: Option<String>,
    updated_at: i64,
    settings_json: Option<String>,
}

/// The part of a session's settings a list shows.
#[derive(Deserialize)]
struct AgentOnly {
    #[serde(default)]
    agent: Option<String>,
}

impl Store {
    /// The sessions of `user_id` that have a message or a title, newest first (by their last
    /// message), at most [`MAX_LISTED_SESSIONS`].
    pub async fn user_sessions(&self, user_id: &str) -> Result<Vec<SessionSummary>, StorageError> {
        // The first 400 characters are enough for any title (it is cut to 80).
        let sql = "SELECT s.id, s.title, s.settings_json, \
                    (SELECT substr(m.content, 1, 400) FROM messages m \
                      WHERE m.session_id = s.id AND m.role = $2 ORDER BY m.seq LIMIT 1) \
                      AS first_message, \
                    COALESCE((SELECT m.created_at FROM messages m WHERE m.session_id = s.id \
                      ORDER BY m.seq DESC LIMIT 1), s.created_at) AS updated_at \
               FROM sessions s \
              WHERE s.user_id = $1 \
                AND (s.title IS NOT NULL OR EXISTS (SELECT 1 FROM messages m \
                      WHERE m.session_id = s.id)) \
              ORDER BY updated_at DESC, s.id LIMIT $3";
        let rows: Vec<SummaryRow> = on_db!(self, read, |db, d| {
            sqlx::query_as(sql)
                .bind(user_id)
                .bind(name(Role::User))
                .bind(MAX_LISTED_SESSIONS)
                .fetch_all(db)
                .await?
        });
        rows.into_iter()
            .map(|r| {
                let agent =
                    from_json::<AgentOnly>("settings_json", r.settings_json)?.and_then(|s| s.agent);
                let title = r
                    .title
                    .or(r.first_message)
                    .map(|t| session_title(&t))
                    .unwrap_or_default();
                Ok(SessionSummary {
                    session_id: r.id,
                    title,
                    updated_at: r.updated_at,
                    agent,
                })
            })
            .collect()
    }

    /// Sets the title of session `id` (`None`: its first message again); false when there is no
    /// such session.
    pub async fn rename_session(
        &self,
        id: &str,
        title: Option<&str>,
    ) -> Result<bool, StorageError> {
        let sql = "UPDATE sessions SET title = $1 WHERE id = $2";
        let done = on_db!(self, write, |db, d| {
            sqlx::query(sql)
                .bind(title)
                .bind(id)
                .execute(db)
                .await?
                .rows_affected()
        });
        Ok(done > 0)
    }
}
