//! Crash-safe streaming: while a reply streams, its text so far (and its tool rounds) is written to
//! storage at least every second, one statement each time, never one per piece. After a crash
//! (`kill -9`, power loss) the restarted server marks the reply failed and retryable, and it keeps
//! what had streamed up to the last checkpoint.

use std::time::Duration;

use glassbox_core::vocab::ToolRound;
use tokio::sync::mpsc;

use crate::storage::Store;

/// How often a streaming reply is written.
pub const EVERY: Duration = Duration::from_secs(1);

enum Piece {
    Text(String),
    Rounds(Vec<ToolRound>),
}

/// The checkpoint writer of one reply; dropping it stops the writer (the final state is stored by
/// the turn, and a checkpoint never overwrites a reply that is no longer streaming).
pub struct Checkpoints {
    tx: mpsc::UnboundedSender<Piece>,
}

impl Checkpoints {
    /// Starts writing reply `reply_id`, which holds `text` so far.
    pub fn start(store: Store, reply_id: String, text: String) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Piece>();
        tokio::spawn(async move {
            let (mut text, mut rounds, mut dirty) = (text, Vec::new(), false);
            // The first write a second in: a reply that ends sooner is stored once, by the turn.
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    piece = rx.recv() => match piece {
                        Some(Piece::Text(t)) => {
                            text.push_str(&t);
                            dirty = true;
                        }
                        Some(Piece::Rounds(r)) => {
                            rounds = r;
                            dirty = true;
                        }
                        None => return,
                    },
                    _ = tick.tick(), if dirty => {
                        dirty = false;
                        if let Err(e) = store.checkpoint_reply(&reply_id, &text, &rounds).await {
                            tracing::warn!(reply = %reply_id, error = %e, "checkpoint failed");
                        }
                    }
                }
            }
        });
        Self { tx }
    }

    /// Text that just streamed.
    pub fn text(&self, text: &str) {
        let _ = self.tx.send(Piece::Text(text.to_owned()));
    }

    /// The reply's tool rounds after a round ended.
    pub fn rounds(&self, rounds: &[ToolRound]) {
        let _ = self.tx.send(Piece::Rounds(rounds.to_vec()));
    }
}
