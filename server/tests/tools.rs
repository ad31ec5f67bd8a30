//! The tool loop against the fake provider in both wire formats: several rounds, several calls in
//! one round, the round limit, bad arguments and unknown tools answered as error results, a failure
//! mid-loop, a budget spent by one round, replay of stored exchanges on later turns, the request
//! rebuilt from the stored receipt, and the context sets the tools keep (REST `PATCH`/`GET`, the
//! offline provider).

mod support;

use glassbox_core::ErrorCode;
use glassbox_core::context::plan::{Sources, build_request};
use glassbox_core::context::sets::{DEFAULT_TOOLS_PROMPT, context_tools};
use glassbox_core::context::{CurrentReply, PartKind, Receipt, TurnMessage, TurnSources};
use glassbox_core::wire::{ChatMessage, ServerEvent};
use glassbox_fake_provider::{Behaviour, FakeCall};
use glassbox_server::providers::{anthropic, openai};
use serde_json::{Value, json};
use support::{Api, TestServer};

const TOOLS_ON: &[(&str, &str)] = &[("GLASSBOX_TOOLS", "context")];

fn tool_call(name: &str, args: &str) -> Behaviour {
    Behaviour::ToolCall {
        text: format!("Calling {name}. "),
        name: name.into(),
        argument_parts: vec![args.into()],
    }
}

