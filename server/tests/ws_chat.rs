//! WebSocket chat against a real server and the fake provider, in both provider wire formats.

mod support;

use std::time::Duration;

use glassbox_core::ErrorCode;
use glassbox_core::prompt::{CONTEXT_CLOSE, CONTEXT_OPEN};
use glassbox_core::vocab::MessageStatus;
use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::{Behaviour, Gate};
use serde_json::{Value, json};
use support::{Api, TestServer, assert_increasing, chunks, delta_text};

async fn context_reaches_provider_but_never_message_content(api: Api) {
    let server = TestServer::start(api, Behaviour::reply(&["Hello", " from", " the model."])).await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    let context = json!({"page": "pack-detail", "entity": "Illustrious-XL", "entityType": "pack"});
    ws.send(json!({"type": "chat", "data": {"message": "What does this model do?", "context": context, "clientMessageId": "c-1"}}))
        .await;
    let frames = ws.until_reply_ends().await;
    assert_increasing(&frames);
    let ServerEvent::Accepted(accepted) = &frames[0].event else {
        panic!("first frame {:?}", frames[0])
    };
    assert_eq!(accepted.message.content, "What does this model do?");
    assert!(matches!(frames[1].event, ServerEvent::ReplyStart(_)));
    assert_eq!(delta_text(&frames), "Hello from the model.");
    let ServerEvent::Done(done) = &frames.last().unwrap().event else {
        panic!("last frame")
    };
    assert_eq!(done.message.content, "Hello from the model.");
    assert_eq!(done.message.status, MessageStatus::Complete);
    assert!(done.message.usage.is_some(), "usage reported");

    // The provider got the context as a delimited JSON segment, and the user text alone.
    let requests = server.fake.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    let system = match api {
        Api::OpenAi => body["messages"][0]["content"].as_str().unwrap().to_owned(),
        Api::Anthropic => body["system"].as_str().unwrap().to_owned(),
    };
    let inner = system
        .split(CONTEXT_OPEN)
        .nth(1)
        .unwrap()
        .split(CONTEXT_CLOSE)
        .next()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(inner.trim()).unwrap(),
        context
    );
    let user_turn = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(user_turn["content"], "What does this model do?");
    // The API key went to the provider from the server.
    assert!(requests[0].key.as_deref().unwrap().contains("sk-test-"));

    // Stored messages: content is the user's text only; context kept separately for display hints
    // (docs/context-planning.md, Page context).
    let stored = server.messages(&session, &token).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0]["content"], "What does this model do?");
    assert_eq!(stored[0]["context"], context);
    assert_eq!(stored[1]["content"], "Hello from the model.");
    for m in &stored {
        assert!(
            !m["content"].as_str().unwrap().contains("Illustrious"),
            "context leaked into {m}"
        );
    }
}

#[tokio::test]
async fn openai_context_reaches_provider_but_never_message_content() {
    context_reaches_provider_but_never_message_content(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_context_reaches_provider_but_never_message_content() {
    context_reaches_provider_but_never_message_content(Api::Anthropic).await;
}

#[tokio::test]
async fn without_context_the_provider_gets_no_context_segment() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["ok"])).await;
    let mut ws = server.ws().await;
    ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "plain"}}))
        .await;
    ws.until_reply_ends().await;
    let body = &server.fake.requests()[0].body;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "plain"}])
    );
}

#[tokio::test]
async fn resending_a_client_message_id_never_creates_a_second_message() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["once"])).await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    let frame = json!({"type": "chat", "data": {"message": "hi", "clientMessageId": "same-id"}});
    ws.send(frame.clone()).await;
    ws.until_reply_ends().await;
    ws.send(frame).await;
    let (f, _) = ws.next().await;
    let ServerEvent::Accepted(a) = f.event else {
        panic!("expected accepted, got {f:?}")
    };
    assert!(a.duplicate);
    assert_eq!(server.messages(&session, &token).await.len(), 2);
    assert_eq!(server.fake.requests().len(), 1);
}

