//! A reply's receipt in "View context": every part the model was given, in order, with why it
//! went and its tokens; what was left out and why; the rules, references and tools in three
//! columns with their near misses; our count beside the provider's. The rows' wording is
//! `crate::receipt_rows`; everything is rendered as text (item names and descriptions come
//! from operators' files, so never as HTML). Loaded as a chunk on first use.

use glassbox_core::context::footer::shorten_to;
use glassbox_core::number::signed_fixed;
use glassbox_core::vocab::{PageContext, Role};
use glassbox_core::wire::ChatMessage;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::badge::{Badge, include_key};
use super::context_viewer::ContextViewer;
use super::token_meter::grouped;
use crate::chunks::lazy_panel_fn;
use crate::client::ChatClient;
use crate::receipt_rows::{
    ItemCell, ItemSection, MessageRun, MissRow, ReceiptRow, ReceiptTotals, item_section,
    left_out_rows, part_rows, totals,
};
use crate::words::{Word, words};

/// Characters of a message shown in the dialog's lists.
const SNIPPET_CHARS: usize = 80;

lazy_panel_fn! {
    /// "View context" for reply `id`.
    receipt_view / preload_receipt_view (client: ChatClient, viewer: ContextViewer, id: String, show_values: bool) =>
        view! { <ReceiptView client=client viewer=viewer id=id show_values=show_values /> }
}

/// The receipt of reply `id`.
#[component]
pub fn ReceiptView(
    client: ChatClient,
    viewer: ContextViewer,
    id: String,
    show_values: bool,
) -> impl IntoView {
    let w = words();
    let Some(reply) = client.message(&id).map(|cell| cell.get_untracked()) else {
        return view! { <p class="gb-receipt-empty">{w.text(Word::ReceiptReplyGone)}</p> }
            .into_any();
    };
    let Some(receipt) = reply.receipt.as_ref() else {
        return view! { <p class="gb-receipt-empty">{w.text(Word::ReceiptNothingRecorded)}</p> }
            .into_any();
    };
    let receipt = match receipt.read() {
        Ok(receipt) => receipt,
        Err(e) => {
            let why = e.to_string();
            return view! {
                <p class="gb-receipt-empty" role="alert">
                    {w.fill_text(Word::ReceiptUnreadable, vec![("why", why)])}
                </p>
            }
            .into_any();
        }
    };
    let page_values = client.transcript.with_untracked(|t| {
        reply
            .reply_to
            .as_deref()
            .and_then(|u| t.find(u))
            .and_then(|u| u.context.clone())
    });
    let parts = part_rows(w, &receipt);
    let left = left_out_rows(w, &receipt);
    let sums = totals(&receipt, reply.usage);
    let items = item_section(w, &receipt);
    let receipt_items_left_out = receipt.left_out.iter().any(|l| l.item.is_some());
    let old = parts.is_empty();
    view! {
        <div class="gb-receipt" data-message-id=id>
            {receipt.overflow.map(|o| view! { <p class="gb-receipt-overflow" role="alert">{crate::words::overflow(w, o)}</p> })}
            {old.then(|| view! {
                <p class="gb-receipt-empty">
                    {w.text(Word::ReceiptStoredBefore)}
                </p>
            })}
            <ol class="gb-receipt-parts" aria-label=w.text(Word::ReceiptSentInOrder)>
                {parts
                    .into_iter()
                    .map(|row| {
                        let values = (row.kind == "page_context" && show_values)
                            .then(|| page_values.clone());
                        view! { <Row client=client viewer=viewer row=row values=values /> }
                    })
                    .collect_view()}
            </ol>
            {(!old).then(|| {
                view! {
                    <h3 class="gb-receipt-heading">{w.text(Word::ReceiptLeftOut)}</h3>
                    {if left.is_empty() {
                        // Items left out are listed under the items' columns.
                        let none = if receipt_items_left_out { Word::ReceiptNoHistoryLeftOut } else { Word::ReceiptNothingLeftOut };
                        view! { <p class="gb-receipt-none">{w.text(none)}</p> }.into_any()
                    } else {
                        view! {
                            <ol class="gb-receipt-left-out" aria-label=w.text(Word::ReceiptLeftOut)>
                                {left
                                    .into_iter()
                                    .map(|row| view! { <Row client=client viewer=viewer row=row values=None /> })
                                    .collect_view()}
                            </ol>
                        }
                            .into_any()
                    }}
                }
            })}
            {items.map(|section| view! { <Items section=section /> })}
            <Totals sums=sums itemized=!old />
        </div>
    }
    .into_any()
}

