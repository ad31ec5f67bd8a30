//! Which stored messages the list renders. A long history opens with its newest messages and the
//! older ones are added a batch per animation frame, so opening a session of thousands of messages
//! is never one long task; the list is complete after a few frames (find-in-page sees all of it).

use leptos::prelude::*;

use crate::frame::next_frame;

/// Messages rendered at once when a long history opens.
const FIRST_PAINT: usize = 30;
/// Older messages added per animation frame after that.
const BATCH: usize = 30;

/// The index of the first rendered message, widened frame by frame.
#[derive(Clone, Copy)]
pub struct HistoryWindow {
    /// First rendered index and the message count last seen.
    state: StoredValue<(usize, usize)>,
    /// The session last seen: another session starts over.
    session: StoredValue<Option<String>>,
    widened: Trigger,
}

impl HistoryWindow {
    pub fn new() -> Self {
        Self {
            state: StoredValue::new((0, 0)),
            session: StoredValue::new(None),
            widened: Trigger::new(),
        }
    }

    /// The first message to render of `len` in `session` (tracks the widening).
    pub fn first(self, session: Option<&str>, len: usize) -> usize {
        self.widened.track();
        let Some((mut from, mut seen)) = self.state.try_get_value() else {
            return 0;
        };
        if self.session.with_value(|s| s.as_deref() != session) {
            self.session.set_value(session.map(str::to_owned));
            (from, seen) = (0, 0);
        }
        if len < seen {
            from = 0; // a new session
        } else if seen == 0 && len > FIRST_PAINT {
            from = len - FIRST_PAINT;
            self.widen_next_frame();
        }
        from = from.min(len);
        self.state.set_value((from, len));
        from
    }

    fn widen_next_frame(self) {
        next_frame(move || {
            let Some((from, seen)) = self.state.try_get_value() else {
                return;
            };
            if from == 0 {
                return;
            }
            let next = from.saturating_sub(BATCH);
            self.state.set_value((next, seen));
            self.widened.notify();
            if next > 0 {
                self.widen_next_frame();
            }
        });
    }
}
