//! The widget's connection to the server: a WebSocket that says `hello`, applies server frames to the
//! transcript, re-sends unconfirmed messages after reconnecting, and reconnects with backoff, resuming
//! from the last sync id it saw.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use glassbox_core::ErrorCode;
use glassbox_core::context::agent_settings::SessionOverrides;
use glassbox_core::context::items::ItemRef;
use glassbox_core::limits::{InputError, validate_chat};
use glassbox_core::transcript::Transcript;
use glassbox_core::vocab::{Attachment, MessageStatus, PageContext};
use glassbox_core::wire::{
    ChatMessage, ChatRequest, ClientFrame, Hello, ItemChange, RetryRequest, ServerEvent,
    ServerFrame,
};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

use crate::config::WidgetConfig;
use crate::preview::{Asker, Previews};
use crate::session_store::{self, StoredSession};

/// Where the connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionStatus {
    Connecting,
    Connected,
    /// Waiting to reconnect, in this many seconds.
    Reconnecting {
        in_secs: u32,
    },
    /// Stopped (the widget was removed).
    Stopped,
}

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
    inner: StoredValue<Rc<Inner>, LocalStorage>,
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
}

struct Inner {
    config: WidgetConfig,
    host: web_sys::EventTarget,
    transcript: RwSignal<Transcript>,
    status: RwSignal<ConnectionStatus>,
    socket: RefCell<Option<Socket>>,
    /// True once the server answered `hello` on the current socket.
    joined: Cell<bool>,
    attempt: Cell<u32>,
    /// The server's `retryAfterMs` of a refused join: the next reconnect waits at least this.
    retry_after_ms: Cell<u32>,
    stopped: Cell<bool>,
    reconnect_timer: RefCell<Option<gloo_timers::callback::Timeout>>,
    countdown: RefCell<Option<gloo_timers::callback::Interval>>,
    announcement: RwSignal<String>,
    previews: Previews,
    /// One signal per stored message: a change to one message re-renders only its view.
    cells: RefCell<HashMap<String, ArcRwSignal<ChatMessage>>>,
    /// Messages with streamed text not yet shown; shown at the next animation frame.
    unshown: RefCell<Vec<String>>,
    frame_requested: Cell<bool>,
    /// Notified when streamed text is shown (once per animation frame), for views that read the
    /// transcript as a whole ([`ChatClient::track_changes`]).
    streamed: ArcTrigger,
    /// The session the socket asked to join (or was given) and its token: the one uploads go to,
    /// even where the browser keeps no storage.
    session: RefCell<Option<StoredSession>>,
}

/// An open WebSocket with its event handlers (kept alive as long as the socket).
struct Socket {
    ws: WebSocket,
    _on_open: Closure<dyn FnMut()>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut(CloseEvent)>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.ws.set_onopen(None);
        self.ws.set_onmessage(None);
        self.ws.set_onclose(None);
        let _ = self.ws.close();
    }
}

