//! The instances sharing a database: each says it is alive every few seconds, and the replies a
//! silent one was producing are marked failed and retryable by the others (docs/instances.md).

use std::sync::Arc;
use std::time::Duration;

use glassbox_core::vocab::MessageStatus;
use glassbox_core::wire::WireError;
use sqlx::PgPool;

use super::DB_NOW;

/// How often an instance says it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// An instance not heard from for this long is gone.
pub const ALIVE_WITHIN: Duration = Duration::from_secs(20);

/// This instance among those sharing the database.
#[derive(Debug, Clone)]
pub struct Instances {
    pool: PgPool,
    id: Arc<str>,
}

/// A reply marked failed because its instance is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub session_id: String,
    pub message_id: String,
}

impl Instances {
    pub fn new(pool: PgPool, id: Arc<str>) -> Self {
        Self { pool, id }
    }

    /// Records that this instance is alive now (and forgets instances gone for a day).
    /// Times are the database's clock, the one clock every instance shares.
    pub async fn beat(&self) -> Result<(), sqlx::Error> {
        sqlx::query(&format!(
            "INSERT INTO instances (id, seen_at) VALUES ($1, {DB_NOW}) \
             ON CONFLICT (id) DO UPDATE SET seen_at = {DB_NOW}"
        ))
        .bind(&*self.id)
        .execute(&self.pool)
        .await?;
        sqlx::query(&format!(
            "DELETE FROM instances WHERE seen_at < {DB_NOW} - 86400000"
        ))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Marks failed (with `error`) the streaming replies whose instance is gone, or unknown
    /// (written before instances were recorded); returns them.
    pub async fn fail_orphans(&self, error: &WireError) -> Result<Vec<Orphan>, sqlx::Error> {
        let json = serde_json::to_string(error).unwrap_or_default();
        let rows: Vec<(String, String)> = sqlx::query_as(&format!(
            "UPDATE messages SET status = $1, error_json = $2 \
             WHERE status = $3 AND (producer IS NULL OR producer NOT IN \
               (SELECT id FROM instances WHERE seen_at > {DB_NOW} - $4)) \
             RETURNING session_id, id",
        ))
        .bind(<&'static str>::from(MessageStatus::Failed))
        .bind(json)
        .bind(<&'static str>::from(MessageStatus::Streaming))
        .bind(ALIVE_WITHIN.as_millis() as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(session_id, message_id)| Orphan {
                session_id,
                message_id,
            })
            .collect())
    }
}
