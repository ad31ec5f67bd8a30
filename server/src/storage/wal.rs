//! SQLite's write-ahead log, copied back into the database file by a task of its own.
//!
//! In WAL mode every commit appends to the log and, with `synchronous = NORMAL`, waits for no
//! disk flush. What does flush is a checkpoint (copying the log into the database). Left to SQLite,
//! the commit that takes the log past `wal_autocheckpoint` pages runs one itself, on the only
//! writer connection, so one request in a few dozen waits for the flush and every write queued
//! behind it does too. Here a task checkpoints on a [`Schedule`], in up to two steps:
//!
//! 1. a `PASSIVE` checkpoint on a connection of its own copies what no reader still needs and
//!    never blocks the writer, which goes on appending meanwhile;
//! 2. once the log holds [`Schedule::restart_pages`], a second one runs on the writer connection itself,
//!    between two writes, and copies only the frames appended during step 1.
//!
//! Step 2 is what lets the log start over from its beginning: SQLite rewinds it when a write begins
//! on a log copied to its end, which under constant load never happens while the writer commits
//! during every checkpoint. The log then grew to the writer's far higher threshold
//! ([`BACKSTOP_PAGES`], kept in case the task falls behind or cannot open its connection), whose
//! checkpoint of the whole log held every write for 40–75 ms (`cargo xtask bench gateway`, c=16).
//! Step 2 holds the writer for its two flushes, a few milliseconds under load, so it runs only
//! when the log is that long, not at every tick.

use std::time::Duration;

use sqlx::ConnectOptions as _;
use sqlx::Connection as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool, SqlitePoolOptions};
use tokio_util::sync::{CancellationToken, DropGuard};

/// When the task checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// How often the log is checkpointed beside the writer (step 1).
    pub every: Duration,
    /// Frames in the log from which step 2 lets it start over.
    pub restart_pages: i64,
}

impl Schedule {
    /// Step 1 every 100 ms, so each copy is short; step 2 from 8,192 pages (32 MiB), half the
    /// size the file is cut back to ([`FILE_LIMIT_BYTES`]), so a log that starts over keeps its
    /// file.
    pub const DEFAULT: Schedule = Schedule {
        every: Duration::from_millis(100),
        restart_pages: 8_192,
    };
}

/// Pages (4 KiB each) the log may hold before the writer checkpoints it itself: 80 MiB, against
/// SQLite's default of 1,000 pages.
pub const BACKSTOP_PAGES: u32 = 20_000;

/// Bytes the log file is cut back to when it starts over (it would otherwise keep the largest
/// size it ever reached, such as the backstop's).
pub const FILE_LIMIT_BYTES: u64 = 64 << 20;

/// The one writer connection to the database `options` open, with the log's limits for the
/// checkpoint task ([`BACKSTOP_PAGES`], [`FILE_LIMIT_BYTES`]).
pub async fn open_writer(options: &SqliteConnectOptions) -> Result<SqlitePool, sqlx::Error> {
    // An in-process database's connection cannot have gone away: no ping on each acquire
    // (a round trip to the connection's thread, several per request).
    SqlitePoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(
            options
                .clone()
                .pragma("wal_autocheckpoint", BACKSTOP_PAGES.to_string())
                .pragma("journal_size_limit", FILE_LIMIT_BYTES.to_string()),
        )
        .await
}

/// The running checkpoint task; it ends when this is dropped (with the store's last clone), and
/// lets go of its clone of the writer's pool then.
#[derive(Debug)]
pub struct Checkpointer {
    _stop: DropGuard,
}

/// Opens the checkpoint connection with `options` (the writer's) and starts the task on
/// `schedule`, which ends its steps on `writer` (the pool of the one writer connection).
pub async fn start(
    options: &SqliteConnectOptions,
    writer: SqlitePool,
    schedule: Schedule,
) -> Result<Checkpointer, sqlx::Error> {
    let mut conn = options.connect().await?;
    let stop = CancellationToken::new();
    let cancelled = stop.clone();
    tokio::spawn(async move {
        let every = schedule.every;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        // Step 2 runs once the log holds `due` frames: `restart_pages`, and after a step 2 that
        // did not let the log start over (a reader still on an old snapshot), as many again.
        let (mut due, mut last) = (schedule.restart_pages, 0);
        loop {
            tokio::select! {
                biased;
                () = cancelled.cancelled() => break,
                _ = tick.tick() => {}
            }
            let done = match checkpoint(&mut conn).await {
                Ok(log) => {
                    if log < last {
                        due = schedule.restart_pages;
                    }
                    last = log;
                    if log < due {
                        Ok(())
                    } else {
                        // Long enough to start over: the rest between two of the writer's writes.
                        let ran = match writer.acquire().await {
                            Ok(mut w) => checkpoint(&mut w).await.map(drop),
                            Err(e) => Err(e),
                        };
                        if ran.is_ok() {
                            due = log.saturating_add(schedule.restart_pages);
                        }
                        ran
                    }
                }
                Err(e) => Err(e),
            };
            match done {
                // Said once per failing stretch, not at every tick.
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "WAL checkpoint failed; the writer checkpoints past its backstop");
                }
                Err(_) => {}
                Ok(()) => failing = false,
            }
        }
        let _ = conn.close().await;
    });
    Ok(Checkpointer {
        _stop: stop.drop_guard(),
    })
}

/// One `PASSIVE` checkpoint on `conn`; answers the frames in the log.
async fn checkpoint(conn: &mut SqliteConnection) -> Result<i64, sqlx::Error> {
    // (busy, frames in the log, frames copied); -1, -1 when the database is not in WAL mode.
    let (_busy, log, _copied): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await?;
    Ok(log)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use sqlx::sqlite::{SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

    use super::*;

    /// Under writes that never pause, the log still starts over (step 2): with the file cut back
    /// to 64 pages at each start, it stays a small part of what was written (~7 % here). Without
    /// step 2 it held every frame written, ~4× the rows' bytes (the writer's own checkpoint is
    /// out of reach here).
    #[tokio::test]
    async fn the_log_starts_over_under_constant_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal);
        let limit_bytes: u64 = 64 * 4096;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                options
                    .clone()
                    .pragma("wal_autocheckpoint", "1000000")
                    .pragma("journal_size_limit", limit_bytes.to_string()),
            )
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .execute(&writer)
            .await
            .unwrap();
        let schedule = Schedule {
            every: Duration::from_millis(20),
            restart_pages: 32,
        };
        let _task = start(&options, writer.clone(), schedule).await.unwrap();
        let wal = dir.path().join("wal.db-wal");
        let body = vec![7u8; 3000];
        let (mut written, mut largest) = (0u64, 0u64);
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(1500) {
            // Each insert a commit of its own, with the next one right behind it.
            sqlx::query("INSERT INTO t (body) VALUES (?1)")
                .bind(&body)
                .execute(&writer)
                .await
                .unwrap();
            written += body.len() as u64;
            largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        }
        assert!(
            written > 8 * limit_bytes,
            "too few writes to tell: {written} B"
        );
        assert!(
            largest < written / 4,
            "the log grew to {largest} B over {written} B written; it never started over"
        );
    }
}
