//! The whole widget: header with connection status, notices, the message list and the composer.

use leptos::html::Div;
use leptos::prelude::*;

use super::history_window::HistoryWindow;
use super::message_list_follow::Follow;

use super::approval_dialog::approval_dialog;
use super::composer::Composer;
use super::compression_settings::{compression_settings, preload_compression_settings};
use super::connection_status::ConnectionBadge;
use super::context_footer::ContextFooter;
use super::context_view::context_dialog;
use super::context_viewer::ContextViewer;
use super::draft_preview::DraftPreviewStrip;
use super::empty_chat::empty_chat;
use super::in_context::InContext;
use super::lazy_panel::lazy_panel;
use super::markdown_view::MarkdownLoader;
use super::message_view::{MessageView, PendingView};
use super::session_drawer::{preload_session_drawer, session_drawer};
use super::token_meter::TokenMeter;
use super::topic_panel::{preload_topic_panel, topic_panel};
use crate::attach::Attaching;
use crate::chunks::{load_in_background, prefetch, split_fn};
use crate::client::ChatClient;
use crate::config::Theme;
use crate::words::{Word, words};
use glassbox_core::attachments::files_to_send;
use glassbox_core::context::selection::choices_from_view;
use glassbox_core::context::{MessageMark, TurnMessage};
use glassbox_core::wire::ChatMessage;

use crate::meter_reading::{self, MeterView};
use crate::token_counts::{TokenCounts, now_ms};

