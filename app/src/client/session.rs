//! The session as this tab holds it: the transcript signal with one signal per stored message,
//! what each server frame changes in them, the live region's words, and the session asked for or
//! joined, whose id and token (and the unsent draft) are kept in browser storage
//! ([`crate::session_store`]).

use std::cell::RefCell;
use std::collections::HashMap;

use glassbox_core::transcript::Transcript;
use glassbox_core::vocab::MessageStatus;
use glassbox_core::wire::{ChatMessage, ChatRequest, ServerEvent, ServerFrame, SessionInfo};
use leptos::prelude::*;

use super::text_batch::Unshown;
use crate::session_store::{self, StoredSession};
use crate::words::{Word, Words, words};

/// The conversation's state on this side, and its storage under one server and slot.
pub struct Session {
    server: String,
    slot: String,
    transcript: RwSignal<Transcript>,
    announcement: RwSignal<String>,
    /// The chat's strings, for the live region's words.
    words: Words,
    /// One signal per stored message: a change to one message re-renders only its view.
    cells: RefCell<HashMap<String, ArcRwSignal<ChatMessage>>>,
    /// Messages with streamed text not shown yet.
    unshown: RefCell<Unshown>,
    /// Notified when streamed text is shown (once per animation frame), for views that read the
    /// transcript as a whole.
    streamed: ArcTrigger,
    /// The session asked to join (or given) and its token: the one uploads go to, even where the
    /// browser keeps no storage.
    asked: RefCell<Option<StoredSession>>,
}

impl Session {
    /// The state kept in `transcript` and `announcement`, stored under `server` and `slot`; the
    /// live region speaks the chat's words (from the owner's context: English without one).
    pub fn new(
        server: String,
        slot: String,
        transcript: RwSignal<Transcript>,
        announcement: RwSignal<String>,
    ) -> Self {
        Self {
            server,
            slot,
            transcript,
            announcement,
            words: words(),
            cells: RefCell::new(HashMap::new()),
            unshown: RefCell::new(Unshown::default()),
            streamed: ArcTrigger::new(),
            asked: RefCell::new(None),
        }
    }

    /// The conversation as shown.
    pub fn transcript(&self) -> RwSignal<Transcript> {
        self.transcript
    }

    /// The signal of one stored message.
    pub fn cell(&self, id: &str) -> Option<ArcRwSignal<ChatMessage>> {
        self.cells.borrow().get(id).cloned()
    }

    /// Subscribes the running effect to streamed text being shown.
    pub fn track_streamed(&self) {
        self.streamed.track();
    }

    /// The session last asked for or joined.
    pub fn asked(&self) -> Option<StoredSession> {
        self.asked.borrow().clone()
    }

    /// Requests not yet accepted by the server, to send (again) once joined.
    pub fn unsent(&self) -> Vec<ChatRequest> {
        self.transcript.with_untracked(|t| t.unsent())
    }

    /// The draft this tab left unsent.
    pub fn load_draft(&self) -> Option<String> {
        session_store::load_draft(&self.server, &self.slot)
    }

    /// Keeps the draft for this tab (an empty one is forgotten).
    pub fn save_draft(&self, text: &str) {
        session_store::save_draft(&self.server, &self.slot, text);
    }

    /// The session to ask for on a new socket: the stored one, else the one asked for before
    /// (where the browser keeps no storage); it becomes the one asked for.
    pub fn resume(&self) -> Option<StoredSession> {
        let stored = session_store::load(&self.server, &self.slot).or_else(|| self.asked());
        self.asked.borrow_mut().clone_from(&stored);
        stored
    }

    /// The session asked for is gone (refused before joining): forgets it and the transcript,
    /// keeping the messages not yet sent.
    pub fn forget_stale(&self) {
        self.forget();
        self.transcript.update(|t| t.reset());
    }

    /// Asks for another of the verified user's sessions (known by its id) in place of this one:
    /// the transcript starts afresh, the messages not yet sent are dropped.
    pub fn switch_to(&self, session_id: String) {
        self.clear();
        let next = StoredSession::of_user(session_id);
        session_store::save(&self.server, &self.slot, &next);
        *self.asked.borrow_mut() = Some(next);
    }

    /// Forgets the session, its transcript and the messages not yet sent (a new chat).
    pub fn clear(&self) {
        self.forget();
        self.transcript.update(|t| {
            t.reset();
            t.pending.clear();
        });
        self.cells.borrow_mut().clear();
    }

