//! Keeping the newest message in view. While the user is at the bottom of the list it follows what
//! arrives, however tall an update is; when they scroll up it stops and "Jump to latest" shows.
//!
//! Nothing reads layout per streamed piece: a `ResizeObserver` on the list and its content runs after
//! the browser's own layout, once per frame at most, and scrolls to the bottom if the list is following.
//! Scrolling up (wheel, keys, scrollbar) is what stops following; reaching the bottom resumes it.

use std::cell::Cell;
use std::rc::Rc;

use leptos::html::Div;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

/// Within this many pixels of the bottom counts as at the bottom.
const AT_BOTTOM_PX: i32 = 24;

/// The follow state of one message list.
#[derive(Clone, Copy)]
pub struct Follow {
    /// True while the list follows the newest message (the "Jump to latest" button is hidden).
    pub following: RwSignal<bool>,
    list: NodeRef<Div>,
    state: StoredValue<Rc<State>, LocalStorage>,
}

struct State {
    following: Cell<bool>,
    /// The scroll position last seen, to tell scrolling up from content growing.
    last_top: Cell<i32>,
}

/// Keeps the observer and its callback alive while the list is mounted.
struct Observer {
    observer: web_sys::ResizeObserver,
    _callback: Closure<dyn FnMut(js_sys::Array, web_sys::ResizeObserver)>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.observer.disconnect();
    }
}

impl Follow {
    /// Follows `content` (the list's inner element) growing inside the scrolling `list`.
    pub fn attach(list: NodeRef<Div>, content: NodeRef<Div>) -> Self {
        let state = Rc::new(State {
            following: Cell::new(true),
            last_top: Cell::new(0),
        });
        let follow = Self {
            following: RwSignal::new(true),
            list,
            state: StoredValue::new_local(state),
        };
        let observer = StoredValue::new_local(None::<Observer>);
        Effect::new(move |_| {
            let (Some(content), Some(frame)) = (content.get(), list.get()) else {
                return;
            };
            let callback = Closure::<dyn FnMut(js_sys::Array, web_sys::ResizeObserver)>::new(
                move |_: js_sys::Array, _: web_sys::ResizeObserver| follow.content_resized(),
            );
            let Ok(ro) = web_sys::ResizeObserver::new(callback.as_ref().unchecked_ref()) else {
                return;
            };
            // The content growing, or the list itself shrinking (a banner, the settings panel).
            ro.observe(&content);
            ro.observe(&frame);
            observer.set_value(Some(Observer {
                observer: ro,
                _callback: callback,
            }));
        });
        on_cleanup(move || {
            observer.try_set_value(None);
        });
        follow
    }

    fn state(&self) -> Option<Rc<State>> {
        self.state.try_get_value()
    }

    /// After layout: the content changed size; scroll to the bottom if following.
    fn content_resized(&self) {
        if let Some(state) = self.state()
            && state.following.get()
        {
            self.scroll_to_bottom(&state);
        }
    }

    fn scroll_to_bottom(&self, state: &State) {
        if let Some(el) = self.list.get_untracked() {
            el.set_scroll_top(el.scroll_height());
            state.last_top.set(el.scroll_top());
        }
    }

    /// A scroll happened (the user's or ours): moving up stops following, reaching the bottom
    /// resumes it. Content growing below does not count as moving.
    pub fn on_scroll(&self) {
        let (Some(state), Some(el)) = (self.state(), self.list.get_untracked()) else {
            return;
        };
        let top = el.scroll_top();
        let from_bottom = el.scroll_height() - top - el.client_height();
        // Moving up stops following, however little, unless the browser only clamped the position
        // to a shorter list (then it is exactly at the bottom).
        if top < state.last_top.get() && from_bottom > 1 {
            self.set_following(&state, false);
        } else if from_bottom <= AT_BOTTOM_PX {
            self.set_following(&state, true);
        }
        state.last_top.set(top);
    }

    /// A wheel turned: upwards stops following at once (before the scroll event arrives).
    pub fn on_wheel(&self, delta_y: f64) {
        let can_move_up = self
            .list
            .get_untracked()
            .is_some_and(|el| el.scroll_top() > 0);
        if delta_y < 0.0
            && can_move_up
            && let Some(state) = self.state()
        {
            self.set_following(&state, false);
        }
    }

    /// Scrolls to the newest message and follows again.
    pub fn jump_to_latest(&self) {
        if let Some(state) = self.state() {
            self.set_following(&state, true);
            self.scroll_to_bottom(&state);
        }
    }

    fn set_following(&self, state: &State, on: bool) {
        if state.following.replace(on) != on {
            self.following.set(on);
        }
    }
}
