//! The connection badge in the header: connected, connecting, or reconnecting with a countdown.

use leptos::prelude::*;

use crate::client::{ChatClient, ConnectionStatus};

/// Shows where the connection stands; while waiting to reconnect it offers "Reconnect now".
#[component]
pub fn ConnectionBadge(client: ChatClient) -> impl IntoView {
    let status = client.status;
    let state = move || -> &'static str { status.get().into() };
    let label = move || match status.get() {
        ConnectionStatus::Connected => "Connected".to_owned(),
        ConnectionStatus::Connecting => "Connecting…".to_owned(),
        ConnectionStatus::Reconnecting { in_secs } => format!("Offline — retrying in {in_secs}s"),
        ConnectionStatus::Stopped => "Disconnected".to_owned(),
    };
    let waiting = move || matches!(status.get(), ConnectionStatus::Reconnecting { .. });
    view! {
        <span class="gb-status" data-state=state role="status">
            <span class="gb-status-dot" aria-hidden="true"></span>
            <span class="gb-status-label">{label}</span>
            <Show when=waiting>
                <button class="gb-link-button" on:click=move |_| client.reconnect_now()>
                    "Reconnect now"
                </button>
            </Show>
        </span>
    }
}
