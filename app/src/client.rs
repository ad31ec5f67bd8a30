//! The chat client the components and the host API hold: [`ChatClient`], a `Copy` handle whose
//! methods send what the user or host asks for. Its parts: the socket and its reconnecting
//! (`connection`, on the schedule of `backoff`), the session state each server frame changes
//! (`session`, streamed text shown once per animation frame by `text_batch`), and `dispatch`,
//! which routes the connection's events between them.

mod backoff;
mod connection;
mod dispatch;
mod session;
mod text_batch;

use std::rc::Rc;

use glassbox_core::ErrorCode;
use glassbox_core::context::agent_settings::SessionOverrides;
use glassbox_core::context::items::ItemRef;
use glassbox_core::limits::{InputError, validate_chat};
use glassbox_core::transcript::Transcript;
use glassbox_core::vocab::{Attachment, PageContext};
use glassbox_core::wire::{
    ChatMessage, ChatRequest, ClientFrame, DeleteSession, ItemChange, RenameSession, RetryRequest,
    StopRequest,
};
use leptos::prelude::*;

pub use connection::ConnectionStatus;
use dispatch::Parts;
use session::Session;

use crate::config::WidgetConfig;
use crate::preview::{Asker, Previews};
use crate::session_store::StoredSession;

/// Why a message could not be sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Invalid(#[from] InputError),
    #[error("attachments or context are not valid JSON of the right shape: {0}")]
    BadArgument(String),
}

impl SendError {
    /// The wire code, the same the server would answer.
    pub fn code(&self) -> ErrorCode {
        match self {
            SendError::Invalid(e) => e.code(),
            SendError::BadArgument(_) => ErrorCode::InvalidFrame,
        }
    }
}

/// A handle to the chat client. `Copy`, so views and event handlers can hold it.
#[derive(Clone, Copy)]
pub struct ChatClient {
    inner: StoredValue<Rc<Parts>, LocalStorage>,
    /// The conversation as shown.
    pub transcript: RwSignal<Transcript>,
    /// The connection state.
    pub status: RwSignal<ConnectionStatus>,
    /// Page context sent with later messages (counted by the token meter as page context).
    pub page_context: RwSignal<Option<PageContext>>,
    /// The message being written (counted by the token meter).
    pub draft: RwSignal<String>,
    /// The uploaded files the draft would carry (the preview counts them).
    pub draft_files: RwSignal<Vec<Attachment>>,
    /// What the polite live region says: set when a reply completes or fails, never per piece.
    pub announcement: RwSignal<String>,
    /// The previews of drafts: the composer's and the host's.
    pub previews: Previews,
    /// The session's agent's items and the session's choices, as the server last sent them.
    pub items: Memo<Option<glassbox_core::wire::ItemsView>>,
    /// Tool calls waiting for the user's yes, oldest first.
    pub approvals: Memo<Vec<glassbox_core::wire::ApprovalRequest>>,
}

fn new_client_message_id() -> String {
    web_sys::window()
        .and_then(|w| w.crypto().ok())
        .map(|c| c.random_uuid())
        .unwrap_or_else(|| format!("m{}", (js_sys::Math::random() * 1e15) as u64))
}

impl ChatClient {
    /// A client for `config`; events for the host page are dispatched on `host`. Call `connect` next.
    pub fn new(config: WidgetConfig, host: web_sys::EventTarget) -> Self {
        let transcript = RwSignal::new(Transcript::default());
        let status = RwSignal::new(ConnectionStatus::Connecting);
        let announcement = RwSignal::new(String::new());
        let previews = Previews::new();
        let session = Session::new(
            config.server.clone(),
            config.slot(),
            transcript,
            announcement,
        );
        let draft = session.load_draft().unwrap_or_default();
        let parts = Parts::new(config, host, previews, status, session);
        Self {
            inner: StoredValue::new_local(parts),
            transcript,
            status,
            page_context: RwSignal::new(None),
            draft: RwSignal::new(draft),
            draft_files: RwSignal::new(Vec::new()),
            announcement,
            previews,
            items: Memo::new(move |_| transcript.with(|t| t.items.clone())),
            approvals: Memo::new(move |_| transcript.with(|t| t.approvals.clone())),
        }
    }