#[tokio::test]
async fn bad_frames_get_typed_errors_and_the_socket_stays_open() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["fine"])).await;
    let mut ws = server.ws().await;

    ws.send(json!({"type": "chat", "data": {"message": "too early"}}))
        .await;
    let (f, raw) = ws.next().await;
    assert!(
        matches!(f.event, ServerEvent::Error(ref e) if e.code == ErrorCode::HelloRequired),
        "{raw}"
    );

    let (session, token) = ws.hello_new().await;
    let big_context = json!({"blob": "x".repeat(9 * 1024)});
    let mut deep = json!("leaf");
    for _ in 0..9 {
        deep = json!({ "n": deep });
    }
    let many: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("k{i}"), json!(i))).collect();
    let cases: Vec<(String, ErrorCode)> = vec![
        ("{not json".into(), ErrorCode::MalformedJson),
        (
            json!({"type": "shout", "data": {}}).to_string(),
            ErrorCode::UnknownFrameType,
        ),
        (
            json!({"type": "chat", "data": {"message": 42}}).to_string(),
            ErrorCode::InvalidFrame,
        ),
        (
            json!({"type": "chat", "data": {"message": "y".repeat(70 * 1024)}}).to_string(),
            ErrorCode::FrameTooLarge,
        ),
        (
            json!({"type": "chat", "data": {"message": "hi", "context": big_context}}).to_string(),
            ErrorCode::ContextTooLarge,
        ),
        (
            json!({"type": "chat", "data": {"message": "hi", "context": deep}}).to_string(),
            ErrorCode::ContextInvalid,
        ),
        (
            json!({"type": "chat", "data": {"message": "hi", "context": many}}).to_string(),
            ErrorCode::ContextInvalid,
        ),
        (
            json!({"type": "chat", "data": {"message": "   "}}).to_string(),
            ErrorCode::InvalidMessage,
        ),
    ];
    let mut last_id = 0;
    for (text, code) in cases {
        ws.send_raw(text).await;
        let (f, raw) = ws.next().await;
        match f.event {
            ServerEvent::Error(e) => assert_eq!(e.code, code, "{raw}"),
            other => panic!("expected error {code:?}, got {other:?}"),
        }
        assert!(f.sync_id > last_id);
        last_id = f.sync_id;
    }
    assert!(
        server.messages(&session, &token).await.is_empty(),
        "nothing stored for bad frames"
    );

    // The same socket still works.
    ws.send(json!({"type": "chat", "data": {"message": "now a good one"}}))
        .await;
    let frames = ws.until_reply_ends().await;
    assert_eq!(delta_text(&frames), "fine");
    assert_eq!(server.messages(&session, &token).await.len(), 2);
}

#[tokio::test]
async fn a_wrong_token_cannot_open_a_session() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["x"])).await;
    let mut ws = server.ws().await;
    let (session, _token) = ws.hello_new().await;
    let mut other = server.ws().await;
    other
        .send(json!({"type": "hello", "data": {"sessionId": session, "token": "0".repeat(64)}}))
        .await;
    let (f, _) = other.next().await;
    assert!(matches!(f.event, ServerEvent::Error(ref e) if e.code == ErrorCode::Unauthorized));
}

/// Reads frames until the delta text holds `words` words; returns the frames read.
async fn until_words(ws: &mut support::Ws, words: usize) -> Vec<glassbox_core::wire::ServerFrame> {
    let mut seen = vec![];
    while delta_text(&seen).split_whitespace().count() < words {
        seen.push(ws.next().await.0);
    }
    seen
}

