//! The Glassbox chat widget's Leptos application: a chat client over WebSocket and the components that
//! show it. The `widget` crate mounts it into a shadow root; nothing here knows about custom elements.

pub mod attach;
mod chunks;
pub mod client;
pub mod components;
pub mod config;
mod dom;
pub mod file_texts;
mod frame;
pub mod headless;
pub mod host_events;
pub mod meter_reading;
pub mod preview;
pub mod receipt_rows;
mod session_store;
pub mod standalone_meter;
pub mod token_counts;
mod url_capture;
pub mod words;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

pub use client::{ChatClient, ConnectionStatus, SendError};
pub use config::{Theme, WidgetConfig};

/// A mounted chat widget. Dropping it unmounts the view and closes the connection.
pub struct ChatHandle {
    client: ChatClient,
    theme: RwSignal<Theme>,
    words: words::Words,
    counts: token_counts::TokenCounts,
    /// The idle URL capture, while the widget lives (none when the host turned it off).
    _capture: Option<std::rc::Rc<std::cell::RefCell<Option<gloo_timers::callback::Interval>>>>,
    _view: leptos::mount::UnmountHandle<leptos::tachys::view::any_view::AnyViewState>,
}

impl ChatHandle {
    /// The chat client, for the host API (send, page context).
    pub fn client(&self) -> ChatClient {
        self.client
    }

    /// Switches the colour theme.
    pub fn set_theme(&self, theme: Theme) {
        self.theme.set(theme);
    }

    /// Switches the language of the widget's strings (a BCP 47 tag; `None`: English).
    pub fn set_language(&self, tag: Option<&str>) {
        self.words.set_language(tag);
    }

    /// Puts the host's words (key → string) over the table; empty clears them.
    pub fn set_strings(&self, strings: Vec<(String, String)>) {
        self.words.set_overrides(strings);
    }
}

impl Drop for ChatHandle {
    fn drop(&mut self) {
        self.client.stop();
        self.counts.stop();
    }
}

/// Mounts the chat into `container` (inside the host's shadow root); `host` receives DOM events.
/// `lang` is the language of its strings (the element's, else the page's; `None`: English).
pub fn mount(
    container: web_sys::HtmlElement,
    host: web_sys::HtmlElement,
    config: WidgetConfig,
    lang: Option<&str>,
) -> ChatHandle {
    // The client and theme are created inside the mount (they belong to its reactive owner) and handed out.
    let slot = std::rc::Rc::new(std::cell::Cell::new(None));
    let out = slot.clone();
    let host_target: web_sys::EventTarget = host.unchecked_into();
    let lang = lang.map(str::to_owned);
    let view = leptos::mount::mount_to(container, move || {
        let theme = RwSignal::new(config.theme);
        let words = words::Words::english();
        words.set_language(lang.as_deref());
        provide_context(words);
        // Once the host's words are asked for too (the element's script does it right after the
        // mount), the chat waits for them no longer than a moment; then the panels' English,
        // so a panel opens without waiting for it.
        leptos::task::spawn_local(async move {
            words.started();
            let _ = words.panels().await;
        });
        // o200k until the server names the model's encoding (the element's script already started
        // the worker with it while the wasm loaded).
        let counts = token_counts::TokenCounts::start(
            &config.worker_url(),
            &config.vocab_url(),
            "o200k_base",
        );
        let client = ChatClient::new(config, host_target);
        out.set(Some((client, theme, words, counts)));
        client.connect();
        view! { <components::chat_panel::ChatPanel client=client theme=theme counts=counts /> }
            .into_any()
    });
    let (client, theme, words, counts) = slot
        .take()
        .expect("mount_to runs its closure before returning");
    let capture = client
        .config()
        .and_then(|c| c.capture)
        .map(|rule| url_capture::start(client, rule));
    ChatHandle {
        client,
        theme,
        words,
        counts,
        _capture: capture,
        _view: view,
    }
}
