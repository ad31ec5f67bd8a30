//! One message: a user bubble (plain text, as typed) or an assistant reply (markdown), with its state:
//! streaming, failed with Retry, stopped with Retry, or complete with the provider's token usage.

use glassbox_core::ErrorCode;
use glassbox_core::vocab::{Attachment, MessageStatus, Role, ToolExchange};
use glassbox_core::wire::WireError;
use leptos::prelude::*;

use super::context_view::preload_context_dialog;
use super::context_viewer::ContextViewer;
use super::in_context::InContext;
use super::lazy_panel::lazy_panel;
use super::markdown_view::MarkdownView;
use super::receipt_view::preload_receipt_view;
use super::token_meter::grouped;
use crate::chunks::{lazy_panel_fn, prefetch};
use crate::client::ChatClient;
use crate::words::{Word, words};
use glassbox_core::context::MessageMark;

/// A stored message; it re-renders only when its own signal changes.
#[component]
pub fn MessageView(
    client: ChatClient,
    id: String,
    /// Whether compression results are shown under replies (the session's setting).
    #[prop(into)]
    show_compression: Signal<bool>,
    /// Opens the reply's "View context" dialog.
    viewer: ContextViewer,
) -> impl IntoView {
    let Some(cell) = client.message(&id) else {
        return ().into_any();
    };
    let message = RwSignal::from(cell);
    let w = words();
    // Memos: a streamed piece notifies the message, and only what changed re-renders.
    let role = Memo::new(move |_| message.with(|m| m.role));
    let status = Memo::new(move |_| message.with(|m| m.status));
    let content = move || message.with(|m| m.content.clone());
    // Why a reply ended early, with Retry: its error, or "Stopped" when the user stopped it (the
    // same line, so a stopped reply costs the first load no view of its own).
    let error = Memo::new(move |_| {
        message.with(|m| match (&m.error, m.status) {
            (None, MessageStatus::Stopped) => Some(WireError {
                retryable: true,
                ..WireError::new(ErrorCode::Cancelled, w.get(Word::ReplyStopped))
            }),
            (e, _) => e.clone(),
        })
    });
    let usage = Memo::new(move |_| message.with(|m| m.usage));
    let report = Memo::new(move |_| message.with(|m| m.receipt.as_ref().and_then(|r| r.totals())));
    let attachments = Memo::new(move |_| message.with(|m| m.attachments.clone()));
    let exchanges = Memo::new(move |_| {
        message.with(|m| {
            m.tool_rounds
                .iter()
                .flat_map(|r| r.exchanges.iter().cloned())
                .collect::<Vec<_>>()
        })
    });
    let mark = Memo::new(move |_| message.with(|m| m.mark));
    let reaches = Memo::new(move |_| message.with(glassbox_core::wire::ChatMessage::reaches_model));
    let in_context = use_context::<InContext>();
    let highlight_id = id.clone();
    let highlighted = move || in_context.is_some_and(|c| c.has(&highlight_id));
    let retry_id = id.clone();
    let view_id = id.clone();
    let mark_id = id.clone();
    view! {
        <div
            class="gb-message"
            part="message"
            class:gb-user=move || role.get() == Role::User
            class:gb-assistant=move || role.get() == Role::Assistant
            class:gb-approval=move || role.get() == Role::Approval
            class:gb-in-context=highlighted
            class:gb-pinned=move || mark.get() == Some(MessageMark::Pinned)
            class:gb-excluded=move || mark.get() == Some(MessageMark::Excluded)
            data-message-id=id
            data-role=move || role.get().as_str()
            data-status=move || status.get().as_str()
        >
            <Show when=move || reaches.get()>
                <MarkMenu client=client id=mark_id.clone() mark=mark />
            </Show>
            <div class="gb-bubble">
                <ToolLines exchanges=exchanges />
                {move || match role.get() {
                    // An approval's content is its line ("Allowed: demo.add_note").
                    Role::User | Role::Approval => view! { <div class="gb-plain" dir="auto">{content}</div> }.into_any(),
                    Role::Assistant => view! { <MarkdownView message=message /> }.into_any(),
                }}
                <AttachmentList attachments=attachments />
                <Show when=move || status.get() == MessageStatus::Streaming>
                    <span class="gb-typing" aria-label=w.text(Word::ReplyInProgress)>
                        <span></span>
                        <span></span>
                        <span></span>
                    </span>
                </Show>
            </div>
            {move || {
                error
                    .get()
                    .map(|e| {
                        let retry_id = retry_id.clone();
                        view! {
                            <div class="gb-error" role="alert" data-code=format!("{:?}", e.code)>
                                <span class="gb-error-text">{e.message}</span>
                                <Show when=move || e.retryable>
                                    {
                                        let retry_id = retry_id.clone();
                                        view! {
                                            <button class="gb-retry" on:click=move |_| client.retry(&retry_id)>
                                                {w.text(Word::Retry)}
                                            </button>
                                        }
                                    }
                                </Show>
                            </div>
                        }
                    })
            }}
            {move || {
                let (usage, report) = (usage.get(), report.get());
                if usage.is_none() && report.is_none() {
                    return None;
                }
                let has_receipt = report.is_some();
                let counted = report.as_ref().map(|r| {
                    w.fill(
                        if r.exact { Word::UsageCountedExact } else { Word::UsageCountedApprox },
                        &[
                            ("tokens", &grouped(r.counted_input_tokens)),
                            ("encoding", r.encoding.as_str()),
                        ],
                    )
                });
                let reported = usage.map(|u| {
                    w.fill(
                        if u.counted { Word::UsageSpentByOurCount } else { Word::UsageReported },
                        &[
                            ("input", &grouped(u.input_tokens)),
                            ("output", &grouped(u.output_tokens)),
                        ],
                    )
                });
                let compression = report
                    .and_then(|r| r.compression)
                    .filter(|_| show_compression.get())
                    .map(|c| {
                        w.fill(
                            Word::UsageCompressed,
                            &[
                                ("strategy", c.strategy.id()),
                                ("original", &grouped(c.original_tokens)),
                                ("compressed", &grouped(c.compressed_tokens)),
                                ("dropped", &c.dropped_count.to_string()),
                            ],
                        )
                    });
                let line = [counted, reported].into_iter().flatten().collect::<Vec<_>>().join(" · ");
                let view_id = view_id.clone();
                Some(view! {
                    <div class="gb-meta" title=w.text(Word::UsageHint)>
                        <span class="gb-usage">{line}</span>
                        {compression.map(|c| view! { <span class="gb-compressed">{c}</span> })}
                        {has_receipt.then(|| view! {
                            <button
                                class="gb-link-button gb-view-context"
                                type="button"
                                aria-haspopup="dialog"
                                on:pointerenter=move |_| { prefetch(preload_context_dialog); prefetch(preload_receipt_view) }
                                on:focus=move |_| { prefetch(preload_context_dialog); prefetch(preload_receipt_view) }
                                on:click=move |ev: leptos::ev::MouseEvent| {
                                    let opener = ev
                                        .current_target()
                                        .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlElement>(t).ok());
                                    viewer.open(view_id.clone(), opener);
                                }
                            >
                                {w.text(Word::ViewContext)}
                            </button>
                        })}
                    </div>
                })
            }}
        </div>
    }
    .into_any()
}