/// Polls the session over REST (10 s at most) until its reply is complete.
async fn until_reply_stored(server: &TestServer, session: &str, token: &str) -> Vec<Value> {
    for _ in 0..200 {
        let stored = server.messages(session, token).await;
        if stored.get(1).is_some_and(|m| m["status"] == "complete") {
            return stored;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the reply was not stored complete: {:?}",
        server.messages(session, token).await
    );
}

fn eight_words() -> Vec<String> {
    chunks(&[
        "one ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight",
    ])
}

/// The reply waits after its second word while the only tab leaves; released, it ends with nobody
/// connected. A reconnect with the last sync id seen gets exactly the frames after it, up to the
/// `done`, and no snapshot.
async fn reconnecting_with_the_last_sync_id_replays_what_was_missed(api: Api) {
    let words = eight_words();
    let gate = Gate::new();
    let server = TestServer::start(
        api,
        Behaviour::Hold {
            chunks: words.clone(),
            delay: Duration::ZERO,
            holds: vec![(2, gate.clone())],
        },
    )
    .await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "count"}}))
        .await;
    let seen = until_words(&mut ws, 2).await;
    assert_eq!(delta_text(&seen), "one two ", "held after two words");
    let last = seen.last().unwrap().sync_id;
    ws.close().await;
    // The rest of the reply is produced while nobody is connected.
    gate.release();
    until_reply_stored(&server, &session, &token).await;

    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"sessionId": session, "token": token, "lastSyncId": last}})).await;
    let mut rest = ws.until_reply_ends().await;
    // The session frame ends the catch-up.
    let (session_frame, _) = ws.next().await;
    assert!(
        matches!(session_frame.event, ServerEvent::Session(ref s) if s.token.is_none()),
        "{session_frame:?}"
    );
    rest.push(session_frame);
    assert!(
        rest.iter().all(|f| f.sync_id > last),
        "only missed frames are replayed"
    );
    assert!(
        !rest
            .iter()
            .any(|f| matches!(f.event, ServerEvent::Snapshot(_)))
    );
    assert_increasing(&rest);
    assert_eq!(
        delta_text(&rest),
        words[2..].concat(),
        "every missed delta, once"
    );
    let ServerEvent::Done(done) = &rest[rest.len() - 2].event else {
        panic!("the replay ends with done: {rest:?}")
    };
    assert_eq!(done.message.content, words.concat());

    // A fresh connection without a sync id gets the history as a snapshot.
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"sessionId": session, "token": token}}))
        .await;
    ws.next().await;
    let (snap, _) = ws.next().await;
    let ServerEvent::Snapshot(s) = snap.event else {
        panic!("expected snapshot")
    };
    assert_eq!(s.messages.len(), 2);
    assert_eq!(s.messages[1].content, words.concat());
}

#[tokio::test]
async fn openai_reconnecting_with_the_last_sync_id_replays_what_was_missed() {
    reconnecting_with_the_last_sync_id_replays_what_was_missed(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_reconnecting_with_the_last_sync_id_replays_what_was_missed() {
    reconnecting_with_the_last_sync_id_replays_what_was_missed(Api::Anthropic).await;
}

/// A reconnect while the reply still streams: the frames produced while away are replayed, and
/// the rest follows live on the same connection. The reply waits after two words while the tab
/// leaves, and after five, once a second tab has seen them (so they were produced while away),
/// while it comes back.
#[tokio::test]
async fn reconnecting_mid_reply_replays_what_was_missed_then_follows_live() {
    let words = eight_words();
    let (away, back) = (Gate::new(), Gate::new());
    let server = TestServer::start(
        Api::OpenAi,
        Behaviour::Hold {
            chunks: words.clone(),
            delay: Duration::ZERO,
            holds: vec![(2, away.clone()), (5, back.clone())],
        },
    )
    .await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    let mut watcher = server.ws().await;
    watcher.hello_existing(&session, &token).await;
    ws.send(json!({"type": "chat", "data": {"message": "count"}}))
        .await;
    let seen = until_words(&mut ws, 2).await;
    let last = seen.last().unwrap().sync_id;
    ws.close().await;
    away.release();
    let watched = until_words(&mut watcher, 5).await;
    assert_eq!(delta_text(&watched), words[..5].concat());

    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"sessionId": session, "token": token, "lastSyncId": last}})).await;
    // Still held after five words: what comes now is the replay, up to the session frame that
    // ends it.
    let mut replayed = vec![];
    loop {
        let (f, _) = ws.next().await;
        let end = matches!(f.event, ServerEvent::Session(_));
        replayed.push(f);
        if end {
            break;
        }
    }
    assert_eq!(
        delta_text(&replayed),
        words[2..5].concat(),
        "the missed deltas"
    );
    back.release();
    let live = ws.until_reply_ends().await;
    assert_eq!(
        delta_text(&live),
        words[5..].concat(),
        "then the rest, live"
    );
    let all: Vec<_> = replayed.into_iter().chain(live).collect();
    assert!(all.iter().all(|f| f.sync_id > last));
    assert_increasing(&all);
    assert!(
        !all.iter()
            .any(|f| matches!(f.event, ServerEvent::Snapshot(_)))
    );
}

