//! The token meter on its own, with no server: the host page feeds it text (or a list of messages)
//! and names a model; the window comes from `core`'s model limits, counting from the same worker.

use glassbox_core::context::{
    CompressionSettings, ContextInfo, TurnMessage, context_limit, encoding_for,
};
use glassbox_core::vocab::Role;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::components::token_meter::TokenMeter;
use crate::config::asset_url;
use crate::meter_reading::{self, MeterView};
use crate::token_counts::{TokenCounts, now_ms};

/// Options of a standalone meter.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterConfig {
    /// Folder of the widget's files (token worker, vocabularies).
    pub assets: String,
    /// Vocabulary URL with `{encoding}`; `{assets}/vocab/{encoding}.gbv` if unset.
    pub vocab_url: Option<String>,
    pub model: String,
    /// Overrides the model's context window.
    pub limit: Option<u32>,
    /// Tokens kept free for the reply.
    pub output_reserve: u32,
    /// Preview of compression; off unless the host turns it on.
    pub compression: CompressionSettings,
    pub compact: bool,
}

/// A mounted standalone meter. Dropping it unmounts the view and stops the worker.
pub struct MeterHandle {
    messages: RwSignal<Vec<String>>,
    system_prompt: RwSignal<String>,
    config: RwSignal<MeterConfig>,
    view: Memo<Option<MeterView>>,
    counts: TokenCounts,
    _view: leptos::mount::UnmountHandle<leptos::tachys::view::any_view::AnyViewState>,
}

impl MeterHandle {
    /// Counts `text` as the whole conversation (one message).
    pub fn set_text(&self, text: String) {
        self.messages.set(vec![text]);
    }

    /// Counts each text as one chat message (with its per-message overhead).
    pub fn set_messages(&self, messages: Vec<String>) {
        self.messages.set(messages);
    }

    /// Counts `text` as the system prompt.
    pub fn set_system_prompt(&self, text: String) {
        self.system_prompt.set(text);
    }

    /// Changes options (model, limit, compression, …).
    pub fn update(&self, f: impl FnOnce(&mut MeterConfig)) {
        self.config.update(f);
    }

    /// The current reading, `None` before the first text.
    pub fn reading(&self) -> Option<MeterView> {
        self.view.get_untracked()
    }
}

impl Drop for MeterHandle {
    fn drop(&mut self) {
        self.counts.stop();
    }
}

fn info_for(config: &MeterConfig) -> ContextInfo {
    let (encoding, exact) = encoding_for(&config.model);
    ContextInfo {
        model: config.model.clone(),
        context_limit: config
            .limit
            .unwrap_or_else(|| context_limit(&config.model, &[])),
        encoding: encoding.to_owned(),
        exact,
        system_prompt_tokens: 0,
        memory_tokens: 0,
        tool_tokens: 0,
        output_reserve: config.output_reserve,
        compression: config.compression,
    }
}

/// Mounts a meter into `container`; `host` receives `glassbox:meter` events on every change.
pub fn mount_meter(
    container: web_sys::HtmlElement,
    host: web_sys::HtmlElement,
    config: MeterConfig,
) -> MeterHandle {
    let slot = std::rc::Rc::new(std::cell::Cell::new(None));
    let out = slot.clone();
    let host: web_sys::EventTarget = host.unchecked_into();
    let handle = leptos::mount::mount_to(container, move || {
        let vocab_url = config
            .vocab_url
            .clone()
            .unwrap_or_else(|| asset_url(&config.assets, "vocab/{encoding}.gbv"));
        let first_encoding = encoding_for(&config.model).0;
        let counts = TokenCounts::start(
            &asset_url(&config.assets, "token-worker.js"),
            &vocab_url,
            first_encoding,
        );
        let config = RwSignal::new(config);
        let messages = RwSignal::new(Vec::<String>::new());
        let system_prompt = RwSignal::new(String::new());
        Effect::new(move |_| {
            counts.set_encoding(encoding_for(&config.with(|c| c.model.clone())).0)
        });
        let view = Memo::new(move |_| {
            counts.revision.track();
            counts.vocab.track();
            let mut info = config.with(info_for);
            let system = system_prompt.get();
            let (system_tokens, system_exact) = if system.is_empty() {
                (0, true)
            } else {
                counts.count_or_estimate(&system)
            };
            info.system_prompt_tokens = system_tokens;
            messages.with(|m| {
                let texts: Vec<TurnMessage> = m
                    .iter()
                    .enumerate()
                    .map(|(i, t)| TurnMessage {
                        id: None,
                        role: if i % 2 == 0 {
                            Role::User
                        } else {
                            Role::Assistant
                        },
                        text: t.as_str().into(),
                        attachments: &[],
                        rounds: &[],
                    })
                    .collect();
                let mut v = meter_reading::read(&counts, &info, &texts, None, None, None, None);
                // Read between a model change and the counts' switch to its encoding: the
                // numbers are the old vocabulary's, so not exact for this model.
                v.estimated |= !system_exact || !counts.counts_in(&info.encoding);
                Some(v)
            })
        });
        Effect::new(move |_| {
            if let Some(v) = view.get() {
                let answered = counts.answered_at();
                if answered > 0.0 {
                    counts.update_ms.set(now_ms() - answered);
                }
                crate::host_events::dispatch(&host, "glassbox:meter", &v.summary());
            }
        });
        let compact = Signal::derive(move || config.with(|c| c.compact));
        out.set(Some((messages, system_prompt, config, view, counts)));
        view! { <TokenMeter view=view compact=compact update_ms=counts.update_ms /> }.into_any()
    });
    let (messages, system_prompt, config, view, counts) = slot
        .take()
        .expect("mount_to runs its closure before returning");
    MeterHandle {
        messages,
        system_prompt,
        config,
        view,
        counts,
        _view: handle,
    }
}
