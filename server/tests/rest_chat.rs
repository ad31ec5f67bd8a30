//! REST chat (JSON and SSE), session access, health and static assets.

mod support;

use glassbox_core::vocab::{MessageStatus, Role};
use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

#[tokio::test]
async fn json_chat_creates_a_session_and_returns_the_finished_reply() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["Hi ", "there."])).await;
    let resp = server
        .post(
            "/api/chat",
            &json!({"message": "Change the theme", "context": {"page": "settings"}}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["message"]["content"], "Change the theme");
    assert_eq!(body["reply"]["content"], "Hi there.");
    assert_eq!(body["reply"]["status"], "complete");
    let session = body["session"]["sessionId"].as_str().unwrap();
    let token = body["session"]["token"].as_str().unwrap();
    let system = server.fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains(r#"{"page":"settings"}"#), "{system}");

    // The session continues with its token; the model sees the earlier turn.
    let resp = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(token)
        .json(&json!({"sessionId": session, "message": "again"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let second = &server.fake.requests()[1].body;
    assert_eq!(second["messages"].as_array().unwrap().len(), 3);
    assert_eq!(server.messages(session, token).await.len(), 4);
}

#[tokio::test]
async fn sse_chat_streams_frames_as_events() {
    let server = TestServer::start(Api::Anthropic, Behaviour::reply(&["A", "B", "C"])).await;
    let text = server
        .http
        .post(server.url("/api/chat"))
        .header("accept", "text/event-stream")
        .json(&json!({"message": "stream please", "context": {"entity": "x"}}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    // Instances sharing PostgreSQL write pieces arriving together as one frame
    // (docs/instances.md); one process sends each as it comes.
    if support::on_postgres() {
        events.dedup_by(|a, b| a == b && *a == "delta");
        assert_eq!(
            events,
            ["session", "accepted", "reply_start", "delta", "done"],
            "{text}"
        );
    } else {
        assert_eq!(
            events,
            [
                "session",
                "accepted",
                "reply_start",
                "delta",
                "delta",
                "delta",
                "done"
            ],
            "{text}"
        );
    }
    let datas: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(datas[1]["data"]["message"]["content"], "stream please");
    let done = datas.last().expect("frames");
    assert_eq!(done["type"], "done");
    assert_eq!(done["data"]["message"]["content"], "ABC");
    let streamed: String = datas
        .iter()
        .filter(|d| d["type"] == "delta")
        .filter_map(|d| d["data"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "ABC");
}

#[tokio::test]
async fn bounds_are_enforced_with_typed_errors_and_nothing_is_stored() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["x"])).await;
    let created = server.post_json("/api/sessions", &json!({})).await;
    let session = created["sessionId"].as_str().unwrap();
    let token = created["token"].as_str().unwrap();
    let many: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("k{i}"), json!(i))).collect();
    let cases = [
        (
            json!({"sessionId": session, "message": "hi", "context": {"blob": "z".repeat(9000)}}),
            413,
            "context_too_large",
        ),
        (
            json!({"sessionId": session, "message": "hi", "context": many}),
            422,
            "context_invalid",
        ),
        (
            json!({"sessionId": session, "message": ""}),
            400,
            "invalid_message",
        ),
        (
            json!({"sessionId": session, "message": "x".repeat(70_000)}),
            413,
            "frame_too_large",
        ),
    ];
    for (body, status, code) in cases {
        let resp = server
            .http
            .post(server.url("/api/chat"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), status);
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"]["code"], code);
    }
    let resp = server
        .http
        .post(server.url("/api/chat"))
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "malformed_json"
    );
    assert!(server.messages(session, token).await.is_empty());
    assert!(
        server.fake.requests().is_empty(),
        "the provider was never called"
    );
}

#[tokio::test]
async fn a_refused_first_message_leaves_no_session() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["x"])).await;
    let stored = || async {
        server
            .state
            .store
            .idle_sessions(i64::MAX, &[], 100)
            .await
            .unwrap()
    };
    let resp = server.post("/api/chat", &json!({"message": ""})).await;
    assert_eq!(resp.status(), 400);
    assert!(stored().await.is_empty(), "{:?}", stored().await);
    // An accepted one is stored with its session, in one transaction.
    let body: Value = server
        .post("/api/chat", &json!({"message": "hello"}))
        .await
        .json()
        .await
        .unwrap();
    let id = body["session"]["sessionId"].as_str().unwrap();
    assert_eq!(stored().await, vec![id.to_owned()]);
    let token = body["session"]["token"].as_str().unwrap();
    assert_eq!(server.messages(id, token).await.len(), 2);
}

