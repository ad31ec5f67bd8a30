//! The composer: Enter sends, Shift+Enter adds a line; refusals show under it and the text is kept.
//! While a reply streams its button is Stop (Esc too), which stops that reply.
//! Files come in by the paperclip's picker, by paste, or dropped on the chat ([`Attaching`]); each shows as
//! a chip until the message that carries it is sent.

use glassbox_core::attachments::human_bytes;
use leptos::html::{Input, Textarea};
use leptos::prelude::*;

use super::draft_preview::preload_preview_body;
use crate::attach::{Attaching, PendingFile, Upload, preload_uploader};
use crate::chunks::prefetch;
use crate::client::ChatClient;
use crate::words::{Word, words};

/// Text input, the attached files and the send button.
#[component]
pub fn Composer(client: ChatClient, attaching: Attaching) -> impl IntoView {
    let text = client.draft;
    let problem = RwSignal::new(None::<String>);
    let input: NodeRef<Textarea> = NodeRef::new();
    let picker: NodeRef<Input> = NodeRef::new();
    let w = words();
    let send = move || {
        let body = text.get_untracked();
        if attaching.busy() {
            problem.set(Some(w.get(Word::WaitForUploads)));
            return;
        }
        if body.trim().is_empty() && !attaching.any_ready() {
            return;
        }
        let files = attaching.files.get_untracked();
        match client.send(&body, attaching.take(), None) {
            Ok(()) => {
                client.set_draft(String::new());
                problem.set(None);
            }
            Err(e) => {
                // Nothing was sent: the files stay on the message.
                attaching.files.set(files);
                problem.set(Some(e.to_string()));
            }
        }
        if let Some(el) = input.get_untracked() {
            let _ = el.focus();
        }
    };
    // One button is Send, or Stop while a reply streams, so focus stays on it.
    let replying = move || client.transcript.with(|t| t.streaming_reply().is_some());
    let stop = move || {
        if let Some(id) = client.streaming_reply() {
            client.stop_reply(&id);
        }
    };
    let problems = move || {
        let mut all = attaching.problems.get();
        all.extend(problem.get());
        all
    };
    view! {
        <form
            class="gb-composer"
            part="composer"
            on:submit=move |ev| {
                ev.prevent_default();
                if client.streaming_reply().is_some() { stop() } else { send() }
            }
            on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                if ev.key() == "Escape" && client.streaming_reply().is_some() {
                    ev.prevent_default();
                    stop();
                }
            }
        >
            <Show when=move || attaching.files.with(|f| !f.is_empty())>
                <ul class="gb-attached" part="attached" aria-label=w.text(Word::FilesAttached)>
                    <For each=move || attaching.files.get() key=|f| (f.key, f.upload == Upload::Sending) let:file>
                        <AttachedChip file=file attaching=attaching />
                    </For>
                </ul>
            </Show>
            <textarea
                class="gb-input"
                dir="auto"
                part="input"
                node_ref=input
                rows="2"
                placeholder=move || client.greeting().placeholder.unwrap_or_else(|| w.get(Word::WriteAMessage))
                aria-label=w.text(Word::Message)
                prop:value=move || text.get()
                on:input=move |ev| client.set_draft(event_target_value(&ev))
                // Writing may come with files: the upload's code too.
                on:focus=move |_| {
                    prefetch(preload_preview_body);
                    prefetch(preload_uploader);
                }
                on:paste=move |ev: leptos::ev::ClipboardEvent| {
                    // Text copied from an office program comes with a picture of itself: the
                    // text is pasted, the picture is not attached.
                    let Some(data) = ev.clipboard_data() else { return };
                    let types = data.types();
                    if types.includes(&"text/plain".into(), 0) || types.includes(&"text/html".into(), 0) {
                        return;
                    }
                    let files = data.files();
                    if files.as_ref().is_some_and(|f| f.length() > 0) {
                        ev.prevent_default();
                        attaching.add_list(files);
                    }
                }
                on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                    if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                        ev.prevent_default();
                        send();
                    }
                }
            ></textarea>
            <input
                class="gb-file-picker"
                type="file"
                multiple
                hidden
                accept=glassbox_core::attachments::picker_accept()
                node_ref=picker
                on:change=move |_| {
                    if let Some(el) = picker.get_untracked() {
                        attaching.add_list(el.files());
                        el.set_value("");
                    }
                }
            />
            <button
                class="gb-icon-button gb-attach"
                part="attach"
                type="button"
                aria-label=w.text(Word::AttachFiles)
                title=w.text(Word::AttachFilesHint)
                on:click=move |_| {
                    if let Some(el) = picker.get_untracked() {
                        el.click();
                    }
                }
            >
                {super::icons::paperclip(18)}
            </button>
            <button
                class="gb-send"
                class:gb-stop=move || replying()
                part="send"
                type="submit"
                disabled=move || {
                    !replying()
                        && (attaching.busy()
                            || (text.with(|t| t.trim().is_empty()) && !attaching.any_ready()))
                }
            >
                // Both words are there; the stylesheet shows the one that applies (cheaper than a
                // reactive text in the first download).
                <span class="gb-send-word">{w.text(Word::Send)}</span>
                <span class="gb-stop-word">{w.text(Word::Stop)}</span>
            </button>
            <Show when=move || !problems().is_empty()>
                <div class="gb-composer-error" role="alert">
                    {move || problems().into_iter().map(|p| view! { <p>{p}</p> }).collect_view()}
                </div>
            </Show>
        </form>
    }
}

/// One attached file: its kind, name and size, "uploading…" until stored, and × to remove it.
#[component]
fn AttachedChip(file: PendingFile, attaching: Attaching) -> impl IntoView {
    let key = file.key;
    let sending = file.upload == Upload::Sending;
    let w = words();
    let remove_label = w.fill_text(Word::RemoveFile, vec![("name", file.name.clone())]);
    view! {
        <li
            class="gb-attached-file"
            data-kind=file.kind.as_str()
            data-state=if sending { "uploading" } else { "ready" }
        >
            <span class="gb-attached-name">{file.name.clone()}</span>
            <span class="gb-attached-size">
                {if sending {
                    w.fill_text(Word::FileUploading, vec![("size", human_bytes(file.size))])
                } else {
                    Signal::stored(human_bytes(file.size))
                }}
            </span>
            <button
                class="gb-attached-remove"
                type="button"
                aria-label=remove_label
                on:click=move |_| attaching.remove(key)
            >
                "×"
            </button>
        </li>
    }
}