    fn forget(&self) {
        session_store::clear(&self.server, &self.slot);
        self.asked.borrow_mut().take();
    }

    /// The server answered `hello` with `info`: stores a new session's token, and forgets the
    /// transcript of another session. (The frame itself is applied by [`Session::apply`].)
    pub fn join(&self, info: &SessionInfo) {
        let given = given_session(info);
        if let Some(given) = &given {
            session_store::save(&self.server, &self.slot, given);
        }
        let joined = joined_session(info, given, self.asked());
        *self.asked.borrow_mut() = joined;
        if self
            .transcript
            .with_untracked(|t| t.session_id.as_ref().is_some_and(|s| s != &info.session_id))
        {
            self.transcript.update(|t| t.reset());
        }
    }

    /// Stores a piece of streamed text (`frame`, a delta) at once without notifying anyone; true
    /// when the caller must ask for an animation frame to [`Session::show_streamed`] it in.
    pub fn stream(&self, frame: &ServerFrame) -> bool {
        let ServerEvent::Delta(d) = &frame.event else {
            return false;
        };
        if self.transcript.try_update_untracked(|t| t.apply(frame)) != Some(true) {
            return false;
        }
        if let Some(cell) = self.cells.borrow().get(&d.message_id) {
            cell.update_untracked(|m| m.content.push_str(&d.text));
        }
        self.unshown.borrow_mut().note(&d.message_id)
    }

    /// Tells the views of messages with new streamed text to show it.
    pub fn show_streamed(&self) {
        let ids = self.unshown.borrow_mut().take();
        let cells = self.cells.borrow();
        for id in ids {
            if let Some(cell) = cells.get(&id) {
                cell.notify();
            }
        }
        self.streamed.notify();
    }

    /// Applies a server frame other than a delta: the transcript, the message signals it
    /// touches, and the live region.
    pub fn apply(&self, frame: &ServerFrame) {
        self.transcript.update(|t| {
            t.apply(frame);
        });
        self.sync_cells(&frame.event);
        // Frames arrive outside any view: the words are read, not followed.
        if let Some(said) = untrack(|| announcement(&frame.event, self.words)) {
            self.announcement.set(said);
        }
    }

    /// Brings the per-message signals in line with the transcript after `event` was applied.
    fn sync_cells(&self, event: &ServerEvent) {
        let Some(touched) = touched(event) else {
            return;
        };
        let mut cells = self.cells.borrow_mut();
        self.transcript.with_untracked(|t| {
            let mut sync = |m: &ChatMessage| match cells.get(&m.id) {
                Some(cell) => {
                    if cell.with_untracked(|c| c != m) {
                        cell.set(m.clone());
                    }
                }
                None => {
                    cells.insert(m.id.clone(), ArcRwSignal::new(m.clone()));
                }
            };
            match touched {
                Touched::One(id) => {
                    if let Some(m) = t.find(id) {
                        sync(m);
                    }
                }
                Touched::All => {
                    t.messages.iter().for_each(&mut sync);
                    if cells.len() > t.messages.len() {
                        cells.retain(|id, _| t.find(id).is_some());
                    }
                }
            }
        });
    }
}

/// The messages an event changes.
#[derive(Debug, PartialEq)]
enum Touched<'a> {
    One(&'a str),
    All,
}

/// Which stored messages `event` may change (`None`: none, or a delta, shown by frame).
fn touched(event: &ServerEvent) -> Option<Touched<'_>> {
    let one = match event {
        ServerEvent::Accepted(a) => a.message.id.as_str(),
        ServerEvent::ReplyStart(r) => r.message_id.as_str(),
        ServerEvent::Done(d) => d.message.id.as_str(),
        ServerEvent::Error(e) => e.message_id.as_deref()?,
        ServerEvent::Session(_) | ServerEvent::Snapshot(_) => return Some(Touched::All),
        ServerEvent::Tool(t) => t.message_id.as_str(),
        ServerEvent::Mark(m) => m.message_id.as_str(),
        ServerEvent::Approval(d) => d.message.id.as_str(),
        ServerEvent::ContextInfo(_)
        | ServerEvent::Context(_)
        | ServerEvent::Budget(_)
        | ServerEvent::Topics(_)
        | ServerEvent::Filter(_)
        | ServerEvent::Items(_)
        | ServerEvent::Preview(_)
        | ServerEvent::Heartbeat(_)
        | ServerEvent::Sessions(_)
        | ServerEvent::ApprovalRequest(_)
        | ServerEvent::Delta(_) => return None,
    };
    Some(Touched::One(one))
}

