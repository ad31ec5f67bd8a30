//! Several instances on one PostgreSQL database (docs/instances.md): a reply streams from one, its
//! client is cut and resumes on another, a tab on a third sees the same frames, the listening
//! connection is killed mid-reply, turns of one session run one at a time across instances, a stop
//! reaches the instance running the reply, and a reply whose instance stopped answering is failed.
//!
//! These need PostgreSQL always, so they run in the first pass of `cargo xtask test` (the second,
//! `GLASSBOX_TEST_BACKEND=postgres`, would only run them again).

mod support;

use std::time::Duration;

use glassbox_core::vocab::MessageStatus;
use glassbox_core::wire::{ServerEvent, ServerFrame};
use glassbox_fake_provider::{Behaviour, Gate};
use serde_json::json;
use support::{Api, TestServer, Ws, delta_text, on_postgres};

/// `n` pieces of reply text, each naming its number (so a lost or doubled one shows).
fn pieces(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("piece {i:04} of the reply. "))
        .collect()
}

/// Three instances on one new database, the provider streaming `chunks` `delay` apart and
/// waiting at `gate` after `hold_at` of them.
async fn three(chunks: &[String], delay: Duration, hold_at: usize, gate: &Gate) -> [TestServer; 3] {
    let url = support::postgres_database().await;
    three_on(&url, chunks, delay, hold_at, gate).await
}

async fn three_on(
    url: &str,
    chunks: &[String],
    delay: Duration,
    hold_at: usize,
    gate: &Gate,
) -> [TestServer; 3] {
    let a = TestServer::start_with(
        Api::OpenAi,
        Behaviour::Hold {
            chunks: chunks.to_vec(),
            delay,
            holds: vec![(hold_at, gate.clone())],
        },
        &[("GLASSBOX_DATABASE_URL", url)],
    )
    .await;
    let b = a.another().await;
    let c = a.another().await;
    [a, b, c]
}

async fn ws_to(server: &TestServer) -> Ws {
    server.ws().await
}

/// Reads frames until `count` bytes of reply text arrived; returns them.
async fn until_text(ws: &mut Ws, count: usize) -> Vec<ServerFrame> {
    let mut frames = Vec::new();
    while delta_text(&frames).len() < count {
        let (f, _) = ws.next().await;
        frames.push(f);
    }
    frames
}

/// Ids strictly increase: nothing came twice or out of order.
fn assert_once_in_order(frames: &[ServerFrame]) {
    for pair in frames.windows(2) {
        assert!(
            pair[1].sync_id > pair[0].sync_id,
            "frame {} after {}: {:?}",
            pair[1].sync_id,
            pair[0].sync_id,
            pair[1].event
        );
    }
}

