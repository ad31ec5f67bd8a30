//! The context footer below the composer: one line with the session's context sets (files, applet,
//! endpoints, ports), live. Hidden while the sets are unknown (a new chat, a session switch before
//! history loads) and when they are empty. Labels are text nodes, links only http(s) or relative
//! (`core::context::footer`); the full list is in the tooltip and the accessible label. After the
//! sets, chips name the page-context keys that changed with the latest message (names only).

use glassbox_core::context::ContextSets;
use glassbox_core::context::footer::{FooterItem, FooterKind, FooterLinks, footer_items};
use leptos::prelude::*;

use crate::words::{Word, Words, words};

/// Changed-key chips shown before the rest is summarized as "+N".
const MAX_CHIPS: usize = 6;

/// The footer for `sets`, linking with the host's templates, and chips for `changed_keys`.
#[component]
pub fn ContextFooter(
    #[prop(into)] sets: Signal<Option<ContextSets>>,
    links: FooterLinks,
    #[prop(into)] changed_keys: Signal<Vec<String>>,
) -> impl IntoView {
    let w = words();
    let items = Memo::new(move |_| {
        sets.with(|s| {
            s.as_ref()
                .map(|s| footer_items(s, &links))
                .unwrap_or_default()
        })
    });
    let chips = move || {
        changed_keys.with(|keys| {
            let mut shown: Vec<String> = keys.iter().take(MAX_CHIPS).cloned().collect();
            if keys.len() > MAX_CHIPS {
                shown.push(format!("+{}", keys.len() - MAX_CHIPS));
            }
            shown
        })
    };
    let changed_line = move || {
        changed_keys.with(|k| {
            (!k.is_empty()).then(|| w.fill(Word::PageContextChanged, &[("keys", &k.join(", "))]))
        })
    };
    // Every item, then the changed keys: the tooltip and what screen readers say.
    let full = move || {
        let mut lines: Vec<String> =
            items.with(|items| items.iter().map(|i| entry_title(w, i)).collect());
        lines.extend(changed_line());
        lines.join("\n")
    };
    view! {
        <div
            class="gb-context-footer"
            part="footer"
            hidden=move || items.with(Vec::is_empty) && changed_keys.with(Vec::is_empty)
            tabindex="0"
            title=full
            aria-label=move || w.fill(Word::SessionContext, &[("items", &full().replace('\n', ", "))])
        >
            <span class="gb-context-icon" aria-hidden="true" hidden=move || items.with(Vec::is_empty)>
                {super::icons::paperclip(14)}
            </span>
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
            <span
                class="gb-context-changed"
                hidden=move || changed_keys.with(Vec::is_empty)
                title=move || changed_line().unwrap_or_default()
                aria-label=move || changed_line().unwrap_or_default()
            >
                {move || chips().into_iter().map(|k| view! { <span class="gb-context-chip">{k}</span> }).collect_view()}
            </span>
        </div>
    }
}

/// The whole of `item` in words, for its tooltip: its title ("port 8080" for a port).
fn entry_title(w: Words, item: &FooterItem) -> String {
    match item.kind {
        FooterKind::Port => w.fill(Word::FooterPort, &[("port", &item.title)]),
        _ => item.title.clone(),
    }
}

#[component]
fn FooterEntry(item: FooterItem) -> impl IntoView {
    let kind: &str = item.kind.into();
    let w = words();
    let title = {
        let item = item.clone();
        move || entry_title(w, &item)
    };
    match item.href {
        Some(href) => view! {
            <a class="gb-context-item" data-kind=kind href=href title=title target="_top" rel="noopener noreferrer">
                {item.label}
            </a>
        }
        .into_any(),
        None => view! {
            <span class="gb-context-item" data-kind=kind title=title>{item.label}</span>
        }
        .into_any(),
    }
}