async fn patch(server: &TestServer, id: &str, token: &str, body: Value) -> reqwest::Response {
    server
        .http
        .patch(server.url(&format!("/api/sessions/{id}")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The tool results a request carries, in the provider's format: (call id, content).
fn results_in(api: Api, body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    match api {
        Api::OpenAi => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect(),
        Api::Anthropic => messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                (
                    b["tool_use_id"].as_str().unwrap().to_owned(),
                    b["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect(),
    }
}

/// The tool call ids an assistant turn of a request carries, in the provider's format.
fn calls_in(api: Api, body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().unwrap();
    match api {
        Api::OpenAi => messages
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect(),
        Api::Anthropic => messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap().to_owned())
            .collect(),
    }
}

/// The provider request rebuilt from the stored reply's receipt (the reply answers the session's
/// first message), in the provider's wire format: equal to the last request the reply made.
fn rebuilt_from_receipt(api: Api, model: &str, session: &Value, receipt: &Receipt) -> Value {
    let stored: Vec<ChatMessage> = serde_json::from_value(session["messages"].clone()).unwrap();
    let history: Vec<TurnMessage> = stored[..1]
        .iter()
        .filter(|m| m.reaches_model())
        .map(ChatMessage::as_turn)
        .collect();
    let reply_msg = &stored[1];
    let tools = context_tools();
    let rebuilt = build_request(
        receipt,
        &Sources {
            model,
            messages: &history,
            sources: TurnSources {
                tools: &tools,
                tool_instructions: Some(DEFAULT_TOOLS_PROMPT),
                ..Default::default()
            },
            current: CurrentReply {
                text: &reply_msg.content,
                rounds: &reply_msg.tool_rounds,
            },
        },
    );
    match api {
        Api::OpenAi => openai::request_body(&rebuilt),
        Api::Anthropic => anthropic::request_body(&rebuilt),
    }
}

async fn several_rounds_then_text(api: Api) {
    let server = TestServer::start_with(api, Behaviour::reply(&["All", " done."]), TOOLS_ON).await;
    server.fake.queue(vec![
        tool_call(
            "set_relevant_context",
            r#"{"setName":"files","items":["/docs/spec.md","/notes.md"],"mode":"merge"}"#,
        ),
        tool_call("get_relevant_context", "{}"),
    ]);
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "Work on the spec").await;
    let reply = &body["reply"];
    assert_eq!(reply["status"], "complete", "{body}");
    // Text streamed in each round, then the final text.
    assert_eq!(
        reply["content"],
        "Calling set_relevant_context. Calling get_relevant_context. All done."
    );
    let rounds = reply["toolRounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{reply}");
    assert_eq!(
        rounds[0]["exchanges"][0]["line"],
        "set_relevant_context · files · merged 2"
    );
    assert_eq!(rounds[0]["exchanges"][0]["result"], "Merged files: 2 items");
    assert_eq!(
        rounds[1]["exchanges"][0]["line"],
        "get_relevant_context · all"
    );
    assert!(
        rounds[1]["exchanges"][0]["result"]
            .as_str()
            .unwrap()
            .contains("/docs/spec.md")
    );

    // The tools were offered, with the instructions; each round's request carried the results so far.
    let requests = server.fake.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0].body;
    assert_eq!(first["tools"].as_array().unwrap().len(), 2);
    let system = match api {
        Api::OpenAi => first["messages"][0]["content"].as_str().unwrap().to_owned(),
        Api::Anthropic => first["system"].as_str().unwrap().to_owned(),
    };
    assert!(system.contains(DEFAULT_TOOLS_PROMPT), "{system}");
    assert_eq!(results_in(api, &requests[1].body).len(), 1);
    let last = results_in(api, &requests[2].body);
    assert_eq!(last.len(), 2);
    assert_eq!(last[0].1, "Merged files: 2 items");
    assert_eq!(
        calls_in(api, &requests[2].body),
        [last[0].0.clone(), last[1].0.clone()]
    );

    // The context sets were stored and are in the session's meta.
    let s = server.session(&id, &token).await;
    assert_eq!(
        s["meta"]["context"],
        json!({"files": ["/docs/spec.md", "/notes.md"]})
    );

    // The receipt lists each exchange; rebuilding from it gives exactly the last request.
    let receipt: Receipt = serde_json::from_value(reply["receipt"].clone()).unwrap();
    let exchanges: Vec<&PartKind> = receipt
        .parts
        .iter()
        .map(|p| &p.kind)
        .filter(|k| matches!(k, PartKind::ToolExchange { .. }))
        .collect();
    assert_eq!(exchanges.len(), 2, "{receipt:?}");
    let wire = rebuilt_from_receipt(api, &server.state.config.model, &s, &receipt);
    assert_eq!(wire, requests[2].body);

    // A later turn replays the stored exchanges in the provider's format.
    server.chat(&id, &token, "And now?").await;
    let next = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(results_in(api, &next).len(), 2);
    assert_eq!(calls_in(api, &next).len(), 2);
}

#[tokio::test]
async fn openai_several_rounds_then_text() {
    several_rounds_then_text(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_several_rounds_then_text() {
    several_rounds_then_text(Api::Anthropic).await;
}

/// The arguments of three calls, in the fragments the fake streams them in.
const FILES_ARGS: [&str; 3] = [
    r#"{"setName":"files","#,
    r#""items":["/docs/spec.md","/notes.md"],"#,
    r#""mode":"merge"}"#,
];
const ENDPOINTS_ARGS: [&str; 2] = [
    r#"{"setName":"endpoints","items":"#,
    r#"["https://api.example/v1"]}"#,
];
/// A set the calls of the round leave alone, so what `get_relevant_context` reads is the same
/// whether the calls of one round run one after another or together.
const APPLET_ARGS: [&str; 1] = [r#"{"setName":"applet"}"#];

async fn several_calls_in_one_round(api: Api) {
    let server =
        TestServer::start_with(api, Behaviour::reply(&["Noted", " all three."]), TOOLS_ON).await;
    server.fake.queue(vec![Behaviour::tool_calls(
        "Calling three tools. ",
        vec![
            FakeCall::new("set_relevant_context", &FILES_ARGS),
            FakeCall::new("set_relevant_context", &ENDPOINTS_ARGS),
            FakeCall::new("get_relevant_context", &APPLET_ARGS),
        ],
    )]);
    let (id, token, _) = server.new_session().await;
    let r = patch(
        &server,
        &id,
        &token,
        json!({"setContext": {"setName": "applet", "items": ["git-diff", "file=a.rs"]}}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let body = server
        .chat(&id, &token, "Work on the spec and its API")
        .await;
    let reply = &body["reply"];
    assert_eq!(reply["status"], "complete", "{body}");
    assert_eq!(reply["content"], "Calling three tools. Noted all three.");

    // One round, its three exchanges in call order, each with its own result.
    let rounds = reply["toolRounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "{reply}");
    assert_eq!(rounds[0]["at"], "Calling three tools. ".len());
    let exchanges = rounds[0]["exchanges"].as_array().unwrap();
    let ids: Vec<&str> = exchanges
        .iter()
        .map(|e| e["call"]["id"].as_str().unwrap())
        .collect();
    let expected_ids = match api {
        Api::OpenAi => ["call_fake_1", "call_fake_2", "call_fake_3"],
        Api::Anthropic => ["toolu_fake_1", "toolu_fake_2", "toolu_fake_3"],
    };
    assert_eq!(ids, expected_ids);
    let applet =
        serde_json::to_string_pretty(&json!({"applet": ["git-diff", "file=a.rs"]})).unwrap();
    let expected = [
        (
            "set_relevant_context",
            FILES_ARGS.concat(),
            "set_relevant_context · files · merged 2",
            "Merged files: 2 items".to_owned(),
        ),
        (
            "set_relevant_context",
            ENDPOINTS_ARGS.concat(),
            "set_relevant_context · endpoints · set 1",
            "Set endpoints: 1 items".to_owned(),
        ),
        (
            "get_relevant_context",
            APPLET_ARGS.concat(),
            "get_relevant_context · applet",
            applet.clone(),
        ),
    ];
    assert_eq!(exchanges.len(), expected.len(), "{reply}");
    for (e, (name, arguments, line, result)) in exchanges.iter().zip(&expected) {
        assert_eq!(e["call"]["name"], *name, "{e}");
        assert_eq!(e["call"]["arguments"], *arguments, "{e}");
        assert_eq!(e["line"], *line, "{e}");
        assert_eq!(e["result"], *result, "{e}");
        assert_eq!(e["isError"], false, "{e}");
    }

    // The next request carries the three calls in one assistant turn, then their three results,
    // in the provider's format.
    let requests = server.fake.requests();
    assert_eq!(requests.len(), 2, "one round, then the text");
    let next = &requests[1].body;
    let [files_id, endpoints_id, applet_id] = expected_ids;
    match api {
        Api::OpenAi => {
            let messages = next["messages"].as_array().unwrap();
            assert_eq!(messages.len(), 6, "{next}");
            assert_eq!(messages[0]["role"], "system");
            assert_eq!(
                messages[1],
                json!({"role": "user", "content": "Work on the spec and its API"})
            );
            assert_eq!(
                messages[2..],
                [
                    json!({"role": "assistant", "content": "Calling three tools. ", "tool_calls": [
                        {"id": files_id, "type": "function",
                            "function": {"name": "set_relevant_context", "arguments": FILES_ARGS.concat()}},
                        {"id": endpoints_id, "type": "function",
                            "function": {"name": "set_relevant_context", "arguments": ENDPOINTS_ARGS.concat()}},
                        {"id": applet_id, "type": "function",
                            "function": {"name": "get_relevant_context", "arguments": APPLET_ARGS.concat()}},
                    ]}),
                    json!({"role": "tool", "tool_call_id": files_id, "content": "Merged files: 2 items"}),
                    json!({"role": "tool", "tool_call_id": endpoints_id, "content": "Set endpoints: 1 items"}),
                    json!({"role": "tool", "tool_call_id": applet_id, "content": applet}),
                ]
            );
        }
        Api::Anthropic => {
            assert_eq!(
                next["messages"],
                json!([
                    {"role": "user", "content": "Work on the spec and its API"},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Calling three tools. "},
                        {"type": "tool_use", "id": files_id, "name": "set_relevant_context",
                            "input": {"setName": "files", "items": ["/docs/spec.md", "/notes.md"], "mode": "merge"}},
                        {"type": "tool_use", "id": endpoints_id, "name": "set_relevant_context",
                            "input": {"setName": "endpoints", "items": ["https://api.example/v1"]}},
                        {"type": "tool_use", "id": applet_id, "name": "get_relevant_context",
                            "input": {"setName": "applet"}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": files_id, "content": "Merged files: 2 items", "is_error": false},
                        {"type": "tool_result", "tool_use_id": endpoints_id, "content": "Set endpoints: 1 items", "is_error": false},
                        {"type": "tool_result", "tool_use_id": applet_id, "content": applet, "is_error": false},
                    ]},
                ])
            );
        }
    }
    assert_eq!(calls_in(api, next), expected_ids);
    assert_eq!(
        results_in(api, next)
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>(),
        expected_ids
    );

    // Both sets the round changed are stored, beside the one it read.
    let s = server.session(&id, &token).await;
    assert_eq!(
        s["meta"]["context"],
        json!({
            "applet": ["git-diff", "file=a.rs"],
            "endpoints": ["https://api.example/v1"],
            "files": ["/docs/spec.md", "/notes.md"],
        })
    );

    // The receipt lists the three exchanges; rebuilding from it gives exactly the last request.
    let receipt: Receipt = serde_json::from_value(reply["receipt"].clone()).unwrap();
    let listed = receipt
        .parts
        .iter()
        .filter(|p| matches!(p.kind, PartKind::ToolExchange { .. }))
        .count();
    assert_eq!(listed, 3, "{receipt:?}");
    let model = body["session"]["model"].as_str().unwrap();
    let wire = rebuilt_from_receipt(api, model, &s, &receipt);
    assert_eq!(wire, *next);

    // A later turn replays the round: three calls, three results.
    server.chat(&id, &token, "And now?").await;
    let later = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(calls_in(api, &later), expected_ids);
    assert_eq!(results_in(api, &later).len(), 3);
}

#[tokio::test]
async fn openai_several_calls_in_one_round() {
    several_calls_in_one_round(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_several_calls_in_one_round() {
    several_calls_in_one_round(Api::Anthropic).await;
}

async fn a_budget_spent_by_a_round_stops_before_the_next_call(api: Api) {
    // The fake reports the words of the request as its input tokens (the tools prompt alone has
    // far more than 10) and one output token per text chunk: the first call spends the budget.
    let server = TestServer::start_with(
        api,
        Behaviour::reply(&["Never sent."]),
        &[
            ("GLASSBOX_TOOLS", "context"),
            ("GLASSBOX_BUDGET_SESSION_TOKENS", "10"),
        ],
    )
    .await;
    server.fake.queue(vec![Behaviour::tool_calls(
        "Saving both. ",
        vec![
            FakeCall::new("set_relevant_context", &FILES_ARGS),
            FakeCall::new("set_relevant_context", &ENDPOINTS_ARGS),
        ],
    )]);
    let mut ws = server.ws().await;
    let (id, token) = ws.hello_new().await;
    ws.send(json!({"type": "chat", "data": {"message": "Keep the spec and the API in mind"}}))
        .await;
    let frames = ws.until_reply_ends().await;
    let reply_id = frames
        .iter()
        .find_map(|f| match &f.event {
            ServerEvent::ReplyStart(r) => Some(r.message_id.clone()),
            _ => None,
        })
        .expect("a reply_start frame");
    // Both calls ran and were told; the budget frame says the first call spent it all.
    let mut lines: Vec<String> = frames
        .iter()
        .filter_map(|f| match &f.event {
            ServerEvent::Tool(t) => {
                assert_eq!(t.message_id, reply_id);
                assert_eq!(t.round, 0);
                Some(t.exchange.line.clone())
            }
            _ => None,
        })
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "set_relevant_context · endpoints · set 1",
            "set_relevant_context · files · merged 2"
        ]
    );
    let budget = frames
        .iter()
        .find_map(|f| match &f.event {
            ServerEvent::Budget(b) => Some(*b),
            _ => None,
        })
        .expect("a budget frame");
    assert_eq!(budget.limit, 10);
    assert!(budget.used >= 10, "{budget:?}");
    let ServerEvent::Error(err) = &frames.last().unwrap().event else {
        panic!("expected the reply to fail: {:?}", frames.last())
    };
    assert_eq!(err.code, ErrorCode::BudgetExhausted, "{err:?}");
    assert_eq!(err.message_id.as_deref(), Some(reply_id.as_str()));
    assert!(!err.retryable, "a session budget does not come back");
    assert_eq!(
        server.fake.requests().len(),
        1,
        "no call after the budget ran out"
    );

    // The failed reply keeps its text and its round, both calls in order with their results.
    let check_stored = |s: &Value| {
        let stored = &s["messages"][1];
        assert_eq!(stored["id"], reply_id.as_str());
        assert_eq!(stored["status"], "failed", "{stored}");
        assert_eq!(stored["error"]["code"], "budget_exhausted", "{stored}");
        assert_eq!(stored["content"], "Saving both. ");
        let rounds = stored["toolRounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 1, "{stored}");
        let exchanges: Vec<(&str, &str)> = rounds[0]["exchanges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["line"].as_str().unwrap(), e["result"].as_str().unwrap()))
            .collect();
        assert_eq!(
            exchanges,
            [
                (
                    "set_relevant_context · files · merged 2",
                    "Merged files: 2 items"
                ),
                (
                    "set_relevant_context · endpoints · set 1",
                    "Set endpoints: 1 items"
                ),
            ]
        );
        let usage = &stored["usage"];
        assert!(
            usage["inputTokens"].as_u64().unwrap() + usage["outputTokens"].as_u64().unwrap() >= 10,
            "{usage}"
        );
        assert_eq!(
            s["meta"]["context"],
            json!({
                "endpoints": ["https://api.example/v1"],
                "files": ["/docs/spec.md", "/notes.md"],
            })
        );
    };
    check_stored(&server.session(&id, &token).await);

    // A retry is refused the same way, before the provider, and changes nothing.
    ws.send(json!({"type": "retry", "data": {"messageId": reply_id}}))
        .await;
    let refused = loop {
        let (f, raw) = ws.next().await;
        match f.event {
            ServerEvent::Error(e) => break e,
            ServerEvent::ReplyStart(_) => panic!("the retry started: {raw}"),
            _ => {}
        }
    };
    assert_eq!(refused.code, ErrorCode::BudgetExhausted, "{refused:?}");
    assert!(!refused.retryable);
    assert_eq!(server.fake.requests().len(), 1);
    check_stored(&server.session(&id, &token).await);
}

#[tokio::test]
async fn openai_a_budget_spent_by_a_round_stops_before_the_next_call() {
    a_budget_spent_by_a_round_stops_before_the_next_call(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_a_budget_spent_by_a_round_stops_before_the_next_call() {
    a_budget_spent_by_a_round_stops_before_the_next_call(Api::Anthropic).await;
}

async fn bad_calls_become_error_results(api: Api) {
    let server = TestServer::start_with(api, Behaviour::reply(&["Understood."]), TOOLS_ON).await;
    server.fake.queue(vec![
        tool_call("set_relevant_context", "{not json"),
        tool_call("delete_everything", "{}"),
        tool_call(
            "set_relevant_context",
            r#"{"setName":"files","items":"one"}"#,
        ),
        tool_call(
            "set_relevant_context",
            r#"{"setName":"files","items":["a\u202Eb"]}"#,
        ),
    ]);
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "try").await;
    let reply = &body["reply"];
    assert_eq!(reply["status"], "complete", "{body}");
    let rounds = reply["toolRounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 4);
    let results: Vec<&str> = rounds
        .iter()
        .map(|r| r["exchanges"][0]["result"].as_str().unwrap())
        .collect();
    assert!(
        results[0].starts_with("Error: arguments are not valid JSON"),
        "{results:?}"
    );
    assert!(
        results[1].contains("unknown tool \"delete_everything\""),
        "{results:?}"
    );
    assert!(
        results[2].starts_with("Error: arguments do not match the tool's schema"),
        "{results:?}"
    );
    assert!(results[3].contains("control character"), "{results:?}");
    for r in rounds {
        assert_eq!(r["exchanges"][0]["isError"], true);
        assert!(
            r["exchanges"][0]["line"]
                .as_str()
                .unwrap()
                .ends_with("· error")
        );
    }
    // The model saw each error, and nothing was saved.
    let last = server.fake.requests().last().unwrap().body.clone();
    assert_eq!(results_in(api, &last).len(), 4);
    let s = server.session(&id, &token).await;
    assert_eq!(s["meta"]["context"], json!({}));
}

#[tokio::test]
async fn openai_bad_calls_become_error_results() {
    bad_calls_become_error_results(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_bad_calls_become_error_results() {
    bad_calls_become_error_results(Api::Anthropic).await;
}

async fn the_round_limit_ends_the_reply(api: Api) {
    let looping = tool_call("get_relevant_context", "{}");
    let server = TestServer::start_with(
        api,
        looping,
        &[
            ("GLASSBOX_TOOLS", "context"),
            ("GLASSBOX_MAX_CHAT_TURNS", "2"),
        ],
    )
    .await;
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "loop").await;
    let reply = &body["reply"];
    assert_eq!(reply["status"], "complete", "{body}");
    assert_eq!(
        server.fake.requests().len(),
        3,
        "two rounds run, the third call not"
    );
    let rounds = reply["toolRounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 3);
    let last = &rounds[2]["exchanges"][0];
    assert_eq!(last["isError"], true);
    assert_eq!(
        last["line"],
        "get_relevant_context · not run (limit of 2 rounds)"
    );
    // The stored reply replays cleanly: every call has its result.
    server.chat(&id, &token, "again").await;
    let next = server.fake.requests()[3].body.clone();
    assert_eq!(results_in(api, &next).len(), 3);
}

#[tokio::test]
async fn openai_the_round_limit_ends_the_reply() {
    the_round_limit_ends_the_reply(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_the_round_limit_ends_the_reply() {
    the_round_limit_ends_the_reply(Api::Anthropic).await;
}

async fn a_failure_mid_loop_keeps_what_was_done(api: Api) {
    let server = TestServer::start_with(api, Behaviour::reply(&["Recovered."]), TOOLS_ON).await;
    server.fake.queue(vec![
        tool_call(
            "set_relevant_context",
            r#"{"setName":"endpoints","items":["https://api.example/v1"]}"#,
        ),
        Behaviour::Status {
            status: 503,
            message: "overloaded".into(),
        },
    ]);
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "go").await;
    let reply = &body["reply"];
    assert_eq!(reply["status"], "failed", "{body}");
    assert_eq!(reply["error"]["retryable"], true);
    assert_eq!(reply["content"], "Calling set_relevant_context. ");
    assert_eq!(reply["toolRounds"].as_array().unwrap().len(), 1);
    let s = server.session(&id, &token).await;
    assert_eq!(
        s["meta"]["context"]["endpoints"],
        json!(["https://api.example/v1"])
    );
    // A failed reply does not reach the model on the next turn.
    let next = server.chat(&id, &token, "next").await;
    assert_eq!(next["reply"]["status"], "complete");
    let last = server.fake.requests().last().unwrap().body.clone();
    assert!(results_in(api, &last).is_empty());
}

#[tokio::test]
async fn openai_a_failure_mid_loop_keeps_what_was_done() {
    a_failure_mid_loop_keeps_what_was_done(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_a_failure_mid_loop_keeps_what_was_done() {
    a_failure_mid_loop_keeps_what_was_done(Api::Anthropic).await;
}

#[tokio::test]
async fn patch_changes_context_sets_with_typed_errors() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["ok"])).await;
    let (id, token, _) = server.new_session().await;
    let r = patch(
        &server,
        &id,
        &token,
        json!({"setContext": {"setName": "files", "items": ["/a.md", "/b.md"]}}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let r = patch(
        &server,
        &id,
        &token,
        json!({"setContext": {"setName": "files", "items": ["/b.md", "/c.md"], "mode": "merge"}}),
    )
    .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["meta"]["context"]["files"],
        json!(["/a.md", "/b.md", "/c.md"])
    );
    let r = patch(
        &server,
        &id,
        &token,
        json!({"context": {"applet": ["git-diff", "file=a.rs"]}}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        server.session(&id, &token).await["meta"]["context"],
        json!({"applet": ["git-diff", "file=a.rs"]})
    );

    let many: Value = (0..6)
        .map(|i| {
            (
                format!("s{i}"),
                json!((0..10).map(|j| format!("{i}-{j}")).collect::<Vec<_>>()),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    let cases = [
        (json!({}), 400, "invalid_frame"),
        (
            json!({"context": {}, "setContext": {"setName": "f", "items": []}}),
            400,
            "invalid_frame",
        ),
        (
            json!({"setContext": {"setName": "<script>", "items": []}}),
            422,
            "invalid_context_set",
        ),
        (
            json!({"setContext": {"setName": "files", "items": ["x".repeat(3000)]}}),
            422,
            "invalid_context_set",
        ),
        (
            json!({"setContext": {"setName": "files", "items": ["a\nb"]}}),
            422,
            "invalid_context_set",
        ),
        (json!({"context": many}), 422, "invalid_context_set"),
        (
            json!({"setContext": {"setName": "files", "items": [1]}}),
            400,
            "invalid_frame",
        ),
        (json!({"other": 1}), 400, "invalid_frame"),
    ];
    for (body, status, code) in cases {
        let r = patch(&server, &id, &token, body.clone()).await;
        assert_eq!(r.status().as_u16(), status, "{body}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["error"]["code"], code, "{body}");
    }
    // Nothing was saved by a refused change; a wrong token reaches nothing.
    assert_eq!(
        server.session(&id, &token).await["meta"]["context"],
        json!({"applet": ["git-diff", "file=a.rs"]})
    );
    let r = patch(&server, &id, "wrong", json!({"context": {}})).await;
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn the_offline_provider_keeps_the_files_a_message_names() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["unused"]),
        &[
            ("GLASSBOX_PROVIDER", "offline"),
            ("GLASSBOX_TOOLS", "context"),
            ("GLASSBOX_OFFLINE_DELAY_MS", "0"),
        ],
    )
    .await;
    let (id, token, _) = server.new_session().await;
    let body = server
        .chat(
            &id,
            &token,
            "Please review docs/spec.md and https://api.example.com/v2",
        )
        .await;
    let reply = &body["reply"];
    assert_eq!(reply["status"], "complete", "{body}");
    let lines: Vec<&str> = reply["toolRounds"][0]["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["line"].as_str().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "set_relevant_context · files · merged 1",
            "set_relevant_context · endpoints · merged 1"
        ]
    );
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .contains("Merged files: 1 items"),
        "{reply}"
    );
    let s = server.session(&id, &token).await;
    assert_eq!(
        s["meta"]["context"],
        json!({"endpoints": ["https://api.example.com/v2"], "files": ["docs/spec.md"]})
    );
    // No paths: no tool round.
    let body = server.chat(&id, &token, "thanks").await;
    assert!(body["reply"]["toolRounds"].is_null(), "{body}");
}

/// A round that sets a context set and then reads it sees its own change: tools that touch the
/// session's state run one after another, in call order.
async fn a_round_reads_what_it_set_before(api: Api) {
    let server = TestServer::start_with(api, Behaviour::reply(&["Done."]), TOOLS_ON).await;
    server.fake.queue(vec![Behaviour::tool_calls(
        "Set, then read. ",
        vec![
            FakeCall::new(
                "set_relevant_context",
                &[r#"{"setName":"files","items":["/a.md"],"mode":"replace"}"#],
            ),
            FakeCall::new("get_relevant_context", &[r#"{"setName":"files"}"#]),
        ],
    )]);
    let (id, token, _) = server.new_session().await;
    let body = server.chat(&id, &token, "Remember /a.md").await;
    let round = &body["reply"]["toolRounds"][0]["exchanges"];
    assert_eq!(round[0]["call"]["name"], "set_relevant_context", "{body}");
    assert!(
        round[1]["result"].as_str().unwrap().contains("/a.md"),
        "the read sees the set made before it in the round: {body}"
    );
}

#[tokio::test]
async fn openai_a_round_reads_what_it_set_before() {
    a_round_reads_what_it_set_before(Api::OpenAi).await;
}

#[tokio::test]
async fn anthropic_a_round_reads_what_it_set_before() {
    a_round_reads_what_it_set_before(Api::Anthropic).await;
}
