//! How an item came in (Always, Manual, Agent, Expansion), as a coloured badge in words.

use leptos::prelude::*;

/// How an item came in, as a badge in words (`text`: with its score), coloured by `badge`.
/// `text` is a `String` (the words core computed) or a signal (words from the table).
#[component]
pub(crate) fn Badge(badge: &'static str, #[prop(into)] text: Signal<String>) -> impl IntoView {
    view! { <span class=format!("gb-item-badge gb-item-badge-{}", include_key(badge))>{text}</span> }
}

/// The include of a cell's badge as on the wire (`always`, `manual`, `agent`, `expansion`): the
/// badge's class suffix and the item's `data-include`.
pub(super) fn include_key(badge: &str) -> String {
    badge.to_ascii_lowercase()
}
