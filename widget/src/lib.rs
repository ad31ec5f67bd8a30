//! The embedding shell: what `glassbox-chat.js` (the `<glassbox-chat>` custom element) calls.
//! It converts JS values at the boundary and delegates everything else to `glassbox-app`.

use glassbox_app::{ChatHandle, Theme, WidgetConfig};
use glassbox_core::context::capture::CaptureRule;
use glassbox_core::context::footer::FooterLinks;
use glassbox_core::vocab::{Attachment, PageContext};
use wasm_bindgen::prelude::*;

/// One mounted widget, owned by its custom element.
#[wasm_bindgen]
pub struct GlassboxWidget {
    handle: Option<ChatHandle>,
}

/// Options read from the element's attributes.
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
    #[serde(default)]
    theme: Option<String>,
    /// Folder the widget's files are served from (the script's own folder).
    assets: String,
    /// Host-given vocabulary URL with `{encoding}`.
    #[serde(default)]
    vocab: Option<String>,
    /// The footer's file link template (`{path}`); `none` for no links.
    #[serde(default)]
    file_link: Option<String>,
    /// The footer's applet link template (`{slug}`, `{params}`); `none` for no links.
    #[serde(default)]
    applet_link: Option<String>,
    /// The idle URL capture rule: `off`, `PARAM` or `PARAM:SET` (`applet` into `applet` if unset;
    /// docs/context-sets.md).
    #[serde(default)]
    capture: Option<String>,
    /// Set when the host forbids showing page-context values in "View context".
    #[serde(default)]
    hide_context_values: bool,
    /// The verified user's id (`user-id`) and its hash (`user-hash`, made by the host's backend).
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    user_hash: Option<String>,
    /// The host's own words: the composer's placeholder, the welcome line, the starters.
    #[serde(default)]
    placeholder: Option<String>,
    #[serde(default)]
    welcome: Option<String>,
    #[serde(default)]
    starters: Vec<String>,
    /// The language of the widget's strings: the element's `lang`, else the page's.
    #[serde(default)]
    lang: Option<String>,
}

/// The host's words as the element's script passes them, `[key, string]` pairs (anything else
/// left out: the script has warned of it).
fn string_pairs(pairs: &JsValue) -> Vec<(String, String)> {
    if !js_sys::Array::is_array(pairs) {
        return Vec::new();
    }
    js_sys::Array::from(pairs)
        .iter()
        .filter_map(|pair| {
            let pair = js_sys::Array::from(&pair);
            Some((pair.get(0).as_string()?, pair.get(1).as_string()?))
        })
        .collect()
}

/// The host's greeting from its attributes, cut to the limits (the element's script reads the
/// `starters` attribute's JSON array).
pub(crate) fn host_greeting(
    placeholder: Option<String>,
    welcome: Option<String>,
    starters: Vec<String>,
) -> glassbox_core::wire::Greeting {
    glassbox_core::wire::Greeting {
        placeholder: placeholder.filter(|p| !p.trim().is_empty()),
        welcome: welcome.filter(|w| !w.trim().is_empty()),
        starters,
    }
    .bounded()
}

/// The user a host vouches for: none without an id (a hash alone says nothing).
pub(crate) fn user_claim(
    id: Option<String>,
    hash: Option<String>,
) -> Option<glassbox_core::wire::UserClaim> {
    id.filter(|id| !id.is_empty())
        .map(|id| glassbox_core::wire::UserClaim {
            id,
            hash: hash.unwrap_or_default(),
        })
}

/// A link template attribute: unset → the default, `none` → no links.
fn link_template(attr: Option<String>, default: Option<String>) -> Option<String> {
    match attr.as_deref().map(str::trim) {
        None | Some("") => default,
        Some(t) if t.eq_ignore_ascii_case("none") => None,
        Some(t) => Some(t.to_owned()),
    }
}

pub(crate) use glassbox_app::host_events::{code_name, error as js_error, from_js};

