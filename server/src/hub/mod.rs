//! Live sessions: each has a frame numbering with a replay log, a broadcast to its connections, a lock
//! that runs replies one at a time, and a count of attached clients that cancels a reply nobody awaits.
//! On one process the numbering and the log are in memory; when several instances share PostgreSQL
//! they are the database's frame log ([`shared`]), which [`listen`] follows.

pub mod delta_size;
pub mod listen;
pub mod shared;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use glassbox_core::ErrorCode;
use glassbox_core::sync::{ReplayLog, Resume};
use glassbox_core::wire::{ServerEvent, ServerFrame, WireError};
use tokio::sync::{broadcast, watch};

use crate::cluster::frames::PartialText;
use crate::cluster::{FrameLog, FrameLogError};
use shared::SharedLog;

/// What a deleted session's tabs are told, and a reply whose session was deleted ends with.
pub const SESSION_DELETED: &str = "this session was deleted";

/// Frames kept per session for replay to reconnecting clients.
const REPLAY_CAPACITY: usize = 4096;
/// Frames a slow connection may fall behind before it resumes from the replay log. The channel
/// allocates every slot up front, so it stays small and carries shared pointers.
const BROADCAST_CAPACITY: usize = 256;

/// Frame numbering plus the text of replies still streaming.
struct LogState {
    log: ReplayLog,
    partial: PartialText,
}

/// Where a session's frames are numbered and kept.
enum Log {
    /// In this process (one instance).
    Memory(Mutex<LogState>),
    /// In the database several instances share.
    Shared(Arc<SharedLog>),
}

/// The live state of one session.
pub struct Hub {
    pub session_id: String,
    log: Log,
    frames: broadcast::Sender<Arc<ServerFrame>>,
    /// Held while a reply streams: replies of one session run in order.
    pub turn_lock: tokio::sync::Mutex<()>,
    clients: Mutex<usize>,
    abandoned: watch::Sender<bool>,
    grace: Duration,
    /// Held while the filter's view is read and numbered, so views reach every tab in the order
    /// of the state they show (a slower, older read never lands after a newer one).
    pub view_lock: tokio::sync::Mutex<()>,
    /// Set when an existing session comes back to life in this process (a resume): its next turn
    /// reminds the model of the session's context sets.
    resume_pending: AtomicBool,
    /// The current topic labels' vectors, while the session is live.
    pub labels: crate::embed::labels::LabelVectors,
    /// The stop tokens of the replies under way or waiting their turn.
    pub stops: crate::stops::ReplyStops,
}

impl Hub {
    fn new(session_id: String, shared: Option<&FrameLog>, grace: Duration) -> Self {
        let frames = broadcast::channel(BROADCAST_CAPACITY).0;
        let log = match shared {
            Some(shared) => Log::Shared(SharedLog::start(
                session_id.clone(),
                shared.clone(),
                frames.clone(),
            )),
            None => Log::Memory(Mutex::new(LogState {
                log: ReplayLog::new(first_sync_id(), REPLAY_CAPACITY),
                partial: PartialText::default(),
            })),
        };
        Self {
            session_id,
            log,
            frames,
            turn_lock: tokio::sync::Mutex::new(()),
            view_lock: tokio::sync::Mutex::new(()),
            clients: Mutex::new(0),
            abandoned: watch::channel(false).0,
            grace,
            labels: Default::default(),
            stops: Default::default(),
            resume_pending: AtomicBool::new(false),
        }
    }

    /// Numbers a session event, keeps it for replay and sends it to every connection (on every
    /// instance, when they share the database: after it is written there).
    pub fn publish(&self, event: ServerEvent) {
        match &self.log {
            Log::Memory(state) => {
                let mut state = lock(state);
                state.partial.apply(&event);
                let frame = state.log.push(event);
                // Sent under the lock so every receiver sees frames in id order.
                let _ = self.frames.send(frame);
            }
            Log::Shared(log) => log.publish(event),
        }
    }

    /// Numbers a frame meant for one connection only.
    pub fn private(&self, event: ServerEvent) -> ServerFrame {
        ServerFrame {
            sync_id: self.reserve(),
            event,
        }
    }

    /// Takes the id of a frame for one connection whose contents are read after this point.
    pub fn reserve(&self) -> u64 {
        match &self.log {
            Log::Memory(state) => lock(state).log.reserve(),
            Log::Shared(log) => log.private_id(),
        }
    }

