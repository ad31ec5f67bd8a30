//! Stopping a reply, over the real server and the fake provider in both formats: the provider's
//! stream is cut at once (the fake counts what it handed over after the stop: at most one piece),
//! the partial reply is kept `stopped` with its receipt and the tokens spent, every tab hears it,
//! Retry regenerates it, a stop of an ended reply changes nothing, and a reply stopped while it
//! waits its turn never calls the provider.

mod support;

use std::time::Duration;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer, Ws};

/// A reply of `n` one-word chunks, 10 ms apart (the fake sends 100 chunks a second).
fn slow_reply(n: usize) -> Behaviour {
    Behaviour::Reply {
        chunks: (0..n).map(|i| format!("w{i} ")).collect(),
        delay: Duration::from_millis(10),
    }
}

/// Reads frames until `count` deltas of reply arrived; returns the reply's id.
async fn until_deltas(ws: &mut Ws, count: usize) -> String {
    let mut seen = 0;
    loop {
        let (f, _) = ws.next().await;
        if let ServerEvent::Delta(d) = f.event {
            seen += 1;
            if seen >= count {
                return d.message_id;
            }
        }
    }
}

/// `POST …/messages/{id}/stop` of `session` with `token`.
async fn post_stop(server: &TestServer, session: &str, id: &str, token: &str) -> reqwest::Response {
    let url = server.url(&format!("/api/sessions/{session}/messages/{id}/stop"));
    server
        .http
        .post(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// Reads frames until the reply ends; returns the raw end frame.
async fn until_end(ws: &mut Ws) -> Value {
    loop {
        let (f, raw) = ws.next().await;
        match f.event {
            ServerEvent::Done(_) => return raw,
            ServerEvent::Error(e) if e.message_id.is_some() => return raw,
            _ => {}
        }
    }
}

async fn stops_at_once_and_keeps_the_partial_reply(api: Api) {
    let server = TestServer::start(api, slow_reply(400)).await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    let mut other = server.ws().await;
    other.hello_existing(&session, &token).await;

    ws.send(json!({"type": "chat", "data": {"message": "count for me"}}))
        .await;
    let reply = until_deltas(&mut ws, 5).await;
    let before = server.fake.texts_taken();
    ws.send(json!({"type": "stop", "data": {"messageId": reply}}))
        .await;
    let end = until_end(&mut ws).await;
    assert_eq!(end["type"], "done", "a stop is no failure: {end}");
    let message = &end["data"]["message"];
    assert_eq!(message["status"], "stopped", "{end}");
    assert!(message.get("error").is_none(), "{end}");
    let kept = message["content"].as_str().unwrap().to_owned();
    assert!(kept.starts_with("w0 w1 w2 w3 w4 "), "{kept}");
    // The receipt of what the model was given, and what was spent by our count (the provider
    // reports usage only at the end).
    assert!(
        message["receipt"]["parts"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "{end}"
    );
    assert_eq!(message["usage"]["counted"], true, "{end}");
    assert!(
        message["usage"]["inputTokens"].as_u64().unwrap() > 0,
        "{end}"
    );
    assert!(
        message["usage"]["outputTokens"].as_u64().unwrap() >= 5,
        "{end}"
    );

    // The provider's stream is closed: in the time 30 more chunks would take, it handed over
    // at most one after the stop (the one already on its way).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = server.fake.texts_taken() - before;
    assert!(
        after <= 1,
        "the fake handed over {after} chunks after the stop"
    );
    assert_eq!(
        server.fake.open_streams(),
        0,
        "the provider's stream is still open"
    );

    // The other tab hears the same end.
    let theirs = until_end(&mut other).await;
    assert_eq!(theirs["data"]["message"]["status"], "stopped", "{theirs}");
    assert_eq!(theirs["data"]["message"]["content"], kept);

    // Stored as it was told; what had streamed reaches the model with the next message.
    let stored = server.messages(&session, &token).await;
    assert_eq!(stored[1]["status"], "stopped");
    assert_eq!(stored[1]["content"], kept);

    // A stop of an ended reply changes nothing and says so.
    let resp = post_stop(&server, &session, &reply, &token).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, json!({"messageId": reply, "stopped": false}));

    // Retry regenerates it in place.
    server.fake.set(Behaviour::reply(&["Whole ", "answer."]));
    ws.send(json!({"type": "retry", "data": {"messageId": reply}}))
        .await;
    let frames = ws.until_reply_ends().await;
    assert!(matches!(&frames[0].event, ServerEvent::ReplyStart(r) if r.message_id == reply));
    let stored = server.messages(&session, &token).await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(stored[1]["status"], "complete");
    assert_eq!(stored[1]["content"], "Whole answer.");

    // The next message carries the stopped reply's text no more (it was regenerated), and the
    // model saw the complete one.
    ws.send(json!({"type": "chat", "data": {"message": "thanks"}}))
        .await;
    ws.until_reply_ends().await;
    let last = server.fake.requests().last().unwrap().body.to_string();
    assert!(last.contains("Whole answer."), "{last}");
}

#[tokio::test]
async fn a_stop_cuts_the_openai_stream_at_once_and_keeps_the_partial_reply() {
    stops_at_once_and_keeps_the_partial_reply(Api::OpenAi).await;
}

#[tokio::test]
async fn a_stop_cuts_the_anthropic_stream_at_once_and_keeps_the_partial_reply() {
    stops_at_once_and_keeps_the_partial_reply(Api::Anthropic).await;
}

/// Over REST: the stop answers `stopped: true`; the text kept reaches the model next time; an
/// unknown reply is `not_found`; another session's token reaches nothing.
#[tokio::test]
async fn rest_stops_a_reply_and_the_stopped_text_reaches_the_model() {
    let server = TestServer::start(Api::OpenAi, slow_reply(400)).await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "count for me"}}))
        .await;
    let reply = until_deltas(&mut ws, 3).await;

    let (_, other_token, _) = server.new_session().await;
    let resp = post_stop(&server, &session, &reply, &other_token).await;
    assert!(
        resp.status() == 401 || resp.status() == 403 || resp.status() == 404,
        "another session's token: {}",
        resp.status()
    );

    let resp = post_stop(&server, &session, &reply, &token).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, json!({"messageId": reply, "stopped": true}));
    let end = until_end(&mut ws).await;
    assert_eq!(end["data"]["message"]["status"], "stopped", "{end}");
    let kept = end["data"]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();

    let resp = post_stop(&server, &session, "msg_nope", &token).await;
    assert_eq!(resp.status(), 404);

    server.fake.set(Behaviour::reply(&["Fine."]));
    ws.send(json!({"type": "chat", "data": {"message": "go on"}}))
        .await;
    ws.until_reply_ends().await;
    let last = server.fake.requests().last().unwrap().body.to_string();
    assert!(
        last.contains(kept.trim()),
        "the stopped text reaches the model: {last}"
    );
}