async fn failure_mid_stream_keeps_partial_reply_and_retry_completes_it(
    api: Api,
    failing: Behaviour,
    code: ErrorCode,
) {
    let server = TestServer::start(api, failing).await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "tell me"}}))
        .await;
    let frames = ws.until_reply_ends().await;
    let ServerEvent::Error(err) = &frames.last().unwrap().event else {
        panic!("expected error")
    };
    assert_eq!(err.code, code);
    assert!(err.retryable);
    let reply_id = err.message_id.clone().unwrap();
    assert_eq!(delta_text(&frames), "Part one, ");

    let stored = server.messages(&session, &token).await;
    assert_eq!(
        stored.len(),
        2,
        "user message and partial reply are both kept"
    );
    assert_eq!(stored[0]["content"], "tell me");
    assert_eq!(stored[1]["status"], "failed");
    assert_eq!(stored[1]["content"], "Part one, ");
    assert_eq!(
        stored[1]["error"]["code"],
        serde_json::to_value(code).unwrap()
    );

    server.fake.set(Behaviour::reply(&["Whole ", "answer."]));
    ws.send(json!({"type": "retry", "data": {"messageId": reply_id}}))
        .await;
    let frames = ws.until_reply_ends().await;
    assert!(matches!(&frames[0].event, ServerEvent::ReplyStart(r) if r.message_id == reply_id));
    assert_eq!(delta_text(&frames), "Whole answer.");
    let stored = server.messages(&session, &token).await;
    assert_eq!(
        stored.len(),
        2,
        "retry reuses the failed message: no duplicate"
    );
    assert_eq!(stored[1]["status"], "complete");
    assert_eq!(stored[1]["content"], "Whole answer.");
    assert!(stored[1].get("error").is_none());

    // A complete reply cannot be retried.
    ws.send(json!({"type": "retry", "data": {"messageId": reply_id}}))
        .await;
    let (f, _) = ws.next().await;
    assert!(matches!(f.event, ServerEvent::Error(ref e) if e.code == ErrorCode::Conflict));
}

fn partial() -> Vec<String> {
    chunks(&["Part one, ", "part two."])
}

#[tokio::test]
async fn openai_cut_mid_stream() {
    failure_mid_stream_keeps_partial_reply_and_retry_completes_it(
        Api::OpenAi,
        Behaviour::Cut {
            chunks: partial(),
            after: 1,
        },
        ErrorCode::ProviderError,
    )
    .await;
}

#[tokio::test]
async fn anthropic_cut_mid_stream() {
    failure_mid_stream_keeps_partial_reply_and_retry_completes_it(
        Api::Anthropic,
        Behaviour::Cut {
            chunks: partial(),
            after: 1,
        },
        ErrorCode::ProviderError,
    )
    .await;
}

#[tokio::test]
async fn openai_stall_times_out() {
    failure_mid_stream_keeps_partial_reply_and_retry_completes_it(
        Api::OpenAi,
        Behaviour::Stall {
            chunks: partial(),
            after: 1,
        },
        ErrorCode::ProviderTimeout,
    )
    .await;
}

