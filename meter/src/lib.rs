//! What `glassbox-token-meter.js` (the `<glassbox-token-meter>` element) calls: the token meter
//! alone, fed text by the page, with no server. Its own wasm module, so a page with only a meter
//! loads no chat (no client, markdown or chat views), and the chat's wasm carries no meter host.

use glassbox_app::standalone_meter::{MeterConfig, MeterHandle, mount_meter};
use glassbox_core::context::{CompressionSettings, Strategy};
use wasm_bindgen::prelude::*;

use glassbox_app::host_events::{error as js_error, from_js};

/// One mounted meter, owned by its custom element.
#[wasm_bindgen]
pub struct GlassboxTokenMeter {
    handle: Option<MeterHandle>,
}

/// Options read from the element's attributes.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    assets: String,
    #[serde(default)]
    vocab: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    output_reserve: Option<u32>,
    /// A strategy name turns the compression preview on.
    #[serde(default)]
    compression: Option<String>,
    #[serde(default)]
    compact: bool,
}

fn config(options: Options) -> Result<MeterConfig, JsValue> {
    let compression = match options
        .compression
        .as_deref()
        .filter(|s| !s.is_empty() && *s != "off")
    {
        None => CompressionSettings {
            enabled: false,
            ..Default::default()
        },
        Some(id) => CompressionSettings {
            strategy: id.parse::<Strategy>().map_err(|_| {
                js_error(
                    "invalid_settings",
                    format!("unknown compression strategy {id:?}"),
                )
            })?,
            ..Default::default()
        },
    };
    Ok(MeterConfig {
        assets: options.assets,
        vocab_url: options.vocab.filter(|v| !v.is_empty()),
        model: options
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "gpt-4o".into()),
        limit: options.limit.filter(|&l| l > 0),
        output_reserve: options.output_reserve.unwrap_or(0),
        compression,
        compact: options.compact,
    })
}

#[wasm_bindgen]
impl GlassboxTokenMeter {
    /// Mounts a meter into `container` (inside `host`'s shadow root).
    #[wasm_bindgen(constructor)]
    pub fn new(
        host: web_sys::HtmlElement,
        container: web_sys::HtmlElement,
        options: JsValue,
    ) -> Result<GlassboxTokenMeter, JsValue> {
        console_error_panic_hook::set_once();
        let options: Options = from_js(options, "options")?;
        Ok(GlassboxTokenMeter {
            handle: Some(mount_meter(container, host, config(options)?)),
        })
    }

    fn live(&self) -> Result<&MeterHandle, JsValue> {
        self.handle
            .as_ref()
            .ok_or_else(|| js_error("conflict", "meter is unmounted"))
    }

    /// Counts `text` as the whole conversation.
    #[wasm_bindgen(js_name = setText)]
    pub fn set_text(&self, text: String) -> Result<(), JsValue> {
        self.live()?.set_text(text);
        Ok(())
    }

    /// Counts each string as one chat message.
    #[wasm_bindgen(js_name = setMessages)]
    pub fn set_messages(&self, messages: Vec<String>) -> Result<(), JsValue> {
        self.live()?.set_messages(messages);
        Ok(())
    }

    /// Counts `text` as the system prompt.
    #[wasm_bindgen(js_name = setSystemPrompt)]
    pub fn set_system_prompt(&self, text: String) -> Result<(), JsValue> {
        self.live()?.set_system_prompt(text);
        Ok(())
    }

    /// Applies changed attributes (same shape as the constructor's options).
    pub fn configure(&self, options: JsValue) -> Result<(), JsValue> {
        let options: Options = from_js(options, "options")?;
        let next = config(options)?;
        self.live()?.update(|c| *c = next);
        Ok(())
    }

    /// The current reading: `{used, limit, percent, state, estimated, …}`, or `null` before any text.
    pub fn reading(&self) -> Result<JsValue, JsValue> {
        let Some(v) = self.live()?.reading() else {
            return Ok(JsValue::NULL);
        };
        let json = serde_json::to_string(&v.summary()).map_err(|e| js_error("internal", e))?;
        js_sys::JSON::parse(&json)
    }

    /// Removes the view and stops the worker.
    pub fn unmount(&mut self) {
        self.handle.take();
    }
}
