//! Above the composer while the user types: what the message being written would carry — the
//! rules and references (with how each came in, its score and tokens), what the knowledge budget
//! would cut, the near misses, and the request's token total — from the server's plan of the draft,
//! asked for when typing pauses and again when anything the plan reads changes. A toggle here
//! (remove a session item, add a near miss) shows what it costs as a token delta before anything
//! is sent.

use glassbox_core::context::MessageMark;
use leptos::prelude::*;

use super::badge::Badge;
use super::lazy_panel::lazy_panel;
use super::token_meter::grouped;
use crate::chunks::lazy_panel_fn;
use crate::client::{ChatClient, ConnectionStatus};
use crate::preview::{DEBOUNCE_MS, DraftPreview};
use crate::receipt_rows::{ItemCell, ItemSection, item_section};
use crate::words::{Word, words};

/// Near misses offered to add, at most.
const MISSES_SHOWN: usize = 3;

lazy_panel_fn! {
    /// What the draft would carry (prefetched when the composer takes focus).
    preview_body / preload_preview_body (client: ChatClient, preview: DraftPreview) =>
        view! { <PreviewBody client=client preview=preview /> }
}

/// The preview strip; asks for previews as the draft, the session's items and settings, the page
/// context or the history change.
#[component]
pub fn DraftPreviewStrip(client: ChatClient) -> impl IntoView {
    follow_draft(client);
    let previews = client.previews;
    let has_draft = move || client.draft.with(|d| !d.trim().is_empty());
    let w = words();
    view! {
        <Show when=move || has_draft() && (previews.current.with(Option::is_some) || previews.problem.with(Option::is_some) || previews.waiting.get())>
            <section
                class="gb-preview"
                part="preview"
                aria-label=w.text(Word::PreviewLabel)
                data-draft-chars=move || previews.current.with(|c| c.as_ref().map(|c| c.draft.chars().count()))
            >
                {move || previews.problem.get().map(|p| view! {
                    <p class="gb-preview-problem" data-code=crate::host_events::code_name(p.code)>
                        {w.fill_text(Word::NoPreview, vec![("problem", p.message)])}
                    </p>
                })}
                {move || previews.current.get().map(|p| lazy_panel(Word::PanelPreview, move || preview_body(client, p.clone())))}
                // The first search of a new server indexes the agent's items first: say so.
                <Show when=move || previews.waiting.get() && previews.current.with(Option::is_none) && previews.problem.with(Option::is_none)>
                    <p class="gb-preview-waiting">{w.text(Word::PreviewWaiting)}</p>
                </Show>
            </section>
        </Show>
    }
}