#[tokio::test]
async fn anthropic_error_event_mid_stream() {
    failure_mid_stream_keeps_partial_reply_and_retry_completes_it(
        Api::Anthropic,
        Behaviour::ErrorEvent {
            chunks: partial(),
            after: 1,
            message: "Overloaded".into(),
        },
        ErrorCode::ProviderError,
    )
    .await;
}

#[tokio::test]
async fn provider_http_errors_map_to_typed_codes() {
    for (status, code) in [
        (500, ErrorCode::ProviderUnavailable),
        (429, ErrorCode::RateLimited),
        (401, ErrorCode::ProviderError),
    ] {
        let server = TestServer::start(
            Api::OpenAi,
            Behaviour::Status {
                status,
                message: "nope".into(),
            },
        )
        .await;
        let mut ws = server.ws().await;
        let (session, token) = ws.hello_new().await;
        ws.send(json!({"type": "chat", "data": {"message": "hi"}}))
            .await;
        let frames = ws.until_reply_ends().await;
        let ServerEvent::Error(e) = &frames.last().unwrap().event else {
            panic!()
        };
        assert_eq!(e.code, code, "HTTP {status}");
        assert!(e.message.contains("nope"));
        let stored = server.messages(&session, &token).await;
        assert_eq!(
            stored[0]["content"], "hi",
            "the user message was stored before the provider call"
        );
    }
}

#[tokio::test]
async fn a_reply_nobody_waits_for_is_cancelled_and_kept_as_failed() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::Stall {
            chunks: partial(),
            after: 1,
        },
        &[
            ("GLASSBOX_DISCONNECT_GRACE_MS", "50"),
            ("GLASSBOX_PROVIDER_IDLE_TIMEOUT_MS", "30000"),
        ],
    )
    .await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "hi"}}))
        .await;
    while !matches!(ws.next().await.0.event, ServerEvent::Delta(_)) {}
    ws.close().await;
    if support::on_postgres() {
        // Instances sharing the database never cancel: the client may be reading the reply on
        // another instance (docs/instances.md).
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let stored = server.messages(&session, &token).await;
        assert_eq!(stored[1]["status"], "streaming");
        assert_eq!(server.fake.open_streams(), 1, "the provider call goes on");
        return;
    }
    let mut stored = vec![];
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stored = server.messages(&session, &token).await;
        if stored[1]["status"] == "failed" {
            break;
        }
    }
    assert_eq!(stored[1]["status"], "failed");
    assert_eq!(stored[1]["error"]["code"], "cancelled");
    assert_eq!(stored[1]["content"], "Part one, ");
    // The upstream request was dropped too: the provider's stream is no longer open.
    for _ in 0..100 {
        if server.fake.open_streams() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        server.fake.open_streams(),
        0,
        "the provider call was cancelled"
    );
}

#[tokio::test]
async fn two_connections_of_one_session_both_see_the_reply() {
    let server = TestServer::start(Api::Anthropic, Behaviour::reply(&["shared"])).await;
    let mut a = server.ws().await;
    let (session, token) = a.hello_new().await;
    let mut b = server.ws().await;
    b.send(json!({"type": "hello", "data": {"sessionId": session, "token": token}}))
        .await;
    b.next().await;
    b.next().await; // snapshot
    b.next().await; // context (load)
    a.send(json!({"type": "chat", "data": {"message": "hi"}}))
        .await;
    assert_eq!(delta_text(&a.until_reply_ends().await), "shared");
    assert_eq!(delta_text(&b.until_reply_ends().await), "shared");
}

