//! `GlassboxClient`: the chat with no view, for frameworks that draw their own (the React hook in
//! `packages/react`). The same client as the element's; the framework reads snapshots.

use glassbox_app::headless::HeadlessChat;
use glassbox_app::{Theme, WidgetConfig};
use glassbox_core::context::footer::FooterLinks;
use wasm_bindgen::prelude::*;

use crate::{
    approve_on, context_args, js_error, send_message_on, set_filter_on, set_page_context_on,
    stop_reply_on, upload_file_on,
};

/// Options of a headless chat: `{server, session?, agent?, model?, userId?, userHash?,
/// placeholder?, welcome?, starters?}`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    server: String,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    model: Option<String>,
    /// The user the host's backend vouches for, and its hash (as the element's attributes).
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    user_hash: Option<String>,
    /// The host's own words, over the agent's (the snapshot's `greeting` has the result).
    #[serde(default)]
    placeholder: Option<String>,
    #[serde(default)]
    welcome: Option<String>,
    #[serde(default)]
    starters: Vec<String>,
}

/// A chat connection with no view. `onChange` is called (with no arguments) after each batch of
/// changes, streamed text at most once per animation frame; `snapshot()` then tells what changed.
#[wasm_bindgen]
pub struct GlassboxClient {
    chat: Option<HeadlessChat>,
    events: web_sys::EventTarget,
}

#[wasm_bindgen]
impl GlassboxClient {
    /// Connects; the conversation is kept per server and `session` slot, as the element's.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue, on_change: js_sys::Function) -> Result<GlassboxClient, JsValue> {
        console_error_panic_hook::set_once();
        let options: Options = crate::from_js(options, "options")?;
        let events = web_sys::EventTarget::new()?;
        let config = WidgetConfig {
            server: options.server,
            session: options
                .session
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default".into()),
            agent: options.agent.filter(|a| !a.is_empty()),
            model: options.model.filter(|m| !m.is_empty()),
            theme: Theme::Auto,
            // No token counting and no footer without a view.
            assets: String::new(),
            vocab_url: None,
            footer_links: FooterLinks::default(),
            capture: None,
            show_context_values: true,
            user: crate::user_claim(options.user_id, options.user_hash),
            greeting: crate::host_greeting(options.placeholder, options.welcome, options.starters),
        };
        let chat = HeadlessChat::start(config, events.clone(), move || {
            let _ = on_change.call0(&JsValue::NULL);
        });
        Ok(GlassboxClient {
            chat: Some(chat),
            events,
        })
    }

    /// The conversation now: `{status, reconnectInSecs?, sessionId, order, changed, pending,
    /// notice, contextSets, topics, filter, contextInfo}`; `changed` holds only the messages that
    /// are new or changed since the previous snapshot (`order` names them all).
    pub fn snapshot(&self) -> JsValue {
        match &self.chat {
            Some(chat) => glassbox_app::host_events::to_js(&chat.snapshot()),
            None => JsValue::NULL,
        }
    }

    /// Makes the next snapshot carry every message.
    #[wasm_bindgen(js_name = resendAll)]
    pub fn resend_all(&self) {
        if let Some(chat) = &self.chat {
            chat.resend_all();
        }
    }

    /// Where the element's events (`glassbox:message`, `glassbox:reply`, `glassbox:error`,
    /// `glassbox:context`, `glassbox:filter-changed`) are dispatched.
    #[wasm_bindgen(getter)]
    pub fn events(&self) -> web_sys::EventTarget {
        self.events.clone()
    }

    /// As the element's `sendMessage`: `context` reaches the model, never the message.
    #[wasm_bindgen(js_name = sendMessage)]
    pub fn send_message(
        &self,
        text: String,
        attachments: JsValue,
        context: JsValue,
    ) -> Result<(), JsValue> {
        send_message_on(self.live()?, &text, attachments, context)
    }

    /// Sets the page context sent with every later message (`null` clears it).
    #[wasm_bindgen(js_name = setPageContext)]
    pub fn set_page_context(&self, context: JsValue) -> Result<(), JsValue> {
        set_page_context_on(self.live()?, context)
    }

    /// As the element's `uploadFile`: a promise of the attachment for `sendMessage`.
    #[wasm_bindgen(js_name = uploadFile)]
    pub fn upload_file(&self, file: web_sys::File) -> Result<js_sys::Promise, JsValue> {
        Ok(upload_file_on(self.live()?, file))
    }

    /// Asks again for a failed or stopped reply.
    pub fn retry(&self, message_id: String) -> Result<(), JsValue> {
        self.live()?.retry(&message_id);
        Ok(())
    }

    /// As the element's `stopReply`: stops `messageId`, else the reply streaming now; false when
    /// none was.
    #[wasm_bindgen(js_name = stopReply)]
    pub fn stop_reply(&self, message_id: Option<String>) -> Result<bool, JsValue> {
        Ok(stop_reply_on(self.live()?, message_id))
    }

    /// As the element's `setContext`.
    #[wasm_bindgen(js_name = setContext)]
    pub fn set_context(
        &self,
        set_name: String,
        items: JsValue,
        mode: Option<String>,
    ) -> Result<(), JsValue> {
        let args = context_args(set_name, items, mode)?;
        self.live()?.set_context(args);
        Ok(())
    }

    /// As the element's `setFilter`.
    #[wasm_bindgen(js_name = setFilter)]
    pub fn set_filter(&self, labels: JsValue) -> Result<(), JsValue> {
        set_filter_on(self.live()?, labels)
    }

    /// As the element's `approve`: answers a tool call waiting for the user's yes (the snapshot's
    /// `approvals`, the `glassbox:approval` event).
    pub fn approve(
        &self,
        approval_id: String,
        decision: String,
        reason: Option<String>,
    ) -> Result<(), JsValue> {
        approve_on(self.live()?, &approval_id, &decision, reason)
    }

    /// Deletes the conversation on the server and starts a new one.
    #[wasm_bindgen(js_name = clearSession)]
    pub fn clear_session(&self) -> Result<(), JsValue> {
        self.live()?.clear_session();
        Ok(())
    }

    /// Closes the connection for good.
    pub fn close(&mut self) {
        self.chat.take();
    }

    fn live(&self) -> Result<glassbox_app::ChatClient, JsValue> {
        self.chat
            .as_ref()
            .map(HeadlessChat::client)
            .ok_or_else(|| js_error("conflict", "the client is closed"))
    }
}
