//! Idle capture of the host page's URL into a context set (docs/context-sets.md): once the
//! session's sets have loaded and nothing has streamed or waited to be sent for a few seconds, the
//! query of `location` is read with the host's rule (`core::context::capture`) and, when it names
//! something the set does not already hold, the set is replaced. Advisory by design: a capture
//! racing a session switch may land on the new session (documented in docs/protocol.md).

use glassbox_core::context::capture::CaptureRule;
use glassbox_core::context::sets::{MergeMode, SetContextArgs};
use gloo_timers::callback::Interval;
use leptos::prelude::*;

use crate::client::{ChatClient, ConnectionStatus};

/// How often the URL is looked at.
const TICK_MS: u32 = 1_000;
/// Quiet ticks in a row before a capture (so "idle" is a few seconds without streaming).
const QUIET_TICKS: u32 = 3;
/// Ticks after which a capture the set still does not show is sent again (the server refused
/// it, e.g. over the session's command limit).
const RESEND_TICKS: u32 = 60;

/// The watch's code: a chunk of its own with the `split` feature (a capture waits seconds of quiet
/// anyway), fetched once the chat has mounted.
type Watch = fn(ChatClient, CaptureRule) -> Interval;

crate::chunks::split_fn! {
    /// The URL watch, from its chunk.
    load_watch / preload_watch () -> Watch => watch
}

/// Starts the watch once its code has come; it runs while the returned slot holds it (a chat
/// removed before then starts none).
pub fn start(
    client: ChatClient,
    rule: CaptureRule,
) -> std::rc::Rc<std::cell::RefCell<Option<Interval>>> {
    let slot = std::rc::Rc::new(std::cell::RefCell::new(None));
    let weak = std::rc::Rc::downgrade(&slot);
    leptos::task::spawn_local(async move {
        match load_watch().await {
            Ok(watch) => {
                if let Some(slot) = weak.upgrade() {
                    *slot.borrow_mut() = Some(watch(client, rule));
                }
            }
            Err(e) => leptos::logging::warn!("glassbox: the URL capture is off: {e}"),
        }
    });
    slot
}

/// Watches the URL while the returned interval lives.
fn watch(client: ChatClient, rule: CaptureRule) -> Interval {
    let mut quiet = 0u32;
    let mut last_sent: Option<(Option<String>, Vec<String>)> = None;
    let mut since_sent = 0u32;
    Interval::new(TICK_MS, move || {
        since_sent = since_sent.saturating_add(1);
        let Some((session, busy, current)) = client.transcript.try_with_untracked(|t| {
            let busy = !t.pending.is_empty() || t.replying();
            let current = t
                .sets
                .as_ref()
                .map(|s| s.get(&rule.set_name).cloned().unwrap_or_default());
            (t.session_id.clone(), busy, current)
        }) else {
            return;
        };
        // Not before the session's sets are known (a new chat, a switch before history loads).
        let Some(current) = current else {
            quiet = 0;
            return;
        };
        let connected = client.status.try_get_untracked() == Some(ConnectionStatus::Connected);
        if !connected {
            // A frame sent just before the connection dropped may not have landed: send again.
            last_sent = None;
        }
        if busy || !connected {
            quiet = 0;
            return;
        }
        quiet = quiet.saturating_add(1);
        if quiet < QUIET_TICKS {
            return;
        }
        let Some(items) = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .and_then(|q| rule.capture(&q))
        else {
            return;
        };
        let key = (session, items);
        if key.1 == current || (last_sent.as_ref() == Some(&key) && since_sent < RESEND_TICKS) {
            return;
        }
        client.set_context(SetContextArgs {
            set_name: rule.set_name.clone(),
            items: key.1.clone(),
            mode: MergeMode::Replace,
        });
        last_sent = Some(key);
        since_sent = 0;
    })
}
