//! A session's frames when several instances share PostgreSQL: published frames wait in an
//! outbox, are numbered and written by the frame log (deltas coalesced for up to
//! [`COALESCE`]), and reach this instance's connections in the table's order — those this
//! instance wrote as soon as they commit, those of other instances when their `NOTIFY` arrives
//! (docs/instances.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use glassbox_core::sync::Resume;
use glassbox_core::wire::{ServerEvent, ServerFrame};
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

use crate::cluster::frames::{private_id, seq_of, sync_id};
use crate::cluster::{FrameLog, FrameLogError, Logged, Since};
use crate::hub::delta_size::DELTA_FRAME_BYTES;

/// How long reply text waits to be written with the pieces that follow it: one write (and one
/// commit and `NOTIFY`) per this much streaming, not one per piece.
pub const COALESCE: Duration = Duration::from_millis(50);
/// Longest a connection waits for frames published before it looked to be written.
const SETTLE_WAIT: Duration = Duration::from_secs(2);
/// Attempts to write a batch before its frames are given up (each logged).
const WRITE_ATTEMPTS: u32 = 5;

/// Frames published and not yet written.
#[derive(Default)]
struct Outbox {
    events: Vec<ServerEvent>,
    /// When the oldest waiting frame was published.
    since: Option<Instant>,
    /// A frame other than reply text waits: written at once.
    urgent: bool,
}

/// What this instance's connections have been sent.
#[derive(Default)]
struct Ids {
    /// The newest logged frame sent to this instance's connections (`None` until first read).
    delivered: Option<u64>,
    /// Frames numbered for one connection since then.
    private: u64,
}

/// One session's shared frames on this instance.
pub struct SharedLog {
    session_id: String,
    frames: FrameLog,
    sender: broadcast::Sender<Arc<ServerFrame>>,
    outbox: Mutex<Outbox>,
    wake: Notify,
    /// The hub is gone: the writer ends once the outbox is empty.
    closed: AtomicBool,
    /// Events published so far, and those written (or given up) so far.
    published: AtomicU64,
    written: AtomicU64,
    /// Told after each batch is written.
    wrote: Notify,
    /// Held while frames are sent to this instance's connections, so they go out in order.
    delivery: tokio::sync::Mutex<()>,
    ids: Mutex<Ids>,
}

