//! The preview of a draft: the receipt the server's plan gives the message being written, without
//! sending it. The widget asks while the user types (debounced, `follow_draft`), and again when the
//! session's items or settings change, so a toggle shows what it costs; the host asks through the
//! element's `preview()`, answered by a promise. Answers to drafts that were overtaken are dropped.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use glassbox_core::wire::{ChatRequest, Preview, ReceiptJson, WireError};
use leptos::prelude::*;
use wasm_bindgen::JsValue;

/// `clientMessageId`s of previews start with this, so their answers and errors are told apart
/// from messages'.
pub const ID_PREFIX: &str = "preview-";

/// How long typing must pause before the draft is previewed.
pub const DEBOUNCE_MS: u32 = 300;

/// What the composer's preview shows.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftPreview {
    /// The draft it is the plan of.
    pub draft: String,
    /// The receipt the turn would have (read by the preview's panel and the meter, both chunks).
    pub receipt: ReceiptJson,
    /// The input tokens the request would have.
    pub total: u32,
    /// Tokens more (positive) or fewer than the preview before it of the same draft: what the
    /// change of items or settings in between costs. `None` after a new draft or no change.
    pub delta: Option<i64>,
}

/// The preview signals views read, and the previews in flight.
#[derive(Clone, Copy)]
pub struct Previews {
    /// The latest answered preview of the draft (`None`: no draft, or none answered yet).
    pub current: RwSignal<Option<DraftPreview>>,
    /// Why the latest preview was refused (a rate limit, a message too long, …).
    pub problem: RwSignal<Option<WireError>>,
    /// The widget's latest preview is asked for and not answered yet.
    pub waiting: RwSignal<bool>,
    inner: StoredValue<InFlight, LocalStorage>,
}

/// A host's `preview()` waiting for its answer.
struct HostAsk {
    request: ChatRequest,
    resolve: js_sys::Function,
    reject: js_sys::Function,
}

#[derive(Default)]
struct InFlight {
    next: Cell<u64>,
    /// The widget's latest preview request: its id and draft.
    latest: RefCell<Option<(String, String)>>,
    /// The host's `preview()` calls waiting: id → (request, resolve, reject).
    host: RefCell<HashMap<String, HostAsk>>,
}

/// Who asked for a preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    /// The composer, for the draft.
    Widget,
    /// The host page, through `preview()`.
    Host,
}

/// Most host previews waiting at once; more are refused with `rate_limited`.
pub const MAX_HOST_WAITING: usize = 32;

impl Previews {
    /// No preview yet.
    pub fn new() -> Self {
        Self {
            current: RwSignal::new(None),
            problem: RwSignal::new(None),
            waiting: RwSignal::new(false),
            inner: StoredValue::new_local(InFlight::default()),
        }
    }

    /// A fresh id for a preview of `draft` by `asker`; the widget's newest one is remembered.
    pub fn next_id(&self, asker: Asker, draft: &str) -> String {
        let id = self.inner.with_value(|i| {
            let n = i.next.get() + 1;
            i.next.set(n);
            let who = if asker == Asker::Widget { "w" } else { "h" };
            format!("{ID_PREFIX}{who}{n}")
        });
        if asker == Asker::Widget {
            self.waiting.set(true);
            self.inner
                .with_value(|i| *i.latest.borrow_mut() = Some((id.clone(), draft.to_owned())));
        }
        id
    }

    /// Waits for the answer to the host's preview `request` (its `clientMessageId` from
    /// `next_id`); it is asked again after each reconnect until answered. False (and `reject`
    /// called with `rate_limited`) when `MAX_HOST_WAITING` already wait.
    pub fn wait(
        &self,
        request: ChatRequest,
        resolve: js_sys::Function,
        reject: js_sys::Function,
    ) -> bool {
        let Some(id) = request.client_message_id.clone() else {
            return false;
        };
        if self.inner.with_value(|i| i.host.borrow().len()) >= MAX_HOST_WAITING {
            let why = format!("{MAX_HOST_WAITING} previews are already waiting for an answer");
            let _ = reject.call1(
                &JsValue::NULL,
                &crate::host_events::error("rate_limited", why),
            );
            return false;
        }
        let ask = HostAsk {
            request,
            resolve,
            reject,
        };
        self.inner
            .with_value(|i| i.host.borrow_mut().insert(id, ask));
        true
    }

