//! What the connection's events do: on each new socket say `hello` for the session to resume,
//! and route each server frame to the previews, the session state, the connection (a refused
//! join, a deleted session, re-sending after joining) and the host page's DOM events.

use std::rc::{Rc, Weak};

use glassbox_core::ErrorCode;
use glassbox_core::wire::{ClientFrame, ServerEvent, ServerFrame, WireError};
use leptos::prelude::*;

use super::connection::{self, Connection, ConnectionStatus, Events};
use super::session::Session;
use crate::config::WidgetConfig;
use crate::preview::Previews;

/// The client's parts, shared by its handle and the socket's event handlers.
pub struct Parts {
    pub config: WidgetConfig,
    pub host: web_sys::EventTarget,
    pub previews: Previews,
    pub conn: Rc<Connection>,
    pub session: Rc<Session>,
}

/// What an error says about joining the session, when it is about that.
#[derive(Debug, PartialEq)]
enum JoinRefusal {
    /// Before joining: the session asked for is gone (unauthorized, not found); ask for a new one.
    Stale,
    /// Before joining: the session's join limit; the server closes the socket and the reconnect
    /// waits this many ms (the badge counts down, no alert is raised).
    Limited(u32),
    /// After joining: the session was deleted (here, in another tab, or over REST); start anew.
    Deleted,
}

/// How `e` refuses the join, given whether the socket has `joined` and a session was `asked` for.
fn join_refusal(e: &WireError, joined: bool, asked: bool) -> Option<JoinRefusal> {
    match e.code {
        // Without a session asked for there is nothing stale to forget: a refused user (a wrong
        // hash, a server without identity) is shown, not asked again.
        ErrorCode::Unauthorized | ErrorCode::NotFound if !joined && asked => {
            Some(JoinRefusal::Stale)
        }
        ErrorCode::RateLimited if !joined && asked => Some(JoinRefusal::Limited(
            e.retry_after_ms.unwrap_or(0).min(60_000) as u32,
        )),
        ErrorCode::Unauthorized
            if joined && e.message_id.is_none() && e.client_message_id.is_none() =>
        {
            Some(JoinRefusal::Deleted)
        }
        _ => None,
    }
}

impl Parts {
    /// The parts of a client for `config`, its connection reporting here.
    pub fn new(
        config: WidgetConfig,
        host: web_sys::EventTarget,
        previews: Previews,
        status: RwSignal<ConnectionStatus>,
        session: Session,
    ) -> Rc<Self> {
        Rc::new_cyclic(|this: &Weak<Parts>| {
            let events: Weak<dyn Events> = this.clone();
            Parts {
                conn: Connection::new(config.ws_url(), status, events),
                session: Rc::new(session),
                config,
                host,
                previews,
            }
        })
    }

    /// Forgets the session (stored id and token, the transcript) and connects for a new one.
    pub fn start_afresh(&self) {
        self.session.clear();
        self.conn.open();
    }

    /// Leaves this session for another of the verified user's (from their list).
    pub fn open_session(&self, session_id: String) {
        self.session.switch_to(session_id);
        self.conn.open();
    }

    fn say_hello(&self) {
        let asked = self.session.resume();
        let (model, agent) = (self.config.model.clone(), self.config.agent.clone());
        let user = self.config.user.clone();
        let hello = self
            .session
            .transcript()
            .with_untracked(|t| connection::hello(asked, t, model, agent, user));
        self.conn.send(&ClientFrame::Hello(hello));
    }

    /// Shows the streamed text at the next animation frame (now, without a window).
    fn show_at_next_frame(&self) {
        let session = Rc::downgrade(&self.session);
        let asked = crate::frame::next_frame(move || {
            if let Some(session) = session.upgrade() {
                session.show_streamed();
            }
        });
        if !asked {
            self.session.show_streamed();
        }
    }

    /// Dispatches the DOM event `event` means for the host page, if any.
    fn notify_host(&self, event: &ServerEvent) {
        match event {
            ServerEvent::Accepted(a) if !a.duplicate => {
                self.dispatch("glassbox:message", &a.message)
            }
            ServerEvent::Error(e) => self.dispatch("glassbox:error", e),
            ServerEvent::Done(d) => self.dispatch("glassbox:reply", &d.message),
            // A tool call waits for the user's yes (the page may answer with `approve`).
            ServerEvent::ApprovalRequest(r) => self.dispatch("glassbox:approval", r),
            ServerEvent::Context(c) => self.dispatch("glassbox:context", c),
            // Which messages go, on every filter change (bubbles to `document`; docs/topics.md).
            ServerEvent::Filter(f) => self.dispatch(
                "glassbox:filter-changed",
                &serde_json::json!({
                    "messageIds": f.message_ids,
                    "labels": f.labels,
                    "orphaned": f.orphaned,
                    "renamed": f.renamed,
                    "total": f.total,
                    "status": f.status_line(),
                }),
            ),
            _ => {}
        }
    }