#[tokio::test]
async fn a_widget_may_pick_only_an_allowed_model() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["ok"]),
        &[
            ("GLASSBOX_MODEL", "gpt-4o-mini"),
            ("GLASSBOX_ALLOWED_MODELS", "gpt-4.1, o3"),
        ],
    )
    .await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"model": "some-expensive-model"}}))
        .await;
    let (f, _) = ws.next().await;
    assert!(
        matches!(f.event, ServerEvent::Error(ref e) if e.code == ErrorCode::ModelNotAllowed),
        "{f:?}"
    );

    ws.send(json!({"type": "hello", "data": {"model": "o3"}}))
        .await;
    let (f, _) = ws.next().await;
    assert!(
        matches!(f.event, ServerEvent::Session(ref s) if s.model == "o3"),
        "{f:?}"
    );
    ws.next().await; // snapshot
    ws.next().await; // context (load)
    ws.send(json!({"type": "chat", "data": {"message": "hi"}}))
        .await;
    ws.until_reply_ends().await;
    assert_eq!(server.fake.requests()[0].body["model"], "o3");
}

#[tokio::test]
async fn each_connection_keeps_the_meter_of_its_own_model_after_a_settings_change() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["ok"]),
        &[
            ("GLASSBOX_MODEL", "gpt-4o-mini"),
            ("GLASSBOX_ALLOWED_MODELS", "gpt-4.1"),
        ],
    )
    .await;
    let mut a = server.ws().await;
    let (session, token) = a.hello_new().await;
    let mut b = server.ws().await;
    b.send(json!({"type": "hello", "data": {"sessionId": session, "token": token, "model": "gpt-4.1"}}))
        .await;
    let (f, _) = b.next().await;
    assert!(
        matches!(f.event, ServerEvent::Session(ref s) if s.model == "gpt-4.1"),
        "{f:?}"
    );
    b.next().await; // snapshot
    b.next().await; // context (load)
    a.send(json!({"type": "settings", "data": {"strategy": "sliding-window"}}))
        .await;
    for (ws, model, limit) in [
        (&mut a, "gpt-4o-mini", 128_000),
        (&mut b, "gpt-4.1", 1_047_576),
    ] {
        // The second tab's topics and filter frames may come before or after it.
        let info = loop {
            let (f, _) = ws.next().await;
            match f.event {
                ServerEvent::Topics(_) | ServerEvent::Filter(_) => continue,
                ServerEvent::ContextInfo(info) => break info,
                other => panic!("expected context, got {other:?}"),
            }
        };
        assert_eq!(info.model, model);
        assert_eq!(info.context_limit, limit);
        assert_eq!(
            info.compression.strategy,
            glassbox_core::context::Strategy::SlidingWindow
        );
    }
}

/// A tab joining while a reply streams gets a snapshot read from a long history; the deltas
/// published while it was read (after the snapshot's point) follow it, none dropped. Before the
/// fix they were taken off the tab's queue with the older ones and lost, and those queued before
/// the session frame reached the tab twice (sent, and in the snapshot).
#[tokio::test]
async fn deltas_streamed_while_a_joining_tab_reads_a_long_history_are_not_lost() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["ok"])).await;
    let mut first = server.ws().await;
    let (id, token) = first.hello_new().await;
    // A long history makes the snapshot's read take a while.
    let long = "x".repeat(1_000);
    for i in 0..2_000 {
        let message_id = format!("imported-{i}");
        let new = glassbox_server::storage::NewUserMessage {
            id: &message_id,
            content: &long,
            client_message_id: None,
            context: None,
            attachments: &[],
            created_at: i,
        };
        server
            .state
            .store
            .insert_user_message(&id, &new)
            .await
            .unwrap();
    }
    let joining = Gate::new();
    let pieces: Vec<String> = (0..3_000).map(|i| format!("w{i} ")).collect();
    server.fake.set(Behaviour::Hold {
        chunks: pieces.clone(),
        delay: Duration::from_micros(200),
        holds: vec![(1, joining.clone())],
    });
    first
        .send(json!({"type": "chat", "data": {"message": "Go on.", "clientMessageId": "c-1"}}))
        .await;
    loop {
        let (_, raw) = first.next().await;
        if raw["type"] == "delta" {
            break;
        }
    }
    let mut second = server.ws().await;
    second
        .send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
        .await;
    joining.release();
    let mut text = String::new();
    loop {
        let (_, raw) = second.next().await;
        match raw["type"].as_str().unwrap_or_default() {
            "snapshot" => {
                let last = raw["data"]["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .cloned();
                if last.as_ref().is_some_and(|m| m["role"] == "assistant") {
                    text.push_str(
                        last.as_ref()
                            .and_then(|m| m["content"].as_str())
                            .unwrap_or_default(),
                    );
                }
            }
            "delta" => text.push_str(raw["data"]["text"].as_str().unwrap_or_default()),
            "done" => break,
            _ => {}
        }
    }
    let whole: String = pieces.concat();
    assert!(
        text == whole,
        "the joining tab lost or doubled part of the reply: {} of {} characters",
        text.len(),
        whole.len()
    );
}

