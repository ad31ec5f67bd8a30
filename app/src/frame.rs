//! Work paced by the browser: a callback for the next animation frame, so pieces that arrive between
//! two frames are shown once, in the frame's own rendering step.

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

/// Runs `f` before the next repaint (the closure frees itself after running). Returns false when
/// there is no window to ask.
pub fn next_frame(f: impl FnOnce() + 'static) -> bool {
    let Some(window) = web_sys::window() else {
        return false;
    };
    let callback = Closure::once_into_js(move |_: f64| f());
    window
        .request_animation_frame(callback.unchecked_ref())
        .is_ok()
}