impl SharedLog {
    /// The session's log, sending to `sender`; its writer runs in the background.
    pub fn start(
        session_id: String,
        frames: FrameLog,
        sender: broadcast::Sender<Arc<ServerFrame>>,
    ) -> Arc<Self> {
        let log = Arc::new(Self {
            session_id,
            frames,
            sender,
            outbox: Mutex::new(Outbox::default()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            published: AtomicU64::new(0),
            written: AtomicU64::new(0),
            wrote: Notify::new(),
            delivery: tokio::sync::Mutex::new(()),
            ids: Mutex::new(Ids::default()),
        });
        tokio::spawn(log.clone().write_loop());
        log
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ids(&self) -> MutexGuard<'_, Ids> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a frame for every connection of the session, on every instance.
    pub fn publish(&self, event: ServerEvent) {
        let mut outbox = self.outbox();
        outbox.urgent |= !matches!(event, ServerEvent::Delta(_));
        outbox.since.get_or_insert_with(Instant::now);
        outbox.events.push(event);
        self.published.fetch_add(1, Ordering::AcqRel);
        drop(outbox);
        self.wake.notify_one();
    }

    /// Sends `events` to this instance's connections only, each numbered as a frame for one
    /// connection (after every frame sent so far, in order with them): what a deleted session's
    /// tabs here still hear, once its frame log is gone.
    pub async fn send_here(&self, events: Vec<ServerEvent>) {
        let _in_order = self.delivery.lock().await;
        for event in events {
            let sync_id = self.private_id();
            let _ = self.sender.send(Arc::new(ServerFrame { sync_id, event }));
        }
    }

    /// The id of a frame for one connection: after every frame sent so far.
    pub fn private_id(&self) -> u64 {
        let mut ids = self.ids();
        ids.private += 1;
        private_id(ids.delivered.unwrap_or(0), ids.private)
    }

    /// The newest logged frame this instance's connections were sent.
    pub fn delivered(&self) -> Option<u64> {
        self.ids().delivered
    }

    /// Ends the writer once what waits is written.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Resolves once every event published before the call is written (or given up), or after
    /// [`SETTLE_WAIT`]: what is published meanwhile is not waited for.
    pub async fn settled(&self) {
        let target = self.published.load(Ordering::Acquire);
        let wait = async {
            loop {
                let wrote = self.wrote.notified();
                tokio::pin!(wrote);
                wrote.as_mut().enable();
                if self.written.load(Ordering::Acquire) >= target {
                    return;
                }
                wrote.await;
            }
        };
        if tokio::time::timeout(SETTLE_WAIT, wait).await.is_err() {
            tracing::warn!(session = %self.session_id, "frames slow to be written");
        }
    }

    /// Sends this instance's connections every frame logged since the last they were sent.
    pub async fn catch_up(&self) -> Result<(), FrameLogError> {
        self.deliver(None).await
    }

    /// Writes what this instance published (not waiting out the coalescing), then catches up:
    /// a connection that looks back next sees every frame published before it looked.
    pub async fn flush_and_catch_up(&self) -> Result<(), FrameLogError> {
        {
            let mut outbox = self.outbox();
            if outbox.since.is_some() {
                outbox.urgent = true;
            }
        }
        self.wake.notify_one();
        self.settled().await;
        self.catch_up().await
    }

    /// What a client that has seen `seen` missed, up to what this instance's connections were
    /// sent (frames after that reach it through the subscription taken before).
    pub async fn resume(&self, seen: u64) -> Resume {
        let read = async {
            self.flush_and_catch_up().await?;
            let through = {
                let mut ids = self.ids();
                let through = ids.delivered.unwrap_or(0);
                // The client saw frames numbered here for one connection after `through` (on
                // this instance or another): ids given next come after those.
                if seq_of(seen) == through {
                    ids.private = ids.private.max(seen - sync_id(through));
                }
                through
            };
            self.frames
                .since(&self.session_id, seq_of(seen), Some(through))
                .await
        };
        match read.await {
            Ok(Since::Frames(frames)) => {
                Resume::Frames(frames.iter().map(|f| Arc::new(Logged::frame(f))).collect())
            }
            Ok(Since::Gap) => Resume::Snapshot,
            Err(e) => {
                tracing::warn!(session = %self.session_id, error = %e, "frame log unreadable: snapshot instead");
                Resume::Snapshot
            }
        }
    }

    /// The id of a snapshot and the text streamed so far of each reply in flight, as of that id.
    pub async fn snapshot_point(&self) -> Result<(u64, HashMap<String, String>), FrameLogError> {
        self.flush_and_catch_up().await?;
        let (id, through) = {
            let mut ids = self.ids();
            ids.private += 1;
            let through = ids.delivered.unwrap_or(0);
            (private_id(through, ids.private), through)
        };
        let partial = self.frames.partial(&self.session_id, through).await?;
        Ok((id, partial))
    }

    /// Sends logged frames to this instance's connections in order: `written` (just written
    /// here) when they follow the last sent, else whatever the table has after it.
    async fn deliver(&self, written: Option<Vec<Logged>>) -> Result<(), FrameLogError> {
        let _in_order = self.delivery.lock().await;
        let current = match self.delivered() {
            Some(current) => current,
            // First use: what was logged before this instance looked is for replay, not live.
            None => {
                let start = match written.as_deref() {
                    Some([first, ..]) => first.seq - 1,
                    _ => self.frames.last_seq(&self.session_id).await?,
                };
                self.ids().delivered = Some(start);
                start
            }
        };
        let batch = match written {
            Some(w) if w.first().is_some_and(|f| f.seq == current + 1) => w,
            Some(w) if w.last().is_none_or(|l| l.seq <= current) => Vec::new(),
            _ => match self.frames.since(&self.session_id, current, None).await? {
                Since::Frames(frames) => frames,
                Since::Gap => {
                    // Pruned before this instance read them (it was not reading): its
                    // connections resume from the next frames, a reconnecting one by snapshot.
                    let last = self.frames.last_seq(&self.session_id).await?;
                    tracing::warn!(session = %self.session_id, from = current, to = last, "frames gone before delivery");
                    self.ids().delivered = Some(last);
                    Vec::new()
                }
            },
        };
        for logged in batch {
            let _ = self.sender.send(Arc::new(logged.frame()));
            let mut ids = self.ids();
            ids.delivered = Some(logged.seq);
            ids.private = 0;
        }
        Ok(())
    }

    /// Writes what is published, in order: reply text after [`COALESCE`], anything else at once.
    async fn write_loop(self: Arc<Self>) {
        loop {
            let wait = {
                let outbox = self.outbox();
                match outbox.since {
                    None if self.closed.load(Ordering::Acquire) => return,
                    None => None,
                    Some(_) if outbox.urgent => Some(Duration::ZERO),
                    Some(since) => Some(COALESCE.saturating_sub(since.elapsed())),
                }
            };
            match wait {
                None => self.wake.notified().await,
                Some(wait) if !wait.is_zero() => {
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.wake.notified() => {}
                    }
                }
                Some(_) => {
                    let events = std::mem::take(&mut *self.outbox()).events;
                    let taken = events.len() as u64;
                    self.write(coalesce(events)).await;
                    self.written.fetch_add(taken, Ordering::AcqRel);
                    self.wrote.notify_waiters();
                }
            }
        }
    }

    /// Writes a batch (trying again a few times), then sends it to this instance's connections.
    async fn write(&self, events: Vec<ServerEvent>) {
        let mut attempt = 0;
        let written = loop {
            attempt += 1;
            match self.frames.append(&self.session_id, events.clone()).await {
                Ok(written) => break written,
                // Deleted: its tabs here still hear the end of what was under way (a reply's
                // error), numbered for them alone, as the deletion notice is; a request waiting
                // for that end would otherwise wait forever.
                Err(e) if is_gone(&e) => return self.send_here(events).await,
                Err(e) if attempt >= WRITE_ATTEMPTS => {
                    // Lost: a tab has the text again from the stored reply when it reloads.
                    tracing::error!(session = %self.session_id, frames = events.len(), error = %e, "frames lost: not written to the frame log");
                    return;
                }
                Err(e) => {
                    tracing::warn!(session = %self.session_id, attempt, error = %e, "frames not written yet");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
            }
        };
        if let Err(e) = self.deliver(Some(written)).await {
            tracing::warn!(session = %self.session_id, error = %e, "frames written but not yet sent here");
        }
    }
}

/// The session was deleted (its frames cannot be written).
fn is_gone(e: &FrameLogError) -> bool {
    matches!(e, FrameLogError::Database(sqlx::Error::Database(db)) if db.is_foreign_key_violation())
}

/// Joins consecutive pieces of the same reply's text into one frame, until a frame holds
/// [`DELTA_FRAME_BYTES`]: the frames a connection sends stay as large as a single instance's.
fn coalesce(events: Vec<ServerEvent>) -> Vec<ServerEvent> {
    let mut out: Vec<ServerEvent> = Vec::with_capacity(events.len());
    for event in events {
        match (out.last_mut(), event) {
            (Some(ServerEvent::Delta(last)), ServerEvent::Delta(next))
                if last.message_id == next.message_id && last.text.len() < DELTA_FRAME_BYTES =>
            {
                last.text.push_str(&next.text);
            }
            (_, event) => out.push(event),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::wire::Delta;

    fn delta(id: &str, text: &str) -> ServerEvent {
        ServerEvent::Delta(Delta {
            message_id: id.into(),
            text: text.into(),
        })
    }

    #[test]
    fn pieces_of_one_reply_join_and_nothing_moves_across_another_frame() {
        let tool = ServerEvent::Budget(glassbox_core::wire::SessionBudget { limit: 1, used: 0 });
        let joined = coalesce(vec![
            delta("a", "x"),
            delta("a", "y"),
            delta("b", "z"),
            tool.clone(),
            delta("b", "w"),
            delta("b", "v"),
        ]);
        assert_eq!(
            joined,
            vec![delta("a", "xy"), delta("b", "z"), tool, delta("b", "wv")]
        );
    }

    #[test]
    fn a_frame_stops_joining_once_it_holds_the_frame_size() {
        // 8,000 bytes in pieces of 4, as a fast provider sends them within one write's wait.
        let pieces: Vec<ServerEvent> = (0..2_000)
            .map(|i| delta("a", &format!("{:03} ", i % 1000)))
            .collect();
        let joined = coalesce(pieces);
        let texts: Vec<&str> = joined
            .iter()
            .map(|e| match e {
                ServerEvent::Delta(d) => d.text.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(
            texts.iter().map(|t| t.len()).collect::<Vec<_>>(),
            [DELTA_FRAME_BYTES, 8_000 - DELTA_FRAME_BYTES]
        );
        let whole: String = (0..2_000).map(|i| format!("{:03} ", i % 1000)).collect();
        assert_eq!(texts.concat(), whole, "every character once, in order");
    }
}
