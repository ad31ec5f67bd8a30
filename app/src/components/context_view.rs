//! "View context": the modal dialog that shows a reply's receipt. The dialog and the receipt's view
//! are chunks, fetched when a reply's button is first neared and mounted when it is first used.
//! Opened from a reply's button (so by keyboard too); Esc or the close button closes it and focus
//! returns to that button, or to the message a history entry pointed at.

use leptos::html::{Dialog, Div};
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::context_viewer::ContextViewer;
use super::lazy_panel::lazy_panel;
use super::receipt_view::receipt_view;
use crate::chunks::lazy_panel_fn;
use crate::client::ChatClient;
use crate::frame::next_frame;
use crate::words::{Word, words};

/// How long a message pointed at from the dialog stays highlighted.
const HIGHLIGHT_MS: u32 = 2_500;
/// Frames to wait for a message of a long history to be rendered (30 more per frame).
const MAX_FRAMES_TO_FIND: u32 = 1_200;

lazy_panel_fn! {
    /// The dialog's code: a chunk, mounted once a reply's context is first asked for.
    context_dialog / preload_context_dialog (
        client: ChatClient,
        viewer: ContextViewer,
        show_values: bool,
        messages: NodeRef<Div>
    ) => view! { <ContextDialog client=client viewer=viewer show_values=show_values messages=messages /> }
}

/// The dialog (one per widget). `messages` is the element holding the message views.
#[component]
pub fn ContextDialog(
    client: ChatClient,
    viewer: ContextViewer,
    /// Whether page-context values may be shown (the host can forbid it).
    show_values: bool,
    messages: NodeRef<Div>,
) -> impl IntoView {
    let dialog: NodeRef<Dialog> = NodeRef::new();
    let w = words();
    Effect::new(move |_| {
        let open = viewer.showing.with(Option::is_some);
        let Some(d) = dialog.get() else { return };
        if open && !d.open() {
            // Mounted from its chunk, the dialog may not be in the document yet when this first
            // runs: it opens at the next frame then.
            if d.is_connected() {
                let _ = d.show_modal();
            } else {
                request_animation_frame(move || {
                    if viewer.showing.with_untracked(Option::is_some)
                        && d.is_connected()
                        && !d.open()
                    {
                        let _ = d.show_modal();
                    }
                });
            }
        } else if !open && d.open() {
            d.close();
        }
    });
    // Esc (the dialog's own cancel) and `close()` both end here.
    let on_close = move |_| {
        viewer.showing.set(None);
        match viewer.go_to.try_update_value(Option::take).flatten() {
            Some(id) => highlight_message(client, viewer, messages, id, 0),
            None => {
                if let Some(opener) = viewer.opener.try_update_value(Option::take).flatten() {
                    let _ = opener.focus();
                }
            }
        }
    };
    view! {
        <dialog
            class="gb-context-dialog"
            part="context-dialog"
            node_ref=dialog
            aria-labelledby="gb-context-title"
            on:close=on_close
        >
            <div class="gb-dialog-header">
                <h2 id="gb-context-title">{w.text(Word::ContextDialogTitle)}</h2>
                <button
                    class="gb-icon-button gb-dialog-close"
                    type="button"
                    aria-label=w.text(Word::Close)
                    on:click=move |_| viewer.close()
                >
                    "×"
                </button>
            </div>
            {move || {
                viewer
                    .showing
                    .get()
                    .map(|id| {
                        lazy_panel(
                            Word::PanelContext,
                            move || receipt_view(client, viewer, id.clone(), show_values),
                        )
                    })
            }}
        </dialog>
    }
}

/// Scrolls to message `id` in `messages`, focuses and highlights it for a moment. A long history
/// opens a batch of messages per frame, so a message not rendered yet is looked for again over the
/// next frames while the transcript still has it; if it never shows, focus goes back to the opener.
fn highlight_message(
    client: ChatClient,
    viewer: ContextViewer,
    messages: NodeRef<Div>,
    id: String,
    attempt: u32,
) {
    // The widget may have been removed meanwhile.
    let Some(list) = messages.try_get_untracked().flatten() else {
        return;
    };
    let children = list.children();
    let found = (0..children.length())
        .filter_map(|i| children.item(i))
        .find(|el| el.get_attribute("data-message-id").as_deref() == Some(id.as_str()));
    let Some(el) = found else {
        let known = client
            .transcript
            .try_with_untracked(|t| t.find(&id).is_some())
            .unwrap_or(false);
        if known && attempt < MAX_FRAMES_TO_FIND {
            next_frame(move || highlight_message(client, viewer, messages, id, attempt + 1));
        } else if let Some(opener) = viewer.opener.try_update_value(Option::take).flatten() {
            let _ = opener.focus();
        }
        return;
    };
    viewer.opener.try_update_value(|o| o.take());
    if let Some(html) = el.dyn_ref::<web_sys::HtmlElement>() {
        html.set_tab_index(-1);
        let _ = html.focus();
    }
    let options = web_sys::ScrollIntoViewOptions::new();
    options.set_block(web_sys::ScrollLogicalPosition::Center);
    el.scroll_into_view_with_scroll_into_view_options(&options);
    HIGHLIGHTED.with(|h| {
        // One highlight at a time: the previous one ends now, with its timer.
        if let Some((previous, _timer)) = h.borrow_mut().take() {
            let _ = previous.class_list().remove_1("gb-highlight");
        }
        let _ = el.class_list().add_1("gb-highlight");
        let timer = gloo_timers::callback::Timeout::new(HIGHLIGHT_MS, || {
            HIGHLIGHTED.with(|h| {
                if let Some((el, _)) = h.borrow_mut().take() {
                    let _ = el.class_list().remove_1("gb-highlight");
                }
            });
        });
        *h.borrow_mut() = Some((el, timer));
    });
}

thread_local! {
    /// The message highlighted now, and the timer that ends it.
    static HIGHLIGHTED: std::cell::RefCell<Option<(web_sys::Element, gloo_timers::callback::Timeout)>> =
        const { std::cell::RefCell::new(None) };
}
