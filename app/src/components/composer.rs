//! The composer: Enter sends, Shift+Enter adds a line; refusals show under it and the text is kept.

use leptos::html::Textarea;
use leptos::prelude::*;

use crate::client::ChatClient;

/// Text input and send button.
#[component]
pub fn Composer(client: ChatClient) -> impl IntoView {
    let text = client.draft;
    let problem = RwSignal::new(None::<String>);
    let input: NodeRef<Textarea> = NodeRef::new();
    let send = move || {
        let body = text.get_untracked();
        if body.trim().is_empty() {
            return;
        }
        match client.send(&body, vec![], None) {
            Ok(()) => {
                client.set_draft(String::new());
                problem.set(None);
            }
            Err(e) => problem.set(Some(e.to_string())),
        }
        if let Some(el) = input.get_untracked() {
            let _ = el.focus();
        }
    };
    view! {
        <form class="gb-composer" part="composer" on:submit=move |ev| {
            ev.prevent_default();
            send();
        }>
            <textarea
                class="gb-input"
                part="input"
                node_ref=input
                rows="2"
                placeholder="Write a message…"
                aria-label="Message"
                prop:value=move || text.get()
                on:input=move |ev| client.set_draft(event_target_value(&ev))
                on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                    if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                        ev.prevent_default();
                        send();
                    }
                }
            ></textarea>
            <button class="gb-send" part="send" type="submit" disabled=move || text.with(|t| t.trim().is_empty())>
                "Send"
            </button>
            <Show when=move || problem.with(Option::is_some)>
                <div class="gb-composer-error" role="alert">{move || problem.get()}</div>
            </Show>
        </form>
    }
}
