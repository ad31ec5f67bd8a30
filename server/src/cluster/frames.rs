//! The frame log several instances share: each session's frames numbered by a counter row and
//! written in one transaction with a `NOTIFY`, read back by any instance (docs/instances.md).

use std::collections::HashMap;

use glassbox_core::wire::{ServerEvent, ServerFrame};
use sqlx::PgPool;

use crate::ids::now_ms;

/// The channel each flush notifies, with payload `{session_id}:{last_seq}`.
pub const FRAMES_CHANNEL: &str = "glassbox_frames";

/// A frame's sync id is its number in the table shifted left by this many bits: the ids between
/// two logged frames are left for frames meant for one connection (see [`private_id`]).
pub const SEQ_SHIFT: u32 = 20;

/// The sync id of the logged frame numbered `seq`.
pub fn sync_id(seq: u64) -> u64 {
    seq << SEQ_SHIFT
}

/// The number of the newest logged frame a client that has seen `sync_id` has.
pub fn seq_of(sync_id: u64) -> u64 {
    sync_id >> SEQ_SHIFT
}

/// The sync id of the `n`th frame for one connection after logged frame `seq`: above `seq`'s,
/// below the next logged one's (`n` past the room left stays at its top).
pub fn private_id(seq: u64, n: u64) -> u64 {
    sync_id(seq) + n.clamp(1, (1 << SEQ_SHIFT) - 1)
}

/// Most frames a reconnecting client is sent from the table; further behind, it gets a snapshot.
pub const MAX_REPLAY: i64 = 4096;

/// How long logged frames are kept (a client away longer gets a snapshot).
pub const KEEP_MS: i64 = 10 * 60 * 1000;

/// Why the frame log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameLogError {
    #[error("frame log: {0}")]
    Database(#[from] sqlx::Error),
    #[error("frame log: a stored frame is corrupt: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// A logged frame: its number and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub seq: u64,
    pub event: ServerEvent,
}

impl Logged {
    /// The frame as clients receive it.
    pub fn frame(&self) -> ServerFrame {
        ServerFrame {
            sync_id: sync_id(self.seq),
            event: self.event.clone(),
        }
    }
}

/// What a client that has seen up to a logged frame finds in the table.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// Every frame after it, in order (possibly none).
    Frames(Vec<Logged>),
    /// Some are gone (older than what is kept) or were never written (the client knows numbers
    /// the table does not): the client needs a snapshot.
    Gap,
}

/// The shared frame log, over the database's pool.
#[derive(Debug, Clone)]
pub struct FrameLog {
    pool: PgPool,
}

/// The reply a frame is about (kept in its own column for [`FrameLog::partial`]).
fn reply_of(event: &ServerEvent) -> Option<&str> {
    match event {
        ServerEvent::ReplyStart(r) => Some(&r.message_id),
        ServerEvent::Delta(d) => Some(&d.message_id),
        ServerEvent::Done(d) => Some(&d.message.id),
        ServerEvent::Error(e) => e.message_id.as_deref(),
        _ => None,
    }
}

