//! The socket to the server: opens it, hands each frame that arrives to its [`Events`], sends
//! frames while it is open, and after a close reconnects with backoff (at least as long as a
//! refused join asked), counting the wait down in [`ConnectionStatus`]. [`hello`] is the first
//! frame on each socket: it resumes the session from the last sync id seen. A socket on which
//! nothing arrives for three of the server's heartbeat intervals is given up and reconnected (a
//! proxy or network path that died without closing it).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use glassbox_core::transcript::Transcript;
use glassbox_core::wire::{ClientFrame, Hello, ServerEvent, ServerFrame, UserClaim};
use gloo_timers::callback::{Interval, Timeout};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

use super::backoff::{backoff_ms, countdown_secs};
use crate::session_store::StoredSession;

/// The close code a restarting server sends (RFC 6455 registry: "Service Restart").
const SERVICE_RESTART: u16 = 1012;

/// Where the connection stands (its name, `connected`, …, is the status badge's `data-state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
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

/// What the connection tells its owner.
pub trait Events {
    /// A socket opened: the owner says `hello` on it.
    fn opened(&self);
    /// A server frame arrived.
    fn received(&self, frame: ServerFrame);
}

/// The `hello` that joins `asked` (a new session when `None`), resuming after the last frame of
/// `transcript` when the transcript is of that session; as `user` when the host vouches for one
/// (whose sessions need no token).
pub fn hello(
    asked: Option<StoredSession>,
    transcript: &Transcript,
    model: Option<String>,
    agent: Option<String>,
    user: Option<UserClaim>,
) -> Hello {
    let last_sync_id = match &asked {
        Some(s) if transcript.session_id.as_deref() == Some(s.session_id.as_str()) => {
            transcript.last_sync_id()
        }
        _ => None,
    };
    Hello {
        session_id: asked.as_ref().map(|s| s.session_id.clone()),
        token: asked.map(|s| s.token).filter(|t| !t.is_empty()),
        last_sync_id,
        model,
        agent,
        user,
    }
}

/// The WebSocket and its reconnecting.
pub struct Connection {
    url: String,
    status: RwSignal<ConnectionStatus>,
    events: Weak<dyn Events>,
    socket: RefCell<Option<Socket>>,
    /// True once the server answered `hello` on the current socket.
    joined: Cell<bool>,
    attempt: Cell<u32>,
    /// The server's `retryAfterMs` of a refused join: the next reconnect waits at least this.
    retry_after_ms: Cell<u32>,
    stopped: Cell<bool>,
    reconnect_timer: RefCell<Option<Timeout>>,
    countdown: RefCell<Option<Interval>>,
    /// When the current socket last received anything (ms since the epoch).
    heard: Cell<f64>,
    /// Checks, every heartbeat interval, that the socket still hears the server.
    watchdog: RefCell<Option<Interval>>,
}

/// Heartbeat intervals without a frame after which the socket is given up.
const SILENT_BEATS: f64 = 3.0;

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

impl Connection {
    /// A connection to `url` (not opened yet) reporting to `events` and in `status`.
    pub fn new(
        url: String,
        status: RwSignal<ConnectionStatus>,
        events: Weak<dyn Events>,
    ) -> Rc<Self> {
        Rc::new(Self {
            url,
            status,
            events,
            socket: RefCell::new(None),
            joined: Cell::new(false),
            attempt: Cell::new(0),
            retry_after_ms: Cell::new(0),
            stopped: Cell::new(false),
            reconnect_timer: RefCell::new(None),
            countdown: RefCell::new(None),
            heard: Cell::new(0.0),
            watchdog: RefCell::new(None),
        })
    }

    /// True once the server answered `hello` on the current socket.
    pub fn is_joined(&self) -> bool {
        self.joined.get()
    }