/// One row: what, why, tokens, and what it names or stands for.
#[component]
fn Row(
    client: ChatClient,
    viewer: ContextViewer,
    row: ReceiptRow,
    /// For the page-context row when values may be shown: the values sent (if still known).
    values: Option<Option<PageContext>>,
) -> impl IntoView {
    let ReceiptRow {
        kind,
        label,
        why,
        tokens,
        names,
        messages,
        note,
    } = row;
    let w = words();
    view! {
        <li class="gb-receipt-row" data-kind=kind>
            <div class="gb-receipt-line">
                <span class="gb-receipt-label">{label}</span>
                // History not read for the turn was not counted.
                {(tokens > 0 || kind != "left_out").then(|| view! {
                    <span class="gb-receipt-tokens">{w.fill_text(Word::Tokens, vec![("count", grouped(tokens))])}</span>
                })}
            </div>
            <div class="gb-receipt-why">{why}</div>
            {(!names.is_empty()).then(|| view! {
                <ul class="gb-receipt-names">
                    {names.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}
                </ul>
            })}
            {values.map(|v| view! { <PageValues values=v /> })}
            {messages.map(|run| view! { <RunMessages client=client viewer=viewer run=run /> })}
            {note.map(|n| view! { <div class="gb-receipt-note">{n}</div> })}
        </li>
    }
}

/// The request's rules, references and tools in three columns (stacked when narrow), the items it
/// did not carry, and why semantic search did not run when it did not. (Public for the component
/// tests, which mount it without a reply.)
#[component]
pub fn Items(section: ItemSection) -> impl IntoView {
    let ItemSection {
        columns,
        misses,
        search,
    } = section;
    let w = words();
    view! {
        <section class="gb-receipt-items">
            <h3 class="gb-receipt-heading">{w.text(Word::ReceiptRulesAndReferences)}</h3>
            {search.map(|s| view! { <p class="gb-item-search">{s}</p> })}
            <div class="gb-item-columns">
                <ItemColumn column="rules" title=w.text(Word::ReceiptRules) cells=columns.rules />
                <ItemColumn column="references" title=w.text(Word::ReceiptReferences) cells=columns.references />
                <ItemColumn column="tools" title=w.text(Word::ReceiptTools) cells=columns.tools />
            </div>
            {(!misses.is_empty()).then(|| view! {
                <h4 class="gb-item-heading">{w.text(Word::ReceiptNearMisses)}</h4>
                <ol class="gb-item-misses" aria-label=w.text(Word::ReceiptNearMisses)>
                    {misses.into_iter().map(|row| view! { <Miss row=row /> }).collect_view()}
                </ol>
            })}
        </section>
    }
}

/// One column: its heading and its items in order, or "None".
#[component]
fn ItemColumn(
    /// `rules`, `references` or `tools`, for styling and tests.
    column: &'static str,
    title: Signal<String>,
    cells: Vec<ItemCell>,
) -> impl IntoView {
    let w = words();
    view! {
        <section class="gb-item-column" data-column=column>
            <h4 class="gb-item-heading">{title}</h4>
            {if cells.is_empty() {
                view! { <p class="gb-item-none">{w.text(Word::ReceiptNone)}</p> }.into_any()
            } else {
                view! {
                    <ol class="gb-item-list" aria-label=title>
                        {cells.into_iter().map(|cell| view! { <Item cell=cell /> }).collect_view()}
                    </ol>
                }
                    .into_any()
            }}
        </section>
    }
}