#[tokio::test]
async fn a_session_is_reachable_only_with_its_token() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["x"])).await;
    let created = server.post_json("/api/sessions", &json!({})).await;
    let session = created["sessionId"].as_str().unwrap();
    let url = server.url(&format!("/api/sessions/{session}"));
    assert_eq!(server.http.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        server
            .http
            .get(&url)
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let other = server.url("/api/sessions/0123456789abcdef0123456789abcdef");
    assert_eq!(
        server
            .http
            .get(&other)
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let post = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth("wrong")
        .json(&json!({"sessionId": session, "message": "sneak"}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 401);
    let ok = server
        .http
        .get(&url)
        .bearer_auth(created["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn a_failed_reply_is_reported_in_the_json_answer() {
    let server = TestServer::start(
        Api::OpenAi,
        Behaviour::Cut {
            chunks: vec!["half".into(), "rest".into()],
            after: 1,
        },
    )
    .await;
    let body: Value = server
        .post_json("/api/chat", &json!({"message": "hi"}))
        .await;
    assert_eq!(body["reply"]["status"], "failed");
    assert_eq!(body["reply"]["content"], "half");
    assert_eq!(body["reply"]["error"]["retryable"], true);
}

#[tokio::test]
async fn healthz_reports_provider_and_model() {
    let server = TestServer::start(Api::Anthropic, Behaviour::reply(&["x"])).await;
    let body: Value = server.get_json("/healthz").await;
    assert_eq!(body["status"], "ok");
    assert_eq!(body["provider"], "anthropic");
    let database = if support::on_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(body["database"], database);
}

#[tokio::test]
async fn offline_provider_needs_no_key_and_states_what_it_received() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["unused"]),
        &[
            ("GLASSBOX_PROVIDER", "offline"),
            ("GLASSBOX_OFFLINE_DELAY_MS", "0"),
        ],
    )
    .await;
    let body: Value = server
        .post_json(
            "/api/chat",
            &json!({"message": "hello", "context": {"page": "home", "user": "ann"}}),
        )
        .await;
    let reply = body["reply"]["content"].as_str().unwrap();
    assert!(
        reply.contains("I received 1 message (1 from you)"),
        "{reply}"
    );
    assert!(reply.contains("`page`, `user`"), "{reply}");
    assert!(server.fake.requests().is_empty());
}

#[tokio::test]
async fn widget_assets_have_mime_types_cache_headers_and_precompressed_bodies() {
    let widget = tempfile::tempdir().unwrap();
    std::fs::write(widget.path().join("w.wasm"), b"\0asm\x01\0\0\0plain").unwrap();
    std::fs::write(widget.path().join("w.wasm.br"), b"brotli-bytes").unwrap();
    std::fs::write(widget.path().join("w.js"), b"export {};").unwrap();
    let chunks = widget.path().join("w_lazy-0123abcd");
    std::fs::create_dir(&chunks).unwrap();
    std::fs::write(chunks.join("load.js"), b"export {};").unwrap();
    let public = concat!(env!("CARGO_MANIFEST_DIR"), "/../public");
    let dir = widget.path().display().to_string();
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["x"]),
        &[
            ("GLASSBOX_WIDGET_DIR", &dir),
            ("GLASSBOX_PUBLIC_DIR", public),
        ],
    )
    .await;

    let br = server
        .http
        .get(server.url("/widget/w.wasm"))
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    assert_eq!(br.status(), 200);
    assert_eq!(br.headers()["content-type"], "application/wasm");
    assert_eq!(br.headers()["content-encoding"], "br");
    assert_eq!(br.headers()["cache-control"], "no-cache");
    let last_modified = br.headers()["last-modified"].clone();
    assert_eq!(br.bytes().await.unwrap().as_ref(), b"brotli-bytes");

    let again = server
        .http
        .get(server.url("/widget/w.wasm"))
        .header("if-modified-since", last_modified)
        .send()
        .await
        .unwrap();
    assert_eq!(
        again.status(),
        304,
        "an unchanged widget costs a revalidation only"
    );

    // A build's chunks never change under their folder's name: cached for a year.
    let chunk = server
        .http
        .get(server.url("/widget/w_lazy-0123abcd/load.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(chunk.status(), 200);
    assert_eq!(
        chunk.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let missing = server
        .http
        .get(server.url("/widget/w_lazy-0123abcd/chunk_9.wasm"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_ne!(
        missing.headers().get("cache-control").map(|v| v.as_bytes()),
        Some(&b"public, max-age=31536000, immutable"[..]),
        "a missing chunk is not cached"
    );

    let js = server
        .http
        .get(server.url("/widget/w.js"))
        .send()
        .await
        .unwrap();
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert_eq!(
        js.headers()["access-control-allow-origin"],
        "*",
        "embeddable from any origin"
    );

    let page = server.http.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<glassbox-chat"));
    assert_eq!(
        server
            .http
            .get(server.url("/widget/missing.js"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

/// NUL (U+0000) is text no database keeps alike (PostgreSQL refuses it): a message holding one is
/// refused, typed; one in a provider's reply is left out, and the reply is stored.
#[tokio::test]
async fn a_nul_character_is_refused_in_a_message_and_left_out_of_a_reply() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["Fine\u{0} ", "now."])).await;
    let refused = server
        .post("/api/chat", &json!({"message": "bad\u{0}input"}))
        .await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_message", "{body}");
    let answer = server
        .post_json("/api/chat", &json!({"message": "hello"}))
        .await;
    assert_eq!(answer["reply"]["content"], "Fine now.", "{answer}");
    assert_eq!(answer["reply"]["status"], "complete");
}

/// A client that hangs up while its message is being stored (the request's future dropped) still
/// has the reply run and end: never a message stored with its reply left `streaming`, which
/// nothing would end before the next start and which cannot be retried.
#[tokio::test]
async fn a_message_whose_client_hangs_up_while_it_is_stored_still_gets_its_reply() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["Hi ", "there."])).await;
    let state = &server.state;
    let session = state
        .sessions
        .open_for_message(glassbox_server::sessions::Ask::default())
        .await
        .unwrap();
    let request: glassbox_core::wire::ChatRequest =
        serde_json::from_value(json!({"message": "hello"})).unwrap();
    let mut submit = Box::pin(state.chat.submit(
        &session.hub,
        &session.info.model,
        request,
        None,
        session.unsaved.as_ref(),
    ));
    // Polled until it waits for the task that stores the message (every check before it answers
    // at once here: limits and budgets are off), then dropped: the client went away.
    assert!(futures::poll!(submit.as_mut()).is_pending());
    drop(submit);
    let id = &session.info.session_id;
    let mut roles = Vec::new();
    for _ in 0..100 {
        let messages = state.store.messages(id).await.unwrap();
        roles = messages
            .iter()
            .map(|m| (m.role, m.status, m.content.clone()))
            .collect();
        if messages.len() == 2 && messages[1].status != MessageStatus::Streaming {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        roles,
        [
            (Role::User, MessageStatus::Complete, "hello".to_owned()),
            (
                Role::Assistant,
                MessageStatus::Complete,
                "Hi there.".to_owned()
            ),
        ]
    );
}
