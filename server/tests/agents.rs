//! Agents from the configuration file over the real server: the agent a new session gets (the
//! first, or the one asked for over WebSocket and REST), its system prompt and model reaching the
//! provider, an existing session keeping its agent, unknown agents refused with the names that
//! exist, and a bad file stopping the start with its file and line.

mod support;

use std::path::Path;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

/// Writes a configuration with two agents (and an item folder for the first) under `dir`.
fn configure(dir: &Path) -> String {
    let items = dir.join("alpha-items");
    std::fs::create_dir_all(&items).unwrap();
    std::fs::write(
        items.join("r.md"),
        "---\ntype: rule\nname: Short\ninclude: always\n---\nAnswer briefly.\n",
    )
    .unwrap();
    let file = dir.join("glassbox.toml");
    std::fs::write(
        &file,
        "[[agents]]\nname = \"alpha\"\nsystem_prompt = \"You are Alpha.\"\nitems = \"alpha-items\"\n\n\
         [[agents]]\nname = \"beta\"\nsystem_prompt = \"You are Beta.\"\nmodel = \"beta-model\"\nmax_chat_turns = 2\n",
    )
    .unwrap();
    file.display().to_string()
}

/// The system prompt of a request the fake provider received (OpenAI format).
fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Starts a server on configuration `file` (data under `dir`), which must refuse to start; the
/// error's words (`why`: what the test expects to refuse it).
async fn start_refused(dir: &Path, file: &str, why: &str) -> String {
    let mut vars = std::collections::HashMap::new();
    vars.insert("GLASSBOX_CONFIG".to_owned(), file.to_owned());
    vars.insert(
        "GLASSBOX_DATA_DIR".to_owned(),
        dir.join("data").display().to_string(),
    );
    vars.insert("GLASSBOX_EMBEDDINGS".to_owned(), "off".to_owned());
    let config = glassbox_server::config::Config::from_lookup(|k| vars.get(k).cloned()).unwrap();
    match glassbox_server::build_state(config).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{why}"),
    }
}

async fn server(dir: &Path) -> TestServer {
    let file = configure(dir);
    TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["Fine."]),
        &[("GLASSBOX_CONFIG", file.as_str())],
    )
    .await
}

#[tokio::test]
async fn a_new_session_gets_the_first_agent_or_the_one_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;

    // REST chat without an agent: the first one, its prompt.
    let body = server
        .post_json("/api/chat", &json!({"message": "Hi"}))
        .await;
    assert_eq!(body["session"]["agent"], "alpha", "{body}");
    assert_eq!(body["reply"]["status"], "complete", "{body}");
    let sent = &server.fake.requests()[0].body;
    assert!(system_of(sent).starts_with("You are Alpha."), "{sent}");
    assert_eq!(sent["model"], server.state.config.model);

    // REST chat for beta: its prompt and its model.
    let body = server
        .post_json("/api/chat", &json!({"message": "Hi", "agent": "beta"}))
        .await;
    assert_eq!(body["session"]["agent"], "beta", "{body}");
    assert_eq!(body["session"]["model"], "beta-model", "{body}");
    let sent = &server.fake.requests()[1].body;
    assert!(system_of(sent).starts_with("You are Beta."), "{sent}");
    assert_eq!(sent["model"], "beta-model");

    // POST /api/sessions with and without a body.
    let created = server
        .post_json("/api/sessions", &json!({"agent": "beta"}))
        .await;
    assert_eq!(created["agent"], "beta", "{created}");
    let bare = server
        .http
        .post(server.url("/api/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 200);
    let bare: Value = bare.json().await.unwrap();
    assert_eq!(bare["agent"], "alpha", "{bare}");
    let text = server
        .http
        .post(server.url("/api/sessions"))
        .header("content-type", "text/plain")
        .body("agent=beta")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 415);

    // Over the WebSocket.
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"agent": "beta"}}))
        .await;
    let (f, _) = ws.next().await;
    let ServerEvent::Session(info) = f.event else {
        panic!("expected session, got {f:?}")
    };
    assert_eq!(info.agent.as_deref(), Some("beta"));
    assert_eq!(info.model, "beta-model");
}

#[tokio::test]
async fn an_unknown_agent_is_refused_with_the_configured_names() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let resp = server
        .post("/api/sessions", &json!({"agent": "gamma"}))
        .await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_agent", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("gamma") && message.contains("alpha, beta"),
        "{message}"
    );

    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"agent": "gamma"}}))
        .await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "error", "{raw}");
    assert_eq!(raw["data"]["code"], "unknown_agent", "{raw}");
    // Nothing was created.
    assert!(server.fake.requests().is_empty());
}