    /// The server answered `hello`: connected, and the backoff starts over. With the server's
    /// heartbeat interval, a socket that then hears nothing for three intervals is reconnected.
    pub fn set_joined(self: &Rc<Self>, heartbeat_ms: Option<u32>) {
        self.joined.set(true);
        self.attempt.set(0);
        self.status.set(ConnectionStatus::Connected);
        let watchdog = heartbeat_ms.filter(|ms| *ms > 0).map(|ms| {
            let weak = Rc::downgrade(self);
            Interval::new(ms, move || {
                let Some(this) = weak.upgrade() else { return };
                if js_sys::Date::now() - this.heard.get() > SILENT_BEATS * f64::from(ms) {
                    leptos::logging::warn!(
                        "glassbox: nothing from the server for {} s; reconnecting",
                        3 * ms / 1000
                    );
                    this.lost();
                }
            })
        });
        *self.watchdog.borrow_mut() = watchdog;
    }

    /// Gives up the current socket (it went silent) and reconnects after the backoff.
    fn lost(self: &Rc<Self>) {
        self.watchdog.borrow_mut().take();
        // Dropping the socket closes it and removes its handlers (no close event follows).
        self.socket.borrow_mut().take();
        self.joined.set(false);
        self.schedule_reconnect();
    }

    /// The next reconnect waits at least `ms` (a join refused by the session's join limit).
    pub fn wait_at_least(&self, ms: u32) {
        self.retry_after_ms.set(ms);
    }

    /// Sends `frame` if the socket is open (else it is dropped).
    pub fn send(&self, frame: &ClientFrame) {
        let socket = self.socket.borrow();
        let (Some(socket), Ok(text)) = (socket.as_ref(), serde_json::to_string(frame)) else {
            return;
        };
        if socket.ws.ready_state() == WebSocket::OPEN {
            let _ = socket.ws.send_with_str(&text);
        }
    }

    /// Sends `frame` if the session is joined.
    pub fn send_if_joined(&self, frame: &ClientFrame) {
        if self.joined.get() {
            self.send(frame);
        }
    }

