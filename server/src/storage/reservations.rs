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
    /// The call needs its whole reply cap (an answer cut short is of no use): refused rather
    /// than cut.
    pub whole: bool,
    pub now: i64,
    pub expires_at: i64,
}

/// Every PostgreSQL transaction that reserves from a server-wide or a user's daily cap holds this
/// transaction-wide advisory lock ("gbudget"), so they count one at a time.
const BUDGET_LOCK: i64 = 0x0067_6275_6467_6574;

impl Store {
    /// Holds `hold.prompt` plus a reply's cap for a call, when every cap in `caps` has tokens left
    /// (spent and held by calls under way counted); returns the reply's cap it may use: the one
    /// asked for, cut to what the tightest cap has left after the prompt (at least 1).
    pub async fn reserve_tokens(
        &self,
        hold: &Hold<'_>,
        caps: Caps,
    ) -> Result<Result<u32, Reached>, StorageError> {
        // One statement, so what it reads is one moment: a call settling meanwhile is counted
        // either as held or as spent, never neither.
        let sql = "SELECT (SELECT tokens_used FROM sessions WHERE id = $1), \
               (SELECT tokens FROM usage_days WHERE day = $2), \
               (SELECT u.tokens FROM user_usage_days u JOIN sessions s \
                  ON s.user_id = u.user_id WHERE s.id = $1 AND u.day = $2), \
               (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM budget_reservations \
                  WHERE session_id = $1 AND expires_at > $3), \
               (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM budget_reservations \
                  WHERE day = $2 AND expires_at > $3), \
               (SELECT CAST(COALESCE(SUM(r.tokens), 0) AS BIGINT) FROM budget_reservations r \
                  JOIN sessions s ON s.user_id = r.user_id \
                  WHERE s.id = $1 AND r.day = $2 AND r.expires_at > $3), \
               (SELECT user_id FROM sessions WHERE id = $1)";
        let out = on_db!(self, write, |db, d| {
            let mut tx = db.begin().await?;
            lock_session!(d, tx, hold.session_id);
            if d == Dialect::Postgres && (caps.server_day > 0 || caps.user_day > 0) {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(BUDGET_LOCK)
                    .execute(&mut *tx)
                    .await?;
            }
            #[allow(clippy::type_complexity)]
            let read: (
                Option<i64>,
                Option<i64>,
                Option<i64>,
                i64,
                i64,
                i64,
                Option<String>,
            ) = sqlx::query_as(sql)
                .bind(hold.session_id)
                .bind(hold.day)
                .bind(hold.now)
                .fetch_one(&mut *tx)
                .await?;
            let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
            let used = |s: Option<i64>, h: i64| n(s).saturating_add(h.max(0) as u64);
            // An anonymous session has no user's cap.
            let caps = Caps {
                user_day: if read.6.is_some() { caps.user_day } else { 0 },
                ..caps
            };
            let left = tightest(
                caps,
                [
                    used(read.0, read.3),
                    used(read.1, read.4),
                    used(read.2, read.5),
                ],
            );
            let output = match left {
                Some(Err(reached)) => Err(reached),
                None => Ok(hold.output),
                Some(Ok((left, which))) => {
                    let room = left.saturating_sub(hold.prompt).max(1);
                    let room = u32::try_from(room).unwrap_or(u32::MAX);
                    if hold.whole && room < hold.output {
                        Err(which)
                    } else {
                        Ok(room.min(hold.output))
                    }
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

    /// Forgets reservations that expired (their calls' processes ended); returns how many.
    pub async fn prune_reservations(&self, now: i64) -> Result<u64, StorageError> {
        let done = on_db!(self, write, |db, d| {
            sqlx::query("DELETE FROM budget_reservations WHERE expires_at <= $1")
                .bind(now)
                .execute(db)
                .await?
                .rows_affected()
        });
        Ok(done)
    }
}

/// What the tightest cap set in `caps` has left, and which it is, given what is used against each
/// (session, server today, user today): `None` when no cap is set, the cap reached when one has
/// nothing left.
fn tightest(caps: Caps, used: [u64; 3]) -> Option<Result<(u64, Reached), Reached>> {
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
    let mut left: Option<(u64, Reached)> = None;
    for (limit, which) in limits {
        if limit == 0 {
            continue;
        }
        let used = used_of(which);
        if used >= limit {
            return Some(Err(which));
        }
        if left.is_none_or(|(l, _)| limit - used < l) {
            left = Some((limit - used, which));
        }
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
        assert_eq!(
            tightest(caps, [40, 990, 0]),
            Some(Ok((10, Reached::ServerDay)))
        );
        assert_eq!(tightest(caps, [95, 0, 0]), Some(Ok((5, Reached::Session))));
        assert_eq!(tightest(caps, [100, 0, 0]), Some(Err(Reached::Session)));
        assert_eq!(tightest(caps, [0, 1_000, 0]), Some(Err(Reached::ServerDay)));
        assert_eq!(tightest(Caps::default(), [5, 5, 5]), None);
    }
}
