//! Token counts from the counting Web Worker, cached by content, so the meter only ever waits for
//! texts it has not seen: a keystroke sends the composer's text alone, a finished reply its own.
//!
//! The worker (`token-worker.js`, wasm from `glassbox-token-worker`) builds the tokenizer from a
//! vocabulary the page downloads while the worker starts (`load`); until it is ready, counts are
//! estimates and the meter marks them with "~".

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use glassbox_core::tokens::{content_key, estimate};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{MessageEvent, Worker, WorkerOptions, WorkerType};

/// The worker's `onmessage` handler, kept alive as long as the worker.
type MessageHandler = Closure<dyn FnMut(MessageEvent)>;
type ErrorHandler = Closure<dyn FnMut(web_sys::Event)>;

/// Where the vocabulary stands.
#[derive(Debug, Clone, PartialEq)]
pub enum VocabState {
    /// Not requested yet, or being fetched.
    Loading { encoding: String },
    /// Counting exactly. `transfer_bytes` is 0 when the browser cache answered.
    Ready {
        encoding: String,
        transfer_bytes: Option<f64>,
        fetch_ms: f64,
        build_ms: f64,
    },
    /// The worker or the vocabulary failed; counts stay estimates.
    Failed { encoding: String, message: String },
}

impl VocabState {
    /// True when counts are exact.
    pub fn is_ready(&self) -> bool {
        matches!(self, VocabState::Ready { .. })
    }
}

/// A handle to the counting worker and its cache. `Copy`, for views and handlers.
#[derive(Clone, Copy)]
pub struct TokenCounts {
    inner: StoredValue<Rc<Inner>, LocalStorage>,
    /// Changes whenever counts arrive, so readers re-run.
    pub revision: RwSignal<u64>,
    pub vocab: RwSignal<VocabState>,
    /// Milliseconds from the worker's last answer to the meter showing it (set by the meter).
    pub update_ms: RwSignal<f64>,
}

struct Inner {
    worker: RefCell<Option<Worker>>,
    _on_message: RefCell<Option<MessageHandler>>,
    /// The worker's `error` event (it could not start: a Content-Security-Policy, a failed import).
    _on_error: RefCell<Option<ErrorHandler>>,
    /// Vocabulary URL with `{encoding}` in place of the encoding's name.
    vocab_url: String,
    encoding: RefCell<String>,
    counts: RefCell<HashMap<u64, u32>>,
    requested: RefCell<HashSet<u64>>,
    /// Texts asked for before the vocabulary was ready.
    waiting: RefCell<Vec<(u64, String)>>,
    /// Per message id: content length and key, so long histories are not re-hashed on every update.
    message_keys: RefCell<HashMap<String, (usize, u64)>>,
    next_request: Cell<u32>,
    answered_at: Cell<f64>,
    /// True once the current encoding's vocabulary is loaded in the worker.
    ready: Cell<bool>,
    /// Vocabulary loads asked for: a download that finishes after a newer one was asked for is
    /// not handed to the worker.
    loads: Rc<Cell<u32>>,
}

/// `performance.now()` in the page, 0 where unavailable.
pub fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

impl TokenCounts {
    /// Starts the worker from `worker_url` (may be cross-origin: it is imported from a blob module)
    /// and loads the vocabulary for `encoding` from `vocab_url` (`{encoding}` is replaced).
    pub fn start(worker_url: &str, vocab_url: &str, encoding: &str) -> Self {
        let revision = RwSignal::new(0u64);
        let vocab = RwSignal::new(VocabState::Loading {
            encoding: encoding.to_owned(),
        });
        let update_ms = RwSignal::new(0.0);
        let inner = Rc::new(Inner {
            worker: RefCell::new(None),
            _on_message: RefCell::new(None),
            _on_error: RefCell::new(None),
            vocab_url: vocab_url.to_owned(),
            encoding: RefCell::new(encoding.to_owned()),
            counts: RefCell::new(HashMap::new()),
            requested: RefCell::new(HashSet::new()),
            waiting: RefCell::new(Vec::new()),
            message_keys: RefCell::new(HashMap::new()),
            next_request: Cell::new(0),
            answered_at: Cell::new(0.0),
            ready: Cell::new(false),
            loads: Rc::new(Cell::new(0)),
        });
        // Absolute, as the page's script makes it: the pool's key, and a blob module cannot
        // import a path relative to the page.
        let worker_url = &absolute(worker_url);
        if let Some(early) = take_early_worker(worker_url) {
            // The page's script started it while the wasm loaded: taken over at once.
            Inner::start_worker(&inner, Ok(early), revision, vocab);
        } else {
            // After first paint: the chat shows at once; counting catches up (marked "~" until
            // then).
            let weak = Rc::downgrade(&inner);
            let worker_url = worker_url.to_owned();
            request_animation_frame(move || {
                set_timeout(
                    move || {
                        if let Some(inner) = weak.upgrade() {
                            let worker = spawn_worker(&worker_url).map(EarlyWorker::fresh);
                            Inner::start_worker(&inner, worker, revision, vocab);
                        }
                    },
                    std::time::Duration::ZERO,
                )
            });
        }
        TokenCounts {
            inner: StoredValue::new_local(inner),
            revision,
            vocab,
            update_ms,
        }
    }

