//! Shutting down without losing a reply: once the server drains (SIGTERM), new messages are
//! refused with a typed, retryable error, idle WebSockets close with 1012 so their clients
//! reconnect elsewhere, and a reply under way streams to its end before its socket closes. The
//! process itself, sent SIGTERM mid-reply, finishes the reply and exits 0.

mod support;

use std::process::Command;
use std::time::Duration;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::{Behaviour, FakeProvider, Gate};
use serde_json::json;
use support::{Api, TestServer, delta_text};

#[tokio::test]
async fn a_draining_server_refuses_new_messages_and_finishes_the_reply_under_way() {
    let gate = Gate::new();
    let server = TestServer::start(
        Api::OpenAi,
        Behaviour::hold(&["Half ", "way ", "there."], 1, &gate),
    )
    .await;
    let mut busy = server.ws().await;
    let (id, _token) = busy.hello_new().await;
    busy.send(json!({"type": "chat", "data": {"message": "tell me"}}))
        .await;
    gate.reached(1).await;
    let mut idle = server.ws().await;
    idle.hello_new().await;

    server.state.drain.begin();
    // The idle tab is told to reconnect (1012: service restart).
    assert_eq!(
        idle.close_code_within(Duration::from_secs(5)).await,
        Some(1012)
    );
    // A new message on the busy tab is refused, typed and retryable, and nothing is stored (the
    // listener no longer takes connections: REST clients go to another instance).
    busy.send(json!({"type": "chat", "data": {"message": "another", "clientMessageId": "late"}}))
        .await;
    let mut seen = Vec::new();
    let refusal = loop {
        let (frame, raw) = busy.next().await;
        if raw["type"] == "error" {
            break raw;
        }
        seen.push(frame);
    };
    assert_eq!(refusal["data"]["code"], "overloaded", "{refusal}");
    assert_eq!(refusal["data"]["retryable"], true);
    assert_eq!(refusal["data"]["clientMessageId"], "late");
    assert!(
        refusal["data"]["retryAfterMs"].as_u64() > Some(0),
        "{refusal}"
    );

    // The reply under way streams to its end, then its socket closes too.
    gate.release();
    let mut frames = seen;
    frames.extend(busy.until_reply_ends().await);
    let ServerEvent::Done(done) = &frames.last().unwrap().event else {
        panic!("the reply did not finish: {frames:?}")
    };
    assert_eq!(done.message.content, "Half way there.");
    assert_eq!(delta_text(&frames), "Half way there.");
    assert_eq!(
        busy.close_code_within(Duration::from_secs(5)).await,
        Some(1012)
    );
    assert_eq!(server.state.drain.finish(Duration::from_secs(5)).await, 0);
    // Only the first message and its reply are stored (the listener is closed: read the store).
    let stored = server.state.store.messages(&id).await.unwrap();
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(
        stored[1].status,
        glassbox_core::vocab::MessageStatus::Complete
    );
}

/// A `glassbox-server` process on a free port with `fake` as its provider; its base URL.
fn spawn_server(fake: &FakeProvider, data: &std::path::Path) -> (std::process::Child, String) {
    support::spawn_process(
        data,
        &fake.openai_base(),
        &[
            ("GLASSBOX_TOPICS", "off"),
            ("GLASSBOX_CONFIG", "off"),
            ("GLASSBOX_PUBLIC_DIR", "off"),
            ("GLASSBOX_SHUTDOWN_GRACE_MS", "20000"),
        ],
    )
}

fn sigterm(child: &std::process::Child) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

async fn exits_cleanly(mut child: std::process::Child) {
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status}");
}

#[tokio::test]
async fn sigterm_mid_reply_lets_the_reply_finish_then_the_process_exits() {
    let gate = Gate::new();
    let fake = FakeProvider::start(Behaviour::hold(&["Kept ", "to ", "the end."], 1, &gate))
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let (child, base) = spawn_server(&fake, data.path());
    // A reply streams over SSE and is held mid-way.
    let http = reqwest::Client::new();
    let mut sse = http
        .post(format!("{base}/api/chat"))
        .header("accept", "text/event-stream")
        .json(&json!({"message": "go"}))
        .send()
        .await
        .unwrap();
    gate.reached(1).await;
    sigterm(&child);
    // New connections are no longer taken while the reply is under way.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        http.get(format!("{base}/healthz")).send().await.is_err(),
        "the listener still accepts"
    );
    gate.release();
    let mut text = String::new();
    while let Some(chunk) = sse.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("event: done"), "{text}");
    assert!(text.contains("the end."), "{text}");
    exits_cleanly(child).await;
}

#[tokio::test]
async fn sigterm_mid_reply_on_a_websocket_sends_the_whole_reply_then_1012() {
    let gate = Gate::new();
    let fake = FakeProvider::start(Behaviour::hold(&["Every ", "frame ", "arrives."], 1, &gate))
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let (child, base) = spawn_server(&fake, data.path());
    let addr = base.trim_start_matches("http://");
    let mut busy = support::ws_at(addr, Some(&base)).await.unwrap();
    busy.hello_new().await;
    let mut idle = support::ws_at(addr, Some(&base)).await.unwrap();
    idle.hello_new().await;
    busy.send(json!({"type": "chat", "data": {"message": "go"}}))
        .await;
    gate.reached(1).await;
    sigterm(&child);
    assert_eq!(
        idle.close_code_within(Duration::from_secs(5)).await,
        Some(1012),
        "an idle socket is closed at once"
    );
    gate.release();
    let frames = busy.until_reply_ends().await;
    let ServerEvent::Done(done) = &frames.last().unwrap().event else {
        panic!("the reply did not finish: {frames:?}")
    };
    assert_eq!(done.message.content, "Every frame arrives.");
    assert_eq!(
        busy.close_code_within(Duration::from_secs(5)).await,
        Some(1012)
    );
    exits_cleanly(child).await;
}
