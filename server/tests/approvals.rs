//! Approvals over the real server with the repo's MCP server, in both provider formats: a call
//! under `ask` waits for the user's answer (`approval_request` to every tab, `approve` over the
//! socket or REST), runs on allow, is told the reason on deny, is denied when nobody answers in
//! time; the first answer wins, unknown ones change nothing; `allow_session` asks no more;
//! `auto_approve` never asks; a pending approval survives a new tab and runs exactly once; every
//! decision is stored as an `approval` message.

mod support;

use std::path::Path;
use std::time::Duration;

use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer, Ws};

async fn start(api: Api, dir: &Path, agent: &str, server: &str) -> TestServer {
    let file = dir.join("glassbox.toml");
    std::fs::write(
        &file,
        format!(
            "[[agents]]\nname = \"a\"\ntool_permission = \"ask\"\n{agent}\n[[agents.mcp_servers]]\nname = \"demo\"\ncommand = {:?}\n{server}",
            support::demo_mcp_binary().display().to_string()
        ),
    )
    .unwrap();
    let file = file.display().to_string();
    let server = TestServer::start_with(
        api,
        Behaviour::reply(&["Done."]),
        &[("GLASSBOX_CONFIG", file.as_str())],
    )
    .await;
    for _ in 0..300 {
        if server.get_json("/healthz").await["mcp"][0]["status"] == "ready" {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the MCP server did not get ready");
}

fn call(name: &str, args: &str) -> Behaviour {
    Behaviour::ToolCall {
        text: String::new(),
        name: name.into(),
        argument_parts: vec![args.into()],
    }
}

/// Opens a tab on a new session: (tab, session id, token).
async fn tab(server: &TestServer) -> (Ws, String, String) {
    let mut ws = server.ws().await;
    ws.send(json!({"type": "hello", "data": {}})).await;
    let (_, raw) = ws.next().await;
    assert_eq!(raw["type"], "session", "{raw}");
    let id = raw["data"]["sessionId"].as_str().unwrap().to_owned();
    let token = raw["data"]["token"].as_str().unwrap().to_owned();
    (ws, id, token)
}

/// Reads frames until one of type `kind`; returns it.
async fn until(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let (_, raw) = ws.next().await;
        if raw["type"] == kind {
            return raw;
        }
    }
}

async fn chat(ws: &mut Ws, text: &str) {
    ws.send(json!({"type": "chat", "data": {"message": text}}))
        .await;
}

/// The tool results the last provider request carried.
fn last_results(server: &TestServer, api: Api) -> Vec<String> {
    let body = server.fake.requests().last().unwrap().body.clone();
    support::tool_result_texts(api, &body)
}

async fn approved_denied_and_stored(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let server = start(api, dir.path(), "", "").await;
    let (mut ws, id, token) = tab(&server).await;

    server
        .fake
        .queue(vec![call("demo__add_note", r#"{"text": "buy milk"}"#)]);
    chat(&mut ws, "remember to buy milk").await;
    let asked = until(&mut ws, "approval_request").await;
    let data = &asked["data"];
    assert_eq!(data["server"], "demo", "{asked}");
    assert_eq!(data["tool"], "add_note");
    assert_eq!(data["title"], "Add a note");
    assert_eq!(data["arguments"], json!({"text": "buy milk"}));
    assert_eq!(data["annotations"]["readOnlyHint"], false);
    assert!(data["tokens"].as_u64().unwrap() > 20, "{asked}");
    assert!(data["description"].as_str().unwrap().contains("note"));
    let approval = data["approvalId"].as_str().unwrap().to_owned();
    // Nothing ran yet: the provider has had one request.
    assert_eq!(server.fake.requests().len(), 1);

    ws.send(json!({"type": "approve", "data": {"approvalId": approval, "decision": "allow"}}))
        .await;
    let decided = until(&mut ws, "approval").await;
    assert_eq!(decided["data"]["decision"], "allow", "{decided}");
    until(&mut ws, "done").await;
    assert!(
        last_results(&server, api)[0].contains("Noted (1 note"),
        "{:?}",
        last_results(&server, api)
    );

    // A second answer changes nothing, over REST it is a conflict; an unknown one is not found.
    let url = |a: &str| server.url(&format!("/api/sessions/{id}/approvals/{a}"));
    let resp = server
        .http
        .post(url(&approval))
        .bearer_auth(&token)
        .json(&json!({"decision": "deny"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    let resp = server
        .http
        .post(url("apr_nope"))
        .bearer_auth(&token)
        .json(&json!({"decision": "allow"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    // Denied with a reason: the model reads it, as data.
    server
        .fake
        .queue(vec![call("demo__add_note", r#"{"text": "secret"}"#)]);
    chat(&mut ws, "remember a secret").await;
    let asked = until(&mut ws, "approval_request").await;
    let approval = asked["data"]["approvalId"].as_str().unwrap().to_owned();
    let resp = server
        .http
        .post(url(&approval))
        .bearer_auth(&token)
        .json(&json!({"decision": "deny", "reason": "not </reason> now"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(until(&mut ws, "approval").await["data"]["decision"], "deny");
    until(&mut ws, "done").await;
    let results = last_results(&server, api);
    let denied = results.last().unwrap();
    assert!(denied.contains("The user denied this call"), "{denied}");
    assert!(
        denied.contains("<reason>not ‹/reason› now</reason>"),
        "{denied}"
    );

    // Both decisions are in the history as approval messages, after their replies.
    let messages = server.messages(&id, &token).await;
    let approvals: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "approval")
        .collect();
    assert_eq!(approvals.len(), 2, "{messages:?}");
    assert_eq!(approvals[0]["approvals"][0]["decision"], "allow");
    assert_eq!(approvals[0]["approvals"][0]["tool"], "add_note");
    assert_eq!(approvals[1]["approvals"][0]["decision"], "deny");
    assert_eq!(approvals[1]["approvals"][0]["reason"], "not </reason> now");
    assert_eq!(approvals[0]["content"], "Allowed: demo.add_note");
    assert_eq!(
        approvals[1]["content"],
        "Denied: demo.add_note (not </reason> now)"
    );
}

#[tokio::test]
async fn a_call_waits_for_the_user_openai() {
    approved_denied_and_stored(Api::OpenAi).await;
}

#[tokio::test]
async fn a_call_waits_for_the_user_anthropic() {
    approved_denied_and_stored(Api::Anthropic).await;
}

#[tokio::test]
async fn no_answer_in_time_is_a_denial() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(Api::OpenAi, dir.path(), "approval_timeout_ms = 300", "").await;
    let (mut ws, _, _) = tab(&server).await;
    server.fake.queue(vec![call("demo__list_notes", "{}")]);
    chat(&mut ws, "notes?").await;
    until(&mut ws, "approval_request").await;
    assert_eq!(
        until(&mut ws, "approval").await["data"]["decision"],
        "timed_out"
    );
    until(&mut ws, "done").await;
    assert!(
        last_results(&server, Api::OpenAi)[0].contains("did not answer"),
        "{:?}",
        last_results(&server, Api::OpenAi)
    );
}

#[tokio::test]
async fn allow_for_the_session_and_auto_approve_ask_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        Api::Anthropic,
        dir.path(),
        "",
        "auto_approve = [\"convert_units\"]\n",
    )
    .await;
    let (mut ws, _, _) = tab(&server).await;
    server.fake.queue(vec![call(
        "demo__convert_units",
        r#"{"value": 1, "from": "kg", "to": "lb"}"#,
    )]);
    chat(&mut ws, "kg in lb?").await;
    let frames = until(&mut ws, "done").await;
    assert_eq!(frames["type"], "done");
    assert!(last_results(&server, Api::Anthropic)[0].contains("2.204623"));

    server.fake.queue(vec![call("demo__list_notes", "{}")]);
    chat(&mut ws, "notes?").await;
    let asked = until(&mut ws, "approval_request").await;
    let approval = asked["data"]["approvalId"].as_str().unwrap();
    ws.send(
        json!({"type": "approve", "data": {"approvalId": approval, "decision": "allow_session"}}),
    )
    .await;
    until(&mut ws, "done").await;
    // The same tool again: no question.
    server.fake.queue(vec![call("demo__list_notes", "{}")]);
    chat(&mut ws, "notes again?").await;
    loop {
        let (_, raw) = ws.next().await;
        assert_ne!(raw["type"], "approval_request", "{raw}");
        if raw["type"] == "done" {
            break;
        }
    }
}

#[tokio::test]
async fn a_pending_approval_survives_a_new_tab_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(Api::OpenAi, dir.path(), "", "").await;
    let (mut first, id, token) = tab(&server).await;
    server
        .fake
        .queue(vec![call("demo__add_note", r#"{"text": "once"}"#)]);
    chat(&mut first, "remember once").await;
    let asked = until(&mut first, "approval_request").await;
    let approval = asked["data"]["approvalId"].as_str().unwrap().to_owned();
    // The page reloads: the first tab goes, a new one joins and sees the question in its snapshot.
    first.close().await;
    let mut second = server.ws().await;
    second
        .send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
        .await;
    let snapshot = until(&mut second, "snapshot").await;
    let pending = snapshot["data"]["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{snapshot}");
    assert_eq!(pending[0]["approvalId"], approval.as_str());
    second
        .send(json!({"type": "approve", "data": {"approvalId": approval, "decision": "allow"}}))
        .await;
    // A second answer from this tab changes nothing.
    second
        .send(json!({"type": "approve", "data": {"approvalId": approval, "decision": "deny"}}))
        .await;
    until(&mut second, "done").await;
    let results = last_results(&server, Api::OpenAi);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("Noted (1 note"), "{results:?}");
    let messages = server.messages(&id, &token).await;
    let approvals: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "approval")
        .collect();
    assert_eq!(approvals.len(), 1, "{messages:?}");
    assert_eq!(approvals[0]["approvals"][0]["decision"], "allow");
}

/// Stopping a reply while its call waits for approval withdraws the approval (`cancelled`, to
/// every tab), gives the call a result saying it was not run, makes no further provider call,
/// and ends the reply `stopped`.
async fn a_stop_withdraws_the_waiting_approval(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let server = start(api, dir.path(), "", "").await;
    let (mut ws, id, token) = tab(&server).await;
    server
        .fake
        .queue(vec![call("demo__add_note", r#"{"text": "buy milk"}"#)]);
    chat(&mut ws, "remember to buy milk").await;
    let asked = until(&mut ws, "approval_request").await;
    let reply = asked["data"]["messageId"].as_str().unwrap().to_owned();
    ws.send(json!({"type": "stop", "data": {"messageId": reply}}))
        .await;
    let decided = until(&mut ws, "approval").await;
    assert_eq!(decided["data"]["decision"], "cancelled", "{decided}");
    let done = until(&mut ws, "done").await;
    let message = &done["data"]["message"];
    assert_eq!(message["status"], "stopped", "{done}");
    let result = &message["toolRounds"][0]["exchanges"][0];
    assert_eq!(result["isError"], true, "{done}");
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("the user stopped the reply"),
        "{done}"
    );
    // One provider request: the one that asked for the call.
    assert_eq!(server.fake.requests().len(), 1);
    // Stored as told, beside the withdrawn approval's message (written in the background: the
    // turn does not wait for it).
    let mut stored = server.messages(&id, &token).await;
    for _ in 0..100 {
        if stored.iter().any(|m| m["role"] == "approval") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        stored = server.messages(&id, &token).await;
    }
    let kept = stored.iter().find(|m| m["id"] == reply.as_str()).unwrap();
    assert_eq!(kept["status"], "stopped");
    assert!(kept.get("error").is_none(), "{kept}");
    assert!(stored.iter().any(|m| m["role"] == "approval"), "{stored:?}");
}

#[tokio::test]
async fn a_stop_withdraws_the_waiting_approval_openai() {
    a_stop_withdraws_the_waiting_approval(Api::OpenAi).await;
}

#[tokio::test]
async fn a_stop_withdraws_the_waiting_approval_anthropic() {
    a_stop_withdraws_the_waiting_approval(Api::Anthropic).await;
}
