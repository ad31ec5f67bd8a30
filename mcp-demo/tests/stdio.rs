//! The demo server over stdio, as any MCP client sees it: tools listed across pages (test mode),
//! called with typed arguments, notes scoped by the `glassbox/session` request meta.

use rmcp::model::{CallToolRequestParams, ClientRequest, Request, RequestMetaObject, ServerResult};
use rmcp::service::PeerRequestOptions;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

async fn connect() -> rmcp::service::RunningService<RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_glassbox-mcp-demo"));
    cmd.arg("--test-tools");
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn call(
    client: &rmcp::service::RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
    session: Option<&str>,
) -> rmcp::model::CallToolResult {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let mut options = PeerRequestOptions::no_options();
    if let Some(s) = session {
        let mut meta = serde_json::Map::new();
        meta.insert(glassbox_mcp_demo::SESSION_META_KEY.into(), json!(s));
        options = options.with_meta(RequestMetaObject::from(meta));
    }
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            options,
        )
        .await
        .unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(r) => r,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn tools_are_listed_across_pages_and_called() {
    let client = connect().await;
    let page = client.list_tools(None).await.unwrap();
    assert_eq!(page.tools.len(), 3);
    assert!(page.next_cursor.is_some());
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "add_note",
            "big",
            "convert_units",
            "crash",
            "current_time",
            "echo",
            "list_notes",
            "reveal_tool",
            "slow"
        ]
    );

    let r = call(
        &client,
        "convert_units",
        json!({"value": 212, "from": "°F", "to": "C"}),
        None,
    )
    .await;
    assert_eq!(text(&r), "212 °F = 100 C");
    let r = call(
        &client,
        "convert_units",
        json!({"value": 1, "from": "kg", "to": "m"}),
        None,
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("cannot convert a mass into a length"));
    let r = call(
        &client,
        "current_time",
        json!({"zone": "Mars/Olympus"}),
        None,
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let r = call(
        &client,
        "current_time",
        json!({"zone": "Europe/Paris"}),
        None,
    )
    .await;
    assert!(text(&r).contains("Europe/Paris, UTC+0"), "{}", text(&r));

    call(&client, "add_note", json!({"text": "for s1"}), Some("s1")).await;
    call(&client, "add_note", json!({"text": "for nobody"}), None).await;
    assert_eq!(
        text(&call(&client, "list_notes", json!({}), Some("s1")).await),
        "1. for s1"
    );
    assert_eq!(
        text(&call(&client, "list_notes", json!({}), Some("s2")).await),
        "No notes yet."
    );
    assert_eq!(
        text(&call(&client, "list_notes", json!({}), None).await),
        "1. for nobody"
    );
    client.cancel().await.unwrap();
}
