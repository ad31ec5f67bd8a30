//! Which reply's "View context" is open, shared by the replies' buttons, the dialog and the
//! receipt inside it.

use leptos::prelude::*;

/// Which reply's context is shown, and where focus goes when the dialog closes.
#[derive(Clone, Copy)]
pub struct ContextViewer {
    /// The reply whose context is shown (`None`: the dialog is closed).
    pub(super) showing: RwSignal<Option<String>>,
    /// The element focus goes back to on close.
    pub(super) opener: StoredValue<Option<web_sys::HtmlElement>, LocalStorage>,
    /// A message to scroll to and highlight once the dialog has closed.
    pub(super) go_to: StoredValue<Option<String>>,
}

impl ContextViewer {
    /// A viewer showing nothing.
    pub fn new() -> Self {
        Self {
            showing: RwSignal::new(None),
            opener: StoredValue::new_local(None),
            go_to: StoredValue::new(None),
        }
    }

    /// Shows the context of reply `message_id`; focus returns to `opener` on close.
    pub fn open(self, message_id: String, opener: Option<web_sys::HtmlElement>) {
        self.opener.set_value(opener);
        self.go_to.set_value(None);
        self.showing.set(Some(message_id));
    }

    /// Closes the dialog.
    pub fn close(self) {
        self.showing.set(None);
    }

    /// Closes the dialog, then scrolls to message `id` and highlights it.
    pub fn show_in_conversation(self, id: String) {
        self.go_to.set_value(Some(id));
        self.close();
    }
}

impl Default for ContextViewer {
    fn default() -> Self {
        Self::new()
    }
}
