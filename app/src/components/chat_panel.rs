//! The whole widget: header with connection status, notices, the message list and the composer.

use leptos::html::Div;
use leptos::prelude::*;

use super::composer::Composer;
use super::connection_status::ConnectionBadge;
use super::message_view::{MessageView, PendingView};
use crate::client::ChatClient;
use crate::config::Theme;

/// The chat panel.
#[component]
pub fn ChatPanel(client: ChatClient, theme: RwSignal<Theme>) -> impl IntoView {
    let transcript = client.transcript;
    let list: NodeRef<Div> = NodeRef::new();
    let message_ids =
        move || transcript.with(|t| t.messages.iter().map(|m| m.id.clone()).collect::<Vec<_>>());
    let pending_ids = move || {
        transcript.with(|t| {
            t.pending
                .iter()
                .map(|p| p.client_message_id().to_owned())
                .collect::<Vec<_>>()
        })
    };
    let empty = move || transcript.with(|t| t.messages.is_empty() && t.pending.is_empty());

    // Keep the newest message in view while the user is at the bottom of the list.
    Effect::new(move |_| {
        transcript.track();
        if let Some(el) = list.get() {
            let near_bottom = el.scroll_height() - el.scroll_top() - el.client_height() < 120;
            if near_bottom {
                el.set_scroll_top(el.scroll_height());
            }
        }
    });

    let notice = move || transcript.with(|t| t.notice.clone());
    view! {
        <div class="gb-root" data-theme=move || theme.get().as_str()>
            <header class="gb-header">
                <span class="gb-title">"Glassbox"</span>
                <ConnectionBadge client=client />
            </header>
            {move || {
                notice()
                    .map(|n| {
                        view! {
                            <div class="gb-notice" role="alert" data-code=format!("{:?}", n.code)>
                                <span>{n.message}</span>
                                <button class="gb-link-button" on:click=move |_| client.clear_notice()>
                                    "Dismiss"
                                </button>
                            </div>
                        }
                    })
            }}
            <div class="gb-messages" role="log" aria-live="polite" aria-label="Conversation" node_ref=list>
                <Show when=empty>
                    <p class="gb-empty">"Ask anything. Replies stream in here."</p>
                </Show>
                <For each=message_ids key=|id| id.clone() let:id>
                    <MessageView client=client id=id />
                </For>
                <For each=pending_ids key=|id| id.clone() let:cid>
                    <PendingView client=client client_message_id=cid />
                </For>
            </div>
            <Composer client=client />
        </div>
    }
}
