//! A session's items and overrides over the real server: a new session starts with its agent's
//! `always` items; items are added (as `manual`) and removed by REST and WebSocket frames, heard by
//! every tab; overrides of the agent's defaults are checked, stored in the session's settings and
//! reach both providers (temperature, top_p, the longest reply).

mod support;

use std::path::Path;

use glassbox_core::wire::ServerEvent;
use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

/// An agent with an `always` rule, a `manual` reference and an `agent` reference.
fn configure(dir: &Path) -> String {
    let items = dir.join("items");
    std::fs::create_dir_all(&items).unwrap();
    let write = |file: &str, text: &str| std::fs::write(items.join(file), text).unwrap();
    write(
        "brief.md",
        "---\ntype: rule\nname: Be brief\npriority: 1\ninclude: always\n---\nAnswer in one paragraph.\n",
    );
    write(
        "sql.md",
        "---\ntype: reference\nname: SQL indexes\ndescription: B-trees\npriority: 5\ninclude: manual\n---\nAn index on (a, b) serves a and a+b.\n",
    );
    write(
        "bread.md",
        "---\ntype: reference\nname: Sourdough\npriority: 6\ninclude: agent\n---\nFeed the starter daily.\n",
    );
    let file = dir.join("glassbox.toml");
    std::fs::write(
        &file,
        "[[agents]]\nname = \"helper\"\nitems = \"items\"\ntemperature = 0.4\n",
    )
    .unwrap();
    file.display().to_string()
}

async fn server(api: Api, dir: &Path) -> TestServer {
    let file = configure(dir);
    TestServer::start_with(
        api,
        Behaviour::reply(&["Fine."]),
        &[("GLASSBOX_CONFIG", file.as_str())],
    )
    .await
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| format!("{}:{}:{}", i["kind"], i["name"], i["included"]).replace('"', ""))
        .collect()
}