    /// Dispatches a DOM event on the host element with `detail` as a JS object.
    fn dispatch<T: serde::Serialize>(&self, name: &str, detail: &T) {
        crate::host_events::dispatch(&self.host, name, detail);
    }
}

impl Events for Parts {
    fn opened(&self) {
        self.say_hello();
    }

    fn received(&self, frame: ServerFrame) {
        match &frame.event {
            ServerEvent::Preview(p) if self.previews.answer(p) => return,
            ServerEvent::Error(e) if self.previews.refused(e) => return,
            ServerEvent::Error(e) => {
                let asked = self.session.asked().is_some();
                match join_refusal(e, self.conn.is_joined(), asked) {
                    Some(JoinRefusal::Stale) => {
                        self.session.forget_stale();
                        self.say_hello();
                        return;
                    }
                    Some(JoinRefusal::Limited(wait)) => {
                        self.conn.wait_at_least(wait);
                        return;
                    }
                    Some(JoinRefusal::Deleted) => {
                        self.start_afresh();
                        return;
                    }
                    None => {}
                }
            }
            ServerEvent::Session(info) => self.session.join(info),
            _ => {}
        }
        // Streamed text is stored at once and shown at the next frame: nothing that depends on
        // the whole transcript runs per piece.
        if let ServerEvent::Delta(_) = &frame.event {
            if self.session.stream(&frame) {
                self.show_at_next_frame();
            }
            return;
        }
        self.session.apply(&frame);
        if let ServerEvent::Session(info) = &frame.event {
            self.conn.set_joined(info.heartbeat_ms);
            for request in self.session.unsent() {
                self.conn.send(&ClientFrame::Chat(request));
            }
            for request in self.previews.unanswered() {
                self.conn.send(&ClientFrame::Preview(request));
            }
        }
        self.notify_host(&frame.event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: ErrorCode) -> WireError {
        WireError::new(code, "no")
    }

    #[test]
    fn before_joining_a_refused_session_is_stale() {
        for code in [ErrorCode::Unauthorized, ErrorCode::NotFound] {
            assert_eq!(
                join_refusal(&error(code), false, true),
                Some(JoinRefusal::Stale)
            );
            // Nothing was asked for (a new session, refused for its user): shown, not retried.
            assert_eq!(join_refusal(&error(code), false, false), None);
        }
        assert_eq!(join_refusal(&error(ErrorCode::NotFound), true, true), None);
    }

    #[test]
    fn a_limited_join_waits_as_asked_up_to_a_minute() {
        let mut e = error(ErrorCode::RateLimited);
        e.retry_after_ms = Some(4_500);
        assert_eq!(
            join_refusal(&e, false, true),
            Some(JoinRefusal::Limited(4_500))
        );
        e.retry_after_ms = Some(3_600_000);
        assert_eq!(
            join_refusal(&e, false, true),
            Some(JoinRefusal::Limited(60_000))
        );
        e.retry_after_ms = None;
        assert_eq!(join_refusal(&e, false, true), Some(JoinRefusal::Limited(0)));
        // Without a session asked for, or once joined, a rate limit is about something else.
        assert_eq!(join_refusal(&e, false, false), None);
        assert_eq!(join_refusal(&e, true, true), None);
    }

    #[test]
    fn after_joining_only_a_bare_unauthorized_means_deleted() {
        let e = error(ErrorCode::Unauthorized);
        assert_eq!(join_refusal(&e, true, true), Some(JoinRefusal::Deleted));
        let mut about_a_reply = e.clone();
        about_a_reply.message_id = Some("r".into());
        assert_eq!(join_refusal(&about_a_reply, true, true), None);
        let mut about_a_message = e;
        about_a_message.client_message_id = Some("c".into());
        assert_eq!(join_refusal(&about_a_message, true, true), None);
        assert_eq!(
            join_refusal(&error(ErrorCode::ProviderError), true, true),
            None
        );
    }
}