    fn parts(&self) -> Option<Rc<Parts>> {
        self.inner.try_get_value()
    }

    /// Sends `frame` if the socket is open.
    fn send_frame(&self, frame: ClientFrame) {
        if let Some(parts) = self.parts() {
            parts.conn.send(&frame);
        }
    }

    /// The signal of one stored message (its view subscribes to nothing else of the transcript).
    pub fn message(&self, id: &str) -> Option<ArcRwSignal<ChatMessage>> {
        self.parts()?.session.cell(id)
    }

    /// The session this client joined, its token and its verified user (`None` before it has
    /// joined one).
    pub fn session(&self) -> Option<StoredSession> {
        let parts = self.parts()?;
        let mut session = parts.conn.is_joined().then(|| parts.session.asked())??;
        session.user.clone_from(&parts.config.user);
        Some(session)
    }

    /// The session this client last asked for or joined, joined now or not (a reconnect keeps it).
    pub fn last_session(&self) -> Option<StoredSession> {
        self.parts()?.session.asked()
    }

    /// What the host configured.
    pub fn config(&self) -> Option<WidgetConfig> {
        self.parts().map(|p| p.config.clone())
    }

    /// Changes the draft, which this tab keeps until it is sent (across re-creation and reload).
    pub fn set_draft(&self, text: String) {
        if let Some(parts) = self.parts() {
            parts.session.save_draft(&text);
        }
        self.draft.set(text);
    }

    /// Subscribes the running effect to every change a view of the whole conversation shows: the
    /// transcript, the connection, and streamed text (at most once per animation frame).
    pub fn track_changes(&self) {
        self.transcript.track();
        self.status.track();
        if let Some(parts) = self.parts() {
            parts.session.track_streamed();
        }
    }

    /// Opens the WebSocket.
    pub fn connect(&self) {
        if let Some(parts) = self.parts() {
            parts.conn.open();
        }
    }

    /// Closes the connection for good.
    pub fn stop(&self) {
        if let Some(parts) = self.parts() {
            parts.conn.stop();
            parts.previews.abandon("the widget was removed");
        }
    }

    /// Sets the page context sent with later messages (`None` clears it).
    pub fn set_page_context(&self, context: Option<PageContext>) -> Result<(), SendError> {
        if let Some(ctx) = &context {
            glassbox_core::limits::validate_context(ctx)?;
        }
        self.page_context.set(context);
        Ok(())
    }

    /// Sends a user message. `context` overrides the page context for this message only.
    /// The message shows at once; it is delivered when connected and re-sent after a reconnect.
    pub fn send(
        &self,
        text: &str,
        attachments: Vec<Attachment>,
        context: Option<PageContext>,
    ) -> Result<(), SendError> {
        let Some(parts) = self.parts() else {
            return Ok(());
        };
        let context = context.or_else(|| self.page_context.get_untracked());
        let request = ChatRequest {
            message: text.to_owned(),
            context,
            attachments,
            client_message_id: Some(new_client_message_id()),
        };
        validate_chat(&request)?;
        self.transcript.update(|t| t.add_pending(request.clone()));
        parts.conn.send_if_joined(&ClientFrame::Chat(request));
        Ok(())
    }

    /// Asks the server to stop a streaming reply (it ends `stopped`, its text so far kept). Not
    /// [`ChatClient::stop`], which closes the connection.
    pub fn stop_reply(&self, message_id: &str) {
        self.send_frame(ClientFrame::Stop(StopRequest {
            message_id: message_id.to_owned(),
        }));
    }

    /// Whether `message_id` is a reply streaming now; read without subscribing.
    pub fn is_streaming(&self, message_id: &str) -> bool {
        self.transcript.with_untracked(|t| {
            t.find(message_id)
                .is_some_and(|m| m.status == glassbox_core::vocab::MessageStatus::Streaming)
        })
    }

    /// The reply streaming now, if any (what Stop stops); read without subscribing.
    pub fn streaming_reply(&self) -> Option<String> {
        self.transcript
            .with_untracked(|t| t.streaming_reply().map(str::to_owned))
    }