/// What the polite live region says for `event`: a reply completed (its first 200 characters) or
/// failed; nothing per piece (a stopped reply's "Stopped" line is an alert of its own).
fn announcement(event: &ServerEvent, w: Words) -> Option<String> {
    match event {
        ServerEvent::Done(d) if d.message.status == MessageStatus::Complete => {
            let text = d.message.content.trim();
            let cut = text.char_indices().nth(200).map_or(text.len(), |(i, _)| i);
            let more = if cut < text.len() { "…" } else { "" };
            let said = format!("{}{more}", &text[..cut]);
            Some(w.fill(Word::ReplyComplete, &[("text", said.as_str())]))
        }
        ServerEvent::Error(e) if e.message_id.is_some() => {
            Some(w.fill(Word::ReplyFailed, &[("message", e.message.as_str())]))
        }
        _ => None,
    }
}

/// The credentials of a session the server just created (it sends a token only then).
fn given_session(info: &SessionInfo) -> Option<StoredSession> {
    info.token.as_ref().map(|token| StoredSession {
        session_id: info.session_id.clone(),
        token: token.clone(),
        ..Default::default()
    })
}

/// The session joined: the one just `given`, else the one `asked` for if the server agreed.
fn joined_session(
    info: &SessionInfo,
    given: Option<StoredSession>,
    asked: Option<StoredSession>,
) -> Option<StoredSession> {
    given.or_else(|| asked.filter(|s| s.session_id == info.session_id))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use serde_json::json;

    fn frame(sync_id: u64, kind: &str, data: serde_json::Value) -> ServerFrame {
        serde_json::from_value(json!({"syncId": sync_id, "type": kind, "data": data})).unwrap()
    }

    fn message(id: &str, content: &str, status: &str) -> serde_json::Value {
        json!({"id": id, "role": "assistant", "content": content, "status": status, "createdAt": 1})
    }

    fn info(session_id: &str, token: Option<&str>) -> SessionInfo {
        serde_json::from_value(json!({"sessionId": session_id, "token": token, "model": "m"}))
            .unwrap()
    }

    fn stored(session_id: &str) -> StoredSession {
        StoredSession {
            session_id: session_id.into(),
            token: "t".into(),
            ..Default::default()
        }
    }

    fn session() -> Session {
        Session::new(
            "https://x.org".into(),
            "default".into(),
            RwSignal::new(Transcript::default()),
            RwSignal::new(String::new()),
        )
    }

    /// How often `cell`'s watchers would re-render: a memo over it, counting its runs.
    fn renders(cell: &ArcRwSignal<ChatMessage>) -> (ArcMemo<String>, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let memo = ArcMemo::new({
            let (cell, runs) = (cell.clone(), runs.clone());
            move |_| {
                runs.fetch_add(1, Ordering::SeqCst);
                cell.with(|m| m.content.clone())
            }
        });
        (memo, runs)
    }

    #[test]
    fn a_snapshot_gives_every_message_a_signal_and_drops_those_gone() {
        let s = session();
        s.apply(&frame(
            1,
            "snapshot",
            json!({"messages": [
                message("a", "one", "complete"), message("b", "two", "complete"),
            ]}),
        ));
        assert_eq!(s.cell("a").unwrap().get_untracked().content, "one");
        assert_eq!(s.cell("b").unwrap().get_untracked().content, "two");
        s.apply(&frame(
            2,
            "snapshot",
            json!({"messages": [message("b", "two!", "complete")]}),
        ));
        assert!(s.cell("a").is_none());
        assert_eq!(s.cell("b").unwrap().get_untracked().content, "two!");
        assert_eq!(s.transcript().get_untracked().messages.len(), 1);
    }

    #[test]
    fn streamed_text_is_stored_at_once_and_shown_once_per_frame() {
        let s = session();
        s.apply(&frame(
            1,
            "reply_start",
            json!({"messageId": "r", "replyTo": "u", "createdAt": 1}),
        ));
        let cell = s
            .cell("r")
            .expect("a reply start makes the message's signal");
        let (shown, runs) = renders(&cell);
        assert_eq!(shown.get(), "");
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        let delta = |n, text: &str| frame(n, "delta", json!({"messageId": "r", "text": text}));
        assert!(
            s.stream(&delta(2, "Hel")),
            "the first piece asks for a frame"
        );
        assert!(
            !s.stream(&delta(3, "lo")),
            "later pieces wait for the same frame"
        );
        assert!(
            !s.stream(&delta(3, "lo")),
            "a replayed piece is not applied twice"
        );
        assert_eq!(cell.get_untracked().content, "Hello");
        assert_eq!(
            s.transcript().get_untracked().find("r").unwrap().content,
            "Hello"
        );
        assert_eq!(shown.get(), "", "nothing re-renders before the frame");
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        s.show_streamed();
        assert_eq!(shown.get(), "Hello");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(
            s.stream(&delta(4, "!")),
            "a piece after the frame asks for the next"
        );
    }

    #[test]
    fn a_done_reply_updates_its_signal_and_is_announced() {
        let s = session();
        s.apply(&frame(
            1,
            "reply_start",
            json!({"messageId": "r", "replyTo": "u", "createdAt": 1}),
        ));
        s.apply(&frame(
            2,
            "done",
            json!({"message": message("r", "  All done.  ", "complete")}),
        ));
        assert_eq!(
            s.cell("r").unwrap().get_untracked().status,
            MessageStatus::Complete
        );
        assert_eq!(s.announcement.get_untracked(), "Reply complete: All done.");
    }

    #[test]
    fn joining_another_session_forgets_the_transcript_of_the_last() {
        let s = session();
        s.apply(&frame(
            1,
            "session",
            json!({"sessionId": "s1", "model": "m"}),
        ));
        s.apply(&frame(
            2,
            "snapshot",
            json!({"messages": [message("a", "one", "complete")]}),
        ));
        s.join(&info("s1", None));
        assert_eq!(s.transcript().get_untracked().messages.len(), 1);
        s.join(&info("s2", None));
        let t = s.transcript().get_untracked();
        assert!(t.messages.is_empty() && t.session_id.is_none());
    }

    #[test]
    fn the_session_joined_is_the_one_given_or_the_one_asked_for() {
        let given = given_session(&info("new", Some("tok")));
        assert_eq!(
            given,
            Some(StoredSession {
                session_id: "new".into(),
                token: "tok".into(),
                ..Default::default()
            })
        );
        assert_eq!(given_session(&info("s1", None)), None);
        let asked = Some(stored("s1"));
        assert_eq!(
            joined_session(&info("s1", None), None, asked.clone()),
            asked
        );
        // The server gave another session than the one asked for, without a token: none known.
        assert_eq!(joined_session(&info("s2", None), None, asked.clone()), None);
        assert_eq!(
            joined_session(&info("new", Some("tok")), given.clone(), asked),
            given
        );
    }

    #[test]
    fn only_finished_or_failed_replies_are_announced() {
        let done = |content: &str, status: &str| -> ServerEvent {
            frame(1, "done", json!({"message": message("r", content, status)})).event
        };
        let long = "é".repeat(250);
        assert_eq!(
            announcement(&done(&long, "complete"), Words::english_in_full()).unwrap(),
            format!("Reply complete: {}…", "é".repeat(200))
        );
        assert_eq!(
            announcement(
                &done(&"x".repeat(200), "complete"),
                Words::english_in_full()
            )
            .unwrap(),
            format!("Reply complete: {}", "x".repeat(200))
        );
        assert_eq!(
            announcement(&done("partial", "failed"), Words::english_in_full()),
            None
        );
        let failed = frame(
            1,
            "error",
            json!({"code": "provider_error", "message": "boom", "retryable": true, "messageId": "r"}),
        );
        assert_eq!(
            announcement(&failed.event, Words::english_in_full()).unwrap(),
            "Reply failed: boom"
        );
        let refused = frame(
            1,
            "error",
            json!({"code": "rate_limited", "message": "slow down", "retryable": true}),
        );
        assert_eq!(announcement(&refused.event, Words::english_in_full()), None);
    }

    #[test]
    fn events_touch_their_message_or_all_or_none() {
        let ev = |kind: &str, data: serde_json::Value| frame(1, kind, data).event;
        assert_eq!(
            touched(&ev(
                "reply_start",
                json!({"messageId": "r", "replyTo": "u", "createdAt": 1})
            )),
            Some(Touched::One("r"))
        );
        assert_eq!(
            touched(&ev("snapshot", json!({"messages": []}))),
            Some(Touched::All)
        );
        assert_eq!(
            touched(&ev("delta", json!({"messageId": "r", "text": "x"}))),
            None
        );
        assert_eq!(
            touched(&ev(
                "error",
                json!({"code": "rate_limited", "message": "m", "retryable": true})
            )),
            None
        );
    }
}
