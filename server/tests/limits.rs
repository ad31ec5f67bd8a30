//! Rate limits per address and per session, answered with `rate_limited` and when to retry
//! (`Retry-After` over REST, `retryAfterMs` on the WebSocket), nothing stored for a refused message,
//! and lifted once the reason is gone; `X-Forwarded-For` counts only from trusted proxies.

mod support;

use std::time::Duration;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::{Behaviour, Gate};
use serde_json::{Value, json};
use support::{Api, TestServer};

async fn start(extra: &[(&str, &str)]) -> TestServer {
    TestServer::start_with(Api::OpenAi, Behaviour::reply(&["Fine."]), extra).await
}

/// The seconds of `Retry-After`, checked to be a whole positive number.
fn retry_after(resp: &reqwest::Response) -> u64 {
    let secs: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in whole seconds");
    assert!(secs >= 1);
    secs
}

#[tokio::test]
async fn messages_per_session_over_rest_are_refused_with_retry_after_and_nothing_stored() {
    let server = start(&[("GLASSBOX_LIMIT_MESSAGES_PER_MINUTE", "2")]).await;
    let (id, token, _) = server.new_session().await;
    server.chat(&id, &token, "one").await;
    server.chat(&id, &token, "two").await;
    let resp = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(&token)
        .json(&json!({"sessionId": id, "message": "three"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let secs = retry_after(&resp);
    assert!(
        secs <= 30,
        "2 a minute: the next in at most 30 s, got {secs}"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    assert_eq!(body["error"]["retryable"], true);
    let ms = body["error"]["retryAfterMs"].as_u64().unwrap();
    assert!(ms > 0 && ms <= 30_000, "{ms}");
    let texts: Vec<String> = server
        .messages(&id, &token)
        .await
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts, ["one", "two"], "the refused message was not stored");
    assert_eq!(server.fake.requests().len(), 2);
    // Another session of the same address has its own per-session allowance.
    let (other, other_token, _) = server.new_session().await;
    server.chat(&other, &other_token, "hello").await;
}

#[tokio::test]
async fn on_the_websocket_a_refused_message_names_itself_and_when_to_retry() {
    let server = start(&[("GLASSBOX_LIMIT_ADDRESS_MESSAGES_PER_MINUTE", "1")]).await;
    let mut ws = server.ws().await;
    ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "first", "clientMessageId": "c-1"}}))
        .await;
    ws.until_reply_ends().await;
    ws.send(json!({"type": "chat", "data": {"message": "second", "clientMessageId": "c-2"}}))
        .await;
    let (frame, raw) = ws.next().await;
    let ServerEvent::Error(e) = frame.event else {
        panic!("expected an error frame, got {raw}")
    };
    assert_eq!(raw["data"]["code"], "rate_limited");
    assert_eq!(e.client_message_id.as_deref(), Some("c-2"));
    let ms = e.retry_after_ms.expect("retryAfterMs");
    assert!(ms > 50_000 && ms <= 60_000, "1 a minute: {ms}");
}

#[tokio::test]
async fn new_sessions_per_address_are_limited_on_rest_and_the_websocket() {
    let server = start(&[("GLASSBOX_LIMIT_SESSIONS_PER_HOUR", "2")]).await;
    let (id, token, _) = server.new_session().await;
    server.new_session().await;
    let resp = server.post("/api/sessions", &json!({})).await;
    assert_eq!(resp.status(), 429);
    assert!(retry_after(&resp) > 60);
    // A chat without a session would create one: refused the same way.
    let resp = server.post("/api/chat", &json!({"message": "hi"})).await;
    assert_eq!(resp.status(), 429);
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["data"]["code"], "rate_limited", "{raw}");
    assert_eq!(server.fake.requests().len(), 0);
    // Unlike a refused join, the socket stays open: the client may join an existing session on it.
    ws.hello_existing(&id, &token).await;
}