lazy_panel_fn! {
    /// A message's mark options: a chunk of their own, fetched when a menu is first neared or
    /// opened.
    mark_options / preload_mark_options (
        client: ChatClient,
        id: String,
        mark: Signal<Option<MessageMark>>,
    ) => view! { <MarkOptions client=client id=id mark=mark /> }
}

/// A message's mark as a badge, and a small menu to pin it (always sent), exclude it (never sent)
/// or clear the mark; the menu's options come from their chunk when it first opens.
#[component]
fn MarkMenu(
    client: ChatClient,
    id: String,
    #[prop(into)] mark: Signal<Option<MessageMark>>,
) -> impl IntoView {
    let open = RwSignal::new(false);
    let w = words();
    view! {
        <div class="gb-mark">
            {move || match mark.get() {
                Some(MessageMark::Pinned) => Some(view! { <span class="gb-mark-badge">{w.text(Word::MarkPinnedBadge)}</span> }),
                Some(MessageMark::Excluded) => Some(view! { <span class="gb-mark-badge">{w.text(Word::MarkExcludedBadge)}</span> }),
                None => None,
            }}
            <details
                class="gb-mark-menu"
                on:toggle=move |ev| {
                    open.set(event_target::<web_sys::Element>(&ev).has_attribute("open"))
                }
            >
                <summary
                    aria-label=w.text(Word::MessageOptions)
                    title=w.text(Word::MessageOptionsHint)
                    on:pointerenter=move |_| prefetch(preload_mark_options)
                >
                    "⋯"
                </summary>
                {move || {
                    let id = id.clone();
                    open.get().then(|| lazy_panel(Word::PanelMark, move || mark_options(client, id.clone(), mark)))
                }}
            </details>
        </div>
    }
}

