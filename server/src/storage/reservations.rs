//! Tokens held for provider calls under way, beside what was spent (docs/configuration.md,
//! budgets): a call is admitted while every cap has tokens left, counting those held by calls
//! under way, and holds its prompt plus its reply's cap, itself cut to what is left; it settles
//! (spends what it used) when it ends. A reservation whose process ended expires.

use super::{Dialect, StorageError, Store, lock_session, on_db};

/// The caps a call must fit (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    pub session: u64,
    pub server_day: u64,
    pub user_day: u64,
}

/// Which cap has nothing left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reached {
    Session,
    ServerDay,
    UserDay,
}

/// A call about to be made: who, when, how big.
#[derive(Debug, Clone, Copy)]
pub struct Hold<'a> {
    /// The reservation's id.
    pub id: &'a str,
    pub session_id: &'a str,
    pub day: i64,
    /// The prompt's tokens (an estimate: our count).
    pub prompt: u64,
    /// The reply's cap asked for.
    pub output: u32,
    pub now: i64,
    pub expires_at: i64,
}

/// Every PostgreSQL transaction that reserves from a server-wide or a user's daily cap holds this
/// transaction-wide advisory lock ("gbudget"), so they count one at a time.
const BUDGET_LOCK: i64 = 0x6762_7564_6765_74;

impl Store {
    /// Holds `hold.prompt` plus a reply's cap for a call, when every cap in `caps` has tokens left
    /// (spent and held by calls under way counted); returns the reply's cap it may use: the one
    /// asked for, cut to what the tightest cap has left after the prompt (at least 1).
    pub async fn reserve_tokens(
        &self,
        hold: &Hold<'_>,
        caps: Caps,
    ) -> Result<Result<u32, Reached>, StorageError> {
        let spent_sql = "SELECT (SELECT tokens_used FROM sessions WHERE id = $1), \
               (SELECT tokens FROM usage_days WHERE day = $2), \
               (SELECT u.tokens FROM user_usage_days u JOIN sessions s \
                  ON s.user_id = u.user_id WHERE s.id = $1 AND u.day = $2)";
        let held_sql = "SELECT \
               CAST(COALESCE(SUM(CASE WHEN session_id = $1 THEN tokens ELSE 0 END), 0) AS BIGINT), \
               CAST(COALESCE(SUM(CASE WHEN day = $2 THEN tokens ELSE 0 END), 0) AS BIGINT), \
               CAST(COALESCE(SUM(CASE WHEN day = $2 AND user_id = \
                 (SELECT user_id FROM sessions WHERE id = $1) THEN tokens ELSE 0 END), 0) AS BIGINT) \
             FROM budget_reservations WHERE expires_at > $3";
        let out = on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            lock_session!(d, tx, hold.session_id);
            if d == Dialect::Postgres && (caps.server_day > 0 || caps.user_day > 0) {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(BUDGET_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("DELETE FROM budget_reservations WHERE expires_at <= $1")
                .bind(hold.now)
                .execute(&mut *tx)
                .await?;
            let spent: (Option<i64>, Option<i64>, Option<i64>) = sqlx::query_as(spent_sql)
                .bind(hold.session_id)
                .bind(hold.day)
                .fetch_one(&mut *tx)
                .await?;
            let held: (i64, i64, i64) = sqlx::query_as(held_sql)
                .bind(hold.session_id)
                .bind(hold.day)
                .bind(hold.now)
                .fetch_one(&mut *tx)
                .await?;
            let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
            let used = |s: Option<i64>, h: i64| n(s).saturating_add(h.max(0) as u64);
            let left = tightest(
                caps,
                [
                    used(spent.0, held.0),
                    used(spent.1, held.1),
                    used(spent.2, held.2),
                ],
            );
            let output = match left {
                Some(Err(reached)) => Err(reached),
                None => Ok(hold.output),
                Some(Ok(left)) => {
                    let room = left.saturating_sub(hold.prompt).max(1);
                    Ok(u32::try_from(room).unwrap_or(u32::MAX).min(hold.output))
                }
            };
            if let Ok(output) = output {
                sqlx::query(
                    "INSERT INTO budget_reservations (id, session_id, user_id, day, tokens, expires_at) \
                     SELECT $1, id, user_id, $2, $3, $4 FROM sessions WHERE id = $5",
                )
                .bind(hold.id)
                .bind(hold.day)
                .bind(i64::try_from(hold.prompt.saturating_add(u64::from(output))).unwrap_or(i64::MAX))
                .bind(hold.expires_at)
                .bind(hold.session_id)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            output
        });
        Ok(out)
    }

    /// Ends reservation `id` (when there was one) and adds `tokens` to what the session, the server
    /// and the session's verified user spent on `day`; returns the session's total.
    pub async fn settle_tokens(
        &self,
        id: Option<&str>,
        session_id: &str,
        day: i64,
        tokens: u64,
    ) -> Result<u64, StorageError> {
        if let Some(id) = id {
            on_db!(self, write, |db, d| {
                sqlx::query("DELETE FROM budget_reservations WHERE id = $1")
                    .bind(id)
                    .execute(db)
                    .await?;
            });
        }
        self.spend_tokens(session_id, day, tokens).await
    }
}

/// What the tightest cap set in `caps` has left, given what is used against each (session, server
/// today, user today): `None` when no cap is set, the cap reached when one has nothing left.
fn tightest(caps: Caps, used: [u64; 3]) -> Option<Result<u64, Reached>> {
    let limits = [
        (caps.session, Reached::Session),
        (caps.user_day, Reached::UserDay),
        (caps.server_day, Reached::ServerDay),
    ];
    let used_of = |r: Reached| match r {
        Reached::Session => used[0],
        Reached::ServerDay => used[1],
        Reached::UserDay => used[2],
    };
    let mut left: Option<u64> = None;
    for (limit, which) in limits {
        if limit == 0 {
            continue;
        }
        let used = used_of(which);
        if used >= limit {
            return Some(Err(which));
        }
        left = Some(left.map_or(limit - used, |l| l.min(limit - used)));
    }
    left.map(Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tightest_cap_decides_and_a_reached_one_refuses_in_order() {
        let caps = Caps {
            session: 100,
            server_day: 1_000,
            user_day: 0,
        };
        assert_eq!(tightest(caps, [40, 990, 0]), Some(Ok(10)));
        assert_eq!(tightest(caps, [100, 0, 0]), Some(Err(Reached::Session)));
        assert_eq!(tightest(caps, [0, 1_000, 0]), Some(Err(Reached::ServerDay)));
        assert_eq!(tightest(Caps::default(), [5, 5, 5]), None);
    }
}