    fn inner(&self) -> Option<Rc<Inner>> {
        self.inner.try_get_value()
    }

    /// Whether the counts held are in `encoding` (not yet, just after the model changed and
    /// before [`TokenCounts::set_encoding`] ran).
    pub fn counts_in(&self, encoding: &str) -> bool {
        self.inner()
            .is_some_and(|inner| *inner.encoding.borrow() == encoding)
    }

    /// Switches to another encoding (a different model); loads its vocabulary.
    pub fn set_encoding(&self, encoding: &str) {
        let Some(inner) = self.inner() else { return };
        if *inner.encoding.borrow() == encoding {
            return;
        }
        *inner.encoding.borrow_mut() = encoding.to_owned();
        inner.counts.borrow_mut().clear();
        inner.requested.borrow_mut().clear();
        inner.message_keys.borrow_mut().clear();
        inner.waiting.borrow_mut().clear();
        inner.ready.set(false);
        self.vocab.set(VocabState::Loading {
            encoding: encoding.to_owned(),
        });
        inner.load();
    }

    /// The exact count of `text` if known; otherwise asks the worker and returns `None`.
    pub fn count(&self, text: &str) -> Option<u32> {
        let inner = self.inner()?;
        Inner::lookup(&inner, content_key(text), text)
    }

    /// Like [`count`](Self::count) for a stored message: its key is remembered by id and length.
    pub fn count_message(&self, id: &str, text: &str) -> Option<u32> {
        let inner = self.inner()?;
        let key = {
            let mut keys = inner.message_keys.borrow_mut();
            match keys.get(id) {
                Some(&(len, key)) if len == text.len() => key,
                _ => {
                    let key = content_key(text);
                    keys.insert(id.to_owned(), (text.len(), key));
                    key
                }
            }
        };
        Inner::lookup(&inner, key, text)
    }

    /// The count, or the estimate while the exact one is pending: `(tokens, exact)`.
    pub fn count_or_estimate(&self, text: &str) -> (u32, bool) {
        match self.count(text) {
            Some(n) => (n, true),
            None => (estimate(text) as u32, false),
        }
    }

    /// When the worker last answered (`performance.now()`).
    pub fn answered_at(&self) -> f64 {
        self.inner().map_or(0.0, |i| i.answered_at.get())
    }

    /// Stops the worker.
    pub fn stop(&self) {
        if let Some(inner) = self.inner()
            && let Some(worker) = inner.worker.borrow_mut().take()
        {
            worker.terminate();
        }
    }
}

/// A started worker, with what it was asked and said before this client took it over.
struct EarlyWorker {
    worker: Worker,
    /// The vocabulary it was asked to load.
    loading: Option<String>,
    /// What it answered before it was taken over, oldest first.
    messages: Vec<JsValue>,
}

impl EarlyWorker {
    fn fresh(worker: Worker) -> Self {
        Self {
            worker,
            loading: None,
            messages: Vec::new(),
        }
    }
}

/// The worker for `url` the page's script started while the wasm loaded (`startTokenWorker` in
/// `token-worker-start.js`: `globalThis[Symbol.for('glassbox.tokenWorkers')]`, a `Map` from the
/// worker's URL to `{worker, vocabUrl, messages}`), taken out of the map.
fn take_early_worker(url: &str) -> Option<EarlyWorker> {
    let key = js_sys::Symbol::for_("glassbox.tokenWorkers");
    let pool: js_sys::Map = js_sys::Reflect::get(&js_sys::global(), &key)
        .ok()?
        .dyn_into()
        .ok()?;
    let entry = pool.get(&JsValue::from_str(url));
    pool.delete(&JsValue::from_str(url));
    let worker: Worker = get(&entry, "worker").dyn_into().ok()?;
    let messages: js_sys::Array = get(&entry, "messages").dyn_into().ok()?;
    Some(EarlyWorker {
        worker,
        loading: get(&entry, "vocabUrl").as_string(),
        messages: messages.iter().collect(),
    })
}

