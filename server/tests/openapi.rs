//! `/openapi.json` describes the REST routes the server answers, and `/api/docs` shows it.

mod support;

use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

#[tokio::test]
async fn every_described_route_is_served_and_says_what_it_takes() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["x"])).await;
    let resp = server
        .http
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let api: Value = resp.json().await.unwrap();
    assert!(api["openapi"].as_str().unwrap().starts_with("3.1"), "{api}");
    let paths = api["paths"].as_object().unwrap();

    let (id, token, _) = server.new_session().await;
    let mut operations = 0;
    for (path, item) in paths {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            operations += 1;
            // Every route may answer a typed error, and names each parameter of its path.
            assert!(op["responses"]["4XX"].is_object(), "{method} {path}");
            for name in path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            {
                let declared = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == name && p["in"] == "path");
                assert!(declared, "{method} {path} does not declare {name}");
            }
            // The server answers it: a typed answer, never the router's bare 404 or 405.
            let url = server.url(
                &path
                    .replace("{id}", &id)
                    .replace("{message_id}", "m-none")
                    .replace("{file_id}", "f-none")
                    .replace("{approvalId}", "a-none"),
            );
            let resp = server
                .http
                .request(method.to_uppercase().parse().unwrap(), url)
                .bearer_auth(&token)
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            assert_ne!(status, 405, "{method} {path} is not served");
            assert!(
                status != 404 || body.contains("\"error\""),
                "{method} {path} is not served: {status} {body}"
            );
        }
    }
    assert!(operations >= 24, "only {operations} operations described");

    // The bodies' schemas come from the wire types.
    let schemas = &api["components"]["schemas"];
    for name in [
        "RestChatRequest",
        "RestChatResponse",
        "ChatMessage",
        "ChatRequest",
        "SessionInfo",
        "ErrorBody",
        "WireError",
        "ErrorCode",
        "Attachment",
    ] {
        assert!(schemas[name].is_object(), "no schema {name}");
    }
    let codes: Vec<&str> = schemas["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(codes.contains(&"budget_exhausted"), "{codes:?}");
    let chat = &paths["/api/chat"]["post"];
    assert_eq!(
        chat["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/RestChatRequest"
    );
    assert!(
        chat["responses"]["200"]["content"]["text/event-stream"].is_object(),
        "{chat}"
    );
    let messages = &paths["/api/sessions/{id}"]["get"];
    assert!(
        messages["security"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s.get("session_token").is_some()),
        "{messages}"
    );
    assert_eq!(
        api["components"]["securitySchemes"]["session_token"]["scheme"],
        "bearer"
    );
}

#[tokio::test]
async fn the_docs_page_lists_the_routes_under_a_strict_policy() {
    let server = TestServer::start(Api::OpenAi, Behaviour::reply(&["x"])).await;
    let resp = server
        .http
        .get(server.url("/api/docs"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'")
    );
    let page = resp.text().await.unwrap();
    for route in ["/api/chat", "/api/sessions/{id}/preview", "/v1/embeddings"] {
        assert!(page.contains(route), "{route} missing");
    }
    assert!(!page.contains("<script"), "the page runs nothing");
}
