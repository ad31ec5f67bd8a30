//! A WebSocket's heartbeat (docs/protocol.md, "Heartbeat"): every `GLASSBOX_WS_HEARTBEAT_MS` the
//! server sends a ping and a `heartbeat` frame (browsers answer pings but hide them from pages; the
//! frame lets the widget see the line is alive), so proxies that cut idle connections never see
//! this one idle; a peer that sent nothing, not even a pong, for three intervals is gone.

use axum::extract::ws::Message;
use futures::{Sink, SinkExt};
use glassbox_core::wire::ServerFrame;
use tokio::time::{Duration, Instant};

/// Intervals of silence after which the peer counts as gone.
const SILENT_BEATS: u32 = 3;

/// One connection's heartbeat.
pub struct Heartbeat {
    every: Duration,
    next: Instant,
    heard: Instant,
}

/// The peer was silent too long, or the socket failed.
pub struct Gone;

impl Heartbeat {
    /// A heartbeat every `every` (zero: none).
    pub fn new(every: Duration) -> Self {
        let now = Instant::now();
        Self {
            every,
            next: now + every,
            heard: now,
        }
    }

    /// Resolves when the next beat is due (never without a heartbeat).
    pub async fn due(&self) {
        if self.every.is_zero() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep_until(self.next).await;
    }

    /// The peer sent something (a frame, a pong): it is alive.
    pub fn heard(&mut self) {
        self.heard = Instant::now();
    }

    /// Sends the ping and the `heartbeat` frame; `Gone` when the peer has been silent for three
    /// intervals (the caller closes the connection) or the socket failed.
    pub async fn beat<W: Sink<Message> + Unpin>(&mut self, sink: &mut W) -> Result<(), Gone> {
        let now = Instant::now();
        self.next = now + self.every;
        if now.duration_since(self.heard) >= self.every * SILENT_BEATS {
            tracing::info!(
                silent_ms = now.duration_since(self.heard).as_millis() as u64,
                "closing a WebSocket whose peer went silent"
            );
            let _ = sink.send(Message::Close(None)).await;
            return Err(Gone);
        }
        let frame = serde_json::to_string(&ServerFrame::heartbeat()).map_err(|_| Gone)?;
        sink.send(Message::Ping(Default::default()))
            .await
            .map_err(|_| Gone)?;
        sink.send(Message::Text(frame.into()))
            .await
            .map_err(|_| Gone)
    }

    /// The interval in whole milliseconds, for the `session` frame (`None` without a heartbeat).
    pub fn interval_ms(&self) -> Option<u32> {
        (!self.every.is_zero()).then(|| u32::try_from(self.every.as_millis()).unwrap_or(u32::MAX))
    }
}