/// Delay before reconnect attempt `n` (0-based): 0.5 s doubling to 30 s, with up to 30% jitter.
fn backoff_ms(attempt: u32) -> u32 {
    let base = 500u32.saturating_mul(1 << attempt.min(6)).min(30_000);
    let jitter = (js_sys::Math::random() * 0.3 * f64::from(base)) as u32;
    base + jitter
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
        let draft = session_store::load_draft(&config.server, &config.slot()).unwrap_or_default();
        let inner = Rc::new(Inner {
            announcement,
            previews,
            config,
            host,
            transcript,
            status,
            socket: RefCell::new(None),
            joined: Cell::new(false),
            attempt: Cell::new(0),
            retry_after_ms: Cell::new(0),
            stopped: Cell::new(false),
            reconnect_timer: RefCell::new(None),
            countdown: RefCell::new(None),
            cells: RefCell::new(HashMap::new()),
            unshown: RefCell::new(Vec::new()),
            frame_requested: Cell::new(false),
            streamed: ArcTrigger::new(),
            session: RefCell::new(None),
        });
        Self {
            inner: StoredValue::new_local(inner),
            transcript,
            status,
            page_context: RwSignal::new(None),
            draft: RwSignal::new(draft),
            draft_files: RwSignal::new(Vec::new()),
            announcement,
            previews,
            items: Memo::new(move |_| transcript.with(|t| t.items.clone())),
        }
    }

    /// The signal of one stored message (its view subscribes to nothing else of the transcript).
    pub fn message(&self, id: &str) -> Option<ArcRwSignal<ChatMessage>> {
        self.inner()?.cells.borrow().get(id).cloned()
    }

    /// The session this client joined and its token (`None` before it has joined one).
    pub fn session(&self) -> Option<StoredSession> {
        let inner = self.inner()?;
        let joined = inner.joined.get();
        joined.then(|| inner.session.borrow().clone()).flatten()
    }

    /// The session this client last asked for or joined, joined now or not (a reconnect keeps it).
    pub fn last_session(&self) -> Option<StoredSession> {
        self.inner()?.session.borrow().clone()
    }

    /// What the host configured.
    pub fn config(&self) -> Option<WidgetConfig> {
        self.inner().map(|i| i.config.clone())
    }

    /// Changes the draft, which this tab keeps until it is sent (across re-creation and reload).
    pub fn set_draft(&self, text: String) {
        if let Some(inner) = self.inner() {
            session_store::save_draft(&inner.config.server, &inner.config.slot(), &text);
        }
        self.draft.set(text);
    }

    /// Subscribes the running effect to every change a view of the whole conversation shows: the
    /// transcript, the connection, and streamed text (at most once per animation frame).
    pub fn track_changes(&self) {
        self.transcript.track();
        self.status.track();
        if let Some(inner) = self.inner() {
            inner.streamed.track();
        }
    }

    fn inner(&self) -> Option<Rc<Inner>> {
        self.inner.try_get_value()
    }

    /// Opens the WebSocket.
    pub fn connect(&self) {
        if let Some(inner) = self.inner() {
            Inner::open(&inner);
        }
    }

    /// Closes the connection for good.
    pub fn stop(&self) {
        if let Some(inner) = self.inner() {
            inner.stopped.set(true);
            inner.reconnect_timer.borrow_mut().take();
            inner.countdown.borrow_mut().take();
            inner.socket.borrow_mut().take();
            inner.previews.abandon("the widget was removed");
            let _ = self.status.try_set(ConnectionStatus::Stopped);
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
        let Some(inner) = self.inner() else {
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
        if inner.joined.get() {
            inner.send_frame(&ClientFrame::Chat(request));
        }
        Ok(())
    }

    /// Asks the server to regenerate a failed reply.
    pub fn retry(&self, message_id: &str) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::Retry(RetryRequest {
                message_id: message_id.to_owned(),
            }));
        }
    }

    /// Sends new compression settings for this session; the server answers every tab with `context`.
    pub fn update_compression(&self, settings: glassbox_core::context::CompressionSettings) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::Settings(settings));
        }
    }

    /// Changes one of the session's context sets (the host's `setContext`); every tab gets `context`.
    pub fn set_context(&self, args: glassbox_core::context::sets::SetContextArgs) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::SetContext(args));
        }
    }

    /// Selects topics by label (empty clears the filter); the server answers every tab with `filter`.
    pub fn set_filter(&self, labels: Vec<String>) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::SetFilter(glassbox_core::wire::SetFilter {
                labels,
            }));
        }
    }

    /// Switches similarity mode for the session; `threshold` (checked by the caller) also sets
    /// the session's similarity threshold (`Some(None)`: back to the server's).
    pub fn set_similarity_mode(&self, enabled: bool, threshold: Option<Option<f32>>) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::SetSimilarityMode(
                glassbox_core::wire::SetSimilarityMode { enabled, threshold },
            ));
        }
    }

    /// Pins or excludes a message, or clears its mark.
    pub fn mark_message(
        &self,
        message_id: &str,
        mark: Option<glassbox_core::context::MessageMark>,
    ) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::MarkMessage(
                glassbox_core::wire::MarkMessage {
                    message_id: message_id.to_owned(),
                    mark,
                },
            ));
        }
    }

    /// Adds one of the agent's items to the session (as `manual`); every tab receives `items`.
    pub fn add_item(&self, item: ItemRef) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::AddItem(ItemChange { item }));
        }
    }

    /// Removes an item from the session; every tab receives `items`.
    pub fn remove_item(&self, item: ItemRef) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::RemoveItem(ItemChange { item }));
        }
    }

    /// Replaces the session's overrides of its agent's defaults (checked by the caller and the
    /// server); every tab receives `items`.
    pub fn set_overrides(&self, overrides: SessionOverrides) {
        if let Some(inner) = self.inner() {
            inner.send_frame(&ClientFrame::SetOverrides(overrides));
        }
    }

    /// Asks the server for the plan of the draft being written, with the page context it would
    /// go with; the answer replaces `previews.current` unless a newer draft was asked for since.
    /// Nothing is asked while disconnected.
    pub fn preview_draft(&self, text: &str) {
        let Some(inner) = self.inner() else { return };
        if !inner.joined.get() {
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
        inner.send_frame(&ClientFrame::Preview(request));
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
        let inner = self.inner();
        let previews = self.previews;
        Ok(js_sys::Promise::new(&mut |resolve, reject| {
            if !previews.wait(request.clone(), resolve, reject) {
                return;
            }
            if let Some(inner) = inner.as_ref().filter(|i| i.joined.get()) {
                inner.send_frame(&ClientFrame::Preview(request.clone()));
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
        if let Some(inner) = self.inner()
            && inner.joined.get()
        {
            inner.send_frame(&ClientFrame::Chat(request));
        }
    }

    /// Deletes this conversation on the server and starts a new one (the "New chat" control and
    /// the element's `clearSession()`). Offline, the conversation is forgotten here and left to
    /// the server's idle purge.
    pub fn clear_session(&self) {
        let Some(inner) = self.inner() else { return };
        if inner.joined.get() {
            inner.send_frame(&ClientFrame::DeleteSession(Default::default()));
        } else {
            Inner::start_afresh(&inner);
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
        if let Some(inner) = self.inner() {
            inner.reconnect_timer.borrow_mut().take();
            inner.countdown.borrow_mut().take();
            Inner::open(&inner);
        }
    }
}

impl Inner {
    fn open(this: &Rc<Self>) {
        if this.stopped.get() {
            return;
        }
        this.socket.borrow_mut().take();
        this.joined.set(false);
        this.status.set(ConnectionStatus::Connecting);
        let ws = match WebSocket::new(&this.config.ws_url()) {
            Ok(ws) => ws,
            Err(_) => return Self::schedule_reconnect(this),
        };
        let weak = Rc::downgrade(this);
        let on_open = Closure::<dyn FnMut()>::new({
            let weak = weak.clone();
            move || {
                if let Some(inner) = weak.upgrade() {
                    inner.say_hello();
                }
            }
        });
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new({
            let weak = weak.clone();
            move |ev: MessageEvent| {
                let (Some(inner), Some(text)) = (weak.upgrade(), ev.data().as_string()) else {
                    return;
                };
                match serde_json::from_str::<ServerFrame>(&text) {
                    Ok(frame) => Inner::on_frame(&inner, frame),
                    Err(e) => leptos::logging::warn!("glassbox: unreadable frame from server: {e}"),
                }
            }
        });
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |_ev: CloseEvent| {
            if let Some(inner) = weak.upgrade() {
                inner.joined.set(false);
                // Dropping the socket here would free this closure while it runs; the next open replaces it.
                Self::schedule_reconnect(&inner);
            }
        });
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        *this.socket.borrow_mut() = Some(Socket {
            ws,
            _on_open: on_open,
            _on_message: on_message,
            _on_close: on_close,
        });
    }

    /// Forgets the session (stored id and token, the transcript) and connects for a new one.
    fn start_afresh(this: &Rc<Self>) {
        session_store::clear(&this.config.server, &this.config.slot());
        this.session.borrow_mut().take();
        this.transcript.update(|t| {
            t.reset();
            t.pending.clear();
        });
        this.cells.borrow_mut().clear();
        Inner::open(this);
    }

    fn schedule_reconnect(this: &Rc<Self>) {
        if this.stopped.get() {
            return;
        }
        let attempt = this.attempt.get();
        this.attempt.set(attempt + 1);
        let delay = backoff_ms(attempt).max(this.retry_after_ms.replace(0));
        let mut left = delay.div_ceil(1000);
        this.status
            .set(ConnectionStatus::Reconnecting { in_secs: left });
        let status = this.status;
        *this.countdown.borrow_mut() =
            Some(gloo_timers::callback::Interval::new(1000, move || {
                left = left.saturating_sub(1);
                if let Some(ConnectionStatus::Reconnecting { .. }) = status.try_get_untracked() {
                    let _ = status.try_set(ConnectionStatus::Reconnecting { in_secs: left });
                }
            }));
        let weak: Weak<Self> = Rc::downgrade(this);
        *this.reconnect_timer.borrow_mut() =
            Some(gloo_timers::callback::Timeout::new(delay, move || {
                if let Some(inner) = weak.upgrade() {
                    inner.countdown.borrow_mut().take();
                    Inner::open(&inner);
                }
            }));
    }

    fn say_hello(&self) {
        let stored = session_store::load(&self.config.server, &self.config.slot())
            .or_else(|| self.session.borrow().clone());
        // The session asked for: the one joined if the server agrees (`ServerEvent::Session`).
        self.session.borrow_mut().clone_from(&stored);
        let last_sync_id = match &stored {
            Some(s)
                if self
                    .transcript
                    .with_untracked(|t| t.session_id.as_deref() == Some(s.session_id.as_str())) =>
            {
                self.transcript.with_untracked(|t| t.last_sync_id())
            }
            _ => None,
        };
        self.send_frame(&ClientFrame::Hello(Hello {
            session_id: stored.as_ref().map(|s| s.session_id.clone()),
            token: stored.map(|s| s.token),
            last_sync_id,
            model: self.config.model.clone(),
            agent: self.config.agent.clone(),
        }));
    }

    fn send_frame(&self, frame: &ClientFrame) {
        let socket = self.socket.borrow();
        let (Some(socket), Ok(text)) = (socket.as_ref(), serde_json::to_string(frame)) else {
            return;
        };
        if socket.ws.ready_state() == WebSocket::OPEN {
            let _ = socket.ws.send_with_str(&text);
        }
    }

    fn on_frame(this: &Rc<Self>, frame: ServerFrame) {
        match &frame.event {
            ServerEvent::Preview(p) if this.previews.answer(p) => return,
            ServerEvent::Error(e) if this.previews.refused(e) => return,
            // Before joining, an unauthorized answer means the stored session is gone: start a new one.
            ServerEvent::Error(e)
                if !this.joined.get()
                    && matches!(e.code, ErrorCode::Unauthorized | ErrorCode::NotFound) =>
            {
                session_store::clear(&this.config.server, &this.config.slot());
                this.session.borrow_mut().take();
                this.transcript.update(|t| t.reset());
                this.say_hello();
                return;
            }
            // A join refused by the session's join limit: the server closes the socket, and the
            // reconnect waits as long as it asks; the badge counts down, no alert is raised.
            ServerEvent::Error(e)
                if !this.joined.get()
                    && e.code == ErrorCode::RateLimited
                    && this.session.borrow().is_some() =>
            {
                let wait = e.retry_after_ms.unwrap_or(0).min(60_000) as u32;
                this.retry_after_ms.set(wait);
                return;
            }
            // The session was deleted (here, in another tab, or over REST): start a new one.
            ServerEvent::Error(e)
                if this.joined.get()
                    && e.code == ErrorCode::Unauthorized
                    && e.message_id.is_none()
                    && e.client_message_id.is_none() =>
            {
                Inner::start_afresh(this);
                return;
            }
            ServerEvent::Session(info) => {
                let given = info.token.as_ref().map(|token| StoredSession {
                    session_id: info.session_id.clone(),
                    token: token.clone(),
                });
                if let Some(given) = &given {
                    session_store::save(&this.config.server, &this.config.slot(), given);
                }
                // The session joined: the one just given, else the one the hello named.
                let joined = given.or_else(|| {
                    this.session
                        .borrow()
                        .clone()
                        .filter(|s| s.session_id == info.session_id)
                });
                *this.session.borrow_mut() = joined;
                if this.transcript.with_untracked(|t| {
                    t.session_id.as_ref().is_some_and(|s| s != &info.session_id)
                }) {
                    this.transcript.update(|t| t.reset());
                }
            }
            _ => {}
        }
        let finished = match &frame.event {
            ServerEvent::Done(d) => Some(d.message.clone()),
            _ => None,
        };
        if let ServerEvent::Delta(d) = &frame.event {
            // Streamed text is stored at once and shown at the next frame: nothing that depends on
            // the whole transcript runs per piece.
            if this.transcript.try_update_untracked(|t| t.apply(&frame)) == Some(true) {
                Inner::stream_piece(this, &d.message_id, &d.text);
            }
            return;
        }
        this.transcript.update(|t| {
            t.apply(&frame);
        });
        this.sync_cells(&frame.event);
        this.announce(&frame.event);
        if let ServerEvent::Session(_) = frame.event {
            this.joined.set(true);
            this.attempt.set(0);
            this.status.set(ConnectionStatus::Connected);
            for request in this.transcript.with_untracked(|t| t.unsent()) {
                this.send_frame(&ClientFrame::Chat(request));
            }
            for request in this.previews.unanswered() {
                this.send_frame(&ClientFrame::Preview(request));
            }
        }
        match &frame.event {
            ServerEvent::Accepted(a) if !a.duplicate => {
                this.notify_host("glassbox:message", &a.message);
            }
            ServerEvent::Error(e) => this.notify_host("glassbox:error", e),
            _ => {}
        }
        if let Some(message) = finished {
            this.notify_host("glassbox:reply", &message);
        }
        if let ServerEvent::Context(c) = &frame.event {
            this.notify_host("glassbox:context", c);
        }
        // Which messages go, on every filter change (bubbles to `document`; docs/topics.md).
        if let ServerEvent::Filter(f) = &frame.event {
            this.notify_host(
                "glassbox:filter-changed",
                &serde_json::json!({
                    "messageIds": f.message_ids,
                    "labels": f.labels,
                    "orphaned": f.orphaned,
                    "renamed": f.renamed,
                    "total": f.total,
                    "status": f.status_line(),
                }),
            );
        }
    }

    /// Appends streamed text to its message's signal without notifying; the view is told once per
    /// animation frame.
    fn stream_piece(this: &Rc<Self>, message_id: &str, text: &str) {
        if let Some(cell) = this.cells.borrow().get(message_id) {
            cell.update_untracked(|m| m.content.push_str(text));
        }
        let mut unshown = this.unshown.borrow_mut();
        if !unshown.iter().any(|id| id == message_id) {
            unshown.push(message_id.to_owned());
        }
        drop(unshown);
        if !this.frame_requested.replace(true) {
            let weak = Rc::downgrade(this);
            let asked = crate::frame::next_frame(move || {
                if let Some(inner) = weak.upgrade() {
                    inner.show_streamed();
                }
            });
            if !asked {
                this.show_streamed();
            }
        }
    }

    /// Tells the views of messages with new streamed text to show it.
    fn show_streamed(&self) {
        self.frame_requested.set(false);
        let ids = std::mem::take(&mut *self.unshown.borrow_mut());
        let cells = self.cells.borrow();
        for id in ids {
            if let Some(cell) = cells.get(&id) {
                cell.notify();
            }
        }
        self.streamed.notify();
    }

    /// Brings the per-message signals in line with the transcript after `event` was applied.
    fn sync_cells(&self, event: &ServerEvent) {
        let one = match event {
            ServerEvent::Accepted(a) => Some(a.message.id.as_str()),
            ServerEvent::ReplyStart(r) => Some(r.message_id.as_str()),
            ServerEvent::Done(d) => Some(d.message.id.as_str()),
            ServerEvent::Error(e) => e.message_id.as_deref(),
            ServerEvent::Session(_) | ServerEvent::Snapshot(_) => None,
            ServerEvent::Tool(t) => Some(t.message_id.as_str()),
            ServerEvent::Mark(m) => Some(m.message_id.as_str()),
            ServerEvent::ContextInfo(_)
            | ServerEvent::Context(_)
            | ServerEvent::Budget(_)
            | ServerEvent::Topics(_)
            | ServerEvent::Filter(_)
            | ServerEvent::Items(_)
            | ServerEvent::Preview(_)
            | ServerEvent::Delta(_) => return,
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
            match one {
                Some(id) => {
                    if let Some(m) = t.find(id) {
                        sync(m);
                    }
                }
                None => {
                    t.messages.iter().for_each(&mut sync);
                    if cells.len() > t.messages.len() {
                        cells.retain(|id, _| t.find(id).is_some());
                    }
                }
            }
        });
    }

    /// Says in the live region when a reply completes or fails (never per piece).
    fn announce(&self, event: &ServerEvent) {
        let said = match event {
            ServerEvent::Done(d) if d.message.status == MessageStatus::Complete => {
                let text = d.message.content.trim();
                let cut = text.char_indices().nth(200).map_or(text.len(), |(i, _)| i);
                let more = if cut < text.len() { "…" } else { "" };
                format!("Reply complete: {}{more}", &text[..cut])
            }
            ServerEvent::Error(e) if e.message_id.is_some() => {
                format!("Reply failed: {}", e.message)
            }
            _ => return,
        };
        self.announcement.set(said);
    }

    /// Dispatches a DOM event on the host element with `detail` as a JS object.
    fn notify_host<T: serde::Serialize>(&self, name: &str, detail: &T) {
        crate::host_events::dispatch(&self.host, name, detail);
    }
}