    /// Reserves the id of a snapshot and returns, with it, the text streamed so far of every reply in
    /// flight: a snapshot built from the database plus this text reflects every frame up to the id.
    pub async fn snapshot_point(&self) -> Result<(u64, HashMap<String, String>), FrameLogError> {
        match &self.log {
            Log::Memory(state) => {
                let mut state = lock(state);
                let id = state.log.reserve();
                Ok((id, state.partial.0.clone()))
            }
            Log::Shared(log) => log.snapshot_point().await,
        }
    }

    /// Brings this instance's connections up to the frames published so far, here (written at
    /// once) and by other instances (nothing to do on one process). Called before a connection
    /// looks back, so what it reads reflects them and ids it is given follow them.
    pub async fn ready(&self) {
        if let Log::Shared(log) = &self.log
            && let Err(e) = log.flush_and_catch_up().await
        {
            tracing::warn!(session = %self.session_id, error = %e, "frame log unreadable");
        }
    }

    /// Sends this instance's connections the frames other instances wrote since the last they
    /// were sent (what the listener does on a notification; nothing on one process).
    pub async fn follow(&self) {
        if let Log::Shared(log) = &self.log
            && let Err(e) = log.catch_up().await
        {
            tracing::warn!(session = %self.session_id, error = %e, "frame log unreadable");
        }
    }

    /// The newest frame of the frame log this instance's connections were sent (shared only).
    fn delivered(&self) -> Option<u64> {
        match &self.log {
            Log::Shared(log) => log.delivered(),
            Log::Memory(_) => None,
        }
    }

