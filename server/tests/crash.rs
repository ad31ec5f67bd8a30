//! Crash-safe streaming: the server process is killed with SIGKILL while a reply streams; restarted
//! on the same data directory, the reply is failed, retryable, and keeps the text that had streamed
//! up to the last checkpoint (at most a second old). Retry then completes it in place.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::{Value, json};

/// A `glassbox-server` process on a free port; killed when dropped.
struct Process {
    child: Child,
    base: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(data: &std::path::Path, provider_base: &str) -> Process {
    let (child, base) = support::spawn_process(data, provider_base, &[]);
    Process { child, base }
}

async fn session(http: &reqwest::Client, base: &str, id: &str, token: &str) -> Value {
    http.get(format!("{base}/api/sessions/{id}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_reply_streaming_when_the_process_is_killed_keeps_its_text_and_can_be_retried() {
    let chunks: Vec<String> = ["Partial ", "text ", "that ", "streamed."]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let fake = FakeProvider::start(Behaviour::Stall { chunks, after: 4 })
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let server = spawn(data.path(), &fake.openai_base());

    let created: Value = http
        .post(format!("{}/api/sessions", server.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, token) = (
        created["sessionId"].as_str().unwrap().to_owned(),
        created["token"].as_str().unwrap().to_owned(),
    );
    // The reply streams its four pieces, then the provider goes quiet (the request stays open).
    let chat = {
        let (http, url, token) = (
            http.clone(),
            format!("{}/api/chat", server.base),
            token.clone(),
        );
        let body = json!({"sessionId": id, "message": "tell me something long"});
        tokio::spawn(async move {
            let _ = http
                .post(url)
                .bearer_auth(token)
                .header("accept", "text/event-stream")
                .json(&body)
                .send()
                .await
                .map(|r| r.bytes());
        })
    };
    // What is stored (not what is in memory) reaches the streamed text within a checkpoint.
    let started = Instant::now();
    loop {
        let s = session(&http, &server.base, &id, &token).await;
        let reply = &s["messages"][1];
        if reply["content"] == "Partial text that streamed." {
            assert_eq!(reply["status"], "streaming");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no checkpoint: {s}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // SIGKILL: no shutdown code runs.
    drop(server);
    chat.abort();
    let server = spawn(data.path(), &fake.openai_base());
    let s = session(&http, &server.base, &id, &token).await;
    let reply = &s["messages"][1];
    assert_eq!(reply["status"], "failed", "{s}");
    assert_eq!(reply["content"], "Partial text that streamed.");
    assert_eq!(reply["error"]["retryable"], true);

    // Retry regenerates it in place.
    fake.set(Behaviour::reply(&["A whole ", "answer."]));
    let (mut ws, _) = {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("{}/ws", server.base.replace("http://", "ws://"))
            .into_client_request()
            .unwrap();
        request
            .headers_mut()
            .insert("origin", server.base.parse().unwrap());
        tokio_tungstenite::connect_async(request).await.unwrap()
    };
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let send = |v: Value| Message::Text(v.to_string().into());
    ws.send(send(
        json!({"type": "hello", "data": {"sessionId": id, "token": token}}),
    ))
    .await
    .unwrap();
    let reply_id = reply["id"].as_str().unwrap().to_owned();
    ws.send(send(
        json!({"type": "retry", "data": {"messageId": reply_id}}),
    ))
    .await
    .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(Message::Text(t))) = ws.next().await {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "done" {
                return v;
            }
        }
        panic!("the socket closed before the retry finished")
    })
    .await
    .expect("the retry finishes");
    assert_eq!(done["data"]["message"]["id"], reply_id);
    assert_eq!(done["data"]["message"]["content"], "A whole answer.");
}

#[tokio::test]
async fn logs_are_json_lines_with_one_request_id_per_request_when_stdout_is_not_a_terminal() {
    let fake = FakeProvider::start(Behaviour::reply(&["ok"]))
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_glassbox-server"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GLASSBOX_ADDR", "127.0.0.1:0")
        .env("GLASSBOX_DATA_DIR", data.path())
        .env("GLASSBOX_PROVIDER", "openai")
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", fake.openai_base())
        .env("GLASSBOX_EMBEDDINGS", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start glassbox-server");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a log line")
    };
    // Every line is one JSON object; the one that says where it listens has the URL.
    let base = loop {
        let line: Value = serde_json::from_str(&next()).expect("a JSON line");
        if line["message"] == "listening" {
            break line["url"]
                .as_str()
                .unwrap()
                .trim_end_matches('/')
                .to_owned();
        }
    };
    let http = reqwest::Client::new();
    for _ in 0..2 {
        http.post(format!("{base}/api/sessions"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    while ids.len() < 2 {
        let line: Value = serde_json::from_str(&next()).expect("a JSON line");
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{line}"
        );
        if line["message"] == "session created" {
            let id = line["span"]["request_id"]
                .as_str()
                .expect("request id")
                .to_owned();
            assert_eq!(id.len(), 36, "a UUID: {id}");
            assert_eq!(line["span"]["path"], "/api/sessions");
            ids.push(id);
        }
    }
    assert_ne!(ids[0], ids[1], "one id per request");
    let _ = child.kill();
    let _ = child.wait();
}
