//! Coalescing of streamed text: the messages whose pieces arrived since the last animation frame,
//! so each is shown once per frame however many pieces it got.

/// Messages with streamed text not shown yet, in the order their first piece arrived.
#[derive(Debug, Default)]
pub struct Unshown {
    ids: Vec<String>,
    frame_asked: bool,
}

impl Unshown {
    /// Notes new text for `message_id`; true when the caller must ask for a frame (none is asked
    /// since the last [`Unshown::take`]).
    pub fn note(&mut self, message_id: &str) -> bool {
        if !self.ids.iter().any(|id| id == message_id) {
            self.ids.push(message_id.to_owned());
        }
        !std::mem::replace(&mut self.frame_asked, true)
    }

    /// The messages to show now, each once; text noted after this asks for a new frame.
    pub fn take(&mut self) -> Vec<String> {
        self.frame_asked = false;
        std::mem::take(&mut self.ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_between_two_frames_ask_one_frame_and_show_each_message_once() {
        let mut u = Unshown::default();
        assert!(u.note("a"), "the first piece asks for a frame");
        assert!(!u.note("a"));
        assert!(!u.note("b"));
        assert!(!u.note("a"));
        assert_eq!(u.take(), ["a", "b"]);
        assert!(u.take().is_empty());
    }

    #[test]
    fn a_piece_after_the_frame_asks_for_the_next() {
        let mut u = Unshown::default();
        assert!(u.note("a"));
        u.take();
        assert!(u.note("a"));
        assert_eq!(u.take(), ["a"]);
    }
}