#[tokio::test]
async fn concurrent_streams_per_address_are_limited_and_free_again_when_a_reply_ends() {
    let server = start(&[("GLASSBOX_LIMIT_STREAMS_PER_ADDRESS", "1")]).await;
    // The first reply waits after its first word until the second message was refused.
    let gate = Gate::new();
    server.fake.set(Behaviour::hold(&["w0 ", "w1"], 1, &gate));
    let (a, a_token, _) = server.new_session().await;
    let (b, b_token, _) = server.new_session().await;
    let first = {
        let (http, url) = (server.http.clone(), server.url("/api/chat"));
        let body = json!({"sessionId": a, "message": "long one"});
        tokio::spawn(async move {
            http.post(url)
                .bearer_auth(a_token)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    gate.reached(1).await;
    let refused = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(&b_token)
        .json(&json!({"sessionId": b, "message": "meanwhile"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    retry_after(&refused);
    assert!(!first.is_finished(), "the first reply was still streaming");
    gate.release();
    assert_eq!(first.await.unwrap(), 200);
    // The first reply is over: its slot is free.
    server.chat(&b, &b_token, "now").await;
}

#[tokio::test]
async fn forwarded_addresses_count_only_from_trusted_proxies() {
    let post = |server: &TestServer, client: &'static str| {
        server
            .http
            .post(server.url("/api/sessions"))
            .header("x-forwarded-for", client)
            .json(&json!({}))
            .send()
    };
    // Behind a trusted proxy (the loopback peer), each forwarded client has its own allowance.
    let server = start(&[
        ("GLASSBOX_LIMIT_SESSIONS_PER_HOUR", "1"),
        ("GLASSBOX_TRUSTED_PROXIES", "127.0.0.1/32"),
    ])
    .await;
    assert_eq!(post(&server, "198.51.100.1").await.unwrap().status(), 200);
    assert_eq!(post(&server, "198.51.100.1").await.unwrap().status(), 429);
    assert_eq!(post(&server, "198.51.100.2").await.unwrap().status(), 200);
    // Without it, the header is the client's own claim and changes nothing.
    let server = start(&[("GLASSBOX_LIMIT_SESSIONS_PER_HOUR", "1")]).await;
    assert_eq!(post(&server, "198.51.100.1").await.unwrap().status(), 200);
    assert_eq!(post(&server, "198.51.100.2").await.unwrap().status(), 429);
}

#[tokio::test]
async fn joining_a_session_too_often_is_refused_and_the_connection_closed() {
    let server = start(&[("GLASSBOX_LIMIT_JOINS_PER_MINUTE", "2")]).await;
    let (id, token, _) = server.new_session().await;
    for _ in 0..2 {
        let mut tab = server.ws().await;
        tab.hello_existing(&id, &token).await;
    }
    // A reconnect loop: the third join in a minute is refused, and the connection closes, so the
    // client backs off.
    let mut looping = server.ws().await;
    looping
        .send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
        .await;
    let (frame, raw) = looping.next().await;
    assert!(matches!(frame.event, ServerEvent::Error(_)), "{raw}");
    assert_eq!(raw["data"]["code"], "rate_limited", "{raw}");
    let ms = raw["data"]["retryAfterMs"].as_u64().unwrap();
    assert!(ms > 0 && ms <= 30_000, "{ms}");
    assert!(
        looping.closed_within(Duration::from_secs(2)).await,
        "the connection stays open"
    );
    // Wrong tokens are told unauthorized (nothing more) and do not spend a session's joins:
    // after three of them, another session is still joined twice.
    let (other, other_token, _) = server.new_session().await;
    for _ in 0..3 {
        let mut stranger = server.ws().await;
        stranger
            .send(json!({"type": "hello", "data": {"sessionId": other, "token": "not-the-token"}}))
            .await;
        let (_, raw) = stranger.next().await;
        assert_eq!(raw["data"]["code"], "unauthorized", "{raw}");
    }
    for _ in 0..2 {
        server.ws().await.hello_existing(&other, &other_token).await;
    }
    // And a new session as usual.
    server.ws().await.hello_new().await;
}

#[tokio::test]
async fn uploads_at_once_per_address_are_limited_and_free_again_when_one_ends() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = start(&[("GLASSBOX_LIMIT_UPLOADS_PER_ADDRESS", "1")]).await;
    let (a, a_token, _) = server.new_session().await;
    let (b, b_token, _) = server.new_session().await;
    // A slow client: the upload's headers and half its body sent, the rest held back.
    let text = "a line of notes\n".repeat(64);
    let (head, tail) = text.split_at(text.len() / 2);
    let open_slow = || async {
        let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        slow.write_all(
            format!(
                "POST /api/sessions/{a}/files?name=notes.txt HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {a_token}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                server.addr,
                text.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        slow
    };
    let mut slow = open_slow().await;
    let upload = |session: String, token: String| {
        server
            .http
            .post(server.url(&format!("/api/sessions/{session}/files")))
            .query(&[("name", "other.txt")])
            .bearer_auth(token)
            .header("content-type", "text/plain")
            .body("other notes")
            .send()
    };
    // The slow upload holds the address's one place (another session changes nothing).
    let mut refused = None;
    for _ in 0..100 {
        let resp = upload(b.clone(), b_token.clone()).await.unwrap();
        if resp.status() == 429 {
            refused = Some(resp);
            break;
        }
        // Not yet read by the server: this one went through; try until the slow one is held.
        assert_eq!(resp.status(), 201);
        // This one may have held the place when the slow one's head arrived: then the slow one
        // was answered (refused) at once, and a new slow one takes its turn.
        let mut peek = [0u8; 1];
        match slow.try_read(&mut peek) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => slow = open_slow().await,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = refused.expect("an upload is refused while the slow one is read");
    retry_after(&refused);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many uploads at once from this address"),
        "{body}"
    );
    // The slow upload ends and is stored: the place is free again.
    slow.write_all(tail.as_bytes()).await.unwrap();
    let mut answer = String::new();
    slow.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(upload(b, b_token).await.unwrap().status(), 201);
}
