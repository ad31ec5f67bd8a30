//! "Your conversations": a verified user's sessions in the session drawer, newest first, each
//! opened by a click, renamed in place, deleted after a second click that confirms. Shown only
//! when the host vouches for a user (`user-id` and `user-hash`); the list comes from the server
//! (`list_sessions`), asked for when the drawer opens, when this tab's session changes and when
//! it gets its first message.

use glassbox_core::wire::SessionSummary;
use leptos::prelude::*;

use crate::client::ChatClient;
use crate::words::{Word, Words, words};

/// How long ago `then` was, from `now` (both ms since the epoch), in a few words.
pub fn ago(w: Words, then: i64, now: i64) -> String {
    let minutes = (now - then).max(0) / 60_000;
    let (word, n) = match minutes {
        0 => return w.get(Word::JustNow),
        1..=59 => (Word::MinutesAgo, minutes),
        60..=1_439 => (Word::HoursAgo, minutes / 60),
        1_440..=2_879 => return w.get(Word::Yesterday),
        _ => (Word::DaysAgo, minutes / 1_440),
    };
    w.fill(word, &[("n", &n.to_string())])
}

/// The list, with "New conversation" above it.
#[component]
pub fn UserSessions(client: ChatClient) -> impl IntoView {
    let transcript = client.transcript;
    let current = Memo::new(move |_| transcript.with(|t| t.session_id.clone()));
    // Asked again whenever this tab joins another session (a new one, or one from the list), and
    // when this one gets its first message (from then on it is listed).
    let started = Memo::new(move |_| transcript.with(|t| !t.messages.is_empty()));
    Effect::new(move |_| {
        if current.get().is_some() {
            started.track();
            client.list_sessions();
        }
    });
    let sessions =
        Memo::new(move |_| transcript.with(|t| t.sessions.as_ref().map(|l| l.sessions.clone())));
    // Rebuilt only when the list appears or empties: a new list updates its rows in place, so a
    // row being renamed or confirming a delete keeps its state (and its focus).
    let state = Memo::new(move |_| sessions.with(|s| s.as_ref().map(Vec::is_empty)));
    let ids = Memo::new(move |_| {
        sessions.with(|s| {
            s.iter()
                .flatten()
                .map(|x| x.session_id.clone())
                .collect::<Vec<_>>()
        })
    });
    // The session being renamed, and the one whose delete waits for its confirming click.
    let renaming = RwSignal::new(None::<String>);
    let confirming = RwSignal::new(None::<String>);
    let w = words();
    view! {
        <section class="gb-conversations" aria-label=w.text(Word::YourConversations)>
            <div class="gb-conversations-bar">
                <h3 class="gb-drawer-heading">{w.text(Word::YourConversations)}</h3>
                <button class="gb-new-conversation" type="button" on:click=move |_| client.new_conversation()>
                    {w.text(Word::NewConversation)}
                </button>
            </div>
            {move || match state.get() {
                None => view! { <p class="gb-drawer-empty">{w.text(Word::LoadingConversations)}</p> }.into_any(),
                Some(true) => view! {
                    <p class="gb-drawer-empty">{w.text(Word::NoConversationsYet)}</p>
                }
                    .into_any(),
                Some(false) => view! {
                    <ul class="gb-conversation-list">
                        <For each=move || ids.get() key=String::clone let:id>
                            <Conversation client=client id=id sessions=sessions current=current renaming=renaming confirming=confirming />
                        </For>
                    </ul>
                }
                    .into_any(),
            }}
        </section>
    }
}