/// The chat panel.
#[component]
pub fn ChatPanel(client: ChatClient, theme: RwSignal<Theme>, counts: TokenCounts) -> impl IntoView {
    let transcript = client.transcript;
    let w = words();
    let meter = chat_meter(client, counts);
    let settings_open = RwSignal::new(false);
    let settings =
        Signal::derive(move || transcript.with(|t| t.context.as_ref().map(|c| c.compression)));
    let on_settings = Callback::new(move |s| client.update_compression(s));
    let list: NodeRef<Div> = NodeRef::new();
    let content: NodeRef<Div> = NodeRef::new();
    // A long history opens with its newest messages; older ones are added a batch per frame.
    let window = HistoryWindow::new();
    let message_ids = move || {
        transcript.with(|t| {
            let from = window.first(t.session_id.as_deref(), t.messages.len());
            t.messages[from..]
                .iter()
                .map(|m| m.id.clone())
                .collect::<Vec<_>>()
        })
    };
    let pending_ids = move || {
        transcript.with(|t| {
            t.pending
                .iter()
                .map(|p| p.client_message_id().to_owned())
                .collect::<Vec<_>>()
        })
    };
    let empty = move || transcript.with(|t| t.messages.is_empty() && t.pending.is_empty());
    // A welcome or starters to show (the host's or the agent's): the empty chat's own chunk.
    let greeted = Memo::new(move |_| {
        let g = client.greeting();
        g.welcome.is_some() || !g.starters.is_empty()
    });
    let show_compression = Memo::new(move |_| {
        transcript.with(|t| {
            t.context
                .as_ref()
                .is_none_or(|c| c.compression.show_indicator)
        })
    });

    // The list follows the newest message while the user is at the bottom; a message they send
    // brings them back there.
    let sentinel: NodeRef<Div> = NodeRef::new();
    let follow = Follow::attach(list, content, sentinel);
    let pending_count = StoredValue::new(0usize);
    Effect::new(move |_| {
        let n = transcript.with(|t| t.pending.len());
        if n > pending_count.get_value() {
            follow.jump_to_latest();
        }
        pending_count.set_value(n);
    });

    let notice = move || transcript.with(|t| t.notice.clone());
    let context_sets = Memo::new(move |_| transcript.with(|t| t.sets.clone()));
    let changed_keys = Memo::new(move |_| transcript.with(changed_page_keys));
    let config = client.config();
    let footer_links = config
        .as_ref()
        .map(|c| c.footer_links.clone())
        .unwrap_or_default();
    let show_values = config.is_some_and(|c| c.show_context_values);
    let viewer = ContextViewer::new();
    let dialog_wanted = RwSignal::new(false);
    Effect::new(move |_| {
        if viewer.showing.with(Option::is_some) {
            dialog_wanted.set(true);
        }
    });
    let budget = Memo::new(move |_| transcript.with(|t| t.budget));
    let topics_open = RwSignal::new(false);
    let drawer_open = RwSignal::new(false);
    provide_context(InContext::new(transcript));
    provide_context(MarkdownLoader::start());
    // Files dropped anywhere on the chat are attached to the message being written.
    let attaching = Attaching::new(client);
    let dragging = RwSignal::new(0i32);
    let carries_files = |ev: &leptos::ev::DragEvent| {
        ev.data_transfer()
            .is_some_and(|d| d.types().includes(&"Files".into(), 0))
    };
    let on_drag_enter = move |ev: leptos::ev::DragEvent| {
        if carries_files(&ev) {
            ev.prevent_default();
            dragging.update(|n| *n += 1);
        }
    };
    let on_drag_over = move |ev: leptos::ev::DragEvent| {
        if carries_files(&ev) {
            ev.prevent_default();
        }
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        dragging.set(0);
        if carries_files(&ev) {
            ev.prevent_default();
            attaching.add_list(ev.data_transfer().and_then(|d| d.files()));
        }
    };
    view! {
        <div
            class="gb-root"
            class:gb-dropping=move || dragging.get() != 0
            class:gb-words-pending=move || !words().settled()
            part="root"
            data-theme=move || theme.get().as_str()
            on:dragenter=on_drag_enter
            on:dragover=on_drag_over
            on:dragleave=move |_| dragging.update(|n| *n = (*n - 1).max(0))
            on:drop=on_drop
        >
            <header class="gb-header" part="header">
                <span class="gb-title">{w.text(Word::ChatTitle)}</span>
                <TokenMeter view=meter update_ms=counts.update_ms budget=budget />
                <button
                    class="gb-icon-button gb-new-chat"
                    type="button"
                    aria-label=w.text(Word::NewChat)
                    title=move || if client.has_user() { w.get(Word::NewChatKept) } else { w.get(Word::NewChatDeleted) }
                    on:click=move |_| client.new_conversation()
                >
                    "+"
                </button>
                <button
                    class="gb-icon-button gb-topics-toggle"
                    type="button"
                    aria-label=w.text(Word::Topics)
                    title=w.text(Word::TopicsHint)
                    aria-expanded=move || topics_open.get().to_string()
                    on:click=move |_| topics_open.update(|o| *o = !*o)
                    on:pointerenter=move |_| prefetch(preload_topic_panel)
                    on:focus=move |_| prefetch(preload_topic_panel)
                >
                    "◎"
                </button>
                <button
                    class="gb-icon-button gb-drawer-toggle"
                    type="button"
                    aria-label=w.text(Word::DrawerToggle)
                    title=w.text(Word::DrawerToggleHint)
                    aria-expanded=move || drawer_open.get().to_string()
                    on:click=move |_| drawer_open.update(|o| *o = !*o)
                    on:pointerenter=move |_| prefetch(preload_session_drawer)
                    on:focus=move |_| prefetch(preload_session_drawer)
                >
                    {super::icons::menu(16)}
                </button>
                <button
                    class="gb-icon-button gb-settings-toggle"
                    type="button"
                    aria-label=w.text(Word::ContextSettings)
                    aria-expanded=move || settings_open.get().to_string()
                    on:click=move |_| settings_open.update(|o| *o = !*o)
                    on:pointerenter=move |_| prefetch(preload_compression_settings)
                    on:focus=move |_| prefetch(preload_compression_settings)
                >
                    {super::icons::sliders(16)}
                </button>
                <ConnectionBadge client=client />
            </header>
            <Show when=move || settings_open.get()>
                {lazy_panel(Word::PanelSettings, move || compression_settings(settings, on_settings))}
            </Show>
            <Show when=move || topics_open.get()>
                {lazy_panel(Word::PanelTopics, move || topic_panel(client))}
            </Show>
            <Show when=move || drawer_open.get()>
                {lazy_panel(Word::PanelSession, move || session_drawer(client))}
            </Show>
            {move || {
                notice()
                    .map(|n| {
                        view! {
                            <div class="gb-notice" part="notice" role="alert" data-code=format!("{:?}", n.code)>
                                <span>{n.message}</span>
                                <button class="gb-link-button" on:click=move |_| client.clear_notice()>
                                    {w.text(Word::Dismiss)}
                                </button>
                            </div>
                        }
                    })
            }}
            <div class="gb-messages-frame">
                <div
                    class="gb-messages"
                    part="messages"
                    role="log"
                    aria-live="off"
                    aria-label=w.text(Word::Conversation)
                    node_ref=list
                    on:wheel=move |ev: leptos::ev::WheelEvent| follow.on_wheel(ev.delta_y())
                    on:keydown=move |ev: leptos::ev::KeyboardEvent| follow.on_key(&ev.key())
                    on:pointerdown=move |ev: leptos::ev::PointerEvent| {
                        let on_list = ev.target().zip(ev.current_target()).is_some_and(|(t, c)| t == c);
                        follow.on_press(on_list)
                    }
                >
                    <div class="gb-messages-content" node_ref=content>
                        <Show when=empty>
                            {move || if greeted.get() {
                                // Its own chunk; the loading line is not shown here (it is tiny).
                                view! { <div class="gb-greeting-slot">{lazy_panel(Word::PanelWelcome, move || empty_chat(client))}</div> }.into_any()
                            } else {
                                view! { <p class="gb-empty">{w.text(Word::EmptyChat)}</p> }.into_any()
                            }}
                        </Show>
                        <For each=message_ids key=|id| id.clone() let:id>
                            <MessageView client=client id=id show_compression=show_compression viewer=viewer />
                        </For>
                        <For each=pending_ids key=|id| id.clone() let:cid>
                            <PendingView client=client client_message_id=cid />
                        </For>
                    </div>
                    // In view while the list is at its bottom (see `message_list_follow`).
                    <div class="gb-messages-end" node_ref=sentinel aria-hidden="true"></div>
                </div>
                <button
                    class="gb-jump-latest"
                    type="button"
                    hidden=move || follow.following.get()
                    on:click=move |_| follow.jump_to_latest()
                >
                    {w.text(Word::JumpToLatest)}
                </button>
            </div>
            <div class="gb-live gb-visually-hidden" role="status" aria-live="polite">
                {move || client.announcement.get()}
            </div>
            // A tool call waiting for the user's yes: the dialog's code arrives with the first one.
            <Show when=move || client.approvals.with(|a| !a.is_empty())>
                {lazy_panel(Word::PanelApproval, move || approval_dialog(client))}
            </Show>
            <DraftPreviewStrip client=client />
            <Composer client=client attaching=attaching />
            <ContextFooter sets=context_sets links=footer_links changed_keys=changed_keys />
            // Mounted when a reply's context is first asked for, and kept.
            {move || {
                dialog_wanted
                    .get()
                    .then(|| lazy_panel(Word::PanelContext, move || context_dialog(client, viewer, show_values, content)))
            }}
        </div>
    }
}