/// Starts a module worker that imports `url`; a blob module makes cross-origin hosts work.
fn spawn_worker(url: &str) -> Result<Worker, String> {
    let source = format!("import {};", serde_json::to_string(url).unwrap_or_default());
    let parts = js_sys::Array::of1(&JsValue::from_str(&source));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("text/javascript");
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| "cannot create the worker script".to_owned())?;
    let blob_url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| "cannot create the worker URL".to_owned())?;
    let worker_options = WorkerOptions::new();
    worker_options.set_type(WorkerType::Module);
    Worker::new_with_options(&blob_url, &worker_options)
        .map_err(|e| format!("cannot start the token worker: {e:?}"))
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

impl Inner {
    fn start_worker(
        this: &Rc<Self>,
        worker: Result<EarlyWorker, String>,
        revision: RwSignal<u64>,
        vocab: RwSignal<VocabState>,
    ) {
        match worker {
            Ok(EarlyWorker {
                worker,
                loading,
                messages,
            }) => {
                let weak = Rc::downgrade(this);
                let on_message =
                    Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
                        if let Some(inner) = weak.upgrade() {
                            inner.on_message(&ev.data(), revision, vocab);
                        }
                    });
                worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
                *this._on_message.borrow_mut() = Some(on_message);
                let weak = Rc::downgrade(this);
                let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
                    if let Some(inner) = weak.upgrade() {
                        let failed = js_object(&[
                            ("type", "error".into()),
                            ("message", "the token worker could not start".into()),
                        ]);
                        inner.on_message(&failed, revision, vocab);
                    }
                });
                worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
                *this._on_error.borrow_mut() = Some(on_error);
                *this.worker.borrow_mut() = Some(worker);
                if loading.as_deref() != Some(this.wanted_vocab().as_str()) {
                    this.load();
                }
                for message in &messages {
                    this.on_message(message, revision, vocab);
                }
            }
            Err(message) => {
                let encoding = this.encoding.borrow().clone();
                vocab.set(VocabState::Failed { encoding, message });
            }
        }
    }

    /// The URL of the vocabulary of the current encoding, absolute: the worker (a blob module)
    /// cannot resolve a path relative to the page.
    fn wanted_vocab(&self) -> String {
        absolute(
            &self
                .vocab_url
                .replace("{encoding}", &self.encoding.borrow()),
        )
    }

    /// Has the worker load the current encoding's vocabulary, downloaded here meanwhile (a worker
    /// takes tens of milliseconds to run its first line) and handed over without a copy. A failed
    /// download is left to the worker, which fetches again and reports the error.
    fn load(&self) {
        let url = self.wanted_vocab();
        let Some(worker) = self.worker.borrow().clone() else {
            return;
        };
        let asked = self.loads.get().wrapping_add(1);
        self.loads.set(asked);
        let loads = self.loads.clone();
        // Asked now, not when the task first runs (after the view mounts).
        let started = now_ms();
        let fetching = web_sys::window().map(|w| w.fetch_with_str(&url));
        leptos::task::spawn_local(async move {
            let downloaded = match fetching {
                Some(response) => download(response).await,
                None => None,
            };
            if loads.get() != asked {
                return;
            }
            let plain = js_object(&[("type", "load".into()), ("url", JsValue::from_str(&url))]);
            let Some((bytes, transfer_bytes)) = downloaded else {
                // The worker fetches it and reports why it cannot.
                let _ = worker.post_message(&plain);
                return;
            };
            let message = js_object(&[
                ("type", "load".into()),
                ("url", JsValue::from_str(&url)),
                ("bytes", bytes.clone()),
                ("transferBytes", transfer_bytes),
                ("fetchMs", (now_ms() - started).into()),
            ]);
            if worker
                .post_message_with_transfer(&message, &js_sys::Array::of1(&bytes))
                .is_err()
            {
                let _ = worker.post_message(&plain);
            }
        });
    }

    fn post(&self, message: &JsValue) {
        if let Some(worker) = self.worker.borrow().as_ref() {
            let _ = worker.post_message(message);
        }
    }

    fn lookup(this: &Rc<Self>, key: u64, text: &str) -> Option<u32> {
        if let Some(&n) = this.counts.borrow().get(&key) {
            return Some(n);
        }
        if this.requested.borrow_mut().insert(key) {
            this.waiting.borrow_mut().push((key, text.to_owned()));
            Self::flush_soon(this);
        }
        None
    }

    /// Sends waiting texts once the current render pass is over (one message per pass), if the
    /// vocabulary is ready; otherwise the `ready` answer sends them.
    fn flush_soon(this: &Rc<Self>) {
        if !this.ready.get() || this.waiting.borrow().len() != 1 {
            return;
        }
        let weak = Rc::downgrade(this);
        leptos::task::spawn_local(async move {
            if let Some(inner) = weak.upgrade() {
                inner.flush();
            }
        });
    }

    /// Sends every waiting text to the worker in one message, once the current encoding's
    /// vocabulary is loaded (a flush scheduled before a model change waits for the new `ready`:
    /// sent now, its counts would be the old vocabulary's, dropped, and never asked again).
    fn flush(&self) {
        if !self.ready.get() {
            return;
        }
        let batch: Vec<(u64, String)> = std::mem::take(&mut *self.waiting.borrow_mut());
        if batch.is_empty() {
            return;
        }
        let keys = js_sys::Array::new();
        let texts = js_sys::Array::new();
        for (key, text) in batch {
            // Keys travel as decimal strings: u64 does not fit a JS number.
            keys.push(&JsValue::from_str(&key.to_string()));
            texts.push(&JsValue::from_str(&text));
        }
        let id = self.next_request.get();
        self.next_request.set(id + 1);
        self.post(&js_object(&[
            ("type", "count".into()),
            ("id", id.into()),
            ("keys", keys.into()),
            ("texts", texts.into()),
        ]));
    }

    fn on_message(&self, data: &JsValue, revision: RwSignal<u64>, vocab: RwSignal<VocabState>) {
        let kind = get(data, "type").as_string().unwrap_or_default();
        let encoding = self.encoding.borrow().clone();
        match kind.as_str() {
            "ready" => {
                // An answer for a vocabulary we switched away from (or another one's guess).
                if get(data, "encoding").as_string().as_deref() != Some(encoding.as_str())
                    || get(data, "url")
                        .as_string()
                        .is_some_and(|url| url != self.wanted_vocab())
                {
                    return;
                }
                vocab.set(VocabState::Ready {
                    encoding,
                    transfer_bytes: get(data, "transferBytes").as_f64(),
                    fetch_ms: get(data, "fetchMs").as_f64().unwrap_or(0.0),
                    build_ms: get(data, "buildMs").as_f64().unwrap_or(0.0),
                });
                self.ready.set(true);
                self.flush();
            }
            // Counted by the vocabulary of a model switched away from (asked before the switch,
            // answered after it): those numbers are not this encoding's.
            "counts" if get(data, "encoding").as_string().as_deref() != Some(encoding.as_str()) => {
            }
            "counts" => {
                let keys = js_sys::Array::from(&get(data, "keys"));
                let counts = js_sys::Array::from(&get(data, "counts"));
                {
                    let mut cache = self.counts.borrow_mut();
                    for (key, count) in keys.iter().zip(counts.iter()) {
                        if let (Some(key), Some(count)) = (
                            key.as_string().and_then(|k| k.parse::<u64>().ok()),
                            count.as_f64(),
                        ) {
                            cache.insert(key, count as u32);
                        }
                    }
                }
                self.answered_at.set(now_ms());
                revision.update(|r| *r += 1);
            }
            // A failed load of a vocabulary no longer wanted (an early guess) changes nothing.
            "error"
                if get(data, "url")
                    .as_string()
                    .is_some_and(|url| url != self.wanted_vocab()) => {}
            "error" => {
                let message = get(data, "message")
                    .as_string()
                    .unwrap_or_else(|| "token worker failed".into());
                leptos::logging::warn!("glassbox: {message}");
                vocab.set(VocabState::Failed { encoding, message });
            }
            _ => {}
        }
    }
}

