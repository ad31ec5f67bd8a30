//! Stopping without losing a reply (SIGTERM, Ctrl-C): the process stops taking messages, lets the
//! replies under way finish within a grace period (`GLASSBOX_SHUTDOWN_GRACE_MS`), then exits. A
//! WebSocket with no reply under way is closed at once (1012, "service restart") so its client
//! reconnects; one with a reply under way sends the reply to its end, then closes the same way.
//! A reply still running at the deadline is failed and retryable at the next start, as after a
//! crash. A second signal exits at once.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::{TaskTrackerToken, TrackedFuture};

/// The process's replies and WebSockets, and whether it is shutting down. Cheap to clone.
#[derive(Clone, Default)]
pub struct Drain {
    begun: CancellationToken,
    turns: TaskTracker,
    sockets: TaskTracker,
}

/// A message accepted before shutting down began: its reply is waited for ([`Admitted::run`]),
/// even if shutting down begins before the reply starts.
pub struct Admitted {
    /// Counts the message's reply as under way until dropped.
    _token: TaskTrackerToken,
}

impl Admitted {
    /// Runs the message's reply in the background, counted until it ends.
    pub fn run<F>(self, reply: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(async move {
            let _admitted = self;
            reply.await;
        });
    }
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

    /// Takes a message in, unless shutting down has begun (`None`).
    pub fn admit(&self) -> Option<Admitted> {
        let admitted = Admitted {
            _token: self.turns.token(),
        };
        // Checked after counting it: a shutdown that begins now waits for this reply.
        (!self.is_draining()).then_some(admitted)
    }

    /// Serves a WebSocket, counted until it closes (its last frames are waited for).
    pub fn socket<F>(&self, socket: F) -> TrackedFuture<F>
    where
        F: Future<Output = ()>,
    {
        self.sockets.track_future(socket)
    }

    /// Replies under way (or waiting their session's turn) now.
    pub fn running(&self) -> usize {
        self.turns.len()
    }

    /// Waits until every reply under way has ended, then every WebSocket has sent its last frames
    /// and closed, or `grace` has passed; returns how many replies are still running.
    pub async fn finish(&self, grace: Duration) -> usize {
        self.turns.close();
        self.sockets.close();
        let deadline = tokio::time::Instant::now() + grace;
        let _ = tokio::time::timeout_at(deadline, self.turns.wait()).await;
        let _ = tokio::time::timeout_at(deadline, self.sockets.wait()).await;
        self.turns.len()
    }
}

/// Resolves on SIGTERM (what systemd, containers and rolling deploys send) or Ctrl-C; never when
/// neither can be listened for.
pub async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn finish_waits_for_replies_until_the_grace_runs_out() {
        let drain = Drain::default();
        assert!(!drain.is_draining());
        let (a, b) = (drain.admit().unwrap(), drain.admit().unwrap());
        a.run(tokio::time::sleep(Duration::from_secs(1)));
        b.run(tokio::time::sleep(Duration::from_secs(60)));
        // Admitted before the shutdown, spawned after it began: waited for all the same.
        let late = drain.admit().unwrap();
        assert_eq!(drain.running(), 3);
        drain.begin();
        assert!(drain.is_draining());
        assert!(drain.admit().is_none());
        drain.begun().await;
        late.run(tokio::time::sleep(Duration::from_secs(2)));
        // The short replies end within the grace; the long one is still running at its end.
        assert_eq!(drain.finish(Duration::from_secs(5)).await, 1);
    }
}
