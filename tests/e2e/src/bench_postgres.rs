//! A benchmark's PostgreSQL database on the cluster `GLASSBOX_BENCH_POSTGRES_URL` names (as
//! `cargo xtask bench gateway` and `bench context` start one), and what requests cost it
//! (`pg_stat_statements`, `pg_stat_database`, `pg_stat_user_tables`).

use std::time::Duration;

use anyhow::Result;
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

/// The cluster's admin URL (its `postgres` database), when the bench was given one.
pub fn cluster() -> Option<String> {
    std::env::var("GLASSBOX_BENCH_POSTGRES_URL").ok()
}

/// A fresh database on the cluster.
pub struct Database {
    pub url: String,
}

/// Counters read at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    statements: i64,
    notifies: i64,
    commits: i64,
    frames: i64,
}

/// What one request cost, on average.
#[derive(Debug, Clone, Copy)]
pub struct PerRequest {
    pub statements: f64,
    pub commits: f64,
    pub notifies: f64,
    pub frames: f64,
}

impl Counts {
    /// The cost per request of `n` requests since `before`.
    pub fn since(&self, before: &Counts, n: usize) -> PerRequest {
        let per = |a: i64, b: i64| (a - b) as f64 / n.max(1) as f64;
        PerRequest {
            statements: per(self.statements, before.statements),
            commits: per(self.commits, before.commits),
            notifies: per(self.notifies, before.notifies),
            frames: per(self.frames, before.frames),
        }
    }
}

impl Database {
    /// Makes database `name` anew on the cluster `admin` names (its `postgres` database),
    /// with `pg_stat_statements`.
    pub async fn create(admin: &str, name: &str) -> Result<Self> {
        let mut conn = PgConnection::connect(admin).await?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await?;
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => anyhow::bail!("not a database URL: {admin}"),
        };
        let mut db = PgConnection::connect(&url).await?;
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&mut db)
            .await?;
        Ok(Self { url })
    }

    /// The counters now. The statements' are live; a connection reports its commits and
    /// rows when it has been idle a while (up to 10 s since PostgreSQL 15), so they are read
    /// after 11 s of quiet and then until they stop moving.
    pub async fn counts(&self) -> Result<Counts> {
        tokio::time::sleep(Duration::from_secs(11)).await;
        let mut conn = PgConnection::connect(&self.url).await?;
        let mut last: Option<Counts> = None;
        for _ in 0..30 {
            let (statements, notifies): (i64, i64) = sqlx::query_as(
                "SELECT coalesce(sum(calls), 0)::bigint, \
                        coalesce(sum(calls) FILTER (WHERE query ILIKE '%pg_notify%'), 0)::bigint \
                 FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            )
            .fetch_one(&mut conn)
            .await?;
            sqlx::query("SELECT pg_stat_clear_snapshot()")
                .execute(&mut conn)
                .await?;
            let commits: i64 = sqlx::query_scalar(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
            )
            .fetch_one(&mut conn)
            .await?;
            let frames: i64 = sqlx::query_scalar(
                "SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_stat_user_tables WHERE relname = 'frames'",
            )
            .fetch_one(&mut conn)
            .await?;
            let now = Counts {
                statements,
                notifies,
                commits,
                frames,
            };
            // Our own reads add a few commits each round: "still" is within them.
            if let Some(prev) = last
                && now.commits - prev.commits <= 4
                && now.frames == prev.frames
            {
                return Ok(now);
            }
            last = Some(now);
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        Ok(last.unwrap_or(Counts {
            statements: 0,
            notifies: 0,
            commits: 0,
            frames: 0,
        }))
    }
}