async fn send(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Value,
) -> reqwest::Response {
    server
        .http
        .request(method, server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn items_are_added_and_removed_over_rest_and_every_tab_hears_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(Api::OpenAi, dir.path()).await;
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let mut id = String::new();
    let mut token = String::new();
    // session, snapshot, context (load), items, topics, filter
    let mut first_items = None;
    for _ in 0..6 {
        let (f, raw) = ws.next().await;
        match f.event {
            ServerEvent::Session(info) => {
                id = info.session_id;
                token = info.token.unwrap();
            }
            ServerEvent::Items(_) => first_items = Some(raw["data"].clone()),
            _ => {}
        }
    }
    let view = first_items.expect("a session with an agent hears its items after hello");
    assert_eq!(view["agent"], "helper");
    assert_eq!(names(&view["session"]), ["rule:Be brief:always"]);
    assert_eq!(view["available"].as_array().unwrap().len(), 3);
    assert_eq!(view["available"][1]["description"], "B-trees");
    assert_eq!(view["defaults"]["temperature"], 0.4);
    assert_eq!(view["defaults"]["contextTopK"], 20);
    assert_eq!(view["overrides"], json!({}));

    let path = format!("/api/sessions/{id}/items");
    let resp = send(
        &server,
        reqwest::Method::POST,
        &path,
        &token,
        json!({"item": {"kind": "reference", "name": "SQL indexes"}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let view: Value = resp.json().await.unwrap();
    assert_eq!(
        names(&view["session"]),
        ["rule:Be brief:always", "reference:SQL indexes:manual"]
    );
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "items", "{raw}");
    assert_eq!(raw["data"]["session"], view["session"]);

    // Twice is once; an unknown item is refused with its name.
    let again: Value = send(
        &server,
        reqwest::Method::POST,
        &path,
        &token,
        json!({"item": {"kind": "reference", "name": "SQL indexes"}}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(again["session"].as_array().unwrap().len(), 2);
    let _ = ws.next().await;
    let unknown = send(
        &server,
        reqwest::Method::POST,
        &path,
        &token,
        json!({"item": {"kind": "rule", "name": "Nope"}}),
    )
    .await;
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().contains("Nope"),
        "{body}"
    );

    // Removing works whatever brought the item in.
    let view: Value = send(
        &server,
        reqwest::Method::DELETE,
        &path,
        &token,
        json!({"item": {"kind": "rule", "name": "Be brief"}}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(names(&view["session"]), ["reference:SQL indexes:manual"]);
    let stored = server.state.store.settings(&id).await.unwrap();
    assert_eq!(stored.items.len(), 1);

    // Without the token: nothing.
    let refused = send(
        &server,
        reqwest::Method::DELETE,
        &path,
        "wrong",
        json!({"item": {"kind": "reference", "name": "SQL indexes"}}),
    )
    .await;
    assert_eq!(refused.status(), 401);

    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "items", "the removal is heard too: {raw}");
    assert_eq!(
        names(&raw["data"]["session"]),
        ["reference:SQL indexes:manual"]
    );

    // The same over the WebSocket.
    ws.send(
        json!({"type": "add_item", "data": {"item": {"kind": "reference", "name": "Sourdough"}}}),
    )
    .await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "items", "{raw}");
    assert_eq!(
        names(&raw["data"]["session"]),
        ["reference:SQL indexes:manual", "reference:Sourdough:manual"]
    );
    ws.send(json!({"type": "get_items", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "items", "{raw}");
    assert_eq!(raw["data"]["session"].as_array().unwrap().len(), 2);
}

async fn overrides_reach_the_provider(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let server = server(api, dir.path()).await;
    let created = server.post_json("/api/sessions", &json!({})).await;
    let (id, token) = (
        created["sessionId"].as_str().unwrap().to_owned(),
        created["token"].as_str().unwrap().to_owned(),
    );
    // The agent's temperature, the provider's own top_p.
    server.chat(&id, &token, "One").await;
    let sent = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(sent["temperature"], 0.4, "{sent}");
    assert!(sent.get("top_p").is_none(), "{sent}");

    let path = format!("/api/sessions/{id}/overrides");
    let view: Value = send(
        &server,
        reqwest::Method::PUT,
        &path,
        &token,
        json!({"temperature": 1.1, "topP": 0.5, "maxOutputTokens": 321}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(view["overrides"]["topP"], 0.5, "{view}");
    assert_eq!(view["defaults"]["temperature"], 0.4, "{view}");
    server.chat(&id, &token, "Two").await;
    let sent = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(sent["temperature"], 1.1, "{sent}");
    assert_eq!(sent["top_p"], 0.5, "{sent}");
    let longest = match api {
        Api::OpenAi => &sent["max_tokens"],
        Api::Anthropic => &sent["max_tokens"],
    };
    assert_eq!(*longest, 321, "{sent}");

    // Out of range (invalid_settings), or a key that does not exist (invalid_frame): refused,
    // nothing stored.
    for (bad, status, code) in [
        (json!({"temperature": 3}), 422, "invalid_settings"),
        (json!({"contextTopK": 0}), 422, "invalid_settings"),
        // A session may lower what costs, not raise it past the agent's or the server's limits.
        (json!({"maxChatTurns": 11}), 422, "invalid_settings"),
        (json!({"maxOutputTokens": 100000}), 422, "invalid_settings"),
        (json!({"contextMinScore": 0.9}), 422, "invalid_settings"),
        (json!({"temprature": 1}), 400, "invalid_frame"),
    ] {
        let resp = send(&server, reqwest::Method::PUT, &path, &token, bad.clone()).await;
        assert_eq!(resp.status(), status, "{bad}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{bad}: {body}");
    }
    let stored = server.state.store.settings(&id).await.unwrap();
    assert_eq!(stored.overrides.top_p, Some(0.5));

    // Back to the defaults.
    send(&server, reqwest::Method::PUT, &path, &token, json!({})).await;
    server.chat(&id, &token, "Three").await;
    let sent = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(sent["temperature"], 0.4, "{sent}");
    assert!(sent.get("top_p").is_none(), "{sent}");
}

#[tokio::test]
async fn openai_overrides_reach_the_provider() {
    overrides_reach_the_provider(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_overrides_reach_the_provider() {
    overrides_reach_the_provider(Api::Anthropic).await;
}

/// A tool that acts beyond the session, so it asks first (`Tool::asks`' default).
struct Outside;

impl glassbox_server::tools::Tool for Outside {
    fn name(&self) -> &str {
        "send_email"
    }

    fn definition(&self) -> glassbox_core::vocab::ToolDefinition {
        glassbox_core::vocab::ToolDefinition {
            name: "send_email".into(),
            description: "Sends an email.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn call<'a>(
        &'a self,
        _ctx: glassbox_server::tools::ToolCtx<'a>,
        _args: Value,
    ) -> futures::future::BoxFuture<
        'a,
        Result<glassbox_server::tools::ToolOutput, glassbox_server::tools::ToolError>,
    > {
        Box::pin(async { Err(glassbox_server::tools::ToolError::Internal) })
    }
}

/// The names of the tools a provider request offered (both formats name them `name`, OpenAI
/// under `function`).
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

async fn tool_permission_decides_what_is_offered(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let file = configure(dir.path());
    let server = TestServer::start_with(
        api,
        Behaviour::reply(&["Fine."]),
        &[
            ("GLASSBOX_CONFIG", file.as_str()),
            ("GLASSBOX_TOOLS", "context"),
        ],
    )
    .await;
    let created = server.post_json("/api/sessions", &json!({})).await;
    let (id, token) = (
        created["sessionId"].as_str().unwrap().to_owned(),
        created["token"].as_str().unwrap().to_owned(),
    );
    server.state.tools.add(
        glassbox_server::tools::ToolScope::Session(id.clone()),
        std::sync::Arc::new(Outside),
    );
    let path = format!("/api/sessions/{id}/overrides");
    let mut seen = Vec::new();
    for permission in ["ask", "allow", "deny"] {
        let resp = send(
            &server,
            reqwest::Method::PUT,
            &path,
            &token,
            json!({"toolPermission": permission}),
        )
        .await;
        assert_eq!(resp.status(), 200, "{permission}");
        server.chat(&id, &token, "Hello").await;
        let sent = server.fake.requests().last().unwrap().body.clone();
        let mut names = offered(&sent);
        names.sort();
        seen.push((permission, names));
    }
    assert_eq!(
        seen,
        [
            // Ask: everything is offered; a call of the tool that asks waits for the user's yes
            // (tests/approvals.rs), the session's own context-set tools need none.
            (
                "ask",
                vec![
                    "get_relevant_context".to_owned(),
                    "send_email".to_owned(),
                    "set_relevant_context".to_owned()
                ]
            ),
            (
                "allow",
                vec![
                    "get_relevant_context".to_owned(),
                    "send_email".to_owned(),
                    "set_relevant_context".to_owned()
                ]
            ),
            ("deny", vec![]),
        ]
    );
}

#[tokio::test]
async fn openai_tool_permission_decides_what_is_offered() {
    tool_permission_decides_what_is_offered(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_tool_permission_decides_what_is_offered() {
    tool_permission_decides_what_is_offered(Api::Anthropic).await;
}
