//! Compression settings per session (docs/context-planning.md, Compression): toggle, threshold,
//! strategy, messages kept intact, indicator. Changes go to the server, which stores them and tells
//! every open tab.

use glassbox_core::context::{CompressionSettings, Strategy};
use leptos::prelude::*;

use crate::chunks::lazy_panel_fn;
use crate::words::{Word, words};

lazy_panel_fn! {
    /// The compression settings.
    compression_settings / preload_compression_settings (
        settings: Signal<Option<CompressionSettings>>,
        on_change: Callback<CompressionSettings>,
    ) => view! { <CompressionSettingsPanel settings=settings on_change=on_change /> }
}

/// The settings form; `on_change` receives every valid edit.
#[component]
pub fn CompressionSettingsPanel(
    #[prop(into)] settings: Signal<Option<CompressionSettings>>,
    on_change: Callback<CompressionSettings>,
) -> impl IntoView {
    let current = move || settings.get().unwrap_or_default();
    let problem = RwSignal::new(None::<String>);
    let w = words();
    let apply = move |edit: &dyn Fn(&mut CompressionSettings)| {
        let mut next = current();
        edit(&mut next);
        match next.validate() {
            Ok(()) => {
                problem.set(None);
                on_change.run(next);
            }
            Err(e) => problem.set(Some(e)),
        }
    };
    view! {
        <fieldset class="gb-settings" disabled=move || settings.with(Option::is_none)>
            <legend>{w.text(Word::ContextManagement)}</legend>
            <label class="gb-setting">
                <input
                    type="checkbox"
                    name="enabled"
                    prop:checked=move || current().enabled
                    on:change=move |ev| { let on = event_target_checked(&ev); apply(&|s| s.enabled = on) }
                />
                {w.text(Word::EnableCompression)}
            </label>
            <label class="gb-setting">
                {w.text(Word::CompressWhenContextReaches)}
                " "
                <input
                    type="number"
                    name="threshold"
                    min="1"
                    max="100"
                    prop:value=move || current().threshold.to_string()
                    on:change=move |ev| {
                        match event_target_value(&ev).trim().parse::<u8>() {
                            Ok(t) => apply(&|s| s.threshold = t),
                            Err(_) => problem.set(Some(w.get(Word::CompressThresholdWhole))),
                        }
                    }
                />
                {w.text(Word::CompressPercentOfLimit)}
            </label>
            <label class="gb-setting">
                {w.text(Word::CompressStrategy)}
                " "
                <select
                    name="strategy"
                    prop:value=move || current().strategy.id()
                    on:change=move |ev| {
                        if let Ok(st) = event_target_value(&ev).parse::<Strategy>() {
                            apply(&|s| s.strategy = st)
                        }
                    }
                >
                    {Strategy::ALL
                        .into_iter()
                        .map(|st| view! { <option value=st.id()>{w.text(strategy_word(st))}</option> })
                        .collect_view()}
                </select>
            </label>
            <label class="gb-setting">
                {w.text(Word::CompressAlwaysKeepLast)}
                " "
                <input
                    type="number"
                    name="preserveRecentMessages"
                    min="0"
                    max="1000"
                    prop:value=move || current().preserve_recent_messages.to_string()
                    on:change=move |ev| {
                        match event_target_value(&ev).trim().parse::<u32>() {
                            Ok(n) => apply(&|s| s.preserve_recent_messages = n),
                            Err(_) => problem.set(Some(w.get(Word::CompressKeepWhole))),
                        }
                    }
                />
                " "
                {w.text(Word::CompressMessagesIntact)}
            </label>
            <label class="gb-setting">
                <input
                    type="checkbox"
                    name="showIndicator"
                    prop:checked=move || current().show_indicator
                    on:change=move |ev| { let on = event_target_checked(&ev); apply(&|s| s.show_indicator = on) }
                />
                {w.text(Word::ShowCompressionIndicator)}
            </label>
            <Show when=move || problem.with(Option::is_some)>
                <p class="gb-settings-error" role="alert">{move || problem.get()}</p>
            </Show>
        </fieldset>
    }
}

/// A strategy's name in the list.
fn strategy_word(strategy: Strategy) -> Word {
    match strategy {
        Strategy::Summarize => Word::StrategySummarize,
        Strategy::DropLowValue => Word::StrategyDropLowValue,
        Strategy::SlidingWindow => Word::StrategySlidingWindow,
        Strategy::Hybrid => Word::StrategyHybrid,
    }
}
