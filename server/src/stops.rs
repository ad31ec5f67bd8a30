//! Stopping replies (the `stop` frame, `POST …/messages/{id}/stop`): every reply under way or
//! waiting its turn holds a token here while it runs; a stop cancels it, and the turn ends the
//! reply as `stopped` (docs/protocol.md, "Stopping a reply").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// The stop tokens of one session's replies in this process.
#[derive(Default)]
pub struct ReplyStops {
    state: Arc<Mutex<State>>,
}

/// Each registered reply's token, with the number of its registration.
#[derive(Default)]
struct State {
    tokens: HashMap<String, (u64, CancellationToken)>,
    registered: u64,
}

impl ReplyStops {
    /// Registers reply `reply_id` until the returned handle is dropped.
    pub fn register(&self, reply_id: &str) -> StopHandle {
        let token = CancellationToken::new();
        let mut state = self.lock();
        state.registered += 1;
        let number = state.registered;
        state
            .tokens
            .insert(reply_id.to_owned(), (number, token.clone()));
        StopHandle {
            state: self.state.clone(),
            reply_id: reply_id.to_owned(),
            number,
            token,
        }
    }

    /// Stops reply `reply_id`; false when it is not under way here (it ended, or never ran).
    pub fn stop(&self, reply_id: &str) -> bool {
        match self.lock().tokens.get(reply_id) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// True while a reply of the session is under way (or waiting its turn) here.
    pub fn any(&self) -> bool {
        !self.lock().tokens.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running reply's side of its stop: asked whether, or waited on until, it was stopped.
pub struct StopHandle {
    state: Arc<Mutex<State>>,
    reply_id: String,
    number: u64,
    token: CancellationToken,
}

impl StopHandle {
    /// True once the reply was asked to stop.
    pub fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves when the reply is asked to stop.
    pub async fn stopped(&self) {
        self.token.cancelled().await;
    }

    /// The token itself (for code that takes one, such as a tool call).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for StopHandle {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // A retry of the same reply may have registered again meanwhile: only this one goes.
        if state
            .tokens
            .get(&self.reply_id)
            .is_some_and(|(n, _)| *n == self.number)
        {
            state.tokens.remove(&self.reply_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reaches_the_registered_reply_once_and_ends_with_it() {
        let stops = ReplyStops::default();
        assert!(!stops.stop("r1"), "nothing registered");
        let handle = stops.register("r1");
        assert!(!handle.is_stopped());
        assert!(stops.stop("r1"));
        assert!(handle.is_stopped());
        drop(handle);
        assert!(!stops.stop("r1"), "gone with its handle");
        // An older handle of the same reply, dropped late, leaves the newer registration alone.
        let old = stops.register("r2");
        let new = stops.register("r2");
        drop(old);
        assert!(stops.stop("r2"));
        assert!(new.is_stopped());
    }
}