    /// Asks the server to regenerate a failed or stopped reply.
    pub fn retry(&self, message_id: &str) {
        self.send_frame(ClientFrame::Retry(RetryRequest {
            message_id: message_id.to_owned(),
        }));
    }

    /// Sends new compression settings for this session; the server answers every tab with `context`.
    pub fn update_compression(&self, settings: glassbox_core::context::CompressionSettings) {
        self.send_frame(ClientFrame::Settings(settings));
    }

    /// Changes one of the session's context sets (the host's `setContext`); every tab gets `context`.
    pub fn set_context(&self, args: glassbox_core::context::sets::SetContextArgs) {
        self.send_frame(ClientFrame::SetContext(args));
    }

    /// Selects topics by label (empty clears the filter); the server answers every tab with `filter`.
    pub fn set_filter(&self, labels: Vec<String>) {
        self.send_frame(ClientFrame::SetFilter(glassbox_core::wire::SetFilter {
            labels,
        }));
    }

    /// Switches similarity mode for the session; `threshold` (checked by the caller) also sets
    /// the session's similarity threshold (`Some(None)`: back to the server's).
    pub fn set_similarity_mode(&self, enabled: bool, threshold: Option<Option<f32>>) {
        self.send_frame(ClientFrame::SetSimilarityMode(
            glassbox_core::wire::SetSimilarityMode { enabled, threshold },
        ));
    }

    /// Pins or excludes a message, or clears its mark.
    pub fn mark_message(
        &self,
        message_id: &str,
        mark: Option<glassbox_core::context::MessageMark>,
    ) {
        self.send_frame(ClientFrame::MarkMessage(glassbox_core::wire::MarkMessage {
            message_id: message_id.to_owned(),
            mark,
        }));
    }

    /// Adds one of the agent's items to the session (as `manual`); every tab receives `items`.
    pub fn add_item(&self, item: ItemRef) {
        self.send_frame(ClientFrame::AddItem(ItemChange { item }));
    }

    /// Answers a waiting tool call (`allow`, `deny` with an optional reason the model is told, or
    /// `allow_session`); every tab receives `approval`.
    pub fn approve(
        &self,
        approval_id: &str,
        decision: glassbox_core::vocab::ApprovalDecision,
        reason: Option<String>,
    ) {
        self.send_frame(ClientFrame::Approve(glassbox_core::wire::Approve {
            approval_id: approval_id.to_owned(),
            decision,
            reason,
        }));
    }

    /// Removes an item from the session; every tab receives `items`.
    pub fn remove_item(&self, item: ItemRef) {
        self.send_frame(ClientFrame::RemoveItem(ItemChange { item }));
    }

    /// Replaces the session's overrides of its agent's defaults (checked by the caller and the
    /// server); every tab receives `items`.
    pub fn set_overrides(&self, overrides: SessionOverrides) {
        self.send_frame(ClientFrame::SetOverrides(overrides));
    }

    /// Asks the server for the plan of the draft being written, with the page context it would
    /// go with; the answer replaces `previews.current` unless a newer draft was asked for since.
    /// Nothing is asked while disconnected.
    pub fn preview_draft(&self, text: &str) {
        let Some(parts) = self.parts() else { return };
        if !parts.conn.is_joined() {
            return;
        }
        let id = self.previews.next_id(Asker::Widget, text);
        let request = ChatRequest {
            message: text.to_owned(),
            context: self.page_context.get_untracked(),
            attachments: self.draft_files.get_untracked(),
            client_message_id: Some(id),
        };
        if let Err(e) = validate_chat(&request) {
            self.previews
                .refuse(glassbox_core::wire::WireError::new(e.code(), e.to_string()));
            return;
        }
        parts.conn.send(&ClientFrame::Preview(request));
    }

