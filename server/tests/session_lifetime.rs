//! Session lifetime: `DELETE /api/sessions/{id}` and the `delete_session` frame delete a session
//! now, with its messages, summaries and cached embeddings, and tell its open tabs; sessions idle
//! longer than `GLASSBOX_SESSION_TTL` are purged the same way.

mod support;

use std::time::Duration;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use serde_json::json;
use support::{Api, TestServer};

async fn start(extra: &[(&str, &str)]) -> TestServer {
    TestServer::start_with(Api::OpenAi, Behaviour::reply(&["Noted."]), extra).await
}

/// A session with one exchange, a summary and a cached embedding of its first message.
async fn filled_session(server: &TestServer) -> (String, String, String) {
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "remember this").await;
    let first = body["message"]["id"].as_str().unwrap().to_owned();
    let store = &server.state.store;
    store
        .put_summary(&id, (&first, &first, "h"), "a summary", 1)
        .await
        .unwrap();
    store
        .put_embeddings("m", &[(format!("{first}:hash"), vec![1.0, 0.0])])
        .await
        .unwrap();
    (id, token, first)
}

async fn cached(server: &TestServer, key: &str) -> bool {
    let found = server
        .state
        .store
        .cached_embeddings("m", &[key.to_owned()])
        .await
        .unwrap();
    !found.is_empty()
}

#[tokio::test]
async fn delete_removes_everything_and_tells_the_open_tabs() {
    let server = start(&[]).await;
    let (id, token, first) = filled_session(&server).await;
    let mut tab = server.ws().await;
    tab.hello_existing(&id, &token).await;

    let url = server.url(&format!("/api/sessions/{id}"));
    let wrong = server.delete_session(&id, "nope").await;
    assert_eq!(wrong.status(), 401);
    let resp = server.delete_session(&id, &token).await;
    assert_eq!(resp.status(), 204);

    let (frame, raw) = tab.next().await;
    let ServerEvent::Error(e) = frame.event else {
        panic!("expected the deletion notice, got {raw}")
    };
    assert_eq!(raw["data"]["code"], "unauthorized");
    assert_eq!(e.message, "this session was deleted");
    let gone = server
        .http
        .get(&url)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 401);
    assert!(server.state.store.messages(&id).await.unwrap().is_empty());
    assert_eq!(
        server
            .state
            .store
            .summary(&id, &first, &first, "h")
            .await
            .unwrap(),
        None
    );
    assert!(!cached(&server, &format!("{first}:hash")).await);
    // Deleting again: the session is unknown.
    let again = server.delete_session(&id, &token).await;
    assert_eq!(again.status(), 401);
}

#[tokio::test]
async fn the_delete_session_frame_deletes_the_connections_session() {
    let server = start(&[]).await;
    let mut ws = server.ws().await;
    let (id, token) = ws.hello_new().await;
    ws.send(json!({"type": "delete_session", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "error");
    assert_eq!(raw["data"]["code"], "unauthorized");
    let gone = server
        .http
        .get(server.url(&format!("/api/sessions/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 401);
}

#[tokio::test]
async fn idle_sessions_are_purged_after_the_ttl_and_used_ones_stay() {
    let server = start(&[("GLASSBOX_SESSION_TTL", "1s")]).await;
    let (idle, idle_token, first) = filled_session(&server).await;
    // An embedding that belongs to no message (an agent item's chunk) is not touched.
    server
        .state
        .store
        .put_embeddings("m", &[("chunkhash".to_owned(), vec![0.5])])
        .await
        .unwrap();
    // As old, but a tab is connected: in use, so kept whatever its timestamp.
    let (open, open_token, _) = server.new_session().await;
    let mut tab = server.ws().await;
    tab.hello_existing(&open, &open_token).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (fresh, fresh_token, _) = filled_session(&server).await;

    assert_eq!(server.state.sessions.purge_idle().await.unwrap(), 1);
    let status = |id: &str, token: &str| {
        server
            .http
            .get(server.url(&format!("/api/sessions/{id}")))
            .bearer_auth(token.to_owned())
            .send()
    };
    assert_eq!(status(&idle, &idle_token).await.unwrap().status(), 401);
    assert_eq!(status(&fresh, &fresh_token).await.unwrap().status(), 200);
    assert_eq!(status(&open, &open_token).await.unwrap().status(), 200);
    assert!(!cached(&server, &format!("{first}:hash")).await);
    assert!(cached(&server, "chunkhash").await);
    // Still connected: still kept.
    assert_eq!(server.state.sessions.purge_idle().await.unwrap(), 0);
    drop(tab);
}

#[tokio::test]
async fn many_idle_sessions_are_purged_in_batches() {
    // A TTL the startup purge cannot race: the sessions are younger than it until the sleep.
    let server = start(&[("GLASSBOX_SESSION_TTL", "1s")]).await;
    for _ in 0..450 {
        server.new_session().await;
    }
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(server.state.sessions.purge_idle().await.unwrap(), 450);
}

/// The tokens every session spent today (and yesterday, should the test cross midnight).
async fn server_days(server: &TestServer, session_id: &str) -> u64 {
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        / 86_400_000;
    let mut total = 0;
    for day in [today - 1, today] {
        total += server
            .state
            .store
            .tokens_spent(session_id, day)
            .await
            .unwrap()
            .server_day;
    }
    total
}

#[tokio::test]
async fn a_reply_whose_session_is_deleted_while_it_streams_counts_its_tokens_once() {
    let gate = glassbox_fake_provider::Gate::new();
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::hold(&["Half ", "and the rest."], 1, &gate),
        &[],
    )
    .await;
    let (gone, gone_token, _) = server.new_session().await;
    let request = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(&gone_token)
        .json(&json!({"sessionId": gone, "message": "count me once"}))
        .send();
    let streaming = tokio::spawn(request);
    gate.reached(1).await;
    let deleted = server.delete_session(&gone, &gone_token).await;
    assert_eq!(deleted.status(), 204);
    gate.release();
    // The answer ends, with the message stored and no reply.
    let answered = tokio::time::timeout(Duration::from_secs(30), async {
        let answer = streaming.await.unwrap().unwrap();
        answer.json::<serde_json::Value>().await.unwrap()
    })
    .await
    .expect("the answer ends once the turn has");
    assert!(answered["reply"].is_null(), "{answered}");
    assert!(server.state.store.messages(&gone).await.unwrap().is_empty());

    // The same turn again, in a session that stays: what one such turn spends.
    let (kept, kept_token, _) = server.new_session().await;
    server.chat(&kept, &kept_token, "count me once").await;
    let one_turn = server
        .state
        .store
        .tokens_spent(&kept, 0)
        .await
        .unwrap()
        .session;
    assert!(one_turn > 0);
    assert_eq!(
        server_days(&server, &kept).await,
        2 * one_turn,
        "the deleted session's turn counts once for the server's day, as the kept one's"
    );
}
