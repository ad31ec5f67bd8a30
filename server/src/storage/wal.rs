//! SQLite's write-ahead log, copied back into the database file by a task of its own.
//!
//! In WAL mode every commit appends to the log and, with `synchronous = NORMAL`, waits for no
//! disk flush. What does flush is a checkpoint (copying the log into the database). Left to SQLite,
//! the commit that takes the log past `wal_autocheckpoint` pages runs one itself, on the only
//! writer connection, so one request in a few dozen waits for the flush and every write queued
//! behind it does too. Here a task on a connection of its own runs a `PASSIVE` checkpoint every
//! [`EVERY`]: it copies what no reader still needs and never blocks the writer, which goes on
//! appending meanwhile. The writer keeps a far higher threshold ([`BACKSTOP_PAGES`]) in case the
//! task falls behind (or cannot open its connection).

use std::time::Duration;

use sqlx::ConnectOptions as _;
use sqlx::Connection as _;
use sqlx::sqlite::SqliteConnectOptions;
use tokio_util::sync::{CancellationToken, DropGuard};

/// How often the log is checkpointed.
pub const EVERY: Duration = Duration::from_millis(500);

/// Pages (4 KiB each) the log may hold before the writer checkpoints it itself: 80 MiB, against
/// SQLite's default of 1,000 pages.
pub const BACKSTOP_PAGES: u32 = 20_000;

/// Bytes the log file is cut back to when it starts over (it would otherwise keep the largest
/// size it ever reached).
pub const FILE_LIMIT_BYTES: u64 = 16 << 20;

/// The running checkpoint task; it ends when this is dropped (with the store's last clone).
#[derive(Debug)]
pub struct Checkpointer {
    _stop: DropGuard,
}

/// Opens the checkpoint connection with `options` (the writer's) and starts the task.
pub async fn start(options: &SqliteConnectOptions) -> Result<Checkpointer, sqlx::Error> {
    let mut conn = options.connect().await?;
    let stop = CancellationToken::new();
    let cancelled = stop.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                biased;
                () = cancelled.cancelled() => break,
                _ = tick.tick() => {}
            }
            match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&mut conn)
                .await
            {
                // Said once per failing stretch, not twice a second.
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "WAL checkpoint failed; the writer checkpoints past its backstop");
                }
                Err(_) => {}
                Ok(_) => failing = false,
            }
        }
        let _ = conn.close().await;
    });
    Ok(Checkpointer {
        _stop: stop.drop_guard(),
    })
}