/// The page-context keys that changed with the latest user message (against the one before).
fn changed_page_keys(t: &glassbox_core::transcript::Transcript) -> Vec<String> {
    let mut users = t
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == glassbox_core::vocab::Role::User);
    let Some(latest) = users.next() else {
        return Vec::new();
    };
    glassbox_core::context::footer::changed_page_keys(
        users.next().and_then(|m| m.context.as_ref()),
        latest.context.as_ref(),
    )
}

/// [`meter_reading::read`] as a function value.
type ReadMeter = fn(
    &TokenCounts,
    &glassbox_core::context::meter::ContextInfo,
    &[TurnMessage<'_>],
    Option<&glassbox_core::vocab::PageContext>,
    Option<&[glassbox_core::context::selection::Choice]>,
    Option<&glassbox_core::wire::ReceiptJson>,
    Option<&glassbox_core::attachments::FileContents>,
) -> MeterView;

split_fn! {
    /// The meter's arithmetic (what each part of the next request costs): a chunk of its own with
    /// the `split` feature, fetched as the chat mounts; the meter has no reading until it comes.
    load_meter_reader / preload_meter_reader () -> ReadMeter => meter_reading::read
}

/// The meter's reading for the chat: every message that reaches the model, the pending ones, and
/// the draft being written, plus page context; re-read when counts arrive.
fn chat_meter(client: ChatClient, counts: TokenCounts) -> Memo<Option<MeterView>> {
    let transcript = client.transcript;
    let file_texts = crate::file_texts::FileTexts::new(client);
    let read = load_in_background(load_meter_reader);
    // A different model may count with another vocabulary.
    Effect::new(move |_| {
        if let Some(encoding) = transcript.with(|t| t.context.as_ref().map(|c| c.encoding.clone()))
        {
            counts.set_encoding(&encoding);
        }
    });
    let memo = Memo::new(move |_| {
        counts.revision.track();
        counts.vocab.track();
        let draft = client.draft.get();
        let draft_files = client.draft_files.get();
        let page_context = client.page_context.get();
        let preview = client.previews.current.get();
        let read = read.get()?;
        transcript.with(|t| {
            let info = t.context.as_ref()?;
            let stored: Vec<&ChatMessage> =
                t.messages.iter().filter(|m| m.reaches_model()).collect();
            let marks: Vec<(&str, Option<MessageMark>)> =
                stored.iter().map(|m| (m.id.as_str(), m.mark)).collect();
            let sticky = t.topics.as_ref().map_or(&[][..], |s| &s.sticky_ids[..]);
            let choices = choices_from_view(&marks, sticky, t.filter.as_ref());
            let mut texts: Vec<TurnMessage> = stored.iter().map(|m| m.as_turn()).collect();
            texts.extend(
                t.pending
                    .iter()
                    .map(|p| TurnMessage::draft(&p.request.message, &p.request.attachments)),
            );
            if !draft.trim().is_empty() || !draft_files.is_empty() {
                texts.push(TurnMessage::draft(&draft, &draft_files));
            }
            // Images count by their size, text files by their text (fetched once each).
            let files = file_texts.contents(&files_to_send(texts.iter().map(|m| m.attachments)));
            // The rules and references the next request should carry: the draft's, else the
            // last reply's.
            let knowledge = preview.as_ref().map(|p| &p.receipt).or_else(|| {
                t.messages
                    .iter()
                    .rev()
                    .find(|m| m.role == glassbox_core::vocab::Role::Assistant)
                    .and_then(|m| m.receipt.as_ref())
            });
            Some(read(
                &counts,
                info,
                &texts,
                page_context.as_ref(),
                Some(&choices),
                knowledge,
                Some(&files),
            ))
        })
    });
    // How long after the worker's answer the meter showed it.
    Effect::new(move |_| {
        memo.track();
        let answered = counts.answered_at();
        if answered > 0.0 {
            counts.update_ms.set(now_ms() - answered);
        }
    });
    memo
}
