//! Verified users (GLASSBOX_IDENTITY_SECRET): a host vouches for its user with an HMAC of the id;
//! the user's sessions are theirs on any connection without the token, listed, renamed and deleted;
//! wrong hashes, borrowed hashes and other users' sessions read nothing; limits and the user's daily
//! budget count per user.

mod support;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use glassbox_server::identity::user_hash;
use serde_json::{Value, json};
use support::{Api, TestServer, Ws};

const SECRET: &str = "test-identity-secret-0123456789";

async fn start(extra: &[(&str, &str)]) -> TestServer {
    let mut vars = vec![("GLASSBOX_IDENTITY_SECRET", SECRET)];
    vars.extend_from_slice(extra);
    TestServer::start_with(Api::OpenAi, Behaviour::reply(&["Sure", "."]), &vars).await
}

fn user(id: &str) -> Value {
    json!({"id": id, "hash": user_hash(SECRET, id)})
}

/// Sends `hello` with `data`; returns the `session` frame's data after the history has loaded, or
/// the error frame's.
async fn hello(ws: &mut Ws, data: Value) -> Result<Value, Value> {
    ws.send(json!({"type": "hello", "data": data})).await;
    let (_, first) = ws.next().await;
    match first["type"].as_str() {
        Some("session") => {}
        _ => return Err(first["data"].clone()),
    }
    loop {
        let (_, raw) = ws.next().await;
        if raw["type"] == "filter" {
            return Ok(first["data"].clone());
        }
    }
}

/// Sends a chat message and waits for the reply to end.
async fn say(ws: &mut Ws, text: &str) {
    ws.send(json!({"type": "chat", "data": {"message": text}}))
        .await;
    ws.until_reply_ends().await;
}

/// The next `sessions` frame's list (other frames are skipped).
async fn sessions(ws: &mut Ws) -> Vec<Value> {
    loop {
        let (frame, raw) = ws.next().await;
        match frame.event {
            ServerEvent::Sessions(_) => return raw["data"]["sessions"].as_array().unwrap().clone(),
            ServerEvent::Error(e) => panic!("error instead of sessions: {e:?}"),
            _ => {}
        }
    }
}

/// The next error frame's data.
async fn error(ws: &mut Ws) -> Value {
    loop {
        let (_, raw) = ws.next().await;
        if raw["type"] == "error" {
            return raw["data"].clone();
        }
    }
}

fn get(server: &TestServer, path: &str, who: Option<(&str, &str)>) -> reqwest::RequestBuilder {
    let req = server.http.get(server.url(path));
    match who {
        Some((id, hash)) => req
            .header("x-glassbox-user", id)
            .header("x-glassbox-user-hash", hash),
        None => req,
    }
}

