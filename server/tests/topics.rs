//! Topics and the history filter against a real server, the real embedding model and the fake
//! provider: extraction after replies, selecting a topic, the request the provider then receives
//! and the receipt that says so; pins and excludes; refusals; a late extraction racing a newer one.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use glassbox_core::context::topics::TopicSource;
use glassbox_core::context::{LeftOutWhy, PartKind, Reason, Receipt, SessionTopics, Topic};
use glassbox_core::wire::ChatMessage;
use glassbox_fake_provider::{Behaviour, Gate, topics_answer};
use serde_json::{Value, json};
use support::{Api, TestServer};

fn model_dir() -> PathBuf {
    std::env::var_os("GLASSBOX_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(glassbox_server::config::default_model_dir)
}

/// A server with the embedding model on and offline extraction, waiting until the model is ready.
async fn start(extra: &[(&str, &str)]) -> TestServer {
    let dir = model_dir().display().to_string();
    let mut vars = vec![
        ("GLASSBOX_EMBEDDINGS", "on"),
        ("GLASSBOX_EMBED_MODEL_DIR", dir.as_str()),
        ("GLASSBOX_TOPIC_MODEL", "offline"),
        ("GLASSBOX_TOPICS", "on"),
    ];
    vars.extend_from_slice(extra);
    let server = TestServer::start_with(Api::OpenAi, Behaviour::reply(&["ok"]), &vars).await;
    embeddings_ready(&server).await;
    server
}

/// Waits (a minute at most) until the server's embedding model is loaded.
async fn embeddings_ready(server: &TestServer) {
    for _ in 0..600 {
        let health = server.get_json("/healthz").await;
        if health["embeddings"]["status"] != "loading" {
            assert_eq!(health["embeddings"]["status"], "ready", "{health}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the embedding model did not load within a minute");
}

const KUBERNETES: [(&str, &str); 3] = [
    (
        "My Kubernetes pod cannot reach the ClusterIP service in another namespace.",
        "Use the service's full DNS name, service.namespace.svc.cluster.local, and check the NetworkPolicy allows the traffic.",
    ),
    (
        "The Kubernetes NetworkPolicy denies all ingress by default in that namespace.",
        "Add an ingress rule to the NetworkPolicy that selects the calling pod's namespace and labels.",
    ),
    (
        "Now the Kubernetes service has no endpoints at all.",
        "The service selector matches no pod labels; compare the selector with kubectl get pods --show-labels.",
    ),
];

const SOURDOUGH: [(&str, &str); 3] = [
    (
        "My sourdough starter smells like nail polish remover. Is the starter dead?",
        "The starter is hungry, not dead: feed the sourdough starter twice a day with equal flour and water.",
    ),
    (
        "How warm should the sourdough starter and the dough be while it rises?",
        "Keep the sourdough dough around 24 to 26 degrees; bulk fermentation then takes four to six hours.",
    ),
    (
        "My sourdough loaf comes out flat and dense after baking.",
        "A flat sourdough loaf is usually over-proofed dough or weak shaping; bake it in a preheated Dutch oven.",
    ),
];

/// One exchange with the given reply.
async fn say(server: &TestServer, id: &str, token: &str, text: &str, reply: &str) -> Value {
    server.fake.set(Behaviour::reply(&[reply]));
    server.chat(id, token, text).await
}

/// Polls the session's topics until an extraction read `messages` messages (extraction runs on
/// the low-priority thread: on a machine busy with the other tests it may wait a while).
async fn topics_after(server: &TestServer, id: &str, token: &str, messages: u32) -> Value {
    let mut last = Value::Null;
    for _ in 0..1800 {
        last = get(server, &format!("/api/sessions/{id}/topics"), token).await;
        if last["topics"]["messageCount"].as_u64() >= Some(u64::from(messages)) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no extraction read {messages} messages: {last}");
}

async fn get(server: &TestServer, path: &str, token: &str) -> Value {
    let r = server
        .http
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.expect("JSON")
}

async fn put(server: &TestServer, path: &str, token: &str, body: Value) -> (u16, Value) {
    let r = server
        .http
        .put(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("PUT");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A session about Kubernetes, then a standing instruction, then sourdough; returns its id, token,
/// the message ids in order and the extracted topics.
async fn two_subjects(server: &TestServer) -> (String, String, Vec<String>, Value) {
    let (id, token, _) = server.new_session().await;
    let mut ids = Vec::new();
    let mut remember = |answer: Value| {
        ids.push(answer["message"]["id"].as_str().unwrap().to_owned());
        ids.push(answer["reply"]["id"].as_str().unwrap().to_owned());
    };
    for (q, a) in KUBERNETES {
        remember(say(server, &id, &token, q, a).await);
    }
    remember(
        say(
            server,
            &id,
            &token,
            "Be concise from now on, please.",
            "Understood.",
        )
        .await,
    );
    for (q, a) in SOURDOUGH {
        remember(say(server, &id, &token, q, a).await);
    }
    let topics = topics_after(server, &id, &token, ids.len() as u32).await;
    (id, token, ids, topics)
}

#[tokio::test]
async fn selecting_a_topic_sends_only_its_messages_and_the_standing_instruction() {
    let server = start(&[]).await;
    let (id, token, ids, found) = two_subjects(&server).await;
    let topics: SessionTopics = serde_json::from_value(found["topics"].clone()).unwrap();
    assert_eq!(topics.source, TopicSource::Offline);
    assert_eq!(topics.sticky_ids, [ids[6].clone()], "{found}");
    assert!(topics.topics.len() >= 2, "{found}");
    let bread = topics
        .topics
        .iter()
        .find(|t| {
            let l = t.label.to_lowercase();
            ["sourdough", "starter", "dough", "loaf"]
                .iter()
                .any(|w| l.contains(w))
        })
        .unwrap_or_else(|| panic!("no sourdough topic in {found}"));
    // No filter yet: everything is in context.
    assert_eq!(
        found["filter"]["messageIds"].as_array().unwrap().len(),
        ids.len()
    );

    let (status, view) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": [bread.label]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    let kept: Vec<&str> = view["messageIds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The sourdough exchanges (ids 8..14) and the instruction (6), none of the Kubernetes ones.
    assert!(kept.contains(&ids[6].as_str()), "{view}");
    for k in &ids[..6] {
        assert!(!kept.contains(&k.as_str()), "{k} kept: {view}");
    }
    // Most of the sourdough messages match the label (a message can fall just under 0.4).
    let bread_kept = ids[8..14]
        .iter()
        .filter(|s| kept.contains(&s.as_str()))
        .count();
    assert!(
        bread_kept >= 3,
        "{bread_kept} sourdough messages kept: {view}"
    );

    let answer = say(
        &server,
        &id,
        &token,
        "How long should the dough proof?",
        "About 4 hours.",
    )
    .await;
    let sent = server.fake.requests().last().unwrap().body.clone();
    let texts: Vec<String> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(texts.iter().all(|t| !t.contains("Kubernetes")), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("Be concise")), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("sourdough")), "{texts:?}");
    assert_eq!(texts.last().unwrap(), "How long should the dough proof?");

    // The receipt says so: the filter, matches with scores, the sticky message, the rest left out.
    let receipt: Receipt = serde_json::from_value(answer["reply"]["receipt"].clone()).unwrap();
    assert_eq!(
        receipt.filter.as_ref().map(|f| &f.labels),
        Some(&vec![bread.label.clone()])
    );
    assert!(receipt.parts.iter().any(|p| p.reason == Reason::Sticky));
    assert!(
        receipt.parts.iter().any(
            |p| matches!(p.reason, Reason::TopicMember | Reason::TopicMatch)
                && matches!(&p.kind, PartKind::History { scores, .. } if !scores.is_empty())
        ),
        "{receipt:?}"
    );
    // The Kubernetes messages are another topic's: left out as such, with their scores.
    let filtered: u32 = receipt
        .left_out
        .iter()
        .filter(|l| matches!(l.why, LeftOutWhy::OtherTopic | LeftOutWhy::TopicFilter))
        .map(|l| l.count)
        .sum();
    assert!(filtered >= 5, "{receipt:?}");
    assert!(
        receipt
            .left_out
            .iter()
            .any(|l| l.why == LeftOutWhy::OtherTopic && !l.scores.is_empty()),
        "{receipt:?}"
    );

    // Similarity mode off: the filter stays, the whole history goes.
    let (status, view) = put(
        &server,
        &format!("/api/sessions/{id}/similarity"),
        &token,
        json!({"enabled": false}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(view["labels"], json!([bread.label]));
    assert_eq!(
        view["messageIds"].as_array().unwrap().len() as u64,
        view["total"].as_u64().unwrap()
    );

    // The session's own threshold: at 0.99 no other message is similar enough, so exactly what the
    // bubble counts goes, with the instruction; outside 0–1 it is refused and the setting stays.
    let similarity = format!("/api/sessions/{id}/similarity");
    let (status, view) = put(
        &server,
        &similarity,
        &token,
        json!({"enabled": true, "threshold": 0.99}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert!(
        (view["threshold"].as_f64().unwrap() - 0.99).abs() < 1e-6,
        "{view}"
    );
    assert_eq!(view["fallback"], false, "{view}");
    let topics: SessionTopics = serde_json::from_value(
        get(&server, &format!("/api/sessions/{id}/topics"), &token).await["topics"].clone(),
    )
    .unwrap();
    let members = &topics
        .topics
        .iter()
        .find(|t| t.label == bread.label)
        .unwrap()
        .message_ids;
    let mut want: Vec<&String> = members.iter().chain([&ids[6]]).collect();
    want.sort();
    let mut kept: Vec<&str> = view["messageIds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        want,
        "the bubble's {} messages and the instruction: {view}",
        members.len()
    );
    assert_eq!(
        members.len() as u32,
        topics
            .topics
            .iter()
            .find(|t| t.label == bread.label)
            .unwrap()
            .count
    );
    let (status, body) = put(
        &server,
        &similarity,
        &token,
        json!({"enabled": true, "threshold": 1.5}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_filter")),
        "{body}"
    );
    let (status, view) = put(&server, &similarity, &token, json!({"enabled": true})).await;
    assert_eq!(status, 200);
    assert!(
        (view["threshold"].as_f64().unwrap() - 0.99).abs() < 1e-6,
        "kept: {view}"
    );
    // `null` returns the session to the server's threshold (0.4 here), and the filter applies again.
    let (status, view) = put(
        &server,
        &similarity,
        &token,
        json!({"enabled": true, "threshold": null}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert!(
        (view["threshold"].as_f64().unwrap() - 0.4).abs() < 1e-6,
        "back to the server's: {view}"
    );
    assert_eq!(view["fallback"], false, "{view}");
    assert!(
        (view["messageIds"].as_array().unwrap().len() as u64) < view["total"].as_u64().unwrap(),
        "{view}"
    );
}

/// A turn under a filter embeds nothing it could have had ahead: the selected label's vector is
/// kept with the session (the view embedded it), and the last exchange's vectors are computed once
/// its reply is done, before the next message (extraction, which would do it too, is held off).
#[tokio::test]
async fn a_turn_under_a_filter_embeds_nothing_it_could_have_had_ahead() {
    let server = start(&[("GLASSBOX_TOPICS_SETTLE_MS", "600000")]).await;
    let state = &server.state;
    let (id, token, _) = server.new_session().await;
    for (q, a) in KUBERNETES.iter().chain(&SOURDOUGH) {
        say(&server, &id, &token, q, a).await;
    }
    let topics = SessionTopics {
        topics: vec![
            Topic {
                label: "Kubernetes networking".into(),
                count: 6,
                ..Default::default()
            },
            Topic {
                label: "Sourdough baking".into(),
                count: 6,
                ..Default::default()
            },
        ],
        generation: glassbox_server::topics::extract::next_generation(),
        ..Default::default()
    };
    assert!(state.store.put_topics(&id, &topics).await.unwrap());
    let (status, view) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": ["Sourdough baking"]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    let questions = [
        "How long should the dough proof?",
        "Should the starter be fed before baking?",
    ];
    for (round, question) in questions.into_iter().enumerate() {
        let before = state.embeddings.computed();
        // The reply waits at the gate before its first piece: what the turn embedded by the time
        // the provider has its request (its reply not done).
        let gate = Gate::new();
        server
            .fake
            .set(Behaviour::hold(&["Noted.", " About four hours."], 0, &gate));
        let (answer, embedded) = tokio::join!(server.chat(&id, &token, question), async {
            gate.reached(1).await;
            let embedded = state.embeddings.computed() - before;
            gate.release();
            embedded
        });
        assert_eq!(
            embedded, 0,
            "round {round}: the turn embedded {embedded} texts"
        );
        let receipt: Receipt = serde_json::from_value(answer["reply"]["receipt"].clone()).unwrap();
        assert!(
            receipt.filter.is_some(),
            "round {round}: the filter applied: {receipt:?}"
        );
        // The exchange's vectors come without another message (extraction is held off).
        let messages = state.store.message_texts(&id).await.unwrap();
        let keys: Vec<String> = messages[messages.len() - 2..]
            .iter()
            .map(|m| glassbox_server::topics::message_embed_item(m).0)
            .collect();
        for _ in 0..600 {
            if keys.iter().all(|k| state.embeddings.remembers(k)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            keys.iter().all(|k| state.embeddings.remembers(k)),
            "round {round}: {keys:?}"
        );
    }
}

#[tokio::test]
async fn the_last_view_every_tab_hears_is_the_current_one() {
    let server = start(&[]).await;
    let (id, token, _, found) = two_subjects(&server).await;
    let label = found["topics"]["topics"][0]["label"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut first = server.ws().await;
    first.hello_existing(&id, &token).await;
    // Forty changes at once from REST, while a second tab joins in the middle of them.
    let changes = (0..40).map(|i| {
        let (server, id, token) = (&server, &id, &token);
        let body = match i % 4 {
            0 => json!({"labels": [label.clone()]}),
            1 => json!({"labels": []}),
            _ => json!({"enabled": i % 8 == 2}),
        };
        let path = if i % 4 < 2 { "filter" } else { "similarity" };
        async move {
            let (status, body) =
                put(server, &format!("/api/sessions/{id}/{path}"), token, body).await;
            assert_eq!(status, 200, "{body}");
        }
    });
    let mut second = server.ws().await;
    let joining = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        second
            .send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
            .await;
    };
    tokio::join!(futures::future::join_all(changes), joining);
    let current =
        get(&server, &format!("/api/sessions/{id}/topics"), &token).await["filter"].clone();
    for (tab, ws) in [("first", &mut first), ("second", &mut second)] {
        let mut last = None;
        let mut ids = Vec::new();
        while let Some((frame, raw)) = ws.next_within(Duration::from_millis(1500)).await {
            ids.push(frame.sync_id);
            if raw["type"] == "filter" {
                last = Some(raw["data"].clone());
            }
        }
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{tab} tab: frames out of order {ids:?}"
        );
        assert_eq!(
            last.as_ref(),
            Some(&current),
            "{tab} tab ends on a stale view: {ids:?}"
        );
    }
}

#[tokio::test]
async fn deleting_a_session_forgets_its_vectors_in_memory_too() {
    let server = start(&[]).await;
    let (id, token, ids, _) = two_subjects(&server).await;
    let key = glassbox_server::embed::service::message_cache_key(&ids[0], KUBERNETES[0].0);
    assert!(
        server.state.embeddings.remembers(&key),
        "extraction embedded the first message"
    );
    let gone = server.delete_session(&id, &token).await;
    assert!(gone.status().is_success(), "{}", gone.status());
    assert!(!server.state.embeddings.remembers(&key));
}

#[tokio::test]
async fn extraction_embeds_every_message_a_filter_scores_not_only_those_it_reads() {
    let server = start(&[]).await;
    let (id, token, _) = server.new_session().await;
    // An imported or fast-growing session: more messages than one extraction reads.
    let state = &server.state;
    // Live throughout (as with a tab open), so the label vectors kept with it stay.
    let _live = state.hubs.get(&id).expect("the new session's hub");
    let count = glassbox_server::topics::extract::MAX_MESSAGES + 40;
    let keys = import(state, &id, 0..count).await;
    let generation = glassbox_server::topics::extract::next_generation();
    assert!(state.topics.extract(&id, generation).await.unwrap());
    let missing: Vec<usize> = (0..count)
        .filter(|&i| !state.embeddings.remembers(&keys[i]))
        .collect();
    assert!(
        missing.is_empty(),
        "not embedded ahead: {} of {count}, first {:?}",
        missing.len(),
        missing.first()
    );
    // So switching a filter on computes nothing.
    let before = state.embeddings.computed();
    let topics = get(&server, &format!("/api/sessions/{id}/topics"), &token).await;
    let label = topics["topics"]["topics"][0]["label"].clone();
    let (status, view) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": [label.clone()]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["total"], count);
    // Not even the label: extraction kept its vector with the session.
    assert_eq!(state.embeddings.computed() - before, 0, "nothing embedded");
    // A filter changed while an extraction computes vectors does not wait for them: it computes
    // what it needs itself, so a new message is computed twice at most (once by each). The
    // background thread is held busy meanwhile, so a filter that waited for extraction's vectors
    // would never finish.
    let more = 300;
    let new_keys = import(state, &id, count..count + more).await;
    let before = state.embeddings.computed();
    let (busy, release) = hold_background_thread().await;
    let extraction = tokio::spawn({
        let (state, id) = (state.clone(), id.clone());
        async move {
            let generation = glassbox_server::topics::extract::next_generation();
            state.topics.extract(&id, generation).await
        }
    });
    // Once a job waits behind the held one: the extraction's (it reads and looks up 640 messages
    // first; other tests' extractions may hold the permits, or queue a job of theirs).
    let queued = async {
        while glassbox_server::background::pending() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), queued)
        .await
        .expect("the extraction waits for the thread");
    let path = format!("/api/sessions/{id}/filter");
    let changed = put(&server, &path, &token, json!({"labels": [label]}));
    let (status, view) = tokio::time::timeout(Duration::from_secs(120), changed)
        .await
        .expect("the filter waited for the extraction's background work");
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["total"], count + more);
    assert!(
        !extraction.is_finished(),
        "the extraction went on without the background thread"
    );
    release.send(()).unwrap();
    busy.await.unwrap();
    extraction.await.unwrap().unwrap();
    let computed = state.embeddings.computed() - before;
    // The new messages once or twice, the label once, at most 8 × 8 candidate labels of the
    // extraction.
    let most = 2 * more as u64 + 1 + 64;
    assert!(
        computed >= more as u64 && computed <= most,
        "{computed} computed for {more} new messages"
    );
    let missing = new_keys
        .iter()
        .filter(|k| !state.embeddings.remembers(k))
        .count();
    assert_eq!(missing, 0, "every new message's vector is remembered");
}

/// Occupies the background thread until the returned sender is used (the task ends then).
async fn hold_background_thread() -> (tokio::task::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel();
    let busy = tokio::spawn(async move {
        glassbox_server::background::run(move || {
            let _ = started.send(());
            let _ = wait.recv();
        })
        .await
        .unwrap();
    });
    running.await.expect("the background thread runs the job");
    (busy, release)
}

/// Purging an idle session while a step of its vectors is computed, by a request or in the
/// background: no vector is stored for it once it is gone. (A request's step holds the session's
/// gate, so the purge waits for it; a background step is computed outside the gate, and refused
/// when it comes to store.)
#[tokio::test]
async fn purging_a_session_whose_vectors_are_computed_leaves_none_behind() {
    use glassbox_server::embed::service::Urgency;
    let server = start(&[("GLASSBOX_SESSION_TTL", "1s")]).await;
    let state = &server.state;
    for urgency in [Urgency::Now, Urgency::Background] {
        let (id, _, _) = server.new_session().await;
        let keys = import(state, &id, 0..1_024).await;
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let history = state.store.messages(&id).await.unwrap();
        let before = state.embeddings.computed();
        let computing = tokio::spawn({
            let (state, id) = (state.clone(), id.clone());
            async move {
                state
                    .topics
                    .message_vectors(&id, &history, urgency)
                    .await
                    .map(|v| v.len())
            }
        });
        // Once the first vectors are computed (the rest of the step is under way or about to be).
        until_computing(state, before).await;
        assert_eq!(state.sessions.purge_idle().await.unwrap(), 1, "{urgency:?}");
        let outcome = computing.await.unwrap();
        assert!(
            outcome.is_err(),
            "{urgency:?}: the steps after the purge are refused: {outcome:?}"
        );
        let left = state
            .store
            .cached_embeddings(&state.embeddings.model, &keys)
            .await
            .unwrap();
        assert!(
            left.is_empty(),
            "{urgency:?}: {} vectors stored for a purged session",
            left.len()
        );
        let remembered = keys
            .iter()
            .filter(|k| state.embeddings.remembers(k))
            .count();
        assert_eq!(
            remembered, 0,
            "{urgency:?}: vectors remembered for a purged session"
        );
    }
}

/// Waits (a minute at most) until the embedding model computes more than `before` vectors.
async fn until_computing(state: &glassbox_server::AppState, before: u64) {
    let started = async {
        while state.embeddings.computed() == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), started)
        .await
        .expect("no vector computed within a minute");
}

/// Stores user messages numbered `range` straight into the session (as an import would); returns
/// their cache keys.
async fn import(
    state: &glassbox_server::AppState,
    id: &str,
    range: std::ops::Range<usize>,
) -> Vec<String> {
    let mut keys = Vec::new();
    for i in range {
        let (text, _) = if i % 2 == 0 {
            KUBERNETES[i % 3]
        } else {
            SOURDOUGH[i % 3]
        };
        let text = format!("{text} ({i})");
        let message_id = format!("imported-{i}");
        let new = glassbox_server::storage::NewUserMessage {
            id: &message_id,
            content: &text,
            client_message_id: None,
            context: None,
            attachments: &[],
            created_at: i as i64,
        };
        state.store.insert_user_message(id, &new).await.unwrap();
        keys.push(glassbox_server::embed::service::message_cache_key(
            &message_id,
            &text,
        ));
    }
    keys
}

#[tokio::test]
async fn a_tab_joining_while_a_reply_streams_gets_every_frame_in_order() {
    let server = start(&[]).await;
    let (id, token, _, found) = two_subjects(&server).await;
    // A filter makes reading the view take a while (the labels are embedded, messages scored).
    let label = found["topics"]["topics"][0]["label"].clone();
    let (status, _) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": [label]}),
    )
    .await;
    assert_eq!(status, 200);
    let mut first = server.ws().await;
    first.hello_existing(&id, &token).await;
    // The reply waits after its first piece until the new tab sent its hello; then it streams,
    // paced, so that its deltas are numbered while the new tab's topics and filter are read; and
    // it waits before its last piece until the new tab has them, so that it cannot end first.
    let (joining, joined) = (Gate::new(), Gate::new());
    server.fake.set(Behaviour::Hold {
        chunks: (0..1000).map(|i| format!("w{i} ")).collect(),
        delay: Duration::from_millis(1),
        holds: vec![(1, joining.clone()), (999, joined.clone())],
    });
    first
        .send(json!({"type": "chat", "data": {"message": "Tell me more about starters.", "clientMessageId": "c-1"}}))
        .await;
    // Join once the reply is streaming.
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
    let (mut ids, mut kinds) = (Vec::new(), Vec::new());
    // The reply as the new tab sees it: the snapshot's part, then the deltas.
    let mut text = String::new();
    // Every frame up to the reply's end (the `done` frame).
    loop {
        let (frame, raw) = second.next().await;
        ids.push(frame.sync_id);
        let kind = raw["type"].as_str().unwrap_or_default().to_owned();
        if kind == "snapshot" {
            let partial = raw["data"]["messages"]
                .as_array()
                .and_then(|m| m.last())
                .cloned();
            text.push_str(
                partial
                    .as_ref()
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default(),
            );
        }
        if kind == "filter" {
            joined.release();
        }
        if kind == "delta" {
            text.push_str(raw["data"]["text"].as_str().unwrap_or_default());
        }
        let done = kind == "done";
        kinds.push(kind);
        if done {
            break;
        }
    }
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "frames out of order: {:?}",
        ids.iter().zip(&kinds).collect::<Vec<_>>()
    );
    for expected in ["session", "snapshot", "topics", "filter", "delta", "done"] {
        assert!(
            kinds.iter().any(|k| k == expected),
            "no {expected} frame: {kinds:?}"
        );
    }
    let whole: String = (0..1000).map(|i| format!("w{i} ")).collect();
    assert!(
        text == whole,
        "the new tab lost or doubled part of the reply: {} of {} characters",
        text.len(),
        whole.len()
    );
}

#[tokio::test]
async fn commands_are_limited_per_session_but_a_new_tab_still_gets_its_topics() {
    let server = start(&[("GLASSBOX_LIMIT_COMMANDS_PER_MINUTE", "3")]).await;
    let (id, token, _) = server.new_session().await;
    let topics = format!("/api/sessions/{id}/topics");
    for _ in 0..3 {
        get(&server, &topics, &token).await;
    }
    let refused = server
        .http
        .get(server.url(&topics))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    // Over the WebSocket: the hello's topics do not count; a command is refused with a typed error.
    let mut tab = server.ws().await;
    tab.hello_existing(&id, &token).await;
    tab.send(json!({"type": "set_similarity_mode", "data": {"enabled": false}}))
        .await;
    let (_, raw) = tab.next().await;
    assert_eq!(raw["type"], "error", "{raw}");
    assert_eq!(raw["data"]["code"], "rate_limited", "{raw}");
    // Settings and context changes count too, over REST and the WebSocket.
    tab.send(json!({"type": "settings", "data": {"threshold": 70}}))
        .await;
    let (_, raw) = tab.next().await;
    assert_eq!(raw["data"]["code"], "rate_limited", "{raw}");
    tab.send(json!({"type": "set_context", "data": {"setName": "files", "items": ["a.rs"]}}))
        .await;
    let (_, raw) = tab.next().await;
    assert_eq!(raw["data"]["code"], "rate_limited", "{raw}");
    let (status, body) = put(
        &server,
        &format!("/api/sessions/{id}/settings"),
        &token,
        json!({"threshold": 70}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("rate_limited")),
        "{body}"
    );
    let patched = server
        .http
        .patch(server.url(&format!("/api/sessions/{id}")))
        .bearer_auth(&token)
        .json(&json!({"setContext": {"setName": "files", "items": ["a.rs"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 429);
    // Another session has its own allowance.
    let (other, other_token, _) = server.new_session().await;
    get(
        &server,
        &format!("/api/sessions/{other}/topics"),
        &other_token,
    )
    .await;
    let (status, body) = put(
        &server,
        &format!("/api/sessions/{other}/settings"),
        &other_token,
        json!({"threshold": 70}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn pinned_and_excluded_messages_and_refusals() {
    let server = start(&[]).await;
    let (id, token, _) = server.new_session().await;
    let first = say(
        &server,
        &id,
        &token,
        "Remember: the staging cluster is called kestrel.",
        "Noted.",
    )
    .await;
    let secret = say(
        &server,
        &id,
        &token,
        "My password is hunter2, ignore it.",
        "I will.",
    )
    .await;
    let pin = first["message"]["id"].as_str().unwrap();
    let drop = secret["message"]["id"].as_str().unwrap();
    let mark = |m: &str| format!("/api/sessions/{id}/messages/{m}/mark");

    let (status, view) = put(&server, &mark(drop), &token, json!({"mark": "excluded"})).await;
    assert_eq!(status, 200);
    assert!(
        !view["messageIds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == drop)
    );
    assert_eq!(
        put(&server, &mark(pin), &token, json!({"mark": "pinned"}))
            .await
            .0,
        200
    );

    let answer = say(
        &server,
        &id,
        &token,
        "What is the staging cluster called?",
        "kestrel",
    )
    .await;
    let sent = server.fake.requests().last().unwrap().body.to_string();
    assert!(
        !sent.contains("hunter2"),
        "an excluded message went: {sent}"
    );
    assert!(sent.contains("kestrel"));
    let receipt: Receipt = serde_json::from_value(answer["reply"]["receipt"].clone()).unwrap();
    assert!(receipt.parts.iter().any(|p| p.reason == Reason::Pinned));
    assert!(
        receipt
            .left_out
            .iter()
            .any(|l| l.why == LeftOutWhy::Excluded && l.first_id == drop)
    );
    let messages = server.messages(&id, &token).await;
    assert_eq!(messages[0]["mark"], "pinned");
    assert_eq!(messages[2]["mark"], "excluded");

    // Unmarking brings it back; a message of another session, an unknown label, a bad token: refused.
    assert_eq!(
        put(&server, &mark(drop), &token, json!({"mark": null}))
            .await
            .0,
        200
    );
    let (status, body) = put(&server, &mark("nope"), &token, json!({"mark": "pinned"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, body) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": ["No such topic"]}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_filter"))
    );
    let (other, other_token, _) = server.new_session().await;
    let (status, _) = put(&server, &mark(pin), &other_token, json!({"mark": "pinned"})).await;
    assert_eq!(status, 401, "another session's token");
    let (status, _) = put(
        &server,
        &format!("/api/sessions/{other}/messages/{pin}/mark"),
        &other_token,
        json!({"mark": "pinned"}),
    )
    .await;
    assert_eq!(status, 404, "a message of another session");
    let (status, body) = put(&server, &mark(pin), &token, json!({"mark": "starred"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_frame")),
        "{body}"
    );
}

/// Topics and the filter read the history without its JSON parts: the same messages, the same
/// text, role, status, time and mark, and nothing else decoded.
#[tokio::test]
async fn topics_read_the_history_without_receipts() {
    let server = start(&[]).await;
    let (id, token, ids, _) = two_subjects(&server).await;
    let (status, _) = put(
        &server,
        &format!("/api/sessions/{id}/messages/{}/mark", ids[0]),
        &token,
        json!({"mark": "pinned"}),
    )
    .await;
    assert_eq!(status, 200);
    let full = server.state.store.messages(&id).await.unwrap();
    let light = server.state.store.message_texts(&id).await.unwrap();
    assert!(
        full.iter().any(|m| m.receipt.is_some()),
        "the replies have receipts"
    );
    let stripped: Vec<ChatMessage> = full
        .into_iter()
        .map(|m| ChatMessage {
            id: m.id,
            role: m.role,
            content: m.content,
            status: m.status,
            created_at: m.created_at,
            mark: m.mark,
            ..Default::default()
        })
        .collect();
    assert_eq!(light, stripped);
    assert!(light[0].mark.is_some());
    // Read in pages (extraction's way, giving way to turns between them): the same messages,
    // across page boundaries and with a last page that is full.
    let state = &server.state;
    for (from, to, total) in [(0, 128 - light.len(), 128), (1_000, 1_070, 198)] {
        import(state, &id, from..to).await;
        let whole = state.topics.model_history(&id).await.unwrap();
        assert_eq!(whole.len(), total);
        for most in [0, 2, 63, 64, 65, 128, total, 10_000] {
            let paged = state
                .topics
                .model_history_in_pages(&id, most)
                .await
                .unwrap();
            assert_eq!(
                paged,
                whole[total.saturating_sub(most)..],
                "newest {most} of {total}"
            );
        }
    }
    let (mut newest_first, mut before) = (Vec::new(), i64::MAX);
    loop {
        let page = state
            .store
            .message_texts_before(&id, before, 64)
            .await
            .unwrap();
        let Some((last, _)) = page.last() else { break };
        before = *last;
        newest_first.extend(page.into_iter().map(|(_, m)| m));
    }
    newest_first.reverse();
    assert_eq!(newest_first, state.store.message_texts(&id).await.unwrap());
}

#[tokio::test]
async fn a_filter_is_refused_without_embeddings() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["ok"]),
        &[
            ("GLASSBOX_TOPIC_MODEL", "offline"),
            ("GLASSBOX_TOPICS", "on"),
        ],
    )
    .await;
    let (id, token, _) = server.new_session().await;
    server
        .chat(&id, &token, "Tell me about chess openings for white.")
        .await;
    let found = topics_after(&server, &id, &token, 2).await;
    let label = found["topics"]["topics"][0]["label"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": [label]}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("embeddings_unavailable"))
    );
    // Clearing is always allowed.
    let (status, view) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": []}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(view["available"], false);
}

#[tokio::test]
async fn an_older_extraction_never_overwrites_a_newer_one() {
    let server = start(&[]).await;
    let (id, token, _) = server.new_session().await;
    say(
        &server,
        &id,
        &token,
        "Which chess opening suits a beginner?",
        "The Italian Game.",
    )
    .await;
    topics_after(&server, &id, &token, 2).await;
    let state = &server.state;
    let older = glassbox_server::topics::extract::next_generation();
    let newer = glassbox_server::topics::extract::next_generation();
    assert!(state.topics.extract(&id, newer).await.unwrap());
    // The older one finishes last: it may not write.
    assert!(!state.topics.extract(&id, older).await.unwrap());
    let stored = state.store.topics(&id).await.unwrap().unwrap();
    assert_eq!(stored.generation, newer);
    // Straight at the store too: a lower generation is refused, a higher one written.
    let stale = SessionTopics {
        topics: vec![Topic {
            label: "Stale".into(),
            count: 1,
            ..Default::default()
        }],
        generation: newer - 1,
        ..Default::default()
    };
    assert!(!state.store.put_topics(&id, &stale).await.unwrap());
    assert!(state.store.topics(&id).await.unwrap().unwrap().topics[0].label != "Stale");
    // A deleted session gets no topics back.
    assert!(
        !state
            .store
            .put_topics(
                "gone",
                &SessionTopics {
                    generation: u64::MAX >> 1,
                    ..stale
                }
            )
            .await
            .unwrap()
    );
}

/// Extraction gives way to a turn that is starting: it reads and writes nothing until the turn has
/// its first token (or, under a load that never lets up, a bound passes).
#[tokio::test]
async fn extraction_waits_while_a_turn_is_starting() {
    let server = start(&[]).await;
    let (id, token, _) = server.new_session().await;
    say(
        &server,
        &id,
        &token,
        "Which chess opening suits a beginner?",
        "The Italian Game.",
    )
    .await;
    topics_after(&server, &id, &token, 2).await;
    let state = server.state.clone();
    let turn = glassbox_server::background::TurnStarting::begin();
    let generation = glassbox_server::topics::extract::next_generation();
    let extraction = tokio::spawn({
        let (state, id) = (state.clone(), id.clone());
        async move { state.topics.extract(&id, generation).await }
    });
    // Once the extraction waits for the starting turn (it cannot store before it goes on).
    let parked = async {
        while glassbox_server::background::waiting_for_turns() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), parked)
        .await
        .expect("the extraction waits for the starting turn");
    let stored = state.store.topics(&id).await.unwrap().unwrap();
    assert!(
        stored.generation < generation,
        "stored while a turn was starting"
    );
    drop(turn);
    let written = tokio::time::timeout(Duration::from_secs(30), extraction).await;
    assert!(
        written
            .expect("finished once the turn started")
            .unwrap()
            .unwrap()
    );
    assert_eq!(
        state.store.topics(&id).await.unwrap().unwrap().generation,
        generation
    );
}

const TOPICS_JSON: &str = r#"{"topics":[{"label":"Chess openings","count":2},{"label":"Rook endgames","count":1}],
"instructions":{"label":"Instructions & Preferences","message_ids":[]}}"#;

/// A server whose topic model is the reply model (the default), on the fake provider's `api`.
/// A server whose topics come from the model; each reply's own extraction starts `settle_ms`
/// after it (a test that extracts by itself sets it out of reach, so the two never race).
async fn with_topic_model(api: Api, settle_ms: &str) -> TestServer {
    let dir = model_dir().display().to_string();
    TestServer::start_with(
        api,
        Behaviour::reply(&["ok"]),
        &[
            ("GLASSBOX_EMBEDDINGS", "on"),
            ("GLASSBOX_EMBED_MODEL_DIR", dir.as_str()),
            ("GLASSBOX_TOPICS", "on"),
            ("GLASSBOX_TOPICS_SETTLE_MS", settle_ms),
        ],
    )
    .await
}

#[tokio::test]
async fn the_topic_model_answers_in_the_schema_and_bad_answers_keep_the_topics() {
    let server = with_topic_model(Api::OpenAi, "1500").await;
    let (id, token, _) = server.new_session().await;
    server.fake.set(Behaviour::reply(&[TOPICS_JSON]));
    server
        .chat(&id, &token, "Which chess opening suits a beginner?")
        .await;
    let found = topics_after(&server, &id, &token, 2).await;
    assert_eq!(found["topics"]["source"], "model", "{found}");
    assert_eq!(found["topics"]["topics"][0]["label"], "Chess openings");
    // The extraction request: the schema, the instructions, the conversation as delimited data.
    let asked = server
        .fake
        .requests()
        .into_iter()
        .find(|r| r.body.get("response_format").is_some())
        .expect("an extraction request");
    assert_eq!(asked.body["response_format"]["type"], "json_schema");
    assert_eq!(
        asked.body["response_format"]["json_schema"]["name"],
        "report_topics"
    );
    assert_eq!(asked.body["response_format"]["json_schema"]["strict"], true);
    let user = asked.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.starts_with("<conversation>\n[") && user.ends_with("</conversation>"),
        "{user}"
    );
    let before = server.state.store.topics(&id).await.unwrap().unwrap();

    // Partial JSON: not used, the previous topics stay.
    server
        .fake
        .set(Behaviour::reply(&[r#"{"topics": [{"label": "Che"#]));
    let next = glassbox_server::topics::extract::next_generation();
    let err = server.state.topics.extract(&id, next).await;
    assert!(err.is_err(), "{err:?}");
    assert_eq!(
        server.state.store.topics(&id).await.unwrap().unwrap(),
        before
    );

    // The call fails: topics from the embeddings instead.
    server.fake.set(Behaviour::Status {
        status: 500,
        message: "down".into(),
    });
    let next = glassbox_server::topics::extract::next_generation();
    assert!(server.state.topics.extract(&id, next).await.unwrap());
    let after = server.state.store.topics(&id).await.unwrap().unwrap();
    assert_eq!(after.source, TopicSource::Offline);
    assert!(!after.topics.is_empty());
}

#[tokio::test]
async fn anthropic_answers_through_the_forced_tool() {
    let server = with_topic_model(Api::Anthropic, "3600000").await;
    let (id, token, _) = server.new_session().await;
    // An exchange for each label, so both topics keep members whether the messages' vectors are
    // ready when it runs (each exchange under its closest label) or not (the model's counts).
    server
        .chat(&id, &token, "Which chess opening suits a beginner?")
        .await;
    server
        .chat(&id, &token, "How do I win a rook endgame a pawn up?")
        .await;
    server.fake.set(Behaviour::ToolCall {
        text: String::new(),
        name: "report_topics".into(),
        argument_parts: vec![TOPICS_JSON[..40].to_owned(), TOPICS_JSON[40..].to_owned()],
    });
    let next = glassbox_server::topics::extract::next_generation();
    assert!(server.state.topics.extract(&id, next).await.unwrap());
    let stored = server.state.store.topics(&id).await.unwrap().unwrap();
    assert_eq!(stored.source, TopicSource::Model);
    assert_eq!(stored.topics[1].label, "Rook endgames");
    let asked = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(
        asked["tool_choice"],
        json!({"type": "tool", "name": "report_topics"})
    );
    assert_eq!(asked["tools"][0]["name"], "report_topics");
}

const SPACE: [(&str, &str); 3] = [
    (
        "How do black holes form from dying stars?",
        "A star of more than about twenty solar masses collapses at the end of its life into a black hole.",
    ),
    (
        "What happens at the event horizon of a black hole?",
        "At the event horizon the escape velocity reaches the speed of light, so not even light leaves the black hole.",
    ),
    (
        "Do black holes evaporate through Hawking radiation?",
        "Yes, black holes slowly lose mass through Hawking radiation; a stellar black hole takes far longer than the universe's age.",
    ),
];

/// Runs one extraction now (the test's servers hold the automatic ones off).
async fn extract_now(server: &TestServer, id: &str) -> SessionTopics {
    let generation = glassbox_server::topics::extract::next_generation();
    assert!(server.state.topics.extract(id, generation).await.unwrap());
    server.state.store.topics(id).await.unwrap().unwrap()
}

fn holding<'a>(topics: &'a SessionTopics, message_id: &str) -> &'a Topic {
    topics
        .topics
        .iter()
        .find(|t| t.message_ids.iter().any(|m| m == message_id))
        .unwrap_or_else(|| panic!("no topic holds {message_id}: {topics:?}"))
}

fn ids_of(view: &Value, key: &str) -> Vec<String> {
    view[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {view}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// A session of three exchanges about sourdough, a standing instruction, three about black holes;
/// its message ids in order. The topic model is set to split the bread three ways.
async fn bread_and_space(server: &TestServer) -> (String, String, Vec<String>) {
    let (id, token, _) = server.new_session().await;
    let mut ids: Vec<String> = Vec::new();
    let exchanges = SOURDOUGH
        .iter()
        .chain(&[("Be concise from now on, please.", "Understood.")])
        .chain(&SPACE);
    for (q, a) in exchanges {
        let answer = say(server, &id, &token, q, a).await;
        ids.push(answer["message"]["id"].as_str().unwrap().to_owned());
        ids.push(answer["reply"]["id"].as_str().unwrap().to_owned());
    }
    server.fake.set_structured(Some(topics_answer(
        &[
            ("Black holes", 6),
            ("Sourdough starter smell", 2),
            ("Dough temperature while rising", 2),
            ("Flat dense loaf", 2),
        ],
        &[ids[6].as_str()],
    )));
    (id, token, ids)
}

/// A server whose topic model is the fake provider and whose extractions run only when the test
/// calls [`extract_now`].
async fn with_held_topic_model() -> TestServer {
    start(&[
        ("GLASSBOX_TOPIC_MODEL", "gpt-4o-mini"),
        ("GLASSBOX_TOPICS_SETTLE_MS", "3600000"),
    ])
    .await
}

/// A filter that names other topics than those an extraction replaces (set by the user against the
/// new ones meanwhile, or carried by another extraction) is left as it is, not mapped by the wrong
/// topics.
#[tokio::test]
async fn a_filter_naming_other_topics_is_not_carried() {
    let server = with_held_topic_model().await;
    let (id, token, ids) = bread_and_space(&server).await;
    let first = extract_now(&server, &id).await;
    let warm = holding(&first, &ids[2]).label.clone();
    let (status, _) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": [warm]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        server
            .state
            .store
            .settings(&id)
            .await
            .unwrap()
            .topics
            .filter_generation,
        first.generation
    );
    server
        .state
        .store
        .update_settings(&id, |s| {
            s.topics.filter_generation += 1;
            Ok::<_, glassbox_server::storage::StorageError>(())
        })
        .await
        .unwrap();
    server.fake.set_structured(Some(topics_answer(
        &[("Sourdough bread", 6), ("Black holes", 6)],
        &[ids[6].as_str()],
    )));
    let second = extract_now(&server, &id).await;
    let stored = server.state.store.settings(&id).await.unwrap().topics;
    assert_eq!(stored.filter, std::slice::from_ref(&warm), "not carried");
    assert_eq!(
        stored.filter_generation, second.generation,
        "it names these topics from now on"
    );
    let view = get(&server, &format!("/api/sessions/{id}/topics"), &token).await["filter"].clone();
    assert_eq!(view["orphaned"], json!([&warm]), "shown as gone: {view}");
    server.fake.set_structured(None);
}

/// The user picks a topic; the topic model then names the topics differently (the selected one
/// merged into a larger one, another gone): the filter follows the selected topic's messages to
/// its successor and says it was renamed, a vanished selection stays greyed until cleared, the
/// filter sends the members (what the bubble counts) and a new message about the subject joins
/// on the next turn.
#[tokio::test]
async fn a_selected_topic_follows_its_messages_when_the_topics_are_regenerated() {
    let server = with_held_topic_model().await;
    let (id, token, ids) = bread_and_space(&server).await;
    let (bread, instruction, space) = (&ids[0..6], &ids[6], &ids[8..14]);
    let first = extract_now(&server, &id).await;
    assert_eq!(first.source, TopicSource::Model);
    assert_eq!(&first.sticky_ids, std::slice::from_ref(instruction));
    let warm = holding(&first, &bread[2]);
    assert_eq!(warm.label, "Dough temperature while rising", "{first:?}");
    assert_eq!(
        warm.message_ids,
        bread[2..4],
        "members by exchange: {first:?}"
    );
    assert_eq!(warm.count, 2, "the count is the members");
    let black = holding(&first, &space[0]);
    assert_eq!(black.message_ids, space, "{first:?}");

    let filter = format!("/api/sessions/{id}/filter");
    let (status, view) = put(
        &server,
        &filter,
        &token,
        json!({"labels": [warm.label, black.label]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    // The members, the instruction, and bread messages close enough to the dough's.
    let kept = ids_of(&view, "messageIds");
    for want in bread[2..4].iter().chain([instruction]).chain(space) {
        assert!(
            kept.contains(want),
            "{want} is a member or the instruction: {view}"
        );
    }

    // Regenerated: the bread is one topic now, the black holes are gone (their messages fit no
    // topic the model names).
    let mut frames = server.ws().await;
    frames.hello_existing(&id, &token).await;
    server.fake.set_structured(Some(topics_answer(
        &[("Sourdough bread", 6), ("Kitchen equipment", 1)],
        &[instruction.as_str()],
    )));
    let second = extract_now(&server, &id).await;
    let merged = holding(&second, &bread[2]);
    assert_eq!(
        merged.label, "Sourdough bread",
        "a merged group takes the new label: {second:?}"
    );
    assert_eq!(merged.message_ids, bread, "{second:?}");
    assert!(
        second
            .topics
            .iter()
            .all(|t| !t.message_ids.contains(&space[0])),
        "{second:?}"
    );
    let stored = server.state.store.settings(&id).await.unwrap().topics;
    assert_eq!(
        stored.filter,
        ["Sourdough bread", "Black holes"],
        "followed, and the vanished one kept"
    );
    assert_eq!(
        stored.filter_generation, second.generation,
        "it names the new topics now"
    );
    // The tabs hear it: a `filter` frame naming the rename and the vanished selection.
    let heard = loop {
        let (_, v) = frames.next().await;
        if v["type"] == "filter" && v["data"]["renamed"].is_array() {
            break v["data"].clone();
        }
    };
    assert_eq!(
        heard["renamed"],
        json!([{"from": "Dough temperature while rising", "to": "Sourdough bread"}]),
        "{heard}"
    );
    assert_eq!(heard["labels"], json!(["Sourdough bread"]), "{heard}");
    assert_eq!(heard["orphaned"], json!(["Black holes"]), "{heard}");
    let kept = ids_of(&heard, "messageIds");
    for want in bread.iter().chain([instruction]) {
        assert!(
            kept.contains(want),
            "{want}: the bubble's six and the instruction: {heard}"
        );
    }
    assert!(space.iter().all(|s| !kept.contains(s)), "{heard}");
    // REST says the same.
    let got = get(&server, &format!("/api/sessions/{id}/topics"), &token).await;
    assert_eq!(got["filter"]["labels"], heard["labels"]);
    assert_eq!(got["filter"]["orphaned"], heard["orphaned"]);
    assert_eq!(got["filter"]["messageIds"], heard["messageIds"]);

    // The vanished selection may stay while others change, and is cleared like any other.
    let (status, view) = put(
        &server,
        &filter,
        &token,
        json!({"labels": ["Black holes", "Sourdough bread"]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["orphaned"], json!(["Black holes"]));
    let (status, body) = put(&server, &filter, &token, json!({"labels": ["Chess"]})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_filter")),
        "{body}"
    );
    let (status, view) = put(
        &server,
        &filter,
        &token,
        json!({"labels": ["Sourdough bread"]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert!(view.get("orphaned").is_none(), "cleared: {view}");

    // Three turns under the filter: each sends the members, the instruction, and the messages
    // about the subject that came after the extraction (scored against the topic's messages).
    let questions = [
        "What oven temperature should I bake the sourdough loaf at?",
        "Should the sourdough loaf bake in a Dutch oven with the lid on?",
        "How long should the baked loaf cool before slicing?",
    ];
    for (turn, q) in questions.iter().enumerate() {
        let answer = say(
            &server,
            &id,
            &token,
            q,
            "Around 230 degrees with steam, then lower.",
        )
        .await;
        let sent = server.fake.requests().last().unwrap().body.clone();
        let texts: Vec<String> = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(
            texts.iter().all(|t| !t.contains("black hole")),
            "turn {turn}: {texts:?}"
        );
        assert!(
            texts.iter().any(|t| t.contains("Be concise")),
            "turn {turn}: {texts:?}"
        );
        for (bq, _) in SOURDOUGH {
            assert!(
                texts.iter().any(|t| t == bq),
                "turn {turn}: {bq} missing from {texts:?}"
            );
        }
        for earlier in &questions[..turn] {
            assert!(
                texts.iter().any(|t| t == earlier),
                "turn {turn}: the new {earlier:?} missing: {texts:?}"
            );
        }
        let receipt: Receipt = serde_json::from_value(answer["reply"]["receipt"].clone()).unwrap();
        assert!(
            receipt
                .parts
                .iter()
                .any(|p| p.reason == Reason::TopicMember),
            "{receipt:?}"
        );
        if turn > 0 {
            assert!(
                receipt.parts.iter().any(|p| p.reason == Reason::TopicMatch),
                "{receipt:?}"
            );
        }
    }
    server.fake.set_structured(None);
}

/// A selected topic is the session's, kept in its database: after the server restarts (same data
/// directory, nothing in memory), the REST view has the same labels and messages, and the next
/// request the provider receives holds only the selected subject's messages and the standing
/// instruction.
#[tokio::test]
async fn a_selected_topic_survives_a_server_restart() {
    let server = start(&[]).await;
    let (id, token, ids, found) = two_subjects(&server).await;
    let bread = found["topics"]["topics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["label"].as_str())
        .find(|l| {
            let l = l.to_lowercase();
            ["sourdough", "starter", "dough", "loaf"]
                .iter()
                .any(|w| l.contains(w))
        })
        .unwrap_or_else(|| panic!("no sourdough topic in {found}"))
        .to_owned();
    let topics = format!("/api/sessions/{id}/topics");
    let (status, view) = put(
        &server,
        &format!("/api/sessions/{id}/filter"),
        &token,
        json!({"labels": [bread]}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    let before = get(&server, &topics, &token).await;
    let kept = ids_of(&before["filter"], "messageIds");
    assert!(kept.contains(&ids[6]), "the instruction is kept: {before}");
    assert!(
        ids[..6].iter().all(|k| !kept.contains(k)),
        "no Kubernetes message: {before}"
    );

    let server = server.restart().await;
    embeddings_ready(&server).await;
    let after = get(&server, &topics, &token).await;
    let labels = |v: &Value| -> Vec<String> {
        v["topics"]["topics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["label"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(labels(&after), labels(&before), "the topics: {after}");
    assert_eq!(after["filter"]["labels"], json!([bread]), "{after}");
    assert_eq!(after["filter"]["labels"], before["filter"]["labels"]);
    assert_eq!(
        after["filter"]["messageIds"], before["filter"]["messageIds"],
        "{after}"
    );

    // The next turn sends what the view keeps, in order, and the new question.
    let texts: Vec<&str> = KUBERNETES
        .iter()
        .flat_map(|(q, a)| [*q, *a])
        .chain(["Be concise from now on, please.", "Understood."])
        .chain(SOURDOUGH.iter().flat_map(|(q, a)| [*q, *a]))
        .collect();
    let mut want: Vec<&str> = ids
        .iter()
        .zip(&texts)
        .filter(|(id, _)| kept.contains(id))
        .map(|(_, text)| *text)
        .collect();
    want.push("How long should the dough proof?");
    let asked = server.fake.requests().len();
    let answer = say(
        &server,
        &id,
        &token,
        "How long should the dough proof?",
        "About 4 hours.",
    )
    .await;
    let requests = server.fake.requests();
    assert_eq!(requests.len(), asked + 1, "one request for the turn");
    let sent: Vec<&str> = requests[asked].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        sent, want,
        "only the selected subject's messages and the instruction"
    );
    assert!(sent.iter().all(|t| !t.contains("Kubernetes")), "{sent:?}");
    let receipt: Receipt = serde_json::from_value(answer["reply"]["receipt"].clone()).unwrap();
    assert_eq!(receipt.filter.map(|f| f.labels), Some(vec![bread]));
}