/// Reads an optional JS object argument as `T` (undefined and null mean `None`).
fn optional<T: serde::de::DeserializeOwned>(
    value: JsValue,
    what: &str,
) -> Result<Option<T>, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    from_js(value, what).map(Some)
}

/// The optional `attachments` and `context` arguments of `sendMessage` and `preview`.
fn message_args(
    attachments: JsValue,
    context: JsValue,
) -> Result<(Vec<Attachment>, Option<PageContext>), JsValue> {
    let attachments = optional(attachments, "attachments")?.unwrap_or_default();
    Ok((attachments, optional(context, "context")?))
}

/// `sendMessage(text, attachments?, context?)` on `client`: the element's and the headless client's.
fn send_message_on(
    client: glassbox_app::ChatClient,
    text: &str,
    attachments: JsValue,
    context: JsValue,
) -> Result<(), JsValue> {
    let (attachments, context) = message_args(attachments, context)?;
    client
        .send(text, attachments, context)
        .map_err(|e| js_error(&code_name(e.code()), e))
}

/// `uploadFile(file)` on `client`: a promise of the attachment to pass to `sendMessage`, rejected
/// with the wire's code (`file_too_large`, `file_type_not_allowed`, …).
fn upload_file_on(client: glassbox_app::ChatClient, file: web_sys::File) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(async move {
        glassbox_app::attach::upload_file(client, file)
            .await
            .map(|a| glassbox_app::host_events::to_js(&a))
            .map_err(|e| js_error(&code_name(e.code), e.message))
    })
}

/// `setPageContext(context)` on `client` (`null` clears it).
fn set_page_context_on(client: glassbox_app::ChatClient, context: JsValue) -> Result<(), JsValue> {
    let context: Option<PageContext> = optional(context, "context")?;
    client
        .set_page_context(context)
        .map_err(|e| js_error(&code_name(e.code()), e))
}

/// `setFilter(labels)` on `client` (an empty list clears the filter).
fn set_filter_on(client: glassbox_app::ChatClient, labels: JsValue) -> Result<(), JsValue> {
    let labels: Vec<String> = optional(labels, "labels")?.unwrap_or_default();
    client.set_filter(labels);
    Ok(())
}

/// The arguments of `setContext(setName, items, mode?)`, checked as the server checks them.
fn context_args(
    set_name: String,
    items: JsValue,
    mode: Option<String>,
) -> Result<glassbox_core::context::sets::SetContextArgs, JsValue> {
    use glassbox_core::context::sets::{MergeMode, SetContextArgs, validate_set};
    let items: Vec<String> = optional(items, "items")?.unwrap_or_default();
    let mode = match mode.as_deref() {
        None | Some("") | Some("replace") => MergeMode::Replace,
        Some("merge") => MergeMode::Merge,
        Some(other) => {
            return Err(js_error(
                "invalid_context_set",
                format!("mode {other:?}: use replace or merge"),
            ));
        }
    };
    validate_set(&set_name, &items).map_err(|e| js_error("invalid_context_set", e.to_string()))?;
    Ok(SetContextArgs {
        set_name,
        items,
        mode,
    })
}

#[wasm_bindgen]
impl GlassboxWidget {
    /// Mounts the chat into `container` (inside `host`'s shadow root).
    #[wasm_bindgen(constructor)]
    pub fn new(
        host: web_sys::HtmlElement,
        container: web_sys::HtmlElement,
        options: JsValue,
    ) -> Result<GlassboxWidget, JsValue> {
        console_error_panic_hook::set_once();
        let options: Options = from_js(options, "options")?;
        let defaults = FooterLinks::default();
        let capture = CaptureRule::parse(options.capture.as_deref()).unwrap_or_else(|e| {
            web_sys::console::warn_1(
                &format!("<glassbox-chat capture>: {e}; capture is off").into(),
            );
            None
        });
        let config = WidgetConfig {
            server: options.server,
            session: options
                .session
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default".into()),
            agent: options.agent.filter(|a| !a.is_empty()),
            model: options.model.filter(|m| !m.is_empty()),
            theme: Theme::parse(options.theme.as_deref()),
            assets: options.assets,
            vocab_url: options.vocab.filter(|v| !v.is_empty()),
            footer_links: FooterLinks {
                files: link_template(options.file_link, defaults.files),
                applet: link_template(options.applet_link, defaults.applet),
            },
            capture,
            show_context_values: !options.hide_context_values,
            user: user_claim(options.user_id, options.user_hash),
            greeting: host_greeting(options.placeholder, options.welcome, options.starters),
        };
        Ok(GlassboxWidget {
            handle: Some(glassbox_app::mount(
                container,
                host,
                config,
                options.lang.as_deref().filter(|l| !l.trim().is_empty()),
            )),
        })
    }

