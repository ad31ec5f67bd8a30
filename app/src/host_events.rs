//! What the host page receives: DOM `CustomEvent`s whose `detail` is a plain JS object, bubbling
//! out of the shadow root (`composed`), so pages listen with `addEventListener` on the element;
//! plain JS values; and errors carrying the wire's error code.

/// Dispatches `name` on `target` with `detail` converted through JSON.
pub fn dispatch<T: serde::Serialize>(target: &web_sys::EventTarget, name: &str, detail: &T) {
    let value = to_js(detail);
    if value.is_null() {
        return;
    }
    let init = web_sys::CustomEventInit::new();
    init.set_detail(&value);
    init.set_bubbles(true);
    init.set_composed(true);
    if let Ok(event) = web_sys::CustomEvent::new_with_event_init_dict(name, &init) {
        let _ = target.dispatch_event(&event);
    }
}

/// `value` as a plain JS value (through JSON; `null` when it cannot be written).
pub fn to_js<T: serde::Serialize>(value: &T) -> wasm_bindgen::JsValue {
    serde_json::to_string(value)
        .ok()
        .and_then(|json| js_sys::JSON::parse(&json).ok())
        .unwrap_or(wasm_bindgen::JsValue::NULL)
}

/// Reads a JS argument as `T` through JSON (`JSON.stringify`, then serde_json, which the module
/// already has: no second deserializer). A `T` with `deny_unknown_fields` refuses a misspelt key.
pub fn from_js<T: serde::de::DeserializeOwned>(
    value: wasm_bindgen::JsValue,
    what: &str,
) -> Result<T, wasm_bindgen::JsValue> {
    let json = js_sys::JSON::stringify(&value)
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(|| error("invalid_frame", format!("{what}: not a JSON object")))?;
    serde_json::from_str(&json).map_err(|e| error("invalid_frame", format!("{what}: {e}")))
}

/// A JS `Error` named `GlassboxError[code]` with a `code` property (one of the wire's codes).
pub fn error(code: &str, message: impl std::fmt::Display) -> wasm_bindgen::JsValue {
    let err = js_sys::Error::new(&message.to_string());
    err.set_name(&format!("GlassboxError[{code}]"));
    let _ = js_sys::Reflect::set(&err, &"code".into(), &code.into());
    err.into()
}

/// The wire's name of `code` (`rate_limited`, …).
pub fn code_name(code: glassbox_core::ErrorCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
