//! The client's view of a conversation: stored messages plus messages still being sent, updated by
//! applying server frames. The widget renders it; it holds no IO so it is tested natively.

use crate::context::{ContextInfo, ContextSets, FilterView, SessionTopics};
use crate::sync::SyncCursor;
use crate::vocab::{MessageStatus, Role};
use crate::wire::{ChatMessage, ChatRequest, ServerEvent, ServerFrame, WireError};

/// A user message not yet confirmed by the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub request: ChatRequest,
    /// Set when the server refused it; a retryable refusal is re-sent on reconnect.
    pub error: Option<WireError>,
}

impl Pending {
    /// The idempotency key (always set for pending messages).
    pub fn client_message_id(&self) -> &str {
        self.request
            .client_message_id
            .as_deref()
            .unwrap_or_default()
    }
}

/// Messages of one session as the widget shows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    pub session_id: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub pending: Vec<Pending>,
    /// The newest error that concerns no message (shown as a banner).
    pub notice: Option<WireError>,
    /// The session's context window and compression settings (for the token meter).
    pub context: Option<ContextInfo>,
    /// The session's context sets (the footer); `None` until the server sent them.
    pub sets: Option<ContextSets>,
    /// The session's token budget, when the server sets one.
    pub budget: Option<crate::wire::SessionBudget>,
    /// The session's topics (the bubble cloud); `None` until the server sent them.
    pub topics: Option<SessionTopics>,
    /// The topic filter and the history it lets through.
    pub filter: Option<FilterView>,
    /// The agent's items and the session's choices; `None` until the server sent them.
    pub items: Option<crate::wire::ItemsView>,
    /// The verified user's sessions, newest first; `None` until the server sent them.
    pub sessions: Option<crate::wire::SessionList>,
    /// The session's agent's greeting (placeholder, welcome, starters), from `session`.
    pub greeting: crate::wire::Greeting,
    /// Tool calls waiting for the user's answer, oldest first.
    pub approvals: Vec<crate::wire::ApprovalRequest>,
    cursor: SyncCursor,
}

impl Transcript {
    /// The sync id to resume from on reconnect.
    pub fn last_sync_id(&self) -> Option<u64> {
        self.cursor.last_seen()
    }

    /// Adds a message the user just sent; it shows as sending until the server accepts it.
    pub fn add_pending(&mut self, request: ChatRequest) {
        self.pending.push(Pending {
            request,
            error: None,
        });
    }

    /// Requests to (re-)send after connecting: pending ones without a final refusal.
    pub fn unsent(&self) -> Vec<ChatRequest> {
        self.pending
            .iter()
            .filter(|p| p.error.as_ref().is_none_or(|e| e.retryable))
            .map(|p| p.request.clone())
            .collect()
    }

    /// Clears a refused pending message's error so it shows as sending again; returns its request.
    pub fn resend_pending(&mut self, client_message_id: &str) -> Option<ChatRequest> {
        let p = self
            .pending
            .iter_mut()
            .find(|p| p.client_message_id() == client_message_id)?;
        p.error = None;
        Some(p.request.clone())
    }

    /// Drops a refused pending message.
    pub fn dismiss_pending(&mut self, client_message_id: &str) {
        self.pending
            .retain(|p| p.client_message_id() != client_message_id);
    }

    /// True while any reply is streaming.
    pub fn replying(&self) -> bool {
        self.messages
            .iter()
            .any(|m| m.status == MessageStatus::Streaming)
    }