/// The total (and the last change's delta), the items that would go, what would be cut, the near
/// misses.
#[component]
pub(crate) fn PreviewBody(client: ChatClient, preview: DraftPreview) -> impl IntoView {
    let w = words();
    let receipt = match preview.receipt.read() {
        Ok(receipt) => receipt,
        Err(e) => {
            let why = e.to_string();
            return view! {
                <p class="gb-preview-problem" role="alert">
                    {w.fill_text(Word::ReceiptUnreadable, vec![("why", why)])}
                </p>
            }
            .into_any();
        }
    };
    let section = item_section(w, &receipt);
    // The knowledge budget's cuts (all: the user should know before sending), then the best near
    // misses.
    let (columns, misses, search) = match section {
        Some(ItemSection {
            columns,
            misses,
            search,
        }) => {
            let (capped, near): (Vec<_>, Vec<_>) =
                misses.into_iter().partition(|m| m.cause == "knowledge_cap");
            let misses: Vec<_> = capped
                .into_iter()
                .chain(near.into_iter().take(MISSES_SHOWN))
                .collect();
            (columns, misses, search)
        }
        None => Default::default(),
    };
    let total = w.fill_text(
        Word::TokensToSend,
        vec![(
            "tokens",
            format!(
                "{}{}",
                if receipt.totals.exact { "" } else { "~" },
                grouped(preview.total)
            ),
        )],
    );
    let delta = preview.delta.map(|d| {
        let (sign, word) = if d > 0 {
            ("+", "plus")
        } else {
            ("−", "minus")
        };
        view! {
            <span class="gb-preview-delta" data-sign=word>
                {format!("{sign}{}", grouped(d.unsigned_abs()))}
            </span>
        }
    });
    let cells: Vec<ItemCell> = columns
        .rules
        .into_iter()
        .chain(columns.references)
        .collect();
    let empty = cells.is_empty();
    view! {
        <div class="gb-preview-line">
            <span class="gb-preview-total">{total}</span>
            {delta}
        </div>
        {(!empty).then(|| view! {
            <ul class="gb-preview-items" aria-label=w.text(Word::PreviewItems)>
                {cells.into_iter().map(|cell| view! { <PreviewItem client=client cell=cell /> }).collect_view()}
            </ul>
        })}
        {search.map(|s| view! { <p class="gb-preview-search">{s}</p> })}
        {(!misses.is_empty()).then(|| view! {
            <ul class="gb-preview-misses" aria-label=w.text(Word::PreviewLeftOut)>
                {misses
                    .into_iter()
                    .map(|m| {
                        let item = m.cell.item.clone();
                        let name = m.cell.name.clone();
                        // A near miss can be added; an item the budget cut is chosen already.
                        let addable = m.cause == "below_threshold";
                        view! {
                            <li class="gb-preview-miss" data-name=name.clone() data-cause=m.cause>
                                <span class="gb-item-label">{m.cell.name}</span>
                                <span class="gb-item-why">{m.why}</span>
                                {addable.then(|| view! {
                                    <button
                                        class="gb-link-button gb-preview-add"
                                        type="button"
                                        aria-label=w.fill_text(Word::AddToConversation, vec![("name", name.clone())])
                                        on:click=move |_| client.add_item(item.clone())
                                    >
                                        {w.text(Word::Add)}
                                    </button>
                                })}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        })}
    }
    .into_any()
}

/// One item the draft would carry; the session's own (always, manual) can be removed from here.
#[component]
fn PreviewItem(client: ChatClient, cell: ItemCell) -> impl IntoView {
    let removable = matches!(cell.badge, "Always" | "Manual");
    let name = cell.name.clone();
    let item = cell.item.clone();
    let w = words();
    view! {
        <li class="gb-preview-item" data-include=cell.badge.to_ascii_lowercase() data-name=cell.name.clone()>
            <span class="gb-item-label">{cell.name.clone()}</span>
            <Badge badge=cell.badge text=cell.badge_text(w) />
            <span class="gb-item-tokens">{w.fill_text(Word::TokenCount, vec![("count", grouped(cell.tokens))])}</span>
            {removable.then(|| view! {
                <button
                    class="gb-icon-button gb-preview-remove"
                    type="button"
                    aria-label=w.fill_text(Word::RemoveFromConversation, vec![("name", name.clone())])
                    title=w.text(Word::RemoveFromConversationHint)
                    on:click=move |_| client.remove_item(item.clone())
                >
                    "×"
                </button>
            })}
        </li>
    }
}

/// Asks for a preview `DEBOUNCE_MS` after the last change of what the plan reads; clears it when
/// the draft is emptied.
fn follow_draft(client: ChatClient) {
    let timer = StoredValue::new_local(None::<gloo_timers::callback::Timeout>);
    // What else the plan reads: the history, which of it goes (filter, pins, excludes), the
    // compression settings, the page context. Memos, so an equal value asks nothing.
    let history = Memo::new(move |_| {
        client.transcript.with(|t| {
            let marks: Vec<(String, MessageMark)> = t
                .messages
                .iter()
                .filter_map(|m| m.mark.map(|k| (m.id.clone(), k)))
                .collect();
            (
                t.messages.len(),
                t.filter.as_ref().map(|f| f.labels.clone()),
                marks,
                t.context.as_ref().map(|c| c.compression),
            )
        })
    });
    let page_context = Memo::new(move |_| client.page_context.get());
    let connected = Memo::new(move |_| client.status.get() == ConnectionStatus::Connected);
    Effect::new(move |_| {
        let draft = client.draft.get();
        let has_files = client.draft_files.with(|f| !f.is_empty());
        client.items.track();
        history.track();
        page_context.track();
        let connected = connected.get();
        timer.set_value(None);
        if draft.trim().is_empty() && !has_files {
            client.previews.clear();
            return;
        }
        if connected {
            let pending = gloo_timers::callback::Timeout::new(DEBOUNCE_MS, move || {
                client.preview_draft(&draft);
            });
            timer.set_value(Some(pending));
        }
    });
}