    /// Sends a message as the user: `attachments` is an array of `{name, mimeType?, size?, url?}`,
    /// `context` an object forwarded to the model as page data (defaults to `setPageContext`'s).
    /// Throws an error with a `code` (the server's error codes) when the input is refused.
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

    /// Uploads a file to the conversation: a promise of the attachment for `sendMessage`.
    #[wasm_bindgen(js_name = uploadFile)]
    pub fn upload_file(&self, file: web_sys::File) -> Result<js_sys::Promise, JsValue> {
        Ok(upload_file_on(self.live()?, file))
    }

    /// Deletes the conversation on the server and starts a new one.
    #[wasm_bindgen(js_name = clearSession)]
    pub fn clear_session(&self) {
        if let Some(handle) = &self.handle {
            handle.client().clear_session();
        }
    }

    /// Changes one context set of the session (`mode` `replace` by default, or `merge`); every tab
    /// receives the change and the `glassbox:context` event. Items are checked here and on the server.
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

    /// Selects topics by label (an array of strings; empty clears the filter). The server answers
    /// every tab; the element then dispatches `glassbox:filter-changed` with `{messageIds}`.
    #[wasm_bindgen(js_name = setFilter)]
    pub fn set_filter(&self, labels: JsValue) -> Result<(), JsValue> {
        set_filter_on(self.live()?, labels)
    }

    /// The session's topics and filter as last received: `{topics, filter}` (each `null` before
    /// the server sent them). The server pushes both on every change, so this asks it nothing.
    #[wasm_bindgen(js_name = getTopics)]
    pub fn get_topics(&self) -> JsValue {
        let Some(handle) = &self.handle else {
            return JsValue::NULL;
        };
        use leptos::prelude::WithUntracked;
        let client = handle.client();
        let now = client.transcript.with_untracked(|t| {
            serde_json::json!({"topics": t.topics, "filter": t.filter}).to_string()
        });
        js_sys::JSON::parse(&now).unwrap_or(JsValue::NULL)
    }

    /// Switches similarity mode for the session (off: topics are shown, the whole history goes).
    /// A `threshold` (0–1) also sets the cosine a message needs to match a selected topic; `null`
    /// returns it to the server's; `undefined` keeps it.
    #[wasm_bindgen(js_name = setSimilarityMode)]
    pub fn set_similarity_mode(&self, enabled: bool, threshold: JsValue) -> Result<(), JsValue> {
        let client = self.live()?;
        let threshold = if threshold.is_undefined() {
            None
        } else if threshold.is_null() {
            Some(None)
        } else {
            let t = threshold.as_f64().ok_or_else(|| {
                js_error("invalid_filter", "a threshold is a number, null or absent")
            })?;
            let t = glassbox_core::context::topics::check_threshold(t as f32)
                .map_err(|e| js_error("invalid_filter", e.to_string()))?;
            Some(Some(t))
        };
        client.set_similarity_mode(enabled, threshold);
        Ok(())
    }

