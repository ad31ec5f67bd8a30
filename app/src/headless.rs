//! A chat with no view, for frameworks that draw their own (the React hook): the widget's client,
//! a listener told of changes (batched, streamed text at most once per animation frame), and
//! snapshots that carry only the messages that changed since the previous snapshot.

use std::cell::RefCell;
use std::collections::HashMap;

use glassbox_core::context::{ContextInfo, ContextSets, FilterView, MessageMark, SessionTopics};
use glassbox_core::vocab::MessageStatus;
use glassbox_core::wire::{ChatMessage, WireError};
use leptos::prelude::*;
use serde::Serialize;

use crate::client::{ChatClient, ConnectionStatus};
use crate::config::WidgetConfig;

/// What tells two states of one message apart without comparing its text.
#[derive(Debug, Clone, PartialEq)]
struct Fingerprint {
    content_len: usize,
    status: MessageStatus,
    usage: bool,
    receipt: bool,
    tool_rounds: usize,
    error: bool,
    mark: Option<MessageMark>,
}

impl Fingerprint {
    fn of(m: &ChatMessage) -> Self {
        Self {
            content_len: m.content.len(),
            status: m.status,
            usage: m.usage.is_some(),
            receipt: m.receipt.is_some(),
            tool_rounds: m.tool_rounds.len(),
            error: m.error.is_some(),
            mark: m.mark,
        }
    }
}

/// A message the user sent that the server has not stored yet.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingMessage {
    pub client_message_id: String,
    pub content: String,
    /// The server's refusal, if it refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
}

/// The conversation as a framework draws it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// `connecting`, `connected`, `reconnecting` or `stopped`.
    pub status: &'static str,
    /// While reconnecting: seconds until the next attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_in_secs: Option<u32>,
    pub session_id: Option<String>,
    /// Every stored message's id, in order.
    pub order: Vec<String>,
    /// The stored messages that are new or changed since the previous snapshot.
    pub changed: Vec<ChatMessage>,
    pub pending: Vec<PendingMessage>,
    /// The newest error that concerns no message.
    pub notice: Option<WireError>,
    pub context_sets: Option<ContextSets>,
    pub topics: Option<SessionTopics>,
    pub filter: Option<FilterView>,
    pub context_info: Option<ContextInfo>,
    /// Tool calls waiting for the user's yes, oldest first (answer with `approve`).
    pub approvals: Vec<glassbox_core::wire::ApprovalRequest>,
    /// What to show before the first message: the host's words, else the session's agent's.
    pub greeting: GreetingView,
}

/// A [`glassbox_core::wire::Greeting`] as a framework reads it.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GreetingView {
    pub placeholder: Option<String>,
    pub welcome: Option<String>,
    pub starters: Vec<String>,
}

/// A running chat without a view. Dropping it closes the connection.
pub struct HeadlessChat {
    client: ChatClient,
    owner: Owner,
    seen: RefCell<HashMap<String, Fingerprint>>,
}

impl HeadlessChat {
    /// Connects a client for `config`; host events (`glassbox:reply`, …) are dispatched on `host`,
    /// and `on_change` runs after each batch of changes.
    pub fn start(
        config: WidgetConfig,
        host: web_sys::EventTarget,
        on_change: impl Fn() + 'static,
    ) -> Self {
        // Effects need the browser's task queue; an executor set before is kept.
        let _ = any_spawner::Executor::init_wasm_bindgen();
        let owner = Owner::new();
        let client = owner.with(|| {
            let client = ChatClient::new(config, host);
            Effect::new(move |_| {
                client.track_changes();
                on_change();
            });
            client.connect();
            client
        });
        Self {
            client,
            owner,
            seen: RefCell::new(HashMap::new()),
        }
    }

    /// The client, for sending and the other actions.
    pub fn client(&self) -> ChatClient {
        self.client
    }

    /// The conversation now; messages unchanged since the previous snapshot are named in
    /// `order` only.
    pub fn snapshot(&self) -> Snapshot {
        let (status, reconnect_in_secs) = match self.client.status.get_untracked() {
            ConnectionStatus::Connecting => ("connecting", None),
            ConnectionStatus::Connected => ("connected", None),
            ConnectionStatus::Reconnecting { in_secs } => ("reconnecting", Some(in_secs)),
            ConnectionStatus::Stopped => ("stopped", None),
        };
        let greeting = untrack(|| self.client.greeting());
        let mut seen = self.seen.borrow_mut();
        self.client.transcript.with_untracked(|t| {
            let mut changed = Vec::new();
            let mut now = HashMap::with_capacity(t.messages.len());
            for m in &t.messages {
                let print = Fingerprint::of(m);
                if seen.get(&m.id) != Some(&print) {
                    changed.push(m.clone());
                }
                now.insert(m.id.clone(), print);
            }
            *seen = now;
            Snapshot {
                status,
                reconnect_in_secs,
                session_id: t.session_id.clone(),
                order: t.messages.iter().map(|m| m.id.clone()).collect(),
                changed,
                pending: t
                    .pending
                    .iter()
                    .map(|p| PendingMessage {
                        client_message_id: p.client_message_id().to_owned(),
                        content: p.request.message.clone(),
                        error: p.error.clone(),
                    })
                    .collect(),
                notice: t.notice.clone(),
                context_sets: t.sets.clone(),
                topics: t.topics.clone(),
                filter: t.filter.clone(),
                context_info: t.context.clone(),
                approvals: t.approvals.clone(),
                greeting: GreetingView {
                    placeholder: greeting.placeholder,
                    welcome: greeting.welcome,
                    starters: greeting.starters,
                },
            }
        })
    }

    /// Makes the next snapshot carry every message (a new listener starts from nothing).
    pub fn resend_all(&self) {
        self.seen.borrow_mut().clear();
    }
}

impl Drop for HeadlessChat {
    fn drop(&mut self) {
        self.client.stop();
        self.owner.cleanup();
    }
}
