//! `/metrics` on its own listener: what a turn, a provider failure, a refusal and an open
//! WebSocket add; nothing of it on the public address; demo pages switched off.

mod support;

use glassbox_fake_provider::Behaviour;
use serde_json::json;
use support::{Api, TestServer};

/// The metrics router served on a loopback port of its own, as `GLASSBOX_METRICS_ADDR` does.
async fn metrics_url(server: &TestServer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = glassbox_server::metrics_app(server.state.clone());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}/metrics")
}

/// The value of the sample whose name and labels are `series`, exactly as written.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
}

async fn scrape(server: &TestServer, url: &str) -> String {
    let resp = server.http.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
    );
    resp.text().await.unwrap()
}

#[tokio::test]
async fn turns_tokens_failures_refusals_and_sockets_are_counted() {
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["Hi ", "there."]),
        &[("GLASSBOX_LIMIT_MESSAGES_PER_MINUTE", "2")],
    )
    .await;
    let url = metrics_url(&server).await;
    let model = server.state.config.model.clone();

    let (id, token, _) = server.new_session().await;
    let first = server.chat(&id, &token, "hello").await;
    assert_eq!(first["reply"]["status"], "complete", "{first}");
    // The provider fails the second message's reply mid-stream.
    server.fake.set(Behaviour::ErrorEvent {
        chunks: vec!["Partial ".into(), "text".into()],
        after: 1,
        message: "upstream broke".into(),
    });
    let second = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(&token)
        .json(&json!({"sessionId": id, "message": "again"}))
        .send()
        .await
        .unwrap();
    assert_ne!(second.status(), 429);
    assert_eq!(server.messages(&id, &token).await[3]["status"], "failed");
    // The session's third message in the minute is refused before it is stored.
    let refused = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(&token)
        .json(&json!({"sessionId": id, "message": "one more"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    let ws = server.ws().await;

    let text = scrape(&server, &url).await;
    assert_eq!(
        sample(&text, r#"glassbox_turns_total{outcome="complete"}"#),
        1.0
    );
    assert_eq!(
        sample(&text, r#"glassbox_turns_total{outcome="failed"}"#),
        1.0
    );
    // The fake provider reports usage for the finished reply.
    let input = sample(
        &text,
        &format!(r#"glassbox_tokens_total{{model="{model}",direction="input"}}"#),
    );
    assert!(input > 0.0, "{text}");
    assert_eq!(
        sample(
            &text,
            &format!(
                r#"glassbox_provider_call_seconds_count{{provider="openai",model="{model}"}}"#
            )
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                r#"glassbox_provider_errors_total{{provider="openai",model="{model}",code="provider_error"}}"#
            )
        ),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, "glassbox_added_overhead_seconds_count"), 2.0);
    assert_eq!(
        sample(
            &text,
            r#"glassbox_refusals_total{limit="session_messages"}"#
        ),
        1.0
    );
    assert_eq!(sample(&text, "glassbox_websockets"), 1.0);
    assert_eq!(sample(&text, "glassbox_embedding_queue_depth"), 0.0);
    assert!(text.ends_with("# EOF\n"));

    ws.close().await;
    let mut open = 1.0;
    for _ in 0..100 {
        open = sample(&scrape(&server, &url).await, "glassbox_websockets");
        if open == 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(open, 0.0, "a closed socket stops counting");
}

#[tokio::test]
async fn the_public_address_serves_no_metrics_and_demo_pages_can_be_off() {
    let public = concat!(env!("CARGO_MANIFEST_DIR"), "/../public");
    let server = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["x"]),
        &[("GLASSBOX_PUBLIC_DIR", public)],
    )
    .await;
    let page = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap();
    let body = page.text().await.unwrap();
    assert!(!body.contains("glassbox_turns"), "{body}");
    let demo = server.http.get(server.url("/")).send().await.unwrap();
    assert_eq!(demo.status(), 200);

    let off = TestServer::start_with(
        Api::OpenAi,
        Behaviour::reply(&["x"]),
        &[("GLASSBOX_PUBLIC_DIR", "off")],
    )
    .await;
    for path in ["/", "/index.html", "/react/"] {
        let resp = off.http.get(off.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path}");
    }
    // The API and the widget are served all the same.
    let health = off.http.get(off.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
}
