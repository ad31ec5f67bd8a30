//! A chat with no message yet: the welcome line (shown here only, never sent to the model) and up
//! to four starter prompts as chips, a click sending one. The host's (`welcome`, `starters`) win
//! over the session's agent's. A chunk of its own, fetched when a chat opens empty with either.

use leptos::prelude::*;

use crate::chunks::lazy_panel_fn;
use crate::client::ChatClient;
use crate::words::{Word, words};

lazy_panel_fn! {
    /// The welcome and the starters.
    empty_chat / preload_empty_chat (client: ChatClient) => view! { <EmptyChat client=client /> }
}

/// The welcome line and the starter chips.
#[component]
fn EmptyChat(client: ChatClient) -> impl IntoView {
    let greeting = Memo::new(move |_| client.greeting());
    let w = words();
    let welcome = move || greeting.with(|g| g.welcome.clone());
    let starters = move || greeting.with(|g| g.starters.clone());
    view! {
        <div class="gb-greeting" part="greeting">
            {move || welcome().map(|line| view! { <p class="gb-welcome" dir="auto">{line}</p> })}
            <Show when=move || greeting.with(|g| !g.starters.is_empty())>
                <ul class="gb-starters" aria-label=w.text(Word::Suggestions)>
                    <For each=starters key=String::clone let:prompt>
                        <li>
                            <button
                                class="gb-starter"
                                type="button"
                                dir="auto"
                                on:click={
                                    let prompt = prompt.clone();
                                    move |_| {
                                        // Refused only by the checks a typed message passes too.
                                        let _ = client.send(&prompt, Vec::new(), None);
                                    }
                                }
                            >
                                {prompt.clone()}
                            </button>
                        </li>
                    </For>
                </ul>
            </Show>
        </div>
    }
}
