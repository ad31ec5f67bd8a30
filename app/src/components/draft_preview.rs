//! Under the composer while the user types: what the message being written would carry — the
//! rules and references (with how each came in, its score and tokens), the near misses, and the
//! request's token total — from the server's plan of the draft, asked for when typing pauses and
//! again when the session's items or settings change. A toggle here (remove a session item, add a
//! near miss) shows what it costs as a token delta before anything is sent.

use glassbox_core::context::items::ItemRef;
use glassbox_core::context::receipt_view::{
    ItemCell, item_columns, item_misses, item_search_words,
};
use leptos::prelude::*;

use super::context_view::Badge;
use super::token_meter::grouped;
use crate::client::{ChatClient, ConnectionStatus};
use crate::preview::{DEBOUNCE_MS, DraftPreview};

/// Near misses offered to add, at most.
const MISSES_SHOWN: usize = 3;

/// The preview strip; asks for previews as the draft, the session's items and settings, the page
/// context or the history change.
#[component]
pub fn DraftPreviewStrip(client: ChatClient) -> impl IntoView {
    follow_draft(client);
    let previews = client.previews;
    let has_draft = move || client.draft.with(|d| !d.trim().is_empty());
    view! {
        <Show when=move || has_draft() && (previews.current.with(Option::is_some) || previews.problem.with(Option::is_some))>
            <section class="gb-preview" aria-label="What this message would carry">
                {move || previews.problem.get().map(|p| view! {
                    <p class="gb-preview-problem" data-code=format!("{:?}", p.code)>
                        {format!("No preview: {}", p.message)}
                    </p>
                })}
                {move || previews.current.get().map(|p| view! { <PreviewBody client=client preview=p /> })}
            </section>
        </Show>
    }
}

/// The total (and the last change's delta), the items that would go, the near misses.
#[component]
fn PreviewBody(client: ChatClient, preview: DraftPreview) -> impl IntoView {
    let columns = item_columns(&preview.receipt);
    let misses: Vec<_> = item_misses(&preview.receipt)
        .into_iter()
        .filter(|m| m.cause == "below_threshold")
        .take(MISSES_SHOWN)
        .collect();
    let search = preview
        .receipt
        .item_search
        .as_ref()
        .map(item_search_words)
        .filter(|w| !w.is_empty());
    let total = format!(
        "{}{} tokens to send",
        if preview.receipt.totals.exact {
            ""
        } else {
            "~"
        },
        grouped(preview.total())
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
    let cells: Vec<(ItemRef, ItemCell)> = columns
        .rules
        .into_iter()
        .map(|c| (ItemRef::rule(c.name.clone()), c))
        .chain(
            columns
                .references
                .into_iter()
                .map(|c| (ItemRef::reference(c.name.clone()), c)),
        )
        .collect();
    let empty = cells.is_empty();
    view! {
        <div class="gb-preview-line">
            <span class="gb-preview-total">{total}</span>
            {delta}
        </div>
        {(!empty).then(|| view! {
            <ul class="gb-preview-items" aria-label="Rules and references it would carry">
                {cells.into_iter().map(|(item, cell)| view! { <PreviewItem client=client item=item cell=cell /> }).collect_view()}
            </ul>
        })}
        {search.map(|s| view! { <p class="gb-preview-search">{s}</p> })}
        {(!misses.is_empty()).then(|| view! {
            <ul class="gb-preview-misses" aria-label="Near misses">
                {misses
                    .into_iter()
                    .map(|m| {
                        let item = if m.kind == "Rule" {
                            ItemRef::rule(m.cell.name.clone())
                        } else {
                            ItemRef::reference(m.cell.name.clone())
                        };
                        let name = m.cell.name.clone();
                        view! {
                            <li class="gb-preview-miss" data-name=name.clone()>
                                <span class="gb-item-label">{m.cell.name}</span>
                                <span class="gb-item-why">{m.why}</span>
                                <button
                                    class="gb-link-button gb-preview-add"
                                    type="button"
                                    aria-label=format!("Add {name} to this conversation")
                                    on:click=move |_| client.add_item(item.clone())
                                >
                                    "Add"
                                </button>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        })}
    }
}

/// One item the draft would carry; the session's own (always, manual) can be removed from here.
#[component]
fn PreviewItem(client: ChatClient, item: ItemRef, cell: ItemCell) -> impl IntoView {
    let removable = matches!(cell.badge, "Always" | "Manual");
    let name = cell.name.clone();
    view! {
        <li class="gb-preview-item" data-include=cell.badge.to_ascii_lowercase() data-name=cell.name.clone()>
            <span class="gb-item-label">{cell.name.clone()}</span>
            <Badge badge=cell.badge text=cell.badge_text() />
            <span class="gb-item-tokens">{format!("{} tokens", grouped(cell.tokens))}</span>
            {removable.then(|| view! {
                <button
                    class="gb-icon-button gb-preview-remove"
                    type="button"
                    aria-label=format!("Remove {name} from this conversation")
                    title="Remove from this conversation"
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
    let items = Memo::new(move |_| client.transcript.with(|t| t.items.clone()));
    let history = Memo::new(move |_| {
        client.transcript.with(|t| {
            (
                t.messages.len(),
                t.filter.as_ref().map(|f| f.labels.clone()),
            )
        })
    });
    let connected = Memo::new(move |_| client.status.get() == ConnectionStatus::Connected);
    Effect::new(move |_| {
        let draft = client.draft.get();
        items.track();
        history.track();
        client.page_context.track();
        let connected = connected.get();
        timer.set_value(None);
        if draft.trim().is_empty() {
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
