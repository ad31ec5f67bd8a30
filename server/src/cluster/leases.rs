//! Whose turn it is in a session when several instances share the database: a lease row with an
//! expiry, renewed while the reply streams, and an epoch that grows with each holder, so a holder
//! that stalled past its expiry finds out and stops (docs/instances.md).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use super::DB_NOW;

/// How long a lease lasts unless renewed.
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// How often a holder renews it.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How often an instance waiting for a session's turn looks again.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// Turn leases, taken as instance `holder`.
#[derive(Debug, Clone)]
pub struct Leases {
    pool: PgPool,
    holder: Arc<str>,
}

/// A session's turn, held until dropped (or lost: see [`TurnLease::lost`]).
pub struct TurnLease {
    pool: PgPool,
    session_id: String,
    epoch: i64,
    lost: watch::Receiver<bool>,
    renewing: tokio::task::JoinHandle<()>,
}

impl Leases {
    pub fn new(pool: PgPool, holder: Arc<str>) -> Self {
        Self { pool, holder }
    }

    /// Waits for the session's turn and takes it for reply `reply_id` (through database errors,
    /// which are logged: the caller ends the wait by dropping it, as a stop does).
    pub async fn acquire(&self, session_id: &str, reply_id: &str) -> TurnLease {
        let mut failing = 0u32;
        loop {
            match self.try_acquire(session_id, reply_id).await {
                Ok(Some(epoch)) => return self.hold(session_id, epoch),
                Ok(None) => tokio::time::sleep(WAIT_STEP).await,
                Err(e) => {
                    failing += 1;
                    tracing::warn!(session = %session_id, reply = %reply_id, error = %e, "the session's turn cannot be taken yet");
                    tokio::time::sleep(WAIT_STEP * failing.min(20)).await;
                }
            }
        }
    }

    /// Takes the session's turn if nobody holds it (or its holder let it expire): the new epoch.
    async fn try_acquire(
        &self,
        session_id: &str,
        reply_id: &str,
    ) -> Result<Option<i64>, sqlx::Error> {
        sqlx::query_scalar(&format!(
            "INSERT INTO turn_leases (session_id, holder, reply_id, epoch, expires_at) \
             VALUES ($1, $2, $3, 1, {DB_NOW} + $4) \
             ON CONFLICT (session_id) DO UPDATE SET holder = $2, reply_id = $3, \
               epoch = turn_leases.epoch + 1, expires_at = {DB_NOW} + $4 \
             WHERE turn_leases.expires_at < {DB_NOW} \
             RETURNING epoch"
        ))
        .bind(session_id)
        .bind(&*self.holder)
        .bind(reply_id)
        .bind(LEASE_TTL.as_millis() as i64)
        .fetch_optional(&self.pool)
        .await
    }

    fn hold(&self, session_id: &str, epoch: i64) -> TurnLease {
        let (tx, lost) = watch::channel(false);
        let (pool, session) = (self.pool.clone(), session_id.to_owned());
        let renewing = tokio::spawn(async move {
            let mut tick = tokio::time::interval(RENEW_EVERY);
            tick.tick().await;
            loop {
                tick.tick().await;
                let renewed = sqlx::query(&format!(
                    // Not once released (a renewal still under way as the lease is dropped).
                    "UPDATE turn_leases SET expires_at = {DB_NOW} + $1 \
                     WHERE session_id = $2 AND epoch = $3 AND expires_at <> 0"
                ))
                .bind(LEASE_TTL.as_millis() as i64)
                .bind(&session)
                .bind(epoch)
                .execute(&pool)
                .await;
                match renewed {
                    Ok(done) if done.rows_affected() == 1 => {}
                    Ok(_) => {
                        tracing::warn!(session = %session, epoch, "turn lease lost to another instance");
                        tx.send_replace(true);
                        return;
                    }
                    // Tried again at the next tick; the lease lasts three of them.
                    Err(e) => {
                        tracing::warn!(session = %session, error = %e, "turn lease not renewed")
                    }
                }
            }
        });
        TurnLease {
            pool: self.pool.clone(),
            session_id: session_id.to_owned(),
            epoch,
            lost,
            renewing,
        }
    }
}

impl TurnLease {
    /// Resolves when another instance took the turn (this holder stalled past the expiry): the
    /// reply must stop producing.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        let _ = lost.wait_for(|l| *l).await;
    }
}

impl Drop for TurnLease {
    fn drop(&mut self) {
        self.renewing.abort();
        let (pool, session, epoch) = (self.pool.clone(), self.session_id.clone(), self.epoch);
        // Released at once so the session's next turn need not wait for the expiry.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let released = sqlx::query(
                    "UPDATE turn_leases SET expires_at = 0, reply_id = '' \
                     WHERE session_id = $1 AND epoch = $2",
                )
                .bind(&session)
                .bind(epoch)
                .execute(&pool)
                .await;
                if let Err(e) = released {
                    tracing::warn!(session = %session, error = %e, "turn lease not released (it expires)");
                }
            });
        }
    }
}