    /// The reply streaming now: what Stop stops. Replies of a session run one at a time, in
    /// order, so when a second waits its turn the oldest is the one under way.
    pub fn streaming_reply(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|m| m.role == Role::Assistant && m.status == MessageStatus::Streaming)
            .map(|m| m.id.as_str())
    }

    /// A message by id.
    pub fn find(&self, id: &str) -> Option<&ChatMessage> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// Forgets everything (a new session).
    pub fn reset(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        // The verified user's list is theirs, not the session's: it stays while another opens.
        let sessions = self.sessions.take();
        *self = Transcript {
            pending,
            sessions,
            ..Default::default()
        };
    }

    /// Applies a server frame; returns false if it was already applied (a replayed duplicate).
    pub fn apply(&mut self, frame: &ServerFrame) -> bool {
        if !self.cursor.accept(frame) {
            return false;
        }
        match &frame.event {
            ServerEvent::Session(info) => {
                self.session_id = Some(info.session_id.clone());
                self.greeting = crate::wire::Greeting::of(info);
                if info.context.is_some() {
                    self.context = info.context.clone();
                }
                self.budget = info.budget;
            }
            ServerEvent::Budget(b) => self.budget = Some(*b),
            // A newer extraction may have arrived first (a reply to `get_topics` numbered later).
            ServerEvent::Topics(t) => {
                if self
                    .topics
                    .as_ref()
                    .is_none_or(|old| old.generation <= t.generation)
                {
                    self.topics = Some(t.clone());
                }
            }
            ServerEvent::Filter(f) => self.filter = Some(f.clone()),
            ServerEvent::Items(v) => self.items = Some(v.clone()),
            ServerEvent::Sessions(list) => self.sessions = Some(list.clone()),
            // For the composer, which asked; the transcript keeps nothing of it.
            ServerEvent::Preview(_) | ServerEvent::Heartbeat(_) => {}
            ServerEvent::Mark(m) => {
                if let Some(msg) = self.messages.iter_mut().find(|x| x.id == m.message_id) {
                    msg.mark = m.mark;
                }
            }
            ServerEvent::ContextInfo(info) => self.context = Some(info.clone()),
            ServerEvent::Context(c) => self.sets = Some(c.context.clone()),
            ServerEvent::Tool(t) => {
                if let Some(m) = self
                    .messages
                    .iter_mut()
                    .rev()
                    .find(|m| m.id == t.message_id)
                {
                    let round = t.round as usize;
                    if m.tool_rounds.len() <= round {
                        m.tool_rounds.resize_with(round + 1, Default::default);
                    }
                    m.tool_rounds[round].at = t.at;
                    m.tool_rounds[round].exchanges.push(t.exchange.clone());
                }
            }
            ServerEvent::ApprovalRequest(r) => {
                if !self
                    .approvals
                    .iter()
                    .any(|a| a.approval_id == r.approval_id)
                {
                    self.approvals.push(r.clone());
                }
            }
            ServerEvent::Approval(d) => {
                self.approvals.retain(|a| a.approval_id != d.approval_id);
                self.upsert(d.message.clone());
            }
            ServerEvent::Snapshot(s) => {
                self.approvals = s.approvals.clone();
                self.messages = s.messages.clone();
                let stored: Vec<&str> = self
                    .messages
                    .iter()
                    .filter_map(|m| m.client_message_id.as_deref())
                    .collect();
                self.pending
                    .retain(|p| !stored.contains(&p.client_message_id()));
            }
            ServerEvent::Accepted(a) => {
                if let Some(cid) = &a.message.client_message_id {
                    self.dismiss_pending(cid);
                }
                self.upsert(a.message.clone());
            }
            ServerEvent::ReplyStart(r) => {
                let message = match self.find(&r.message_id) {
                    Some(old) => ChatMessage {
                        content: String::new(),
                        status: MessageStatus::Streaming,
                        error: None,
                        usage: None,
                        receipt: None,
                        tool_rounds: Vec::new(),
                        ..old.clone()
                    },
                    None => ChatMessage {
                        id: r.message_id.clone(),
                        role: Role::Assistant,
                        status: MessageStatus::Streaming,
                        created_at: r.created_at,
                        reply_to: Some(r.reply_to.clone()),
                        ..Default::default()
                    },
                };
                self.upsert(message);
            }
            ServerEvent::Delta(d) => {
                // The streaming reply is almost always the newest message.
                if let Some(m) = self
                    .messages
                    .iter_mut()
                    .rev()
                    .find(|m| m.id == d.message_id)
                {
                    m.content.push_str(&d.text);
                }
            }
            ServerEvent::Done(d) => self.upsert(d.message.clone()),
            ServerEvent::Error(e) => self.apply_error(e),
        }
        true
    }

    fn apply_error(&mut self, e: &WireError) {
        if let Some(id) = &e.message_id
            && let Some(m) = self.messages.iter_mut().find(|m| &m.id == id)
        {
            m.status = MessageStatus::Failed;
            m.error = Some(e.clone());
            return;
        }
        if let Some(cid) = &e.client_message_id
            && let Some(p) = self
                .pending
                .iter_mut()
                .find(|p| p.client_message_id() == cid)
        {
            p.error = Some(e.clone());
            return;
        }
        self.notice = Some(e.clone());
    }

    fn upsert(&mut self, message: ChatMessage) {
        match self.messages.iter_mut().find(|m| m.id == message.id) {
            Some(m) => *m = message,
            None => self.messages.push(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use crate::wire::{Accepted, Delta, Done, ReplyStart, SessionInfo, Snapshot};

    fn frame(id: u64, event: ServerEvent) -> ServerFrame {
        ServerFrame { sync_id: id, event }
    }

    fn user(id: &str, text: &str, cid: &str) -> ChatMessage {
        ChatMessage {
            id: id.into(),
            content: text.into(),
            created_at: 1,
            client_message_id: Some(cid.into()),
            ..Default::default()
        }
    }

    fn request(text: &str, cid: &str) -> ChatRequest {
        ChatRequest {
            message: text.into(),
            client_message_id: Some(cid.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_full_turn_builds_the_conversation() {
        let mut t = Transcript::default();
        t.add_pending(request("hi", "c1"));
        assert_eq!(t.unsent().len(), 1);
        t.apply(&frame(
            1,
            ServerEvent::Session(SessionInfo {
                protocol: crate::wire::PROTOCOL_VERSION,
                session_id: "s".into(),
                token: None,
                model: "m".into(),
                agent: None,
                user: None,
                placeholder: None,
                welcome: None,
                starters: vec![],
                context: None,
                budget: None,
                heartbeat_ms: None,
            }),
        ));
        t.apply(&frame(
            2,
            ServerEvent::Accepted(Accepted {
                message: user("u1", "hi", "c1"),
                duplicate: false,
            }),
        ));
        assert!(t.pending.is_empty());
        t.apply(&frame(
            3,
            ServerEvent::ReplyStart(ReplyStart {
                message_id: "a1".into(),
                reply_to: "u1".into(),
                created_at: 2,
            }),
        ));
        assert!(t.replying());
        assert_eq!(t.streaming_reply(), Some("a1"));
        t.apply(&frame(
            4,
            ServerEvent::Delta(Delta {
                message_id: "a1".into(),
                text: "Hel".into(),
            }),
        ));
        t.apply(&frame(
            5,
            ServerEvent::Delta(Delta {
                message_id: "a1".into(),
                text: "lo".into(),
            }),
        ));
        assert_eq!(t.find("a1").unwrap().content, "Hello");
        let mut done = t.find("a1").unwrap().clone();
        done.status = MessageStatus::Complete;
        t.apply(&frame(6, ServerEvent::Done(Done { message: done })));
        assert!(!t.replying());
        assert_eq!(t.streaming_reply(), None);
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.last_sync_id(), Some(6));
    }

    #[test]
    fn the_reply_under_way_is_the_oldest_streaming_one() {
        let mut t = Transcript::default();
        for (sync_id, id) in [(1, "a1"), (2, "a2")] {
            t.apply(&frame(
                sync_id,
                ServerEvent::ReplyStart(ReplyStart {
                    message_id: id.into(),
                    reply_to: "u".into(),
                    created_at: 0,
                }),
            ));
        }
        // The second waits its turn behind the first: Stop stops the one streaming text.
        assert_eq!(t.streaming_reply(), Some("a1"));
    }

    #[test]
    fn replayed_frames_are_not_applied_twice() {
        let mut t = Transcript::default();
        t.apply(&frame(
            3,
            ServerEvent::ReplyStart(ReplyStart {
                message_id: "a".into(),
                reply_to: "u".into(),
                created_at: 0,
            }),
        ));
        let d = frame(
            4,
            ServerEvent::Delta(Delta {
                message_id: "a".into(),
                text: "x".into(),
            }),
        );
        assert!(t.apply(&d));
        assert!(!t.apply(&d));
        assert_eq!(t.find("a").unwrap().content, "x");
    }

    #[test]
    fn failed_reply_keeps_partial_text_and_retry_restarts_it() {
        let mut t = Transcript::default();
        t.apply(&frame(
            1,
            ServerEvent::ReplyStart(ReplyStart {
                message_id: "a".into(),
                reply_to: "u".into(),
                created_at: 0,
            }),
        ));
        t.apply(&frame(
            2,
            ServerEvent::Delta(Delta {
                message_id: "a".into(),
                text: "part".into(),
            }),
        ));
        t.apply(&frame(
            3,
            ServerEvent::Error(WireError::new(ErrorCode::ProviderError, "cut").for_message("a")),
        ));
        let m = t.find("a").unwrap();
        assert_eq!(
            (m.status, m.content.as_str()),
            (MessageStatus::Failed, "part")
        );
        t.apply(&frame(
            4,
            ServerEvent::ReplyStart(ReplyStart {
                message_id: "a".into(),
                reply_to: "u".into(),
                created_at: 0,
            }),
        ));
        let m = t.find("a").unwrap();
        assert_eq!(
            (m.status, m.content.as_str(), m.error.is_none()),
            (MessageStatus::Streaming, "", true)
        );
        assert_eq!(t.messages.len(), 1);
    }

    #[test]
    fn a_refused_message_stays_visible_with_its_error() {
        let mut t = Transcript::default();
        t.add_pending(request("big", "c9"));
        let mut e = WireError::new(ErrorCode::ContextTooLarge, "too big");
        e.client_message_id = Some("c9".into());
        t.apply(&frame(7, ServerEvent::Error(e)));
        assert_eq!(
            t.pending[0].error.as_ref().unwrap().code,
            ErrorCode::ContextTooLarge
        );
        assert!(t.unsent().is_empty(), "a final refusal is not re-sent");
        assert!(t.notice.is_none());
    }

    #[test]
    fn snapshot_replaces_history_and_settles_pending() {
        let mut t = Transcript::default();
        t.add_pending(request("hi", "c1"));
        t.add_pending(request("later", "c2"));
        t.apply(&frame(
            9,
            ServerEvent::Snapshot(Snapshot {
                messages: vec![user("u1", "hi", "c1")],
                approvals: vec![],
            }),
        ));
        assert_eq!(t.messages.len(), 1);
        assert_eq!(t.pending.len(), 1);
        assert_eq!(t.pending[0].client_message_id(), "c2");
    }
}
