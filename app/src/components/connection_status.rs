//! The connection badge in the header: connected, connecting, or reconnecting with a countdown.

use leptos::prelude::*;

use crate::client::{ChatClient, ConnectionStatus};
use crate::words::{Word, words};

/// Shows where the connection stands; while waiting to reconnect it offers "Reconnect now".
#[component]
pub fn ConnectionBadge(client: ChatClient) -> impl IntoView {
    let status = client.status;
    let w = words();
    let state = move || -> &'static str { status.get().into() };
    let label = move || match status.get() {
        ConnectionStatus::Connected => w.get(Word::Connected),
        ConnectionStatus::Connecting => w.get(Word::Connecting),
        ConnectionStatus::Reconnecting { in_secs } => {
            w.fill(Word::OfflineRetrying, &[("secs", &in_secs.to_string())])
        }
        ConnectionStatus::Stopped => w.get(Word::Disconnected),
    };
    let waiting = move || matches!(status.get(), ConnectionStatus::Reconnecting { .. });
    view! {
        <span class="gb-status" data-state=state role="status">
            <span class="gb-status-dot" aria-hidden="true"></span>
            <span class="gb-status-label">{label}</span>
            <Show when=waiting>
                <button class="gb-link-button" on:click=move |_| client.reconnect_now()>
                    {w.text(Word::ReconnectNow)}
                </button>
            </Show>
        </span>
    }
}