    /// Pins (`"pinned"`: always sent) or excludes (`"excluded"`: never sent) a message, or clears
    /// its mark (`null`).
    #[wasm_bindgen(js_name = markMessage)]
    pub fn mark_message(&self, message_id: String, mark: Option<String>) -> Result<(), JsValue> {
        use glassbox_core::context::MessageMark;
        let client = self.live()?;
        let mark = match mark.as_deref() {
            None | Some("") => None,
            Some("pinned") => Some(MessageMark::Pinned),
            Some("excluded") => Some(MessageMark::Excluded),
            Some(other) => {
                return Err(js_error(
                    "invalid_frame",
                    format!("mark {other:?}: use pinned, excluded or null"),
                ));
            }
        };
        client.mark_message(&message_id, mark);
        Ok(())
    }

    /// The session's agent's items and the session's choices as last received:
    /// `{agent, available, session, defaults, overrides}`, or `null` before the server sent them.
    /// The server pushes them on every change, so this asks it nothing.
    #[wasm_bindgen(js_name = getItems)]
    pub fn get_items(&self) -> JsValue {
        let Some(handle) = &self.handle else {
            return JsValue::NULL;
        };
        use leptos::prelude::WithUntracked;
        handle
            .client()
            .transcript
            .with_untracked(|t| glassbox_app::host_events::to_js(&t.items))
    }

    /// Adds one of the agent's items (`{kind: "rule" | "reference", name}`) to the session as
    /// `manual`; every tab receives the new items (an unknown item is answered `not_found`).
    #[wasm_bindgen(js_name = addItem)]
    pub fn add_item(&self, item: JsValue) -> Result<(), JsValue> {
        let (client, item) = self.item_change(item)?;
        client.add_item(item);
        Ok(())
    }

    /// Answers a tool call waiting for the user's yes (`glassbox:approval`): `decision` is
    /// `allow`, `deny` or `allow_session`; `reason` (for a denial) is told to the model. Anything
    /// else throws `invalid_approval`; the server answers an unknown or answered id `not_found` or
    /// `conflict` (the widget's notice), changing nothing.
    pub fn approve(
        &self,
        approval_id: String,
        decision: String,
        reason: Option<String>,
    ) -> Result<(), JsValue> {
        approve_on(self.live()?, &approval_id, &decision, reason)
    }

    /// Stops a streaming reply: `messageId`, else the one streaming now. It ends `stopped` with
    /// the text so far (every tab sees it); false when no reply was streaming. The connection
    /// stays open (its status `stopped` is another thing: the element was removed).
    #[wasm_bindgen(js_name = stopReply)]
    pub fn stop_reply(&self, message_id: Option<String>) -> Result<bool, JsValue> {
        Ok(stop_reply_on(self.live()?, message_id))
    }

    /// Removes an item (`{kind, name}`) from the session, whatever brought it in.
    #[wasm_bindgen(js_name = removeItem)]
    pub fn remove_item(&self, item: JsValue) -> Result<(), JsValue> {
        let (client, item) = self.item_change(item)?;
        client.remove_item(item);
        Ok(())
    }

    /// Replaces the session's overrides of its agent's defaults (`{temperature?, topP?, …}`, keys
    /// as in `getItems().defaults`; `{}` clears them). Unknown keys are `invalid_frame`, values out
    /// of range `invalid_settings` (checked here when the defaults are known, and on the server).
    #[wasm_bindgen(js_name = setOverrides)]
    pub fn set_overrides(&self, overrides: JsValue) -> Result<(), JsValue> {
        use glassbox_core::context::agent_settings::SessionOverrides;
        use leptos::prelude::WithUntracked;
        let client = self.live()?;
        let overrides: SessionOverrides = if overrides.is_undefined() || overrides.is_null() {
            SessionOverrides::default()
        } else {
            from_js(overrides, "overrides")?
        };
        let checked = client
            .items
            .with_untracked(|v| v.as_ref().map(|v| v.defaults.check_overrides(&overrides)));
        if let Some(Err(e)) = checked {
            return Err(js_error(
                "invalid_settings",
                format!("{}: {}", e.key, e.why),
            ));
        }
        client.set_overrides(overrides);
        Ok(())
    }

