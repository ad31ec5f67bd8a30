//! Events for the host page: a DOM `CustomEvent` whose `detail` is a plain JS object, bubbling out
//! of the shadow root (`composed`), so pages listen with `addEventListener` on the element.

/// Dispatches `name` on `target` with `detail` converted through JSON.
pub fn dispatch<T: serde::Serialize>(target: &web_sys::EventTarget, name: &str, detail: &T) {
    let Some(value) = serde_json::to_string(detail)
        .ok()
        .and_then(|json| js_sys::JSON::parse(&json).ok())
    else {
        return;
    };
    let init = web_sys::CustomEventInit::new();
    init.set_detail(&value);
    init.set_bubbles(true);
    init.set_composed(true);
    if let Ok(event) = web_sys::CustomEvent::new_with_event_init_dict(name, &init) {
        let _ = target.dispatch_event(&event);
    }
}