/// Pin, exclude, clear: what reaches the model of one message.
#[component]
fn MarkOptions(
    client: ChatClient,
    id: String,
    #[prop(into)] mark: Signal<Option<MessageMark>>,
) -> impl IntoView {
    let set = move |id: &str, m: Option<MessageMark>| client.mark_message(id, m);
    let (pin_id, exclude_id, clear_id) = (id.clone(), id.clone(), id);
    let w = words();
    view! {
        <div class="gb-mark-options" role="group" aria-label=w.text(Word::MarkOptionsLabel)>
            <button
                type="button"
                aria-pressed=move || (mark.get() == Some(MessageMark::Pinned)).to_string()
                on:click=move |_| set(&pin_id, Some(MessageMark::Pinned))
            >
                {w.text(Word::MarkPin)}
            </button>
            <button
                type="button"
                aria-pressed=move || (mark.get() == Some(MessageMark::Excluded)).to_string()
                on:click=move |_| set(&exclude_id, Some(MessageMark::Excluded))
            >
                {w.text(Word::MarkExclude)}
            </button>
            <button
                type="button"
                disabled=move || mark.get().is_none()
                on:click=move |_| set(&clear_id, None)
            >
                {w.text(Word::MarkClear)}
            </button>
        </div>
    }
}

/// The reply's tool exchanges, one collapsed line each; opened, the arguments and the result.
#[component]
fn ToolLines(#[prop(into)] exchanges: Signal<Vec<ToolExchange>>) -> impl IntoView {
    let w = words();
    move || {
        let list = exchanges.get();
        (!list.is_empty()).then(|| {
            view! {
                <div class="gb-tools" aria-label=w.text(Word::ToolsUsed)>
                    {list
                        .into_iter()
                        .map(|e| {
                            view! {
                                <details class="gb-tool" class:gb-tool-error=e.is_error>
                                    <summary>{e.line}</summary>
                                    <pre class="gb-tool-detail">{e.call.arguments}</pre>
                                    <pre class="gb-tool-detail">{e.result}</pre>
                                </details>
                            }
                        })
                        .collect_view()}
                </div>
            }
        })
    }
}

/// The files attached to a message, as chips; a chip links to the file when it has an http(s) URL.
#[component]
fn AttachmentList(#[prop(into)] attachments: Signal<Vec<Attachment>>) -> impl IntoView {
    view! {
        <Show when=move || attachments.with(|a| !a.is_empty())>
            <ul class="gb-attachments">
                {move || {
                    attachments
                        .get()
                        .into_iter()
                        .map(|a| {
                            let label = match a.size {
                                Some(size) => format!("{} · {}", a.name, glassbox_core::attachments::human_bytes(size)),
                                None => a.name.clone(),
                            };
                            let href = a.url.clone().filter(|u| glassbox_core::markdown::safe_href(u));
                            view! {
                                <li class="gb-attachment" title=a.mime_type.clone().unwrap_or_default()>
                                    {match href {
                                        Some(href) => {
                                            view! {
                                                <a href=href target="_blank" rel="noopener noreferrer nofollow">
                                                    {label}
                                                </a>
                                            }
                                                .into_any()
                                        }
                                        None => view! { <span>{label}</span> }.into_any(),
                                    }}
                                </li>
                            }
                        })
                        .collect_view()
                }}
            </ul>
        </Show>
    }
}

