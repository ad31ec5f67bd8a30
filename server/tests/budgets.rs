//! Spending caps: a session budget reached mid-conversation refuses the next message with
//! `budget_exhausted` before the provider is called (nothing stored); the server's daily budget
//! does the same for every session and says when it resets; the widget hears the budget.

mod support;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

async fn start(extra: &[(&str, &str)]) -> TestServer {
    TestServer::start_with(Api::OpenAi, Behaviour::reply(&["Sure."]), extra).await
}

async fn post_chat(server: &TestServer, id: &str, token: &str, text: &str) -> reqwest::Response {
    server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(token)
        .json(&json!({"sessionId": id, "message": text}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_session_budget_reached_mid_conversation_refuses_before_the_provider() {
    // The fake provider reports input words + output pieces: each exchange here costs a few
    // tokens more than the last (the history grows).
    let server = start(&[("GLASSBOX_BUDGET_SESSION_TOKENS", "20")]).await;
    let (id, token, created) = server.new_session().await;
    assert_eq!(created["budget"], json!({"limit": 20, "used": 0}));
    let mut sent = 0;
    let refused = loop {
        let resp = post_chat(&server, &id, &token, "a short question here").await;
        if resp.status() != 200 {
            break resp;
        }
        sent += 1;
        assert!(sent < 10, "the budget never ran out");
    };
    assert!(sent >= 1, "the first message fits the budget");
    assert_eq!(refused.status(), 402);
    assert!(
        refused.headers().get("retry-after").is_none(),
        "a session budget does not reset"
    );
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "budget_exhausted");
    assert_eq!(body["error"]["retryable"], false);
    // Nothing stored for the refused one, and the provider was called once per answered message.
    let users = server
        .messages(&id, &token)
        .await
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, sent);
    assert_eq!(server.fake.requests().len(), sent);
    // What was spent is what the provider reported, and the session frame says so.
    let spent: u64 = server
        .messages(&id, &token)
        .await
        .iter()
        .filter_map(|m| {
            let u = &m["usage"];
            Some(u["inputTokens"].as_u64()? + u["outputTokens"].as_u64()?)
        })
        .sum();
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
        .await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["data"]["budget"], json!({"limit": 20, "used": spent}));
    // A new session has its own budget.
    let (other, other_token, _) = server.new_session().await;
    assert_eq!(
        post_chat(&server, &other, &other_token, "hi")
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn the_daily_budget_covers_every_session_and_says_when_it_resets() {
    let server = start(&[("GLASSBOX_BUDGET_DAILY_TOKENS", "5")]).await;
    let (a, a_token, _) = server.new_session().await;
    assert_eq!(
        post_chat(&server, &a, &a_token, "spend most of the day")
            .await
            .status(),
        200
    );
    let (b, b_token, _) = server.new_session().await;
    let resp = post_chat(&server, &b, &b_token, "and now?").await;
    assert_eq!(resp.status(), 402);
    let secs: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&secs), "until midnight UTC: {secs}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "budget_exhausted");
    assert!(body["error"]["retryAfterMs"].as_u64().unwrap() <= 86_400_000);
    assert_eq!(server.fake.requests().len(), 1);
}

#[tokio::test]
async fn tabs_hear_the_budget_after_each_reply() {
    let server = start(&[("GLASSBOX_BUDGET_SESSION_TOKENS", "1000")]).await;
    let mut ws = server.ws().await;
    ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "count me"}}))
        .await;
    let frames = ws.until_reply_ends().await;
    let budget = frames
        .iter()
        .find_map(|f| match &f.event {
            ServerEvent::Budget(b) => Some(*b),
            _ => None,
        })
        .expect("a budget frame");
    assert_eq!(budget.limit, 1000);
    assert!(budget.used > 0 && budget.remaining() < 1000, "{budget:?}");
}

#[tokio::test]
async fn a_failed_call_still_counts_what_went_and_came_back() {
    let server = start(&[("GLASSBOX_BUDGET_SESSION_TOKENS", "1000")]).await;
    server.fake.set(Behaviour::Cut {
        chunks: vec!["Half ".into(), "an ".into(), "answer".into()],
        after: 2,
    });
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "this reply will break off").await;
    assert_eq!(body["reply"]["status"], "failed", "{body}");
    let budget = server.state.budgets.of_session(&id).await.unwrap().unwrap();
    // The provider reported nothing; our count of the request and of "Half an " is charged.
    assert!(budget.used >= 5, "{budget:?}");
}

/// Eight sessions send at once against one daily budget: each call holds its prompt and its reply's
/// cap until it ends, so together they spend no more than the budget (without the holds, all
/// eight passed the check before any had spent, and spent eight times what one does).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_turns_against_one_budget_spend_no_more_than_it() {
    let chunks: Vec<String> = (0..300).map(|i| format!("w{i} ")).collect();
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::Reply {
            chunks,
            delay: std::time::Duration::from_millis(1),
        },
        &[("GLASSBOX_BUDGET_DAILY_TOKENS", "1000")],
    )
    .await;
    let mut sessions = Vec::new();
    for _ in 0..8 {
        let (id, token, _) = server.new_session().await;
        sessions.push((id, token));
    }
    let answers = futures::future::join_all(
        sessions
            .iter()
            .map(|(id, token)| post_chat(&server, id, token, "tell me everything you know")),
    )
    .await;
    // Refused before the message is stored (402), or in its turn: the reply fails with
    // `budget_exhausted` before the provider is called.
    let mut complete = 0;
    let mut refused = 0;
    for answer in answers {
        if answer.status() == 402 {
            refused += 1;
            continue;
        }
        assert_eq!(answer.status(), 200);
        let body: Value = answer.json().await.unwrap();
        match body["reply"]["status"].as_str() {
            Some("complete") => complete += 1,
            _ => {
                assert_eq!(body["reply"]["error"]["code"], "budget_exhausted", "{body}");
                refused += 1;
            }
        }
    }
    assert!(complete >= 1, "the first fits");
    assert_eq!(complete + refused, 8);
    assert_eq!(
        server.fake.requests().len(),
        complete,
        "no refused call reached the provider"
    );
    let day = glassbox_server::ids::now_ms().div_euclid(86_400_000);
    let spent = server
        .state
        .store
        .tokens_spent(&sessions[0].0, day)
        .await
        .expect("spent")
        .server_day;
    let one = 300 + 5; // a whole reply and its prompt, as the fake provider counts them
    assert!(
        spent > 0 && spent <= 1_000,
        "spent {spent} of a budget of 1000"
    );
    assert!(
        complete < 8 && spent < 8 * one,
        "{complete} complete, {spent} spent"
    );
}
