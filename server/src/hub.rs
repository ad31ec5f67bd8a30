//! Live sessions: each has a frame numbering with a replay log, a broadcast to its connections, a lock
//! that runs replies one at a time, and a count of attached clients that cancels a reply nobody awaits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use glassbox_core::ErrorCode;
use glassbox_core::sync::{ReplayLog, Resume};
use glassbox_core::wire::{ServerEvent, ServerFrame, WireError};
use tokio::sync::{broadcast, watch};

/// Frames kept per session for replay to reconnecting clients.
const REPLAY_CAPACITY: usize = 4096;
/// Frames a slow connection may fall behind before it resumes from the replay log. The channel
/// allocates every slot up front, so it stays small and carries shared pointers.
const BROADCAST_CAPACITY: usize = 256;

/// Frame numbering plus the text of replies still streaming.
struct LogState {
    log: ReplayLog,
    partial: HashMap<String, String>,
}

/// The live state of one session.
pub struct Hub {
    pub session_id: String,
    log: Mutex<LogState>,
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
    fn new(session_id: String, last_sync_id: u64, grace: Duration) -> Self {
        Self {
            session_id,
            log: Mutex::new(LogState {
                log: ReplayLog::new(last_sync_id, REPLAY_CAPACITY),
                partial: HashMap::new(),
            }),
            frames: broadcast::channel(BROADCAST_CAPACITY).0,
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

    fn state(&self) -> MutexGuard<'_, LogState> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Numbers a session event, keeps it for replay and sends it to every connection.
    pub fn publish(&self, event: ServerEvent) -> ServerFrame {
        let mut state = self.state();
        match &event {
            ServerEvent::ReplyStart(r) => {
                state.partial.insert(r.message_id.clone(), String::new());
            }
            ServerEvent::Delta(d) => {
                if let Some(text) = state.partial.get_mut(&d.message_id) {
                    text.push_str(&d.text);
                }
            }
            ServerEvent::Done(d) => {
                state.partial.remove(&d.message.id);
            }
            ServerEvent::Error(e) => {
                if let Some(id) = &e.message_id {
                    state.partial.remove(id);
                }
            }
            _ => {}
        }
        let frame = state.log.push(event);
        // Sent under the lock so every receiver sees frames in id order.
        let _ = self.frames.send(Arc::new(frame.clone()));
        frame
    }

    /// Numbers a frame meant for one connection only.
    pub fn private(&self, event: ServerEvent) -> ServerFrame {
        self.state().log.number(event)
    }

    /// Takes the id of a frame for one connection whose contents are read after this point.
    pub fn reserve(&self) -> u64 {
        self.state().log.reserve()
    }

    /// Reserves the id of a snapshot and returns, with it, the text streamed so far of every reply in
    /// flight: a snapshot built from the database plus this text reflects every frame up to the id.
    pub fn snapshot_point(&self) -> (u64, HashMap<String, String>) {
        let mut state = self.state();
        let id = state.log.reserve();
        (id, state.partial.clone())
    }

    /// Subscribes to the session's frames.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ServerFrame>> {
        self.frames.subscribe()
    }

    /// What a client that has seen up to `seen` missed.
    pub fn resume(&self, seen: u64) -> Resume {
        self.state().log.since(seen)
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

    /// Resolves when no client has been attached for the grace period.
    pub async fn abandoned(&self) {
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
                let hub = Arc::new(Hub::new(session_id.to_owned(), first_sync_id(), grace));
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

    /// Forgets a deleted session: its live hub tells every tab it is gone, and is dropped.
    pub fn remove(&self, session_id: &str) {
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
            hub.publish(ServerEvent::Error(WireError::new(
                ErrorCode::Unauthorized,
                "this session was deleted",
            )));
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