    /// The host's `preview(text, attachments?, context?)`: a promise of the receipt a turn
    /// answering `text` would have now, rejected with the server's error. Asked when connected
    /// (again after a reconnect, until answered). `context` defaults to the page context, as for
    /// `send`.
    pub fn preview_for_host(
        &self,
        text: &str,
        attachments: Vec<Attachment>,
        context: Option<PageContext>,
    ) -> Result<js_sys::Promise, SendError> {
        let id = self.previews.next_id(Asker::Host, text);
        let request = ChatRequest {
            message: text.to_owned(),
            context: context.or_else(|| self.page_context.get_untracked()),
            attachments,
            client_message_id: Some(id.clone()),
        };
        validate_chat(&request)?;
        let parts = self.parts();
        let previews = self.previews;
        Ok(js_sys::Promise::new(&mut |resolve, reject| {
            if !previews.wait(request.clone(), resolve, reject) {
                return;
            }
            if let Some(parts) = &parts {
                parts
                    .conn
                    .send_if_joined(&ClientFrame::Preview(request.clone()));
            }
        }))
    }

    /// Sends a refused message again (after a rate limit's wait); it shows as sending meanwhile.
    pub fn resend(&self, client_message_id: &str) {
        let Some(request) = self
            .transcript
            .try_update(|t| t.resend_pending(client_message_id))
            .flatten()
        else {
            return;
        };
        if let Some(parts) = self.parts() {
            parts.conn.send_if_joined(&ClientFrame::Chat(request));
        }
    }

    /// Deletes this conversation on the server and starts a new one (the "New chat" control and
    /// the element's `clearSession()`). Offline, the conversation is forgotten here and left to
    /// the server's idle purge.
    pub fn clear_session(&self) {
        let Some(parts) = self.parts() else { return };
        if parts.conn.is_joined() {
            parts
                .conn
                .send(&ClientFrame::DeleteSession(Default::default()));
        } else {
            parts.start_afresh();
        }
    }

    /// What the chat shows before its first message: the host's placeholder, welcome and starters,
    /// else the session's agent's.
    pub fn greeting(&self) -> glassbox_core::wire::Greeting {
        let agent = self.transcript.with(|t| t.greeting.clone());
        match self.parts() {
            Some(parts) => parts.config.greeting.or(&agent),
            None => agent,
        }
    }

    /// Whether the host vouches for a user (whose sessions the drawer lists).
    pub fn has_user(&self) -> bool {
        self.parts().is_some_and(|p| p.config.user.is_some())
    }

    /// Asks for the verified user's sessions (answered with `sessions`, kept in the transcript).
    pub fn list_sessions(&self) {
        self.send_frame(ClientFrame::ListSessions(Default::default()));
    }

    /// Renames one of the user's sessions (`None` or blank: its first message again).
    pub fn rename_session(&self, session_id: String, title: Option<String>) {
        self.send_frame(ClientFrame::RenameSession(RenameSession {
            session_id: Some(session_id),
            title,
        }));
    }

    /// Deletes one of the user's sessions: this one as the "New chat" control does, another
    /// in place (the list is sent again).
    pub fn delete_listed_session(&self, session_id: String) {
        if self
            .last_session()
            .is_some_and(|s| s.session_id == session_id)
        {
            return self.clear_session();
        }
        self.send_frame(ClientFrame::DeleteSession(DeleteSession {
            session_id: Some(session_id),
        }));
    }

    /// Opens another of the user's sessions in place of this one.
    pub fn open_session(&self, session_id: String) {
        if let Some(parts) = self.parts() {
            parts.open_session(session_id);
        }
    }

    /// Starts a new conversation: a verified user's current one stays theirs (listed in the
    /// drawer); an anonymous one is deleted, as "New chat" does ([`Self::clear_session`]).
    pub fn new_conversation(&self) {
        let Some(parts) = self.parts() else { return };
        if parts.config.user.is_some() {
            parts.start_afresh();
        } else {
            self.clear_session();
        }
    }

    /// Drops a message the server refused.
    pub fn dismiss(&self, client_message_id: &str) {
        self.transcript
            .update(|t| t.dismiss_pending(client_message_id));
    }

    /// Hides the notice banner.
    pub fn clear_notice(&self) {
        self.transcript.update(|t| t.notice = None);
    }

    /// Reconnects now instead of waiting for the backoff.
    pub fn reconnect_now(&self) {
        if let Some(parts) = self.parts() {
            parts.conn.reconnect_now();
        }
    }
}