#[tokio::test]
async fn an_existing_session_keeps_its_agent() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let created = server
        .post_json("/api/sessions", &json!({"agent": "beta"}))
        .await;
    let (id, token) = (
        created["sessionId"].as_str().unwrap(),
        created["token"].as_str().unwrap(),
    );
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {"sessionId": id, "token": token, "agent": "alpha"}}))
        .await;
    let (f, _) = ws.next().await;
    let ServerEvent::Session(info) = f.event else {
        panic!("expected session, got {f:?}")
    };
    assert_eq!(info.agent.as_deref(), Some("beta"));
    let body = server.chat(id, token, "Who are you?").await;
    assert_eq!(body["session"]["model"], "beta-model", "{body}");
    let sent = server.fake.requests().last().unwrap().body.clone();
    assert!(system_of(&sent).starts_with("You are Beta."), "{sent}");
    let settings = server.state.store.settings(id).await.unwrap();
    assert_eq!(settings.agent.as_deref(), Some("beta"));
}

#[tokio::test]
async fn a_bad_configuration_stops_the_start_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = configure(dir.path());
    std::fs::write(
        dir.path().join("alpha-items/bad.md"),
        "---\ntype: rule\nname: Bad\ninclude: sometimes\n---\nText\n",
    )
    .unwrap();
    let text = start_refused(dir.path(), &file, "a bad item file must stop the start").await;
    let bad = dir.path().join("alpha-items/bad.md");
    assert!(
        text.starts_with(&format!("{}:4: ", bad.display())),
        "{text}"
    );
    assert!(text.contains("sometimes"), "{text}");
}

/// An agent's own words (placeholder, welcome, starters) reach the widget in `session`, over the
/// WebSocket and REST; an agent with none sends none; too many starters stop the start at its line.
#[tokio::test]
async fn an_agents_greeting_comes_with_its_sessions_and_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("glassbox.toml");
    std::fs::write(
        &file,
        "[[agents]]\nname = \"shop\"\nplaceholder = \"Ask about your order…\"\n\
         welcome = \"Hi! I know your orders.\"\nstarters = [\"Where is my order?\", \"Return an item\"]\n\n\
         [[agents]]\nname = \"plain\"\n",
    )
    .unwrap();
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["Fine."]),
        &[("GLASSBOX_CONFIG", file.display().to_string().as_str())],
    )
    .await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "session");
    assert_eq!(raw["data"]["placeholder"], "Ask about your order…");
    assert_eq!(raw["data"]["welcome"], "Hi! I know your orders.");
    assert_eq!(
        raw["data"]["starters"],
        json!(["Where is my order?", "Return an item"])
    );
    let rest = server
        .post_json("/api/sessions", &json!({"agent": "plain"}))
        .await;
    for key in ["placeholder", "welcome", "starters"] {
        assert!(rest.get(key).is_none(), "{key}: {rest}");
    }

    std::fs::write(
        &file,
        "[[agents]]\nname = \"shop\"\nstarters = [\"a\", \"b\", \"c\", \"d\", \"e\"]\n",
    )
    .unwrap();
    let text = start_refused(
        dir.path(),
        &file.display().to_string(),
        "five starters must stop the start",
    )
    .await;
    assert!(
        text.starts_with(&format!("{}:1: ", file.display())),
        "{text}"
    );
    assert!(text.contains("starters: at most 4"), "{text}");
}

/// A new session's first message (REST, no session yet) is planned from what was just stored with
/// it, nothing read back; the model gets exactly what a retry of that reply sends it, which reads
/// the session back from the database: the agent's prompt, its rule, the page context.
#[tokio::test]
async fn a_first_message_sends_the_model_what_reading_the_session_back_gives() {
    let dir = tempfile::tempdir().unwrap();
    let file = configure(dir.path());
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::Status {
            status: 400,
            message: "refused".into(),
        },
        &[("GLASSBOX_CONFIG", file.as_str())],
    )
    .await;
    let body = server
        .post_json(
            "/api/chat",
            &json!({"agent": "alpha", "message": "tell me", "context": {"page": "settings"}}),
        )
        .await;
    assert_eq!(body["reply"]["status"], "failed", "{body}");
    let (session, token) = (
        body["session"]["sessionId"].as_str().unwrap(),
        body["session"]["token"].as_str().unwrap(),
    );
    let reply_id = body["reply"]["id"].as_str().unwrap();
    server.fake.set(Behaviour::reply(&["Whole ", "answer."]));
    let mut ws = server.ws().await;
    // Joined: an agent's session answers `items` among the hello's frames; `filter` is the last.
    ws.send(json!({"type": "hello", "data": {"sessionId": session, "token": token}}))
        .await;
    while ws.next_any().await.1["type"] != "filter" {}
    ws.send(json!({"type": "retry", "data": {"messageId": reply_id}}))
        .await;
    let frames = ws.until_reply_ends().await;
    assert!(matches!(
        frames.last().map(|f| &f.event),
        Some(ServerEvent::Done(_))
    ));
    let requests = server.fake.requests();
    assert!(requests.len() >= 2, "{} requests", requests.len());
    let (first, retry) = (&requests[0].body, &requests[requests.len() - 1].body);
    let sent = first.to_string();
    assert!(
        system_of(first).contains("You are Alpha.") && sent.contains("Answer briefly."),
        "{sent}"
    );
    assert_eq!(first, retry);
}