    /// Subscribes to the session's frames.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ServerFrame>> {
        self.frames.subscribe()
    }

    /// What a client that has seen up to `seen` missed.
    pub async fn resume(&self, seen: u64) -> Resume {
        match &self.log {
            Log::Memory(state) => lock(state).log.since(seen),
            Log::Shared(log) => log.resume(seen).await,
        }
    }

    /// True once after the session was resumed: the turn that asks takes the reminder.
    pub fn take_resume(&self) -> bool {
        self.resume_pending.swap(false, Ordering::AcqRel)
    }

    /// Whether the next turn gets the resume reminder (a preview looks without taking it).
    pub fn resume_due(&self) -> bool {
        self.resume_pending.load(Ordering::Acquire)
    }

    /// Registers an attached client until the lease is dropped.
    pub fn attach(self: &Arc<Self>) -> ClientLease {
        *self.clients.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.abandoned.send_replace(false);
        ClientLease { hub: self.clone() }
    }

    /// Resolves when no client has been attached for the grace period. Never when instances share
    /// the database: a client cut from this instance may be reading the reply on another (the
    /// reply runs to its end, within its token cap).
    pub async fn abandoned(&self) {
        if matches!(self.log, Log::Shared(_)) {
            return std::future::pending().await;
        }
        let mut rx = self.abandoned.subscribe();
        let _ = rx.wait_for(|gone| *gone).await;
    }

    fn detach(self: &Arc<Self>) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        *clients -= 1;
        if *clients > 0 {
            return;
        }
        let hub = Arc::downgrade(self);
        let grace = self.grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if let Some(hub) = hub.upgrade()
                && *hub.clients.lock().unwrap_or_else(|p| p.into_inner()) == 0
            {
                hub.abandoned.send_replace(true);
            }
        });
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Log::Shared(log) = &self.log {
            log.close();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A client attached to a session (a WebSocket, or a REST request in flight).
pub struct ClientLease {
    hub: Arc<Hub>,
}

impl Drop for ClientLease {
    fn drop(&mut self) {
        self.hub.detach();
    }
}

/// All live sessions. A session stays live while anything holds its hub; idle ones are dropped.
#[derive(Default)]
pub struct Hubs {
    /// The frame log several instances share (PostgreSQL); none: frames numbered in memory.
    shared: Option<FrameLog>,
    /// The other instances, told when a session is deleted here.
    cluster: Option<crate::cluster::Cluster>,
    /// The sessions' writers to it, while they run (a hub dropped leaves its writer to finish).
    writers: Mutex<Vec<Weak<SharedLog>>>,
    live: Mutex<HashMap<String, Weak<Hub>>>,
    /// Recently used hubs kept alive so reconnecting clients can resume from the replay log.
    recent: Mutex<HashMap<String, (Arc<Hub>, tokio::time::Instant)>>,
}

/// Microseconds since the Unix epoch: below 2^53 (exact in JavaScript numbers) until the year 2255.
fn first_sync_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// How long an unused session keeps its replay log.
const KEEP_IDLE: Duration = Duration::from_secs(120);

impl Hubs {
    /// Hubs whose frames go through the frame log the instances of `cluster` share.
    pub fn clustered(cluster: crate::cluster::Cluster) -> Self {
        Self {
            shared: Some(cluster.frames.clone()),
            cluster: Some(cluster),
            ..Self::default()
        }
    }

    /// The hub of a session, created if it is not live.
    ///
    /// A new hub numbers frames from the current time in microseconds, so ids keep increasing across
    /// server restarts without storing them (a client whose id is ahead of ours gets a snapshot anyway).
    /// `resumed` marks a session that existed before (its next turn gets the resume reminder when
    /// the hub is new here).
    pub fn get_or_create(&self, session_id: &str, grace: Duration, resumed: bool) -> Arc<Hub> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let hub = match live.get(session_id).and_then(Weak::upgrade) {
            Some(hub) => hub,
            None => {
                let hub = Arc::new(Hub::new(session_id.to_owned(), self.shared.as_ref(), grace));
                if let Log::Shared(log) = &hub.log {
                    let mut writers = lock(&self.writers);
                    writers.retain(|w| w.strong_count() > 0);
                    writers.push(Arc::downgrade(log));
                }
                hub.resume_pending.store(resumed, Ordering::Release);
                live.insert(session_id.to_owned(), Arc::downgrade(&hub));
                hub
            }
        };
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.insert(
            session_id.to_owned(),
            (hub.clone(), tokio::time::Instant::now()),
        );
        hub
    }

    /// The session's hub when it is live (a tab connected, a reply running, or used recently).
    pub fn get(&self, session_id: &str) -> Option<Arc<Hub>> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session_id)
            .and_then(Weak::upgrade)
    }

    /// Sessions in use now: a tab connected or a reply running (or queued).
    pub fn live_ids(&self) -> Vec<String> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(id, w)| {
                let hub = w.upgrade()?;
                let clients = *hub.clients.lock().unwrap_or_else(|p| p.into_inner());
                (clients > 0 || hub.turn_lock.try_lock().is_err()).then(|| id.clone())
            })
            .collect()
    }

    /// Forgets a deleted session: its live hub tells every tab it is gone, and is dropped — on
    /// every instance.
    pub fn remove(&self, session_id: &str) {
        self.forget_here(session_id);
        if let Some(cluster) = self.cluster.clone() {
            let command = crate::cluster::Command::Deleted {
                session_id: session_id.to_owned(),
            };
            tokio::spawn(async move {
                if let Err(e) = cluster.send(&command).await {
                    tracing::warn!(error = %e, "other instances not told of a deleted session");
                }
            });
        }
    }

    /// [`Hubs::remove`] on this instance only (another instance deleted the session).
    pub fn forget_here(&self, session_id: &str) {
        let hub = self
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id)
            .and_then(|w| w.upgrade());
        self.recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
        if let Some(hub) = hub {
            let gone = ServerEvent::Error(WireError::new(ErrorCode::Unauthorized, SESSION_DELETED));
            match &hub.log {
                Log::Memory(_) => hub.publish(gone),
                // Its frame log went with it: this instance's tabs are told directly, in order
                // with the frames being sent to them.
                Log::Shared(log) => {
                    let log = Arc::clone(log);
                    tokio::spawn(async move { log.send_here(vec![gone]).await });
                }
            }
        }
    }

    /// Live hubs of sessions that frame log notifications name.
    pub fn live(&self) -> Vec<Arc<Hub>> {
        lock(&self.live)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Whether logged frame `seq` of a session is news to this instance's live hub of it.
    pub fn behind(&self, session_id: &str, seq: u64) -> Option<Arc<Hub>> {
        let hub = self.get(session_id)?;
        hub.delivered().is_none_or(|d| d < seq).then_some(hub)
    }

    /// Waits until every live session's published frames are written (each at most a moment,
    /// all at most `within`): a process that ends after this has lost none (on one process there
    /// is nothing to wait for).
    pub async fn settle(&self, within: Duration) {
        let logs: Vec<Arc<SharedLog>> = lock(&self.writers)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let settled = futures::future::join_all(logs.iter().map(|log| log.settled()));
        if tokio::time::timeout(within, settled).await.is_err() {
            tracing::warn!("frames still unwritten at exit");
        }
    }

    /// Forgets sessions unused for a while (their state is in the database).
    pub fn sweep(&self) {
        let now = tokio::time::Instant::now();
        self.recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, (_, used)| now - *used < KEEP_IDLE);
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, w| w.strong_count() > 0);
    }
}