/// A fast provider's 4,000 pieces of 4 characters (16 kB) reach a tab as a few dozen frames: the
/// deltas of one message are coalesced per connection, every character once and in order. Held
/// halfway while the tab leaves, a reconnect with the last sync id it saw (a coalesced frame's)
/// gets exactly the rest.
#[tokio::test]
async fn fast_deltas_are_coalesced_per_connection_and_resume_exactly() {
    let pieces: Vec<String> = (0..4_000).map(|i| format!("{:03} ", i % 1000)).collect();
    let gate = Gate::new();
    let server = TestServer::start(
        Api::OpenAi,
        Behaviour::Hold {
            chunks: pieces.clone(),
            delay: Duration::ZERO,
            holds: vec![(2_000, gate.clone())],
        },
    )
    .await;
    let mut ws = server.ws().await;
    let (session, token) = ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "count"}}))
        .await;
    let half: String = pieces[..2_000].concat();
    let mut seen = vec![];
    while delta_text(&seen).len() < half.len() {
        seen.push(ws.next().await.0);
    }
    assert_eq!(delta_text(&seen), half, "held after 2,000 pieces");
    let deltas = |frames: &[glassbox_core::wire::ServerFrame]| {
        frames
            .iter()
            .filter(|f| matches!(f.event, ServerEvent::Delta(_)))
            .count()
    };
    let first_half = deltas(&seen);
    // At most one frame per 16 ms or 4 kB: how many depends on how fast the provider's pieces
    // arrive here, so the bound is loose; one frame per piece would be 2,000.
    assert!(
        (2..=400).contains(&first_half),
        "8,000 bytes in 2,000 pieces came as {first_half} frames"
    );
    let last = seen.last().unwrap().sync_id;
    ws.close().await;
    gate.release();
    until_reply_stored(&server, &session, &token).await;

    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"sessionId": session, "token": token, "lastSyncId": last}})).await;
    let rest = ws.until_reply_ends().await;
    assert!(rest.iter().all(|f| f.sync_id > last));
    assert_increasing(&rest);
    assert_eq!(
        delta_text(&rest),
        pieces[2_000..].concat(),
        "every missed piece, once"
    );
    assert!(
        // Read from the log at once: cut at 4 kB only.
        deltas(&rest) <= 10,
        "the replay is coalesced too: {}",
        deltas(&rest)
    );
    eprintln!(
        "2,000 pieces live: {first_half} frames; 2,000 replayed: {} frames",
        deltas(&rest)
    );
    let ServerEvent::Done(done) = &rest.last().unwrap().event else {
        panic!("the replay ends with done")
    };
    assert_eq!(done.message.content, pieces.concat());
}

/// `session` names the protocol version the server speaks.
#[tokio::test]
async fn the_session_names_the_protocol_version() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["Hi."])).await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "session", "{raw}");
    assert_eq!(
        raw["data"]["protocol"],
        glassbox_core::wire::PROTOCOL_VERSION,
        "{raw}"
    );
}
