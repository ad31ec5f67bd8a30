//! Renders reply markdown by building DOM nodes (see `dom`), re-rendered as the text streams in.

use leptos::html::Div;
use leptos::prelude::*;

use crate::dom::append_markdown;

/// Markdown text shown as formatted content.
#[component]
pub fn MarkdownView(#[prop(into)] text: Signal<String>) -> impl IntoView {
    let target: NodeRef<Div> = NodeRef::new();
    Effect::new(move |_| {
        let source = text.get();
        let (Some(el), Some(document)) =
            (target.get(), web_sys::window().and_then(|w| w.document()))
        else {
            return;
        };
        el.set_text_content(None);
        let nodes = glassbox_core::markdown::parse(&source);
        if append_markdown(&document, &el, &nodes).is_err() {
            // Never lose the text: fall back to showing it plain.
            el.set_text_content(Some(&source));
        }
    });
    view! { <div class="gb-markdown" node_ref=target></div> }
}