/// An item the request carried: "001 • name", how it came in (with its score), its tokens, its
/// description.
#[component]
fn Item(cell: ItemCell) -> impl IntoView {
    let label = cell.label();
    let w = words();
    view! {
        <li class="gb-item" data-include=include_key(cell.badge)>
            <span class="gb-item-label">{label}</span>
            <div class="gb-item-meta">
                <Badge badge=cell.badge text=cell.badge_text(w) />
                <span class="gb-item-tokens">{w.fill_text(Word::Tokens, vec![("count", grouped(cell.tokens))])}</span>
            </div>
            {(!cell.description.is_empty())
                .then(|| view! { <div class="gb-item-description">{cell.description}</div> })}
        </li>
    }
}

/// An item the request did not carry: its name and type, why (its score under the threshold, or
/// the knowledge budget: then how it would have come in and its tokens), its description.
#[component]
fn Miss(row: MissRow) -> impl IntoView {
    let MissRow {
        cause,
        cell,
        kind,
        why,
    } = row;
    let label = cell.label();
    let w = words();
    // A near miss's text was never a candidate: no tokens, and its badge would repeat `why`.
    let capped = (cause == "knowledge_cap").then(|| {
        view! {
            <div class="gb-item-meta">
                <Badge badge=cell.badge text=cell.badge_text(w) />
                <span class="gb-item-tokens">{w.fill_text(Word::Tokens, vec![("count", grouped(cell.tokens))])}</span>
            </div>
        }
    });
    view! {
        <li class="gb-item gb-item-miss" data-cause=cause data-include=include_key(cell.badge)>
            <div class="gb-item-line">
                <span class="gb-item-label">{label}</span>
                <span class="gb-item-type">{kind}</span>
            </div>
            <div class="gb-item-why">{why}</div>
            {capped}
            {(!cell.description.is_empty())
                .then(|| view! { <div class="gb-item-description">{cell.description}</div> })}
        </li>
    }
}

/// The "show values" toggle of the page-context row, and the values as text.
#[component]
fn PageValues(values: Option<PageContext>) -> impl IntoView {
    let shown = RwSignal::new(false);
    let w = words();
    let text = values
        .as_ref()
        .and_then(|v| serde_json::to_string_pretty(v).ok());
    view! {
        <button
            class="gb-link-button gb-receipt-values-toggle"
            type="button"
            aria-pressed=move || shown.get().to_string()
            on:click=move |_| shown.update(|s| *s = !*s)
        >
            {move || w.get(if shown.get() { Word::ReceiptHideValues } else { Word::ReceiptShowValues })}
        </button>
        <Show when=move || shown.get()>
            {
                let text = text.clone();
                match text {
                    Some(t) => view! { <pre class="gb-receipt-values">{t}</pre> }.into_any(),
                    None => view! { <p class="gb-receipt-none">{w.text(Word::ReceiptValuesUnknown)}</p> }.into_any(),
                }
            }
        </Show>
    }
}