/// `url` resolved against the page's base URL (unchanged when it cannot be).
fn absolute(url: &str) -> String {
    web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.base_uri().ok().flatten())
        .and_then(|base| web_sys::Url::new_with_base(url, &base).ok())
        .map_or_else(|| url.to_owned(), |u| u.href())
}

/// The bytes of a `fetch` and the bytes the network moved for them (0 from the browser cache).
async fn download(response: js_sys::Promise) -> Option<(JsValue, JsValue)> {
    use wasm_bindgen_futures::JsFuture;
    let window = web_sys::window()?;
    let response: web_sys::Response = JsFuture::from(response).await.ok()?.dyn_into().ok()?;
    if !response.ok() {
        return None;
    }
    let bytes = JsFuture::from(response.array_buffer().ok()?).await.ok()?;
    let transfer_bytes = window
        .performance()
        .map(|p| p.get_entries_by_name_with_entry_type(&response.url(), "resource"))
        .map(|entries| get(&entries.at(-1), "transferSize"))
        .unwrap_or(JsValue::NULL);
    Some((bytes, transfer_bytes))
}

fn js_object(fields: &[(&str, JsValue)]) -> JsValue {
    let obj = js_sys::Object::new();
    for (k, v) in fields {
        let _ = js_sys::Reflect::set(&obj, &JsValue::from_str(k), v);
    }
    obj.into()
}
