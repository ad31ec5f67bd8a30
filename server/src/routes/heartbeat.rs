//! A WebSocket's heartbeat (docs/protocol.md, "Heartbeat"): every `GLASSBOX_WS_HEARTBEAT_MS` the
//! server sends a ping and a `heartbeat` frame (browsers answer pings but hide them from pages; the
//! frame lets the widget see the line is alive), so proxies that cut idle connections never see
//! this one idle; a peer that answered none of three pings in a row (nor sent anything else) is
//! gone. Counting pings, not time, keeps a connection whose own server side was busy for a while
//! (a long `hello`) from being taken for silent.

use axum::extract::ws::Message;
use futures::{Sink, SinkExt};
use glassbox_core::wire::ServerFrame;
use tokio::time::{Duration, Instant};

/// Pings in a row without a word from the peer after which it counts as gone.
const SILENT_BEATS: u32 = 3;

/// One connection's heartbeat.
pub struct Heartbeat {
    every: Duration,
    next: Instant,
    /// Pings sent since the peer last sent anything.
    unanswered: u32,
}

/// The peer was silent too long, or the socket failed.
pub struct Gone;

impl Heartbeat {
    /// A heartbeat every `every` (zero: none).
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            next: Instant::now() + every,
            unanswered: 0,
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
        self.unanswered = 0;
    }

    /// Sends the ping and the `heartbeat` frame; `Gone` when the peer answered none of the last
    /// three pings (the caller ends the connection) or the socket failed.
    pub async fn beat<W: Sink<Message> + Unpin>(&mut self, sink: &mut W) -> Result<(), Gone> {
        self.next = Instant::now() + self.every;
        if self.unanswered >= SILENT_BEATS {
            tracing::info!(
                pings = self.unanswered,
                "closing a WebSocket whose peer went silent"
            );
            let _ = sink.send(Message::Close(None)).await;
            return Err(Gone);
        }
        self.unanswered += 1;
        let frame = serde_json::to_string(&ServerFrame::heartbeat()).map_err(|_| Gone)?;
        sink.send(Message::Ping(Default::default()))
            .await
            .map_err(|_| Gone)?;
        sink.send(Message::Text(frame.into()))
            .await
            .map_err(|_| Gone)
    }
}

/// The interval `every` in whole milliseconds, for the `session` frame (`None`: no heartbeat).
pub fn interval_ms(every: Duration) -> Option<u32> {
    (!every.is_zero()).then(|| u32::try_from(every.as_millis()).unwrap_or(u32::MAX))
}
