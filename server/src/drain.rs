//! Stopping without losing a reply (SIGTERM, Ctrl-C): the process stops taking messages, lets the
//! replies under way finish within a grace period (`GLASSBOX_SHUTDOWN_GRACE_MS`), then exits. A
//! WebSocket with no reply under way is closed at once (1012, "service restart") so its client
//! reconnects — behind a load balancer, to another instance; one with a reply under way closes
//! when the reply ends. A reply still running at the deadline is failed and retryable at the next
//! start, as after a crash.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The process's replies under way, and whether it is shutting down. Cheap to clone.
#[derive(Clone, Default)]
pub struct Drain {
    begun: CancellationToken,
    turns: TaskTracker,
}

impl Drain {
    /// Starts shutting down: no new message is taken from now on.
    pub fn begin(&self) {
        self.begun.cancel();
    }

    /// True once shutting down.
    pub fn is_draining(&self) -> bool {
        self.begun.is_cancelled()
    }

    /// Resolves when shutting down begins.
    pub async fn begun(&self) {
        self.begun.cancelled().await;
    }

    /// Runs a reply in the background, counted until it ends.
    pub fn spawn<F>(&self, reply: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.turns.spawn(reply);
    }

    /// Replies under way (or waiting their session's turn) now.
    pub fn running(&self) -> usize {
        self.turns.len()
    }

    /// Waits until every reply under way has ended, or `grace` has passed; returns how many are
    /// still running.
    pub async fn finish(&self, grace: Duration) -> usize {
        self.turns.close();
        let _ = tokio::time::timeout(grace, self.turns.wait()).await;
        self.turns.len()
    }
}

/// Resolves on SIGTERM (what systemd, containers and rolling deploys send) or Ctrl-C.
pub async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn finish_waits_for_replies_until_the_grace_runs_out() {
        let drain = Drain::default();
        assert!(!drain.is_draining());
        drain.spawn(tokio::time::sleep(Duration::from_secs(1)));
        drain.spawn(tokio::time::sleep(Duration::from_secs(60)));
        assert_eq!(drain.running(), 2);
        drain.begin();
        assert!(drain.is_draining());
        drain.begun().await;
        // The short reply ends within the grace; the long one is still running at its end.
        assert_eq!(drain.finish(Duration::from_secs(5)).await, 1);
    }
}
