//! The context footer below the composer: one line with the session's context sets (files, applet,
//! endpoints, ports), live. Hidden while the sets are unknown (a new chat, a session switch before
//! history loads) and when they are empty. Labels are text nodes, links only http(s) or relative
//! (`core::context::footer`); the full list is in the tooltip and the accessible label.

use glassbox_core::context::ContextSets;
use glassbox_core::context::footer::{FooterItem, FooterKind, FooterLinks, footer_items};
use leptos::prelude::*;

/// The footer for `sets`.
#[component]
pub fn ContextFooter(#[prop(into)] sets: Signal<Option<ContextSets>>) -> impl IntoView {
    let items = Memo::new(move |_| {
        sets.with(|s| {
            s.as_ref()
                .map(|s| footer_items(s, &FooterLinks::default()))
                .unwrap_or_default()
        })
    });
    let full = move || {
        items.with(|items| {
            items
                .iter()
                .map(|i| i.title.clone())
                .collect::<Vec<_>>()
                .join("\n")
        })
    };
    view! {
        <div
            class="gb-context-footer"
            hidden=move || items.with(Vec::is_empty)
            tabindex="0"
            title=full
            aria-label=move || format!("Session context: {}", full().replace('\n', ", "))
        >
            <span class="gb-context-icon" aria-hidden="true">"📎"</span>
            <span class="gb-context-links">
                {move || {
                    items
                        .get()
                        .into_iter()
                        .enumerate()
                        .map(|(i, item)| view! {
                            {(i > 0).then(|| view! { <span class="gb-context-sep" aria-hidden="true">"·"</span> })}
                            <FooterEntry item=item />
                        })
                        .collect_view()
                }}
            </span>
        </div>
    }
}

#[component]
fn FooterEntry(item: FooterItem) -> impl IntoView {
    let kind = match item.kind {
        FooterKind::File => "file",
        FooterKind::Applet => "applet",
        FooterKind::Endpoint => "endpoint",
        FooterKind::Port => "port",
        FooterKind::Other => "other",
        FooterKind::More => "more",
    };
    match item.href {
        Some(href) => view! {
            <a class="gb-context-item" data-kind=kind href=href title=item.title target="_top" rel="noopener noreferrer">
                {item.label}
            </a>
        }
        .into_any(),
        None => view! {
            <span class="gb-context-item" data-kind=kind title=item.title>{item.label}</span>
        }
        .into_any(),
    }
}