fn done_text(frames: &[ServerFrame]) -> String {
    match frames.last().map(|f| &f.event) {
        Some(ServerEvent::Done(d)) => d.message.content.clone(),
        other => panic!("the reply did not end with done: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_cut_mid_reply_resumes_on_another_instance_and_a_third_sees_the_same() {
    if on_postgres() {
        return;
    }
    let chunks = pieces(1_500); // 40 kB
    let full: String = chunks.concat();
    let gate = Gate::new();
    let [a, b, c] = three(&chunks, Duration::from_micros(800), 300, &gate).await;

    let mut on_a = ws_to(&a).await;
    let (id, token) = on_a.hello_new().await;
    on_a.send(json!({"type": "chat", "data": {"message": "stream a long reply"}}))
        .await;
    // Held by the provider after 300 pieces: all of them reach the tab on A.
    let mut seen_on_a = until_text(&mut on_a, chunks[..300].concat().len()).await;
    assert_eq!(delta_text(&seen_on_a), chunks[..300].concat());

    // A second tab, on C, joins mid-reply: its snapshot holds the text so far.
    let mut on_c = ws_to(&c).await;
    on_c.send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
        .await;
    let c_text: String;
    let mut c_frames = Vec::new();
    loop {
        let (f, _) = on_c.next().await;
        if let ServerEvent::Snapshot(s) = &f.event {
            let reply = s.messages.last().expect("the reply is in the snapshot");
            assert_eq!(reply.status, MessageStatus::Streaming);
            c_text = reply.content.clone();
            c_frames.push(f);
            break;
        }
        c_frames.push(f);
    }
    assert_eq!(
        c_text,
        chunks[..300].concat(),
        "C's snapshot has the text so far"
    );

    // A's client is cut; the reply goes on while it is away, then it reconnects to B.
    let last_seen = seen_on_a.last().expect("frames").sync_id;
    on_a.close().await;
    gate.release();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut on_b = ws_to(&b).await;
    on_b.send(json!({"type": "hello", "data": {"sessionId": id, "token": token, "lastSyncId": last_seen}}))
        .await;
    let resumed = on_b.until_reply_ends().await;
    assert!(
        !resumed
            .iter()
            .any(|f| matches!(f.event, ServerEvent::Snapshot(_))),
        "B replays from the frame log, no snapshot"
    );
    seen_on_a.extend(resumed);
    let numbered: Vec<ServerFrame> = seen_on_a
        .iter()
        .filter(|f| !matches!(f.event, ServerEvent::Session(_)))
        .cloned()
        .collect();
    assert_once_in_order(&numbered);
    assert_eq!(
        delta_text(&seen_on_a),
        full,
        "what the client shows equals what the provider sent"
    );
    assert_eq!(done_text(&seen_on_a), full);

    // C saw the same reply: its snapshot's text, then every frame after it.
    let rest = on_c.until_reply_ends().await;
    c_frames.extend(rest.iter().cloned());
    assert_once_in_order(&c_frames[c_frames.len() - rest.len() - 1..]);
    assert_eq!(c_text + &delta_text(&rest), full);
    assert_eq!(done_text(&rest), full);
    // Pieces were written together, not one by one.
    let deltas = rest
        .iter()
        .filter(|f| matches!(f.event, ServerEvent::Delta(_)))
        .count();
    assert!(deltas < 1_200, "{deltas} delta frames for 1,200 pieces");

    // The client comes back again, on A then on C, each time with the id of the last frame it
    // had: frames numbered for its connection alone (`session`) are applied, never taken for
    // ones it has.
    let mut cursor = glassbox_core::sync::SyncCursor::default();
    for f in &seen_on_a {
        cursor.accept(f);
    }
    for server in [&a, &c, &a] {
        let mut ws = ws_to(server).await;
        let seen = cursor.last_seen().expect("frames seen");
        ws.send(
            json!({"type": "hello", "data": {"sessionId": id, "token": token, "lastSyncId": seen}}),
        )
        .await;
        let (session, _) = ws.next().await;
        assert!(
            matches!(session.event, ServerEvent::Session(_)),
            "{session:?}"
        );
        assert!(
            cursor.accept(&session),
            "session frame {} after {seen}",
            session.sync_id
        );
        ws.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_listening_connection_killed_mid_reply_loses_no_frame() {
    if on_postgres() {
        return;
    }
    let chunks = pieces(1_000);
    let full: String = chunks.concat();
    let gate = Gate::new();
    let url = support::postgres_database().await;
    let database = url.rsplit('/').next().expect("database name").to_owned();
    let [a, b, _c] = three_on(&url, &chunks, Duration::from_millis(1), 100, &gate).await;
    let mut on_a = ws_to(&a).await;
    let (id, token) = on_a.hello_new().await;
    let mut on_b = ws_to(&b).await;
    on_b.hello_existing(&id, &token).await;
    on_a.send(json!({"type": "chat", "data": {"message": "stream"}}))
        .await;
    let mut seen = until_text(&mut on_b, chunks[..100].concat().len()).await;
    // Every instance's listening connection is killed while the reply streams on.
    gate.release();
    let url = std::env::var("GLASSBOX_TEST_POSTGRES_URL").expect("test cluster");
    let admin = sqlx::PgPool::connect(&url).await.expect("admin connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1 AND datname = $2",
    )
    .bind(glassbox_server::hub::listen::LISTENER_NAME)
    .bind(&database)
    .fetch_all(&admin)
    .await
    .expect("terminate");
    assert_eq!(
        killed, [true; 3],
        "the three instances' listeners were found"
    );
    seen.extend(on_b.until_reply_ends().await);
    assert_once_in_order(&seen);
    assert_eq!(delta_text(&seen), full);
    assert_eq!(done_text(&seen), full);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn turns_of_one_session_take_turns_across_instances_and_a_stop_reaches_the_producer() {
    if on_postgres() {
        return;
    }
    let chunks = pieces(400);
    let gate = Gate::new();
    let [a, b, _c] = three(&chunks, Duration::from_millis(2), 50, &gate).await;
    let mut on_a = ws_to(&a).await;
    let (id, token) = on_a.hello_new().await;
    let mut on_b = ws_to(&b).await;
    on_b.hello_existing(&id, &token).await;
    on_a.send(json!({"type": "chat", "data": {"message": "first"}}))
        .await;
    let first = until_text(&mut on_a, 1).await;
    let first_id = first
        .iter()
        .find_map(|f| match &f.event {
            ServerEvent::ReplyStart(r) => Some(r.message_id.clone()),
            _ => None,
        })
        .expect("reply_start");
    // A second message on B while A's reply streams: its reply waits for the session's turn.
    on_b.send(json!({"type": "chat", "data": {"message": "second"}}))
        .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The stop, sent on B, reaches A, which runs the reply.
    on_b.send(json!({"type": "stop", "data": {"messageId": first_id}}))
        .await;
    gate.release();
    let mut frames = Vec::new();
    let mut ended = 0;
    while ended < 2 {
        let (f, _) = on_b.next().await;
        if matches!(f.event, ServerEvent::Done(_) | ServerEvent::Error(_)) {
            ended += 1;
        }
        frames.push(f);
    }
    assert_once_in_order(&frames);
    let ends: Vec<(String, MessageStatus)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            ServerEvent::Done(d) => Some((d.message.id.clone(), d.message.status)),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 2, "{frames:?}");
    assert_eq!(ends[0], (first_id.clone(), MessageStatus::Stopped));
    assert_eq!(ends[1].1, MessageStatus::Complete);
    // No piece of the second reply came before the first ended.
    let first_end = frames
        .iter()
        .position(|f| matches!(&f.event, ServerEvent::Done(d) if d.message.id == first_id))
        .expect("first done");
    assert!(
        !frames[..first_end]
            .iter()
            .any(|f| matches!(&f.event, ServerEvent::Delta(d) if d.message_id != first_id))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_whose_instance_stopped_answering_is_failed_and_retryable() {
    if on_postgres() {
        return;
    }
    let gate = Gate::new();
    let [a, b, _c] = three(&pieces(10), Duration::ZERO, 10, &gate).await;
    let mut on_b = ws_to(&b).await;
    let (id, token) = on_b.hello_new().await;
    // A reply left streaming by an instance that is gone (it never said it was alive).
    let gone = a
        .state
        .store
        .clone()
        .producing_as("an-instance-that-crashed");
    let (_, reply) = gone
        .insert_turn(
            &id,
            &glassbox_server::storage::NewUserMessage {
                id: "m-orphan",
                content: "hello?",
                client_message_id: None,
                context: None,
                attachments: &[],
                created_at: 1,
            },
            "r-orphan",
            1,
        )
        .await
        .expect("stored");
    assert_eq!(reply.expect("reply").status, MessageStatus::Streaming);
    // Within a heartbeat, an instance fails it and every tab is told.
    let failed = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let (f, _) = on_b.next().await;
            if let ServerEvent::Error(e) = &f.event
                && e.message_id.as_deref() == Some("r-orphan")
            {
                return e.clone();
            }
        }
    })
    .await
    .expect("the orphaned reply was failed");
    assert!(failed.retryable);
    let messages = b.messages(&id, &token).await;
    assert_eq!(messages.last().expect("reply")["status"], "failed");
    drop(gate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_turns_on_two_instances_against_one_budget_spend_no_more_than_it() {
    if on_postgres() {
        return;
    }
    let url = support::postgres_database().await;
    let a = TestServer::start_with(
        Api::OpenAi,
        Behaviour::Reply {
            chunks: (0..300).map(|i| format!("w{i} ")).collect(),
            delay: Duration::from_millis(1),
        },
        &[
            ("GLASSBOX_DATABASE_URL", url.as_str()),
            ("GLASSBOX_BUDGET_DAILY_TOKENS", "1000"),
        ],
    )
    .await;
    let b = a.another().await;
    let mut sessions = Vec::new();
    for i in 0..8 {
        let server = if i % 2 == 0 { &a } else { &b };
        let (id, token, _) = server.new_session().await;
        sessions.push((server, id, token));
    }
    let answers = futures::future::join_all(sessions.iter().map(|(server, id, token)| {
        server
            .http
            .post(server.url("/api/chat"))
            .bearer_auth(token)
            .json(&json!({"sessionId": id, "message": "tell me everything you know"}))
            .send()
    }))
    .await;
    // Refused before the message is stored (402), or in its turn before the provider is called.
    let mut complete = 0;
    let mut statuses = Vec::new();
    for answer in answers {
        let answer = answer.expect("answered");
        statuses.push(answer.status().as_u16());
        if answer.status() == 200 {
            let body: serde_json::Value = answer.json().await.expect("json");
            match body["reply"]["status"].as_str() {
                Some("complete") => complete += 1,
                _ => assert_eq!(body["reply"]["error"]["code"], "budget_exhausted", "{body}"),
            }
        } else {
            assert_eq!(answer.status(), 402);
        }
    }
    assert!(complete >= 1, "{statuses:?}");
    assert_eq!(
        a.fake.requests().len(),
        complete,
        "no refused call reached the provider"
    );
    let day = glassbox_server::ids::now_ms().div_euclid(86_400_000);
    let spent = a
        .state
        .store
        .tokens_spent(&sessions[0].1, day)
        .await
        .expect("spent")
        .server_day;
    assert!(
        spent > 0 && spent <= 1_000,
        "spent {spent} of a budget of 1000: {statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_admit_no_more_than_one_limit() {
    if on_postgres() {
        return;
    }
    let url = support::postgres_database().await;
    let a = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["ok"]),
        &[
            ("GLASSBOX_DATABASE_URL", url.as_str()),
            ("GLASSBOX_LIMIT_MESSAGES_PER_MINUTE", "3"),
            ("GLASSBOX_LIMIT_SESSIONS_PER_HOUR", "4"),
        ],
    )
    .await;
    let b = a.another().await;
    // Sessions from one address, alternately on each instance: four in all, not four on each.
    let mut created = Vec::new();
    let mut refused = 0;
    for i in 0..8 {
        let server = if i % 2 == 0 { &a } else { &b };
        let resp = server.post("/api/sessions", &json!({})).await;
        match resp.status().as_u16() {
            200 | 201 => {
                let body: serde_json::Value = resp.json().await.expect("json");
                created.push((
                    body["sessionId"].as_str().expect("id").to_owned(),
                    body["token"].as_str().expect("token").to_owned(),
                ));
            }
            429 => refused += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((created.len(), refused), (4, 4));
    // Messages of one session, alternately on each instance: three a minute in all.
    let (id, token) = &created[0];
    let mut statuses = Vec::new();
    for i in 0..6 {
        let server = if i % 2 == 0 { &a } else { &b };
        let resp = server
            .http
            .post(server.url("/api/chat"))
            .bearer_auth(token)
            .json(&json!({"sessionId": id, "message": format!("message {i}")}))
            .send()
            .await
            .expect("answered");
        statuses.push(resp.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
    // The refusal says when to come back: about a minute's third after the first of the three.
    let resp = b
        .http
        .post(b.url("/api/chat"))
        .bearer_auth(token)
        .json(&json!({"sessionId": id, "message": "once more"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .expect("header")
        .parse()
        .expect("seconds");
    assert!((1..=20).contains(&wait), "retry after {wait} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_deleted_on_one_instance_is_gone_from_the_tabs_of_another() {
    if on_postgres() {
        return;
    }
    let gate = Gate::new();
    let [a, b, _c] = three(&pieces(2), Duration::ZERO, 2, &gate).await;
    let mut on_b = ws_to(&b).await;
    let (id, token) = on_b.hello_new().await;
    let resp = a.delete_session(&id, &token).await;
    assert!(resp.status().is_success(), "{}", resp.status());
    let told = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let (f, raw) = on_b.next().await;
            if let ServerEvent::Error(e) = &f.event {
                return (e.clone(), raw);
            }
        }
    })
    .await
    .expect("the tab on B was told");
    assert_eq!(
        told.0.code,
        glassbox_core::ErrorCode::Unauthorized,
        "{}",
        told.1
    );
    drop(gate);
}
