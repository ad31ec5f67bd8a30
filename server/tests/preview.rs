//! The preview of a draft: the receipt the turn would have, from the same plan as the reply's, with
//! nothing stored, nothing spent and the provider not called; over REST and the WebSocket; refused
//! when invalid or too frequent.

mod support;

use glassbox_core::context::{PartKind, Receipt};
use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

async fn preview(server: &TestServer, id: &str, token: &str, body: Value) -> reqwest::Response {
    server
        .http
        .post(server.url(&format!("/api/sessions/{id}/preview")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The receipt with the answered message's id taken out (a draft has none yet).
fn without_message_id(mut r: Receipt) -> Receipt {
    for p in &mut r.parts {
        if let PartKind::UserMessage { id } = &mut p.kind {
            *id = None;
        }
    }
    r
}

#[tokio::test]
async fn a_previewed_draft_has_the_receipt_its_turn_gets_and_nothing_is_spent() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["Sure", "."])).await;
    let (id, token, _) = server.new_session().await;
    server
        .chat(&id, &token, "What is a sourdough starter?")
        .await;
    server
        .chat(&id, &token, "How warm should the dough rise?")
        .await;
    let asked = server.fake.requests().len();
    let spent = server.state.budgets.of_session(&id).await.unwrap();
    let stored = server.messages(&id, &token).await.len();

    let draft = json!({"message": "And how long in the oven?", "context": {"page": "/bread"}});
    let resp = preview(&server, &id, &token, draft.clone()).await;
    assert_eq!(resp.status(), 200);
    let previewed: Receipt = resp.json().await.unwrap();
    assert!(
        previewed
            .parts
            .iter()
            .any(|p| matches!(&p.kind, PartKind::UserMessage { id: None })),
        "{previewed:?}"
    );
    assert!(
        previewed
            .parts
            .iter()
            .any(|p| matches!(&p.kind, PartKind::PageContext { keys } if keys == &["page"])),
        "{previewed:?}"
    );
    assert_eq!(
        server.fake.requests().len(),
        asked,
        "the provider was not called"
    );
    assert_eq!(
        server.messages(&id, &token).await.len(),
        stored,
        "nothing stored"
    );
    assert_eq!(server.state.budgets.of_session(&id).await.unwrap(), spent);

    // The same draft sent: its reply's receipt is the preview's.
    let body = server.chat_with(&token, json!({"sessionId": id, "message": "And how long in the oven?", "context": {"page": "/bread"}})).await;
    let sent: Receipt = serde_json::from_value(body["reply"]["receipt"].clone()).unwrap();
    assert_eq!(without_message_id(sent), previewed);
}

#[tokio::test]
async fn previews_are_checked_and_rate_limited_and_answer_over_the_websocket() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["Fine."]),
        &[("GLASSBOX_LIMIT_PREVIEWS_PER_MINUTE", "2")],
    )
    .await;
    let mut ws = server.ws().await;
    let (id, token) = ws.hello_new().await;

    ws.send(json!({"type": "preview", "data": {"message": "Hello there", "clientMessageId": "draft-1"}}))
        .await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "preview", "{raw}");
    assert_eq!(raw["data"]["clientMessageId"], "draft-1");
    let receipt: Receipt = serde_json::from_value(raw["data"]["receipt"].clone()).unwrap();
    assert!(receipt.totals.counted_input_tokens > 0, "{receipt:?}");

    // An empty draft is refused as a message would be.
    let resp = preview(&server, &id, &token, json!({"message": "  "})).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_message", "{body}");

    // Two a minute here (the empty draft spent none): the next one is refused with when to try
    // again.
    let ok = preview(&server, &id, &token, json!({"message": "Hi"})).await;
    assert_eq!(ok.status(), 200);
    let refused = preview(&server, &id, &token, json!({"message": "Hi"})).await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));

    // Only with the session's token.
    let resp = preview(&server, &id, "wrong", json!({"message": "Hi"})).await;
    assert_eq!(resp.status(), 401);
    assert!(server.fake.requests().is_empty());
}
