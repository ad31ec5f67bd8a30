//! Keeping the newest message in view. While the user is at the bottom of the list it follows what
//! arrives, however tall an update is; when they scroll up it stops and "Jump to latest" shows.
//!
//! Nothing reads layout while a reply streams: a `ResizeObserver` on the list and its content runs
//! after the browser's own layout, once per frame at most, and scrolls to the bottom if the list is
//! following; an `IntersectionObserver` on a sentinel after the last message says whether the
//! bottom is in view (computed by the browser after layout too). Scrolling up takes the sentinel
//! out of view, which stops following; bringing it back resumes it. A wheel turned up, a key that
//! scrolls up and a press on the scrollbar stop following at once (a reply growing every frame
//! would otherwise scroll back down first). (Reading the scroll position in a scroll handler forced
//! a layout of the whole list while text was being appended: at 256 kB, 60 ms of a frame.)

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
}

/// Keeps the observers and their callbacks alive while the list is mounted.
struct Observers {
    resize: web_sys::ResizeObserver,
    _on_resize: Closure<dyn FnMut(js_sys::Array, web_sys::ResizeObserver)>,
    bottom: web_sys::IntersectionObserver,
    _on_bottom: Closure<dyn FnMut(js_sys::Array, web_sys::IntersectionObserver)>,
}

impl Drop for Observers {
    fn drop(&mut self) {
        self.resize.disconnect();
        self.bottom.disconnect();
    }
}

impl Follow {
    /// Follows `content` (the list's inner element) growing inside the scrolling `list`;
    /// `sentinel` is an empty element after the last message.
    pub fn attach(list: NodeRef<Div>, content: NodeRef<Div>, sentinel: NodeRef<Div>) -> Self {
        let state = Rc::new(State {
            following: Cell::new(true),
        });
        let follow = Self {
            following: RwSignal::new(true),
            list,
            state: StoredValue::new_local(state),
        };
        let observers = StoredValue::new_local(None::<Observers>);
        Effect::new(move |_| {
            let (Some(content), Some(frame), Some(end)) =
                (content.get(), list.get(), sentinel.get())
            else {
                return;
            };
            let on_resize = Closure::<dyn FnMut(js_sys::Array, web_sys::ResizeObserver)>::new(
                move |_: js_sys::Array, _: web_sys::ResizeObserver| follow.content_resized(),
            );
            let on_bottom = Closure::<dyn FnMut(js_sys::Array, web_sys::IntersectionObserver)>::new(
                move |entries: js_sys::Array, _: web_sys::IntersectionObserver| {
                    // The newest entry says where the sentinel is now; none counts while the
                    // list is hidden (a closed launcher): it keeps following meanwhile.
                    let newest = entries
                        .iter()
                        .last()
                        .and_then(|e| e.dyn_into::<web_sys::IntersectionObserverEntry>().ok());
                    if let Some(entry) = newest
                        && entry.root_bounds().is_some_and(|r| r.height() > 0.0)
                    {
                        follow.bottom_seen(entry.is_intersecting());
                    }
                },
            );
            let Ok(resize) = web_sys::ResizeObserver::new(on_resize.as_ref().unchecked_ref())
            else {
                return;
            };
            let options = web_sys::IntersectionObserverInit::new();
            options.set_root(Some(&frame));
            options.set_root_margin(&format!("0px 0px {AT_BOTTOM_PX}px 0px"));
            let Ok(bottom) = web_sys::IntersectionObserver::new_with_options(
                on_bottom.as_ref().unchecked_ref(),
                &options,
            ) else {
                return;
            };
            // The content growing, or the list itself shrinking (a banner, the settings panel).
            resize.observe(&content);
            resize.observe(&frame);
            bottom.observe(&end);
            observers.set_value(Some(Observers {
                resize,
                _on_resize: on_resize,
                bottom,
                _on_bottom: on_bottom,
            }));
        });
        on_cleanup(move || {
            observers.try_set_value(None);
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
            self.scroll_to_bottom();
        }
    }

    /// Scrolls to the bottom (where layout is up to date: after layout, or on the user's click).
    fn scroll_to_bottom(&self) {
        if let Some(el) = self.list.get_untracked() {
            el.set_scroll_top(el.scroll_height());
        }
    }

    /// After layout: the bottom came into view (follow again) or left it. While following, a
    /// resize scrolls back down before this is computed, so leaving means the user scrolled up.
    fn bottom_seen(&self, in_view: bool) {
        if let Some(state) = self.state() {
            self.set_following(&state, in_view);
        }
    }

    /// A key went down in the list: one that scrolls up stops following at once.
    pub fn on_key(&self, key: &str) {
        if matches!(key, "ArrowUp" | "PageUp" | "Home")
            && let Some(state) = self.state()
        {
            self.set_following(&state, false);
        }
    }

    /// A press on the list itself (not on a message: its scrollbar) stops following at once.
    pub fn on_press(&self, on_list: bool) {
        if on_list && let Some(state) = self.state() {
            self.set_following(&state, false);
        }
    }

    /// A wheel turned: upwards stops following at once (before the sentinel leaves the view).
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
            self.scroll_to_bottom();
        }
    }

    fn set_following(&self, state: &State, on: bool) {
        if state.following.replace(on) != on {
            self.following.set(on);
        }
    }
}