/// The messages a row stands for: one button for one message; a list, built when opened, for more.
#[component]
fn RunMessages(client: ChatClient, viewer: ContextViewer, run: MessageRun) -> impl IntoView {
    let go = move |id: String| viewer.show_in_conversation(id);
    let w = words();
    if run.count == 1 {
        let id = run.first_id.clone();
        return view! {
            <button class="gb-link-button gb-receipt-go" type="button" on:click=move |_| go(id.clone())>
                {w.text(Word::ReceiptShowInConversation)}
            </button>
        }
        .into_any();
    }
    let open = RwSignal::new(false);
    view! {
        <details class="gb-receipt-run" on:toggle=move |ev| {
            let now = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::HtmlDetailsElement>().ok())
                .is_some_and(|d| d.open());
            open.set(now);
        }>
            <summary>{w.text(Word::ReceiptMessages)}</summary>
            <Show when=move || open.get()>
                {
                    let run = run.clone();
                    let entries = client.transcript.with_untracked(|t| run_entries(&t.messages, &run));
                    if entries.is_empty() {
                        view! { <p class="gb-receipt-none">{w.text(Word::ReceiptMessagesGone)}</p> }.into_any()
                    } else {
                        view! {
                            <ol class="gb-receipt-messages">
                                {entries
                                    .into_iter()
                                    .map(|(id, who, snippet)| {
                                        view! {
                                            <li>
                                                <button class="gb-receipt-message" type="button" on:click=move |_| go(id.clone())>
                                                    <span class="gb-receipt-who">{w.text(who)}</span>
                                                    {snippet}
                                                </button>
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ol>
                        }
                            .into_any()
                    }
                }
            </Show>
        </details>
    }
    .into_any()
}

/// The messages of `run` (among those that reach the model, at most `count`, up to `last_id`):
/// id, who wrote it (its word), its start.
fn run_entries(messages: &[ChatMessage], run: &MessageRun) -> Vec<(String, Word, String)> {
    let Some(start) = messages.iter().position(|m| m.id == run.first_id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in &messages[start..] {
        if m.reaches_model() && out.len() < run.count as usize {
            let who = match m.role {
                Role::User => Word::ReceiptWhoYou,
                Role::Assistant => Word::ReceiptWhoAssistant,
                Role::Approval => Word::ReceiptWhoApproval,
            };
            out.push((
                m.id.clone(),
                who,
                shorten_to(m.content.trim(), SNIPPET_CHARS),
            ));
        }
        if m.id == run.last_id {
            break;
        }
    }
    out
}

/// Our count beside the provider's, the window and what was left out.
#[component]
fn Totals(
    sums: ReceiptTotals,
    /// False for replies stored before receipts: their parts and left-out runs are not known.
    itemized: bool,
) -> impl IntoView {
    let w = words();
    let ours = w.fill_text(
        if sums.exact {
            Word::ReceiptOursExact
        } else {
            Word::ReceiptOursEstimate
        },
        vec![
            ("count", grouped(sums.counted_input)),
            ("encoding", sums.encoding.clone()),
        ],
    );
    let reported = match (sums.reported, sums.drift_percent) {
        (Some((input, output)), Some(drift)) => w.fill_text(
            Word::ReceiptReportedDrift,
            vec![
                ("input", grouped(input)),
                ("output", grouped(output)),
                ("drift", signed_fixed(drift, 1)),
            ],
        ),
        (Some((input, output)), None) => w.fill_text(
            Word::ReceiptReported,
            vec![("input", grouped(input)), ("output", grouped(output))],
        ),
        (None, _) => w.text(Word::ReceiptNotReported),
    };
    let window = (sums.context_limit > 0).then(|| {
        w.fill_text(
            Word::ReceiptWindowTokens,
            vec![
                ("limit", grouped(sums.context_limit)),
                ("reserve", grouped(sums.output_reserve)),
            ],
        )
    });
    view! {
        <dl class="gb-receipt-totals">
            {itemized.then(|| view! {
                <dt>{w.text(Word::ReceiptParts)}</dt>
                <dd>{w.fill_text(Word::Tokens, vec![("count", grouped(sums.parts_tokens))])}</dd>
            })}
            <dt>{w.text(Word::ReceiptOurCount)}</dt>
            <dd class="gb-receipt-ours">{ours}</dd>
            <dt>{w.text(Word::ReceiptReportedBy)}</dt>
            <dd class="gb-receipt-reported">{reported}</dd>
            {window.map(|window| view! { <dt>{w.text(Word::ReceiptWindow)}</dt> <dd>{window}</dd> })}
            {itemized.then(|| view! {
                <dt>{w.text(Word::ReceiptLeftOut)}</dt>
                <dd>{w.fill_text(Word::Tokens, vec![("count", grouped(sums.left_out_tokens))])}</dd>
            })}
        </dl>
    }
}
