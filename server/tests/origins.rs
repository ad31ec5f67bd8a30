//! Only allowed web pages can use the server: the WebSocket upgrade and the API refuse other
//! origins, CORS answers only allowed ones, JSON routes take only JSON (no preflight-free cross-site
//! posts), and the demo pages carry their security headers.

mod support;

use glassbox_fake_provider::Behaviour;
use serde_json::{Value, json};
use support::{Api, TestServer};

async fn start(extra: &[(&str, &str)]) -> TestServer {
    TestServer::start_with(Api::OpenAi, Behaviour::reply(&["Hi."]), extra).await
}

#[tokio::test]
async fn the_websocket_refuses_foreign_null_and_missing_origins_before_upgrading() {
    let server = start(&[]).await;
    for origin in [Some("https://evil.example"), Some("null"), None] {
        let refused = server.ws_from(origin).await.err();
        assert_eq!(refused, Some(403), "{origin:?}");
    }
    // The server's own page and a local development page are welcome.
    for origin in [
        format!("http://{}", server.addr),
        "http://localhost:5173".to_owned(),
    ] {
        let mut ws = server.ws_from(Some(&origin)).await.expect("allowed origin");
        let (id, _) = ws.hello_new().await;
        assert!(!id.is_empty());
    }
    assert_eq!(server.fake.requests().len(), 0);
}

#[tokio::test]
async fn an_explicit_list_replaces_the_development_default() {
    let server = start(&[("GLASSBOX_ALLOWED_ORIGINS", "https://shop.example.com")]).await;
    assert!(
        server
            .ws_from(Some("https://shop.example.com"))
            .await
            .is_ok()
    );
    assert_eq!(
        server.ws_from(Some("http://localhost:5173")).await.err(),
        Some(403)
    );
    // Its own origin stays allowed (the demo page it serves).
    let own = format!("http://{}", server.addr);
    assert!(server.ws_from(Some(&own)).await.is_ok());
}

#[tokio::test]
async fn rest_refuses_foreign_pages_and_nothing_is_created() {
    let server = start(&[]).await;
    for path in ["/api/chat", "/api/sessions"] {
        let resp = server
            .http
            .post(server.url(path))
            .header("origin", "https://evil.example")
            .json(&json!({"message": "spend the operator's key"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403, "{path}");
        assert!(resp.headers().get("access-control-allow-origin").is_none());
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "origin_not_allowed");
    }
    assert_eq!(
        server.fake.requests().len(),
        0,
        "the provider was never called"
    );
    // Without an Origin (not a browser: curl, another server) the token-guarded API answers.
    let resp = server.post("/api/sessions", &json!({})).await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn json_routes_take_only_json() {
    let server = start(&[]).await;
    // A cross-site page could send these without a preflight.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let resp = server
            .http
            .post(server.url("/api/chat"))
            .header("content-type", content_type)
            .body(r#"{"message": "hi"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 415, "{content_type}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unsupported_media_type");
    }
    assert_eq!(server.fake.requests().len(), 0);
}

#[tokio::test]
async fn cors_answers_allowed_origins_only_with_the_headers_we_read() {
    let server = start(&[("GLASSBOX_ALLOWED_ORIGINS", "https://shop.example.com")]).await;
    let preflight = |origin: &'static str| {
        server
            .http
            .request(reqwest::Method::OPTIONS, server.url("/api/chat"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    let ok = preflight("https://shop.example.com").await.unwrap();
    let h = ok.headers();
    assert_eq!(h["access-control-allow-origin"], "https://shop.example.com");
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert!(!allowed.contains('*'));
    let evil = preflight("https://evil.example").await.unwrap();
    assert!(evil.headers().get("access-control-allow-origin").is_none());
    // A simple GET from an allowed page is answered with its origin, not `*`.
    let get = server
        .http
        .get(server.url("/api/sessions/nope"))
        .header("origin", "https://shop.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(
        get.headers()["access-control-allow-origin"],
        "https://shop.example.com"
    );
}

#[tokio::test]
async fn pages_and_assets_carry_security_headers() {
    let server = start(&[]).await;
    let page = server.http.get(server.url("/")).send().await.unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(csp, glassbox_server::routes::DEMO_CSP);
    assert!(
        csp.contains("frame-ancestors 'none'")
            && !csp.contains("script-src 'self' 'unsafe-inline'")
    );
    for path in ["/", "/api/sessions/nope", "/healthz"] {
        let resp = server.http.get(server.url(path)).send().await.unwrap();
        assert_eq!(
            resp.headers()["x-content-type-options"],
            "nosniff",
            "{path}"
        );
        assert_eq!(
            resp.headers()["referrer-policy"],
            "strict-origin-when-cross-origin",
            "{path}"
        );
    }
}