/// One listed session.
#[component]
fn Conversation(
    client: ChatClient,
    id: String,
    sessions: Memo<Option<Vec<SessionSummary>>>,
    current: Memo<Option<String>>,
    renaming: RwSignal<Option<String>>,
    confirming: RwSignal<Option<String>>,
) -> impl IntoView {
    let summary = {
        let id = id.clone();
        Memo::new(move |_| {
            sessions.with(|s| {
                s.iter()
                    .flatten()
                    .find(|x| x.session_id == id)
                    .map(|x| (x.title.clone(), x.updated_at))
                    .unwrap_or_default()
            })
        })
    };
    let title = Memo::new(move |_| summary.with(|s| s.0.clone()));
    let w = words();
    let shown = move || {
        let t = title.get();
        if t.is_empty() {
            w.get(Word::UntitledConversation)
        } else {
            t
        }
    };
    let is_current = {
        let id = id.clone();
        Memo::new(move |_| current.with(|c| c.as_deref() == Some(id.as_str())))
    };
    let is_renaming = {
        let id = id.clone();
        Memo::new(move |_| renaming.with(|r| r.as_deref() == Some(id.as_str())))
    };
    let is_confirming = {
        let id = id.clone();
        Memo::new(move |_| confirming.with(|r| r.as_deref() == Some(id.as_str())))
    };
    let when = move || ago(w, summary.with(|s| s.1), js_sys::Date::now() as i64);
    let open = {
        let id = id.clone();
        move |_| {
            if !is_current.get_untracked() {
                client.open_session(id.clone());
            }
        }
    };
    let save = {
        let id = id.clone();
        move |title: String| {
            renaming.set(None);
            // Unchanged: nothing to store (a title made from the first message stays so).
            if title == summary.with_untracked(|s| s.0.clone()) {
                return;
            }
            client.rename_session(id.clone(), Some(title).filter(|t| !t.trim().is_empty()));
        }
    };
    let on_key = {
        let save = save.clone();
        move |ev: leptos::ev::KeyboardEvent| match ev.key().as_str() {
            "Enter" => {
                ev.prevent_default();
                save(event_target_value(&ev));
            }
            "Escape" => {
                ev.prevent_default();
                ev.stop_propagation();
                renaming.set(None);
            }
            _ => {}
        }
    };
    let start_rename = {
        let id = id.clone();
        move |_| {
            confirming.set(None);
            renaming.set(Some(id.clone()));
        }
    };
    let delete = {
        let id = id.clone();
        move |_| {
            if is_confirming.get_untracked() {
                confirming.set(None);
                client.delete_listed_session(id.clone());
            } else {
                confirming.set(Some(id.clone()));
            }
        }
    };
    view! {
        <li class="gb-conversation" data-session-id=id.clone() aria-current=move || is_current.get().then_some("true")>
            {move || if is_renaming.get() {
                let save = save.clone();
                view! {
                    <input
                        class="gb-conversation-title"
                        type="text"
                        maxlength="80"
                        aria-label=w.text(Word::ConversationNewTitle)
                        prop:value=title.get_untracked()
                        on:keydown=on_key.clone()
                        on:blur=move |ev| if renaming.get_untracked().is_some() { save(event_target_value(&ev)) }
                        node_ref={
                            let input = NodeRef::<leptos::html::Input>::new();
                            // Once its value is set: the whole title selected, typing replaces it.
                            input.on_load(|el| request_animation_frame(move || {
                                let _ = el.focus();
                                el.select();
                            }));
                            input
                        }
                    />
                }
                    .into_any()
            } else {
                view! {
                    <button class="gb-conversation-open" type="button" on:click=open.clone()>
                        <span class="gb-conversation-name" dir="auto">{shown}</span>
                        <span class="gb-conversation-when">{when}</span>
                    </button>
                }
                    .into_any()
            }}
            <button
                class="gb-icon-button gb-conversation-rename"
                type="button"
                aria-label=move || w.fill(Word::RenameConversation, &[("title", &shown())])
                title=w.text(Word::Rename)
                on:click=start_rename
            >
                "✎"
            </button>
            <button
                class="gb-icon-button gb-conversation-delete"
                type="button"
                class:gb-confirming=is_confirming
                aria-label=move || {
                    let word = if is_confirming.get() { Word::ConfirmDeleteConversation } else { Word::DeleteConversation };
                    w.fill(word, &[("title", &shown())])
                }
                title=move || w.get(if is_confirming.get() { Word::ClickAgainToDelete } else { Word::Delete })
                on:click=delete
            >
                {move || if is_confirming.get() { w.get(Word::DeleteQuestion) } else { "×".to_owned() }}
            </button>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::ago;
    use crate::words::Words;

    #[test]
    fn times_read_as_people_say_them() {
        let w = Words::english_in_full();
        let now = 1_800_000_000_000;
        assert_eq!(ago(w, now - 5_000, now), "just now");
        assert_eq!(ago(w, now - 5 * 60_000, now), "5 min ago");
        assert_eq!(ago(w, now - 3 * 3_600_000, now), "3 h ago");
        assert_eq!(ago(w, now - 30 * 3_600_000, now), "yesterday");
        assert_eq!(ago(w, now - 5 * 86_400_000, now), "5 days ago");
        assert_eq!(
            ago(w, now + 60_000, now),
            "just now",
            "a clock ahead is not the future"
        );
    }
}
