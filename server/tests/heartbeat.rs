//! The WebSocket heartbeat: every `GLASSBOX_WS_HEARTBEAT_MS` a ping and an unnumbered `heartbeat`
//! frame (a peer that answers stays), the interval in the `session` frame, and a peer silent for
//! three intervals (not even a pong) closed by the server.

mod support;

use std::time::{Duration, Instant};

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use serde_json::json;
use support::{Api, TestServer};

async fn server() -> TestServer {
    TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["Hi."]),
        &[("GLASSBOX_WS_HEARTBEAT_MS", "200")],
    )
    .await
}

#[tokio::test]
async fn heartbeats_come_unnumbered_and_a_peer_that_answers_stays() {
    let server = server().await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "session", "{raw}");
    assert_eq!(raw["data"]["heartbeatMs"], 200, "{raw}");

    // Reading (so the client library answers each ping) for 1.5 s: heartbeats, not numbered,
    // and the connection stays open well past three intervals.
    let start = Instant::now();
    let mut beats = 0;
    while start.elapsed() < Duration::from_millis(1500) {
        let (frame, raw) = ws.next_any().await;
        if let ServerEvent::Heartbeat(_) = frame.event {
            assert_eq!(raw["syncId"], 0, "{raw}");
            assert_eq!(raw["data"], json!({}), "{raw}");
            beats += 1;
        }
    }
    assert!(
        (4..=10).contains(&beats),
        "{beats} heartbeats in 1.5 s at 200 ms"
    );
    // Still served: a message gets its reply.
    ws.send(json!({"type": "chat", "data": {"message": "still there?"}}))
        .await;
    let frames = ws.until_reply_ends().await;
    assert!(matches!(frames.last().unwrap().event, ServerEvent::Done(_)));
}

#[tokio::test]
async fn a_peer_silent_for_three_intervals_is_closed() {
    let server = server().await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    // Not reading: no pong goes back, nothing else either.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        ws.closed_within(Duration::from_millis(500)).await,
        "the server kept a silent peer"
    );
}

#[tokio::test]
async fn without_a_heartbeat_nothing_is_sent_and_nobody_is_closed() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["Hi."]),
        &[("GLASSBOX_WS_HEARTBEAT_MS", "0")],
    )
    .await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert!(raw["data"].get("heartbeatMs").is_none(), "{raw}");
    // 600 ms of frames (the join's, then none): no heartbeat among them.
    let start = Instant::now();
    while let Some(left) = Duration::from_millis(600).checked_sub(start.elapsed()) {
        let Ok((frame, raw)) = tokio::time::timeout(left, ws.next_any()).await else {
            break;
        };
        assert!(!matches!(frame.event, ServerEvent::Heartbeat(_)), "{raw}");
    }
    assert!(!ws.closed_within(Duration::from_millis(300)).await);
}
