//! Sync ids: the server numbers its frames per session and keeps a bounded log of recent ones, so a
//! client that reconnects with its last seen id gets exactly the frames it missed (or a snapshot).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::wire::{ServerEvent, ServerFrame};

/// What a reconnecting client must receive.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// These frames, in order (possibly none).
    Frames(Vec<Arc<ServerFrame>>),
    /// The gap is not covered by the log: send the full history instead.
    Snapshot,
}

/// A session's frame numbering and bounded replay log.
#[derive(Debug, Clone)]
pub struct ReplayLog {
    last_id: u64,
    /// Every logged frame with an id at or below this is gone (evicted, or from before this log).
    forgotten_up_to: u64,
    /// Shared with the connections they were sent to (a reply's last frame holds the whole
    /// message, not copied again here).
    frames: VecDeque<Arc<ServerFrame>>,
    capacity: usize,
}

impl ReplayLog {
    /// A log whose next frame gets `last_id + 1`, keeping at most `capacity` frames.
    pub fn new(last_id: u64, capacity: usize) -> Self {
        Self {
            last_id,
            forgotten_up_to: last_id,
            frames: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// The id of the newest frame numbered so far.
    pub fn last_id(&self) -> u64 {
        self.last_id
    }

    /// Numbers an event and keeps it for replay.
    pub fn push(&mut self, event: ServerEvent) -> Arc<ServerFrame> {
        let frame = Arc::new(self.number(event));
        if self.frames.len() == self.capacity
            && let Some(evicted) = self.frames.pop_front()
        {
            self.forgotten_up_to = evicted.sync_id;
        }
        self.frames.push_back(frame.clone());
        frame
    }

    /// Numbers an event meant for one connection only (not replayed to others).
    pub fn number(&mut self, event: ServerEvent) -> ServerFrame {
        ServerFrame {
            sync_id: self.reserve(),
            event,
        }
    }

    /// Takes the next id for a frame whose contents are read after this point: any frame numbered
    /// later reflects state at least as new.
    pub fn reserve(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }

    /// What a client that has seen everything up to `seen` needs.
    pub fn since(&self, seen: u64) -> Resume {
        if seen > self.last_id {
            return Resume::Snapshot; // The client knows ids we never issued (e.g. we restarted).
        }
        if seen < self.forgotten_up_to {
            return Resume::Snapshot;
        }
        Resume::Frames(
            self.frames
                .iter()
                .filter(|f| f.sync_id > seen)
                .cloned()
                .collect(),
        )
    }
}

/// Client side: remembers the last sync id seen and drops frames already applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncCursor {
    last_seen: Option<u64>,
}

impl SyncCursor {
    /// The id to send in `hello.lastSyncId`.
    pub fn last_seen(&self) -> Option<u64> {
        self.last_seen
    }

    /// True if the frame is new and should be applied; records it.
    /// Frames numbered 0 come before any session exists and are always applied.
    pub fn accept(&mut self, frame: &ServerFrame) -> bool {
        if frame.sync_id == 0 {
            return true;
        }
        // A snapshot resets the cursor: after a server restart ids may start lower.
        if matches!(frame.event, ServerEvent::Snapshot(_)) {
            self.last_seen = Some(frame.sync_id);
            return true;
        }
        match self.last_seen {
            Some(last) if frame.sync_id <= last => false,
            _ => {
                self.last_seen = Some(frame.sync_id);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Delta, Snapshot};

    fn delta(t: &str) -> ServerEvent {
        ServerEvent::Delta(Delta {
            message_id: "m".into(),
            text: t.into(),
        })
    }

    fn ids(r: Resume) -> Vec<u64> {
        match r {
            Resume::Frames(f) => f.iter().map(|f| f.sync_id).collect(),
            Resume::Snapshot => panic!("expected frames"),
        }
    }

    #[test]
    fn ids_increase_and_replay_returns_what_was_missed() {
        let mut log = ReplayLog::new(10, 100);
        for t in ["a", "b", "c"] {
            log.push(delta(t));
        }
        assert_eq!(log.last_id(), 13);
        assert_eq!(ids(log.since(11)), vec![12, 13]);
        assert_eq!(ids(log.since(13)), Vec::<u64>::new());
    }

    #[test]
    fn a_gap_older_than_the_log_needs_a_snapshot() {
        let mut log = ReplayLog::new(0, 2);
        for t in ["a", "b", "c", "d"] {
            log.push(delta(t));
        }
        assert_eq!(ids(log.since(2)), vec![3, 4]);
        assert_eq!(log.since(1), Resume::Snapshot);
    }

    #[test]
    fn connection_only_frames_do_not_force_a_snapshot() {
        let mut log = ReplayLog::new(0, 10);
        log.push(delta("a")); // 1
        log.number(delta("private")); // 2, not logged
        log.push(delta("b")); // 3
        assert_eq!(ids(log.since(2)), vec![3]);
        assert_eq!(ids(log.since(0)), vec![1, 3]);
    }

    #[test]
    fn ids_from_a_previous_server_life_need_a_snapshot() {
        let log = ReplayLog::new(5, 10);
        assert_eq!(log.since(50), Resume::Snapshot);
    }

    #[test]
    fn cursor_drops_replayed_duplicates_and_resets_on_snapshot() {
        let mut c = SyncCursor::default();
        let f = |id, e| ServerFrame {
            sync_id: id,
            event: e,
        };
        assert!(c.accept(&f(5, delta("x"))));
        assert!(!c.accept(&f(5, delta("x"))));
        assert!(!c.accept(&f(4, delta("y"))));
        assert!(c.accept(&f(2, ServerEvent::Snapshot(Snapshot::default()))));
        assert!(c.accept(&f(3, delta("z"))));
        assert_eq!(c.last_seen(), Some(3));
    }
}