    /// The receipt a turn answering `text` would have now (items, tokens, what is left out),
    /// planned by the server without storing the message or calling the model: a promise, asked
    /// once connected (again after a reconnect, until answered), rejected with the server's error
    /// code (`rate_limited`, `invalid_message`, …). `attachments` and `context` as for
    /// `sendMessage`.
    pub fn preview(
        &self,
        text: String,
        attachments: JsValue,
        context: JsValue,
    ) -> Result<js_sys::Promise, JsValue> {
        let (attachments, context) = message_args(attachments, context)?;
        self.live()?
            .preview_for_host(&text, attachments, context)
            .map_err(|e| js_error(&code_name(e.code()), e))
    }

    /// Switches the theme: "light", "dark" or "auto".
    #[wasm_bindgen(js_name = setTheme)]
    pub fn set_theme(&self, theme: Option<String>) {
        if let Some(handle) = &self.handle {
            handle.set_theme(Theme::parse(theme.as_deref()));
        }
    }

    /// Switches the language of the widget's strings (the element's `lang`, else the page's).
    #[wasm_bindgen(js_name = setLanguage)]
    pub fn set_language(&self, lang: Option<String>) {
        if let Some(handle) = &self.handle {
            handle.set_language(lang.as_deref().filter(|l| !l.trim().is_empty()));
        }
    }

    /// Puts the host's words over the widget's (`[key, string]` pairs; empty clears them). The
    /// element's script calls it right after mounting too, before the first paint.
    #[wasm_bindgen(js_name = setStrings)]
    pub fn set_strings(&self, strings: JsValue) {
        if let Some(handle) = &self.handle {
            handle.set_strings(string_pairs(&strings));
        }
    }

    /// The client and the item of an `addItem`/`removeItem` call.
    fn item_change(
        &self,
        item: JsValue,
    ) -> Result<
        (
            glassbox_app::ChatClient,
            glassbox_core::context::items::ItemRef,
        ),
        JsValue,
    > {
        let client = self.live()?;
        let item = optional(item, "item")?
            .ok_or_else(|| js_error("invalid_frame", "item: give {kind, name}"))?;
        Ok((client, item))
    }

    /// The chat client, unless the widget was unmounted (`conflict`).
    fn live(&self) -> Result<glassbox_app::ChatClient, JsValue> {
        self.handle
            .as_ref()
            .map(ChatHandle::client)
            .ok_or_else(|| js_error("conflict", "widget is unmounted"))
    }

    /// Closes the connection and removes the view.
    pub fn unmount(&mut self) {
        self.handle.take();
    }
}

mod headless;
pub use headless::GlassboxClient;

/// Stops reply `message_id`, else the one streaming now, on `client` (the element's and the
/// headless client's `stopReply`); false when there was none to stop.
pub(crate) fn stop_reply_on(client: glassbox_app::ChatClient, message_id: Option<String>) -> bool {
    let id = match message_id {
        Some(id) if client.is_streaming(&id) => id,
        Some(_) => return false,
        None => match client.streaming_reply() {
            Some(id) => id,
            None => return false,
        },
    };
    client.stop_reply(&id);
    true
}

/// Answers the approval `approval_id` on `client` (the element's and the headless client's
/// `approve`): `decision` is `allow`, `deny` or `allow_session`, else `invalid_approval`.
pub(crate) fn approve_on(
    client: glassbox_app::ChatClient,
    approval_id: &str,
    decision: &str,
    reason: Option<String>,
) -> Result<(), JsValue> {
    let parsed: glassbox_core::vocab::ApprovalDecision =
        serde_json::from_value(serde_json::Value::String(decision.to_owned()))
            .ok()
            .filter(|d: &glassbox_core::vocab::ApprovalDecision| d.is_users())
            .ok_or_else(|| {
                js_error(
                    "invalid_approval",
                    format!("decision {decision:?}: give allow, deny or allow_session"),
                )
            })?;
    client.approve(approval_id, parsed, reason);
    Ok(())
}