impl FrameLog {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Numbers `events` of a session after the frames logged before, writes them and notifies
    /// every instance, in one transaction; returns them numbered. Nothing is written for no events.
    pub async fn append(
        &self,
        session_id: &str,
        events: Vec<ServerEvent>,
    ) -> Result<Vec<Logged>, FrameLogError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let n = events.len() as i64;
        let mut rows = Vec::with_capacity(events.len());
        for event in &events {
            let json = serde_json::to_string(&ServerFrame {
                sync_id: 0,
                event: event.clone(),
            })?;
            let kind: &'static str = event.into();
            rows.push((kind, reply_of(event).map(str::to_owned), json));
        }
        let mut tx = self.pool.begin().await?;
        // The counter row's lock is held to the commit: numbers commit in order.
        let last: i64 = sqlx::query_scalar(
            "INSERT INTO frame_counters (session_id, last_seq) VALUES ($1, $2) \
             ON CONFLICT (session_id) DO UPDATE SET last_seq = frame_counters.last_seq + $2 \
             RETURNING last_seq",
        )
        .bind(session_id)
        .bind(n)
        .fetch_one(&mut *tx)
        .await?;
        let first = last - n + 1;
        let mut builder = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO frames (session_id, seq, kind, message_id, event, created_at) ",
        );
        let now = now_ms();
        builder.push_values(
            rows.iter().enumerate(),
            |mut b, (i, (kind, reply, json))| {
                b.push_bind(session_id)
                    .push_bind(first + i as i64)
                    .push_bind(*kind)
                    .push_bind(reply.as_deref())
                    .push_bind(json.as_str())
                    .push_bind(now);
            },
        );
        builder.build().execute(&mut *tx).await?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(FRAMES_CHANNEL)
            .bind(format!("{session_id}:{last}"))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Logged {
                seq: (first + i as i64) as u64,
                event,
            })
            .collect())
    }

    /// The number of the session's newest logged frame (0 before any).
    pub async fn last_seq(&self, session_id: &str) -> Result<u64, FrameLogError> {
        let last: Option<i64> =
            sqlx::query_scalar("SELECT last_seq FROM frame_counters WHERE session_id = $1")
                .bind(session_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(last.unwrap_or(0).max(0) as u64)
    }

    /// The session's frames after number `seen`, up to `through` when given.
    pub async fn since(
        &self,
        session_id: &str,
        seen: u64,
        through: Option<u64>,
    ) -> Result<Since, FrameLogError> {
        let last = self.last_seq(session_id).await?;
        if seen > last {
            return Ok(Since::Gap);
        }
        let through = through.unwrap_or(last).min(last);
        if seen >= through {
            return Ok(Since::Frames(Vec::new()));
        }
        if through - seen > MAX_REPLAY as u64 {
            return Ok(Since::Gap);
        }
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT seq, event FROM frames WHERE session_id = $1 AND seq > $2 AND seq <= $3 \
             ORDER BY seq",
        )
        .bind(session_id)
        .bind(seen as i64)
        .bind(through as i64)
        .fetch_all(&self.pool)
        .await?;
        // Numbers are consecutive: a missing one was pruned.
        if rows.len() as u64 != through - seen {
            return Ok(Since::Gap);
        }
        let mut frames = Vec::with_capacity(rows.len());
        for (seq, json) in rows {
            let frame: ServerFrame = serde_json::from_str(&json)?;
            frames.push(Logged {
                seq: seq as u64,
                event: frame.event,
            });
        }
        Ok(Since::Frames(frames))
    }

    /// The text streamed up to frame `through` of each reply still in flight then (started and
    /// neither done nor failed), among the frames kept.
    pub async fn partial(
        &self,
        session_id: &str,
        through: u64,
    ) -> Result<HashMap<String, String>, FrameLogError> {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT event FROM frames WHERE session_id = $1 AND seq <= $2 \
             AND message_id IS NOT NULL ORDER BY seq",
        )
        .bind(session_id)
        .bind(through as i64)
        .fetch_all(&self.pool)
        .await?;
        let mut partial = PartialText::default();
        for json in rows {
            let frame: ServerFrame = serde_json::from_str(&json)?;
            partial.apply(&frame.event);
        }
        Ok(partial.0)
    }

    /// Deletes frames older than what is kept, but none of a session with a reply in flight (a
    /// snapshot rebuilds its text from them); returns how many.
    pub async fn prune(&self) -> Result<u64, FrameLogError> {
        let done = sqlx::query(
            "DELETE FROM frames f WHERE created_at < $1 AND NOT EXISTS \
             (SELECT 1 FROM messages m WHERE m.session_id = f.session_id AND m.status = 'streaming')",
        )
            .bind(now_ms() - KEEP_MS)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}

/// The text of each reply in flight, followed frame by frame.
#[derive(Debug, Default, Clone)]
pub struct PartialText(pub HashMap<String, String>);

impl PartialText {
    /// Follows one frame: a reply starts, grows, or ends.
    pub fn apply(&mut self, event: &ServerEvent) {
        match event {
            ServerEvent::ReplyStart(r) => {
                self.0.insert(r.message_id.clone(), String::new());
            }
            ServerEvent::Delta(d) => {
                if let Some(text) = self.0.get_mut(&d.message_id) {
                    text.push_str(&d.text);
                }
            }
            ServerEvent::Done(d) => {
                self.0.remove(&d.message.id);
            }
            ServerEvent::Error(e) => {
                if let Some(id) = &e.message_id {
                    self.0.remove(id);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ids_sit_between_two_logged_frames() {
        assert!(private_id(7, 1) > sync_id(7));
        assert!(private_id(7, u64::MAX) < sync_id(8));
        assert_eq!(seq_of(private_id(7, 3)), 7);
        assert_eq!(seq_of(sync_id(9)), 9);
        // Ids stay exact in JavaScript numbers for 2^33 logged frames of a session.
        assert!(sync_id(1 << 32) < (1 << 53));
    }
}