/// A user message not yet confirmed by the server: "sending", or refused with the reason.
#[component]
pub fn PendingView(client: ChatClient, client_message_id: String) -> impl IntoView {
    let transcript = client.transcript;
    let w = words();
    let pending = {
        let cid = client_message_id.clone();
        Memo::new(move |_| {
            transcript.with(|t| {
                t.pending
                    .iter()
                    .find(|p| p.client_message_id() == cid)
                    .cloned()
            })
        })
    };
    let text = move || {
        pending.with(|p| {
            p.as_ref()
                .map(|p| p.request.message.clone())
                .unwrap_or_default()
        })
    };
    let error = move || pending.with(|p| p.as_ref().and_then(|p| p.error.clone()));
    // A rate limit, or a busy or restarting server, says when the message may go: it is kept and
    // sent again then, by itself.
    let wait = RwSignal::new(None::<u32>);
    let ticker = StoredValue::new_local(None::<gloo_timers::callback::Interval>);
    {
        let cid = client_message_id.clone();
        Effect::new(move |_| {
            let retry_ms = pending.with(|p| {
                p.as_ref()
                    .and_then(|p| p.error.as_ref())
                    .filter(|e| matches!(e.code, ErrorCode::RateLimited | ErrorCode::Overloaded))
                    .and_then(|e| e.retry_after_ms)
            });
            let Some(ms) = retry_ms else {
                ticker.set_value(None);
                wait.set(None);
                return;
            };
            let mut left = ms.div_ceil(1000).max(1) as u32;
            wait.set(Some(left));
            let cid = cid.clone();
            ticker.set_value(Some(gloo_timers::callback::Interval::new(
                1_000,
                move || {
                    left = left.saturating_sub(1);
                    if left == 0 {
                        let _ = wait.try_set(None);
                        client.resend(&cid);
                    } else {
                        let _ = wait.try_set(Some(left));
                    }
                },
            )));
        });
    }
    let cid = client_message_id.clone();
    view! {
        <div
            class="gb-message gb-user gb-pending"
            part="message"
            data-client-message-id=client_message_id
            data-status=move || if error().is_some() { "refused" } else { "sending" }
        >
            <div class="gb-bubble">
                <div class="gb-plain" dir="auto">{text}</div>
                <AttachmentList attachments=Signal::derive(move || {
                    pending.with(|p| p.as_ref().map(|p| p.request.attachments.clone()).unwrap_or_default())
                }) />
            </div>
            {move || {
                let cid = cid.clone();
                match (error(), wait.get()) {
                    (Some(e), Some(secs)) => {
                        view! {
                            <div class="gb-error gb-rate-limited" role="status" data-code=format!("{:?}", e.code)>
                                <span class="gb-error-text">
                                    {w.fill(
                                        if e.code == ErrorCode::RateLimited { Word::RateLimitedKept } else { Word::BusyKept },
                                        &[("secs", &secs.to_string())],
                                    )}
                                </span>
                                <button class="gb-link-button" on:click=move |_| client.dismiss(&cid)>
                                    {w.text(Word::Dismiss)}
                                </button>
                            </div>
                        }
                            .into_any()
                    }
                    (Some(e), None) => {
                        view! {
                            <div class="gb-error" role="alert" data-code=format!("{:?}", e.code)>
                                <span class="gb-error-text">{e.message}</span>
                                <button class="gb-link-button" on:click=move |_| client.dismiss(&cid)>
                                    {w.text(Word::Dismiss)}
                                </button>
                            </div>
                        }
                            .into_any()
                    }
                    (None, _) => view! { <div class="gb-meta">{w.text(Word::MessageSending)}</div> }.into_any(),
                }
            }}
        </div>
    }
}