#[tokio::test]
async fn a_user_finds_their_conversation_on_another_connection_without_its_token() {
    let server = start(&[]).await;
    // The first device: a new session, owned by the user.
    let mut laptop = server.ws().await;
    let info = hello(&mut laptop, json!({"user": user("ann")}))
        .await
        .unwrap();
    assert_eq!(info["user"], "ann");
    let id = info["sessionId"].as_str().unwrap().to_owned();
    assert!(
        info["token"].is_string(),
        "a new session still gets its token"
    );
    say(
        &mut laptop,
        "  How do I\n\nsort a list in Rust, keeping equal elements in their original order please?",
    )
    .await;

    // The second device knows only the user: it lists the sessions, and opens one without a token.
    let mut phone = server.ws().await;
    let other = hello(&mut phone, json!({"user": user("ann")}))
        .await
        .unwrap();
    assert_ne!(
        other["sessionId"],
        id.as_str(),
        "a hello without an id opens a new session"
    );
    phone
        .send(json!({"type": "list_sessions", "data": {}}))
        .await;
    let list = sessions(&mut phone).await;
    assert_eq!(
        list.len(),
        1,
        "the empty new session is not listed: {list:?}"
    );
    assert_eq!(list[0]["sessionId"], id.as_str());
    let title = list[0]["title"].as_str().unwrap();
    assert_eq!(title.chars().count(), 80, "{title}");
    assert!(
        title.starts_with("How do I sort a list in Rust") && title.ends_with('…'),
        "{title}"
    );
    assert!(
        list[0]["updatedAt"].as_i64().unwrap() > 1_700_000_000_000,
        "milliseconds"
    );

    let mut phone = server.ws().await;
    let resumed = hello(&mut phone, json!({"sessionId": id, "user": user("ann")}))
        .await
        .unwrap();
    assert_eq!(resumed["sessionId"], id.as_str());
    assert!(resumed["token"].is_null(), "the token is never shown again");
    say(&mut phone, "And in reverse?").await;
    // Both devices are in one conversation: the laptop hears the phone's message.
    let heard = loop {
        let (frame, _) = laptop.next().await;
        if let ServerEvent::Accepted(a) = frame.event {
            break a.message.content;
        }
    };
    assert_eq!(heard, "And in reverse?");

    // REST with the user's headers: the list, and the session itself, without a bearer token.
    let hash = user_hash(SECRET, "ann");
    let listed: Value = get(&server, "/api/sessions", Some(("ann", &hash)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"][0]["sessionId"], id.as_str());
    let session = get(
        &server,
        &format!("/api/sessions/{id}"),
        Some(("ann", &hash)),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(session.status(), 200);
    let session: Value = session.json().await.unwrap();
    assert_eq!(session["messages"].as_array().unwrap().len(), 4);

    // An id beyond ASCII goes percent-encoded in the header.
    let id = "zoë@example.com";
    let hash = user_hash(SECRET, id);
    let created = server
        .http
        .post(server.url("/api/sessions"))
        .header("x-glassbox-user", "zo%C3%AB%40example.com")
        .header("x-glassbox-user-hash", &hash)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["user"], id);
}

#[tokio::test]
async fn wrong_hashes_and_other_users_read_nothing() {
    let server = start(&[]).await;
    let mut ann = server.ws().await;
    let id = hello(&mut ann, json!({"user": user("ann")})).await.unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    say(&mut ann, "my secret plans").await;
    let anonymous_id = {
        let mut ws = server.ws().await;
        hello(&mut ws, json!({})).await.unwrap()["sessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    let bob_hash = user_hash(SECRET, "bob");
    let refusals = [
        (
            "wrong hash",
            json!({"sessionId": id, "user": {"id": "ann", "hash": "00".repeat(32)}}),
        ),
        (
            "missing hash",
            json!({"sessionId": id, "user": {"id": "ann"}}),
        ),
        (
            "another user's hash",
            json!({"sessionId": id, "user": {"id": "ann", "hash": bob_hash}}),
        ),
        (
            "another user's session",
            json!({"sessionId": id, "user": user("bob")}),
        ),
        (
            "an anonymous session",
            json!({"sessionId": anonymous_id, "user": user("bob")}),
        ),
        (
            "a wrong hash, even for a new session",
            json!({"user": {"id": "bob", "hash": "ab"}}),
        ),
        ("an id too long", json!({"user": user(&"x".repeat(129))})),
    ];
    for (why, data) in refusals {
        let mut ws = server.ws().await;
        let err = hello(&mut ws, data).await.expect_err(why);
        assert_eq!(err["code"], "unauthorized", "{why}: {err}");
        // Nothing was joined: the connection is still waiting for its hello.
        ws.send(json!({"type": "list_sessions", "data": {}})).await;
        assert_eq!(error(&mut ws).await["code"], "hello_required", "{why}");
    }

    // Bob sees none of Ann's sessions, over REST either; without a user the list is refused.
    let mut bob = server.ws().await;
    hello(&mut bob, json!({"user": user("bob")})).await.unwrap();
    bob.send(json!({"type": "list_sessions", "data": {}})).await;
    assert!(sessions(&mut bob).await.is_empty());
    // Not among his: `not_found`, and his own conversation goes on (no `unauthorized` ending it).
    bob.send(json!({"type": "delete_session", "data": {"sessionId": id}}))
        .await;
    assert_eq!(error(&mut bob).await["code"], "not_found");
    bob.send(json!({"type": "rename_session", "data": {"sessionId": id, "title": "mine"}}))
        .await;
    assert_eq!(error(&mut bob).await["code"], "not_found");
    say(&mut bob, "still mine").await;
    let resp = get(
        &server,
        &format!("/api/sessions/{id}"),
        Some(("bob", &bob_hash)),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = get(&server, "/api/sessions", None).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("verified user"),
        "{body}"
    );
    let resp = get(&server, "/api/sessions", Some(("ann", &bob_hash)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    // An anonymous connection cannot list.
    let mut anon = server.ws().await;
    hello(&mut anon, json!({})).await.unwrap();
    anon.send(json!({"type": "list_sessions", "data": {}}))
        .await;
    assert_eq!(error(&mut anon).await["code"], "unauthorized");
    // Ann's session is untouched.
    let messages = server.state.store.messages(&id).await.unwrap();
    assert_eq!(messages.len(), 2);
}

#[tokio::test]
async fn without_a_secret_a_user_is_refused_in_words_that_say_so() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["Sure."])).await;
    let mut ws = server.ws().await;
    let err = hello(&mut ws, json!({"user": user("ann")}))
        .await
        .unwrap_err();
    assert_eq!(err["code"], "unauthorized");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("identity is not configured"),
        "{err}"
    );
    // Anonymous sessions work as ever.
    assert!(hello(&mut ws, json!({})).await.is_ok());
    let resp = server
        .http
        .post(server.url("/api/sessions"))
        .header("x-glassbox-user", "ann")
        .header("x-glassbox-user-hash", user_hash(SECRET, "ann"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}

#[tokio::test]
async fn a_user_renames_and_deletes_their_sessions_from_any_of_them() {
    let server = start(&[]).await;
    let mut ws = server.ws().await;
    let first = hello(&mut ws, json!({"user": user("ann")})).await.unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    say(&mut ws, "First topic").await;
    let mut ws = server.ws().await;
    let second = hello(&mut ws, json!({"user": user("ann")})).await.unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    say(&mut ws, "Second topic").await;
    ws.send(json!({"type": "list_sessions", "data": {}})).await;
    let list = sessions(&mut ws).await;
    let ids: Vec<&str> = list
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [second.as_str(), first.as_str()], "newest first");

    // Rename another of hers from this connection; a null title returns to the first message.
    ws.send(json!({"type": "rename_session", "data": {"sessionId": first, "title": "  Plans\nfor May "}}))
        .await;
    let list = sessions(&mut ws).await;
    assert_eq!(list[1]["title"], "Plans for May");
    ws.send(json!({"type": "rename_session", "data": {"sessionId": first, "title": null}}))
        .await;
    assert_eq!(sessions(&mut ws).await[1]["title"], "First topic");
    // Over REST, with the user's headers.
    let hash = user_hash(SECRET, "ann");
    let renamed: Value = server
        .http
        .put(server.url(&format!("/api/sessions/{first}/title")))
        .header("x-glassbox-user", "ann")
        .header("x-glassbox-user-hash", &hash)
        .json(&json!({"title": "x".repeat(100)}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(renamed["title"].as_str().unwrap().chars().count(), 80);

    // Delete the other one from here: this connection stays in its own session.
    ws.send(json!({"type": "delete_session", "data": {"sessionId": first}}))
        .await;
    let list = sessions(&mut ws).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["sessionId"], second.as_str());
    assert!(server.state.store.session(&first).await.unwrap().is_none());
    say(&mut ws, "still here").await;
}

#[tokio::test]
async fn a_users_daily_budget_spans_their_sessions_and_their_limits_follow_them() {
    let server = start(&[
        ("GLASSBOX_BUDGET_USER_DAILY_TOKENS", "12"),
        ("GLASSBOX_LIMIT_SESSIONS_PER_HOUR", "2"),
    ])
    .await;
    let hash = user_hash(SECRET, "ann");
    let post = |body: Value, as_ann: bool| {
        let req = server.http.post(server.url("/api/chat")).json(&body);
        if as_ann {
            req.header("x-glassbox-user", "ann")
                .header("x-glassbox-user-hash", &hash)
        } else {
            req
        }
    };
    // Each exchange costs a few tokens (the fake reports words in + pieces out).
    let first: Value = post(json!({"message": "one two three"}), true)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = first["session"]["sessionId"].as_str().unwrap().to_owned();
    let mut refused = None;
    for _ in 0..10 {
        let resp = post(json!({"sessionId": id, "message": "one two three"}), true)
            .send()
            .await
            .unwrap();
        if resp.status() != 200 {
            refused = Some(resp);
            break;
        }
    }
    let refused = refused.expect("the user's budget ran out");
    assert_eq!(refused.status(), 402);
    assert!(
        refused.headers().get("retry-after").is_some(),
        "it resets at midnight UTC"
    );
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("you have used today's budget")
    );
    // A new session of the same user is refused too; an anonymous one is not.
    let resp = post(json!({"message": "again"}), true)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        402,
        "the day's budget spans the user's sessions"
    );
    let calls = server.fake.requests().len();
    let resp = post(json!({"message": "hello"}), false)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(server.fake.requests().len(), calls + 1);

    // Two sessions an hour: Ann has made two (from this address); the address itself, anonymous,
    // made one and may make another; Bob, on the same address, has his own count.
    let resp = post(json!({"message": "third"}), true)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["error"]["message"].as_str().unwrap().split(';').next(),
        Some("too many new sessions for this user")
    );
    let bob = server
        .http
        .post(server.url("/api/sessions"))
        .header("x-glassbox-user", "bob")
        .header("x-glassbox-user-hash", user_hash(SECRET, "bob"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(bob.status(), 200);
    let anon = server.post("/api/sessions", &json!({})).await;
    assert_eq!(anon.status(), 200);
}

#[tokio::test]
async fn cors_lets_allowed_pages_send_the_user_headers() {
    let server = start(&[("GLASSBOX_ALLOWED_ORIGINS", "https://shop.example.com")]).await;
    let resp = server
        .http
        .request(reqwest::Method::OPTIONS, server.url("/api/sessions"))
        .header("origin", "https://shop.example.com")
        .header("access-control-request-method", "GET")
        .header(
            "access-control-request-headers",
            "x-glassbox-user, x-glassbox-user-hash",
        )
        .send()
        .await
        .unwrap();
    let allowed = resp.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allowed.contains("x-glassbox-user") && allowed.contains("x-glassbox-user-hash"),
        "{allowed}"
    );
}