    /// Opens a new socket in place of the current one (none once stopped).
    pub fn open(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        self.socket.borrow_mut().take();
        self.watchdog.borrow_mut().take();
        self.joined.set(false);
        self.heard.set(js_sys::Date::now());
        self.status.set(ConnectionStatus::Connecting);
        let ws = match WebSocket::new(&self.url) {
            Ok(ws) => ws,
            Err(_) => return self.schedule_reconnect(),
        };
        let weak = Rc::downgrade(self);
        let on_open = Closure::<dyn FnMut()>::new({
            let weak = weak.clone();
            move || {
                if let Some(events) = weak.upgrade().and_then(|c| c.events.upgrade()) {
                    events.opened();
                }
            }
        });
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new({
            let weak = weak.clone();
            move |ev: MessageEvent| {
                let Some(this) = weak.upgrade() else { return };
                this.heard.set(js_sys::Date::now());
                let (Some(events), Some(text)) = (this.events.upgrade(), ev.data().as_string())
                else {
                    return;
                };
                match serde_json::from_str::<ServerFrame>(&text) {
                    // It only said the line is alive.
                    Ok(frame) if matches!(frame.event, ServerEvent::Heartbeat(_)) => {}
                    Ok(frame) => events.received(frame),
                    Err(e) => leptos::logging::warn!("glassbox: unreadable frame from server: {e}"),
                }
            }
        });
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |ev: CloseEvent| {
            if let Some(this) = weak.upgrade() {
                this.joined.set(false);
                this.watchdog.borrow_mut().take();
                // 1012: the server is restarting (docs/protocol.md, "Shutting down"). Not a failure
                // of ours: the backoff starts again from its shortest wait.
                if ev.code() == SERVICE_RESTART {
                    this.attempt.set(0);
                }
                // Dropping the socket here would free this closure while it runs; the next open replaces it.
                this.schedule_reconnect();
            }
        });
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        *self.socket.borrow_mut() = Some(Socket {
            ws,
            _on_open: on_open,
            _on_message: on_message,
            _on_close: on_close,
        });
    }

    /// Reconnects now instead of waiting for the backoff.
    pub fn reconnect_now(self: &Rc<Self>) {
        self.reconnect_timer.borrow_mut().take();
        self.countdown.borrow_mut().take();
        self.open();
    }

    /// Closes the connection for good.
    pub fn stop(&self) {
        self.stopped.set(true);
        self.watchdog.borrow_mut().take();
        self.reconnect_timer.borrow_mut().take();
        self.countdown.borrow_mut().take();
        self.socket.borrow_mut().take();
        let _ = self.status.try_set(ConnectionStatus::Stopped);
    }

    fn schedule_reconnect(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        let attempt = self.attempt.get();
        self.attempt.set(attempt + 1);
        let delay = backoff_ms(attempt, js_sys::Math::random()).max(self.retry_after_ms.replace(0));
        let mut left = countdown_secs(delay);
        self.status
            .set(ConnectionStatus::Reconnecting { in_secs: left });
        let status = self.status;
        *self.countdown.borrow_mut() = Some(Interval::new(1000, move || {
            left = left.saturating_sub(1);
            if let Some(ConnectionStatus::Reconnecting { .. }) = status.try_get_untracked() {
                let _ = status.try_set(ConnectionStatus::Reconnecting { in_secs: left });
            }
        }));
        let weak = Rc::downgrade(self);
        *self.reconnect_timer.borrow_mut() = Some(Timeout::new(delay, move || {
            if let Some(this) = weak.upgrade() {
                this.countdown.borrow_mut().take();
                this.open();
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::wire::ServerFrame;

    fn session_frame(sync_id: u64, session_id: &str) -> ServerFrame {
        serde_json::from_value(serde_json::json!({
            "syncId": sync_id,
            "type": "session",
            "data": {"sessionId": session_id, "model": "m"},
        }))
        .unwrap()
    }

    fn stored(session_id: &str) -> StoredSession {
        StoredSession {
            session_id: session_id.into(),
            token: format!("token-of-{session_id}"),
            ..Default::default()
        }
    }

    #[test]
    fn hello_resumes_the_transcript_of_the_session_it_asks_for() {
        let mut t = Transcript::default();
        assert!(t.apply(&session_frame(7, "s1")));
        let h = hello(
            Some(stored("s1")),
            &t,
            Some("gpt".into()),
            Some("helper".into()),
            None,
        );
        assert_eq!(h.session_id.as_deref(), Some("s1"));
        assert_eq!(h.token.as_deref(), Some("token-of-s1"));
        assert_eq!(h.last_sync_id, Some(7));
        assert_eq!(h.model.as_deref(), Some("gpt"));
        assert_eq!(h.agent.as_deref(), Some("helper"));
    }

    #[test]
    fn hello_for_another_session_starts_it_from_the_beginning() {
        let mut t = Transcript::default();
        assert!(t.apply(&session_frame(7, "s1")));
        let h = hello(Some(stored("s2")), &t, None, None, None);
        assert_eq!(h.session_id.as_deref(), Some("s2"));
        assert_eq!(h.token.as_deref(), Some("token-of-s2"));
        assert_eq!(h.last_sync_id, None);
    }

    #[test]
    fn hello_without_a_session_asks_for_a_new_one() {
        let mut t = Transcript::default();
        assert!(t.apply(&session_frame(3, "s1")));
        let h = hello(None, &t, None, None, None);
        assert_eq!((h.session_id, h.token, h.last_sync_id), (None, None, None));
    }

    #[test]
    fn a_users_session_opened_from_the_list_is_asked_for_without_a_token() {
        let t = Transcript::default();
        let user = UserClaim {
            id: "ann".into(),
            hash: "ab".into(),
        };
        let listed = StoredSession::of_user("s9".into());
        let h = hello(Some(listed), &t, None, None, Some(user.clone()));
        assert_eq!(h.session_id.as_deref(), Some("s9"));
        assert_eq!(h.token, None, "no empty token is sent");
        assert_eq!(h.user, Some(user));
    }
}