    /// The host's previews not answered yet, to ask (again) once joined.
    pub fn unanswered(&self) -> Vec<ChatRequest> {
        self.inner.with_value(|i| {
            i.host
                .borrow()
                .values()
                .map(|a| a.request.clone())
                .collect()
        })
    }

    /// Forgets the draft's preview (the draft was emptied or sent).
    pub fn clear(&self) {
        self.inner.with_value(|i| i.latest.borrow_mut().take());
        self.current.set(None);
        self.problem.set(None);
        self.waiting.set(false);
    }

    /// Takes an answer; false when it is not a preview's.
    pub fn answer(&self, preview: &Preview) -> bool {
        let Some(id) = preview.client_message_id.as_deref() else {
            return false;
        };
        if !id.starts_with(ID_PREFIX) {
            return false;
        }
        if let Some(HostAsk { resolve, .. }) =
            self.inner.with_value(|i| i.host.borrow_mut().remove(id))
        {
            let _ = resolve.call1(&JsValue::NULL, &crate::host_events::to_js(&preview.receipt));
            return true;
        }
        let Some(draft) = self.inner.with_value(|i| {
            i.latest
                .borrow()
                .as_ref()
                .filter(|(latest, _)| latest == id)
                .map(|(_, draft)| draft.clone())
        }) else {
            return true;
        };
        let receipt = preview.receipt.clone();
        self.current.update(|current| {
            let before = current
                .as_ref()
                .filter(|c| c.draft == draft)
                .map(|c| c.total);
            let now = receipt.totals().map_or(0, |t| t.counted_input_tokens);
            let delta = before
                .map(|b| i64::from(now) - i64::from(b))
                .filter(|d| *d != 0)
                // Same tokens again (a reconnect, a repeated ask): the last change still stands.
                .or_else(|| {
                    current
                        .as_ref()
                        .filter(|c| c.draft == draft && c.total == now)
                        .and_then(|c| c.delta)
                });
            *current = Some(DraftPreview {
                draft,
                receipt,
                total: now,
                delta,
            });
        });
        self.problem.set(None);
        self.waiting.set(false);
        true
    }

    /// Takes an error; false when it is not about a preview.
    pub fn refused(&self, error: &WireError) -> bool {
        let Some(id) = error.client_message_id.as_deref() else {
            return false;
        };
        if !id.starts_with(ID_PREFIX) {
            return false;
        }
        if let Some(HostAsk { reject, .. }) =
            self.inner.with_value(|i| i.host.borrow_mut().remove(id))
        {
            let code = crate::host_events::code_name(error.code);
            let _ = reject.call1(
                &JsValue::NULL,
                &crate::host_events::error(&code, &error.message),
            );
            return true;
        }
        let latest = self.inner.with_value(|i| {
            i.latest
                .borrow()
                .as_ref()
                .is_some_and(|(latest, _)| latest == id)
        });
        if latest {
            self.refuse(error.clone());
        }
        true
    }

    /// Shows why the draft has no preview; the one of an earlier draft goes with it.
    pub fn refuse(&self, error: WireError) {
        self.current.set(None);
        self.problem.set(Some(error));
        self.waiting.set(false);
    }

    /// Rejects the host's previews in flight (the widget was removed before they were answered).
    pub fn abandon(&self, why: &str) {
        let waiting: Vec<_> = self
            .inner
            .try_with_value(|i| i.host.borrow_mut().drain().collect())
            .unwrap_or_default();
        for (_, HostAsk { reject, .. }) in waiting {
            let _ = reject.call1(&JsValue::NULL, &crate::host_events::error("conflict", why));
        }
    }
}

impl Default for Previews {
    fn default() -> Self {
        Self::new()
    }
}
