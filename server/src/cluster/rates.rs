//! Rate limits several instances share: one row per limit and key, taken with a single upsert
//! that admits or refuses (GCRA: the row holds the key's theoretical arrival time; `n` per
//! `period` with a burst of `n`, as the in-memory limiter of one process counts).

use std::time::Duration;

use sqlx::PgPool;

use super::DB_NOW;

/// The shared rate limits, over the database's pool.
#[derive(Debug, Clone)]
pub struct Rates {
    pool: PgPool,
}

impl Rates {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Takes one of `n` per `period` for `key`: `Ok(())`, or how long until one is free.
    pub async fn take(
        &self,
        key: &str,
        n: u32,
        period: Duration,
    ) -> Result<Result<(), Duration>, sqlx::Error> {
        let n = i64::from(n.max(1));
        let emission = (period.as_millis() as i64 / n).max(1);
        let tolerance = emission * (n - 1);
        let taken: Option<i64> = sqlx::query_scalar(&format!(
            "INSERT INTO rate_limits (key, tat) VALUES ($1, {DB_NOW} + $2) \
             ON CONFLICT (key) DO UPDATE SET tat = GREATEST(rate_limits.tat, {DB_NOW}) + $2 \
             WHERE GREATEST(rate_limits.tat, {DB_NOW}) <= {DB_NOW} + $3 \
             RETURNING tat"
        ))
        .bind(key)
        .bind(emission)
        .bind(tolerance)
        .fetch_optional(&self.pool)
        .await?;
        if taken.is_some() {
            return Ok(Ok(()));
        }
        let wait: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT GREATEST(tat - ({DB_NOW} + $2), 1) FROM rate_limits WHERE key = $1"
        ))
        .bind(key)
        .bind(tolerance)
        .fetch_optional(&self.pool)
        .await?;
        Ok(Err(Duration::from_millis(wait.unwrap_or(1).max(1) as u64)))
    }

    /// Forgets keys back at their full allowance; returns how many.
    pub async fn prune(&self) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(&format!("DELETE FROM rate_limits WHERE tat < {DB_NOW}"))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