/// A reply stopped while it waits behind the one streaming never reaches the provider; the one
/// streaming goes on to its end.
#[tokio::test]
async fn a_queued_reply_stopped_never_calls_the_provider() {
    let server = TestServer::start(Api::OpenAi, slow_reply(30)).await;
    let mut ws = server.ws().await;
    ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "first"}}))
        .await;
    let first = until_deltas(&mut ws, 1).await;
    ws.send(json!({"type": "chat", "data": {"message": "second"}}))
        .await;
    let second = loop {
        let (f, _) = ws.next().await;
        if let ServerEvent::ReplyStart(r) = f.event
            && r.message_id != first
        {
            break r.message_id;
        }
    };
    ws.send(json!({"type": "stop", "data": {"messageId": second}}))
        .await;
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let (f, _) = ws.next().await;
        if let ServerEvent::Done(d) = f.event {
            ended.push((d.message.id.clone(), d.message.status));
        }
    }
    use glassbox_core::vocab::MessageStatus;
    assert!(
        ended.contains(&(second.clone(), MessageStatus::Stopped)),
        "{ended:?}"
    );
    assert!(
        ended.contains(&(first.clone(), MessageStatus::Complete)),
        "{ended:?}"
    );
    assert_eq!(
        server.fake.requests().len(),
        1,
        "only the first reply called the provider"
    );
}
