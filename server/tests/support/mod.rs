//! Test harness: a real server on a loopback port, wired to the fake provider, with WS/REST helpers.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use glassbox_core::wire::{ServerEvent, ServerFrame};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use glassbox_server::config::Config;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A fresh, empty database on the private PostgreSQL cluster `cargo xtask test` starts (its URL
/// in `GLASSBOX_TEST_POSTGRES_URL`); returns the database's URL.
pub async fn postgres_database() -> String {
    use sqlx::Connection;
    let admin = std::env::var("GLASSBOX_TEST_POSTGRES_URL").expect(
        "GLASSBOX_TEST_POSTGRES_URL is not set: run `cargo xtask test`, which starts a private \
         PostgreSQL cluster for the tests",
    );
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("the test cluster answers");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("CREATE DATABASE");
    let _ = conn.close().await;
    let base = admin
        .rsplit_once('/')
        .map_or(admin.as_str(), |(base, _)| base);
    format!("{base}/{name}")
}

/// Whether the server tests run on PostgreSQL (`GLASSBOX_TEST_BACKEND=postgres`, as `cargo xtask
/// test`'s second pass over them sets) rather than SQLite.
pub fn on_postgres() -> bool {
    std::env::var("GLASSBOX_TEST_BACKEND").is_ok_and(|b| b == "postgres")
}

pub struct TestServer {
    pub addr: SocketAddr,
    /// The server's own state, for tests that call its Rust API directly.
    pub state: glassbox_server::state::AppState,
    pub fake: FakeProvider,
    pub http: reqwest::Client,
    _data: tempfile::TempDir,
    /// The configuration it was started with (a restart starts from it again).
    vars: HashMap<String, String>,
    /// The task serving `addr`.
    serving: tokio::task::JoinHandle<()>,
}

/// Which wire format the server speaks to the fake provider.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Api {
    OpenAi,
    Anthropic,
}

impl TestServer {
    pub async fn start(api: Api, behaviour: Behaviour) -> Self {
        Self::start_with(api, behaviour, &[]).await
    }

    pub async fn start_with(api: Api, behaviour: Behaviour, extra: &[(&str, &str)]) -> Self {
        let fake = FakeProvider::start(behaviour).await.expect("fake provider");
        let data = tempfile::tempdir().expect("tempdir");
        let mut vars: HashMap<String, String> = HashMap::new();
        vars.insert("GLASSBOX_ADDR".into(), "127.0.0.1:0".into());
        vars.insert(
            "GLASSBOX_DATA_DIR".into(),
            data.path().display().to_string(),
        );
        match api {
            Api::OpenAi => {
                vars.insert("GLASSBOX_PROVIDER".into(), "openai".into());
                vars.insert("OPENAI_API_KEY".into(), "sk-test-openai".into());
                vars.insert("OPENAI_BASE_URL".into(), fake.openai_base());
            }
            Api::Anthropic => {
                vars.insert("GLASSBOX_PROVIDER".into(), "anthropic".into());
                vars.insert("ANTHROPIC_API_KEY".into(), "sk-test-anthropic".into());
                vars.insert("ANTHROPIC_BASE_URL".into(), fake.anthropic_base());
            }
        }
        vars.insert("GLASSBOX_PROVIDER_IDLE_TIMEOUT_MS".into(), "500".into());
        vars.insert("GLASSBOX_DISCONNECT_GRACE_MS".into(), "5000".into());
        // Chat tests do not need the embedding model; the embedding tests switch it on.
        vars.insert("GLASSBOX_EMBEDDINGS".into(), "off".into());
        // Topic extraction calls the provider after every reply; the topic tests switch it on.
        vars.insert("GLASSBOX_TOPICS".into(), "off".into());
        // Tests of the tool loop switch the context tools on; others compare exact request bodies.
        vars.insert("GLASSBOX_TOOLS".into(), "off".into());
        // No agents unless a test configures them (GLASSBOX_CONFIG).
        vars.insert("GLASSBOX_CONFIG".into(), "off".into());
        // Tests send many messages from one address; the limit and budget tests switch them on.
        for limit in glassbox_server::config::LIMIT_VARS {
            vars.insert(limit, "0".into());
        }
        // The vocabularies `cargo xtask build` writes, so counts are exact.
        let widget_dir = std::env::var("GLASSBOX_E2E_WIDGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../dist").to_owned());
        vars.insert("GLASSBOX_VOCAB_DIR".into(), format!("{widget_dir}/vocab"));
        if on_postgres() {
            vars.insert("GLASSBOX_DATABASE_URL".into(), postgres_database().await);
        }
        for (k, v) in extra {
            vars.insert(k.to_string(), v.to_string());
        }
        let (addr, state, serving) = serve(&vars).await;
        Self {
            addr,
            state,
            fake,
            http: reqwest::Client::new(),
            _data: data,
            vars,
            serving,
        }
    }

    /// Stops this server and starts a new one from the same configuration, on the same data
    /// directory (the same database) and fake provider, as a restart of the process would: the
    /// new server shares nothing in memory with the old one (hubs, embedding cache, rate limits).
    /// It listens on another port; the embedding model, if on, loads again.
    pub async fn restart(self) -> Self {
        let Self {
            state,
            fake,
            http,
            _data,
            vars,
            serving,
            ..
        } = self;
        serving.abort();
        let _ = serving.await;
        drop(state);
        let (addr, state, serving) = serve(&vars).await;
        Self {
            addr,
            state,
            fake,
            http,
            _data,
            vars,
            serving,
        }
    }

    /// Another instance beside this one: the same configuration (the same database and fake
    /// provider), its own process state and port — as a second process of a deployment.
    pub async fn another(&self) -> Self {
        let (addr, state, serving) = serve(&self.vars).await;
        Self {
            addr,
            state,
            fake: self.fake.clone(),
            http: reqwest::Client::new(),
            _data: tempfile::tempdir().expect("tempdir"),
            vars: self.vars.clone(),
            serving,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A WebSocket as the demo page opens it (its `Origin` is the server's own).
    pub async fn ws(&self) -> Ws {
        let origin = format!("http://{}", self.addr);
        self.ws_from(Some(&origin)).await.expect("ws connect")
    }

    /// A WebSocket opened with this `Origin` header (none when `None`); the HTTP status when the
    /// upgrade is refused.
    pub async fn ws_from(&self, origin: Option<&str>) -> Result<Ws, u16> {
        ws_at(&self.addr.to_string(), origin).await
    }

    /// `DELETE /api/sessions/{id}` with `token`; the answer as it came.
    pub async fn delete_session(&self, id: &str, token: &str) -> reqwest::Response {
        self.http
            .delete(self.url(&format!("/api/sessions/{id}")))
            .bearer_auth(token)
            .send()
            .await
            .expect("DELETE")
    }

    /// POSTs `body` as JSON to `path`.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST")
    }

    /// POSTs `body` as JSON to `path` and reads the JSON answer.
    pub async fn post_json(&self, path: &str, body: &Value) -> Value {
        self.post(path, body)
            .await
            .json()
            .await
            .expect("JSON answer")
    }

    /// GETs `path` and reads the JSON answer.
    pub async fn get_json(&self, path: &str) -> Value {
        self.http
            .get(self.url(path))
            .send()
            .await
            .expect("GET")
            .json()
            .await
            .expect("JSON answer")
    }

    /// Creates a session over REST: its id, its token and the whole answer.
    pub async fn new_session(&self) -> (String, String, Value) {
        let s = self.post_json("/api/sessions", &json!({})).await;
        (
            s["sessionId"].as_str().expect("sessionId").to_owned(),
            s["token"].as_str().expect("token").to_owned(),
            s,
        )
    }

    /// One chat turn over REST (JSON answer), which must succeed.
    pub async fn chat(&self, id: &str, token: &str, text: &str) -> Value {
        self.chat_with(token, json!({"sessionId": id, "message": text}))
            .await
    }

    /// One chat turn over REST with the whole request `body`, which must succeed.
    pub async fn chat_with(&self, token: &str, body: Value) -> Value {
        let resp = self
            .http
            .post(self.url("/api/chat"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("POST /api/chat");
        assert_eq!(resp.status(), 200);
        resp.json().await.expect("JSON answer")
    }

    /// `GET /api/sessions/{id}`, which must succeed.
    pub async fn session(&self, id: &str, token: &str) -> Value {
        let resp = self
            .http
            .get(self.url(&format!("/api/sessions/{id}")))
            .bearer_auth(token)
            .send()
            .await
            .expect("GET /api/sessions/{id}");
        assert_eq!(resp.status(), 200);
        resp.json().await.expect("JSON answer")
    }

    /// Messages of a session via REST.
    pub async fn messages(&self, session: &str, token: &str) -> Vec<Value> {
        let resp = self
            .http
            .get(self.url(&format!("/api/sessions/{session}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        body["messages"].as_array().cloned().unwrap_or_default()
    }
}

/// Builds a server's state from `vars` and serves it on a free loopback port.
async fn serve(
    vars: &HashMap<String, String>,
) -> (
    SocketAddr,
    glassbox_server::state::AppState,
    tokio::task::JoinHandle<()>,
) {
    let config = Config::from_lookup(|k| vars.get(k).cloned()).expect("config");
    let state = glassbox_server::build_state(config).await.expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let served = state.clone();
    let serving = tokio::spawn(async move {
        let _ = glassbox_server::serve(listener, served).await;
    });
    (addr, state, serving)
}

/// A WebSocket to the server at `addr` (`host:port`), from `origin` when given.
pub async fn ws_at(addr: &str, origin: Option<&str>) -> Result<Ws, u16> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{addr}/ws")
        .into_client_request()
        .expect("ws request");
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().expect("origin header"));
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(Ws { socket }),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("ws connect: {e}"),
    }
}

pub struct Ws {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Ws {
    pub async fn send(&mut self, v: Value) {
        self.socket
            .send(Message::Text(v.to_string().into()))
            .await
            .expect("ws send");
    }

    pub async fn send_raw(&mut self, text: String) {
        self.socket
            .send(Message::Text(text.into()))
            .await
            .expect("ws send");
    }

    /// The next server frame but a heartbeat, as typed value and raw JSON (fails after 10 s).
    pub async fn next(&mut self) -> (ServerFrame, Value) {
        loop {
            let (frame, raw) = self.next_any().await;
            if !matches!(frame.event, ServerEvent::Heartbeat(_)) {
                return (frame, raw);
            }
        }
    }

    /// The next server frame, heartbeats included (fails after 10 s).
    pub async fn next_any(&mut self) -> (ServerFrame, Value) {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), self.socket.next())
                .await
                .expect("timed out waiting for a frame")
                .expect("socket ended")
                .expect("socket error");
            if let Message::Text(t) = msg {
                let raw: Value = serde_json::from_str(&t).expect("server sent JSON");
                // From the text, as the widget reads it (a JSON value would put `data` first).
                let frame: ServerFrame = serde_json::from_str(&t).expect("server frame");
                return (frame, raw);
            }
        }
    }

    /// The next server frame, or `None` when none comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<(ServerFrame, Value)> {
        tokio::time::timeout(wait, self.next()).await.ok()
    }

    /// Whether the server closes the connection within `wait` (frames before it are skipped).
    pub async fn closed_within(&mut self, wait: Duration) -> bool {
        let closed = async {
            loop {
                if let None | Some(Err(_)) | Some(Ok(Message::Close(_))) = self.socket.next().await
                {
                    return;
                }
            }
        };
        tokio::time::timeout(wait, closed).await.is_ok()
    }

    /// The code of the close frame the server sends within `wait` (frames before it are
    /// skipped); `None` when it sends none in time.
    pub async fn close_code_within(&mut self, wait: Duration) -> Option<u16> {
        let closed = async {
            loop {
                match self.socket.next().await {
                    Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                    None | Some(Err(_)) => return None,
                    Some(Ok(_)) => {}
                }
            }
        };
        tokio::time::timeout(wait, closed).await.ok().flatten()
    }

    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }

    /// Sends hello for a new session; returns (session id, token, frames after session).
    pub async fn hello_new(&mut self) -> (String, String) {
        self.send(json!({"type": "hello", "data": {}})).await;
        let (f, _) = self.next().await;
        let ServerEvent::Session(info) = f.event else {
            panic!("expected session, got {f:?}")
        };
        let (snap, _) = self.next().await;
        assert!(
            matches!(snap.event, ServerEvent::Snapshot(_)),
            "expected snapshot, got {snap:?}"
        );
        let (loaded, _) = self.next().await;
        assert!(
            matches!(loaded.event, ServerEvent::Context(ref c) if c.reason == glassbox_core::wire::ContextReason::Load),
            "expected context (load), got {loaded:?}"
        );
        for expected in ["topics", "filter"] {
            let (_, raw) = self.next_of_hello(expected).await;
            assert_eq!(raw["type"], expected, "{raw}");
        }
        (
            info.session_id,
            info.token.expect("new session has a token"),
        )
    }

    /// Joins an existing session as a fresh tab: reads its `session`, `snapshot`, `context` (load),
    /// `topics` and `filter` frames.
    pub async fn hello_existing(&mut self, id: &str, token: &str) {
        self.send(json!({"type": "hello", "data": {"sessionId": id, "token": token}}))
            .await;
        for expected in ["session", "snapshot", "context", "topics", "filter"] {
            let (_, raw) = self.next_of_hello(expected).await;
            assert_eq!(raw["type"], expected, "{raw}");
        }
    }

    /// The next frame of a hello's answer, expected to be `expected`. On PostgreSQL a session's
    /// frames are numbered when written (docs/instances.md), so one published by work still under
    /// way as the tab joins (an extraction's filter view) may come between the hello's own frames,
    /// which are numbered for this connection: such a logged frame of another type is passed over.
    async fn next_of_hello(&mut self, expected: &str) -> (ServerFrame, Value) {
        loop {
            let (frame, raw) = self.next().await;
            let logged = frame.sync_id != 0 && frame.sync_id % (1 << 20) == 0;
            if on_postgres() && logged && raw["type"] != expected {
                continue;
            }
            return (frame, raw);
        }
    }

    /// Reads frames until the reply ends; returns all frames read.
    pub async fn until_reply_ends(&mut self) -> Vec<ServerFrame> {
        let mut frames = vec![];
        loop {
            let (f, _) = self.next().await;
            let end = matches!(&f.event, ServerEvent::Done(_))
                || matches!(&f.event, ServerEvent::Error(e) if e.message_id.is_some());
            frames.push(f);
            if end {
                return frames;
            }
        }
    }
}

/// The concatenated delta text of frames.
pub fn delta_text(frames: &[ServerFrame]) -> String {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            ServerEvent::Delta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect()
}

/// Sync ids strictly increase.
pub fn assert_increasing(frames: &[ServerFrame]) {
    for w in frames.windows(2) {
        assert!(
            w[0].sync_id < w[1].sync_id,
            "sync ids not increasing: {} then {}",
            w[0].sync_id,
            w[1].sync_id
        );
    }
}

pub fn chunks(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The repo's demo MCP server's binary, built beside the test binaries (`cargo test --workspace`
/// builds it: its crate has integration tests).
pub fn demo_mcp_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target dir");
    let bin = dir.join(format!("glassbox-mcp-demo{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p glassbox-mcp-demo` (cargo xtask test does)",
        bin.display()
    );
    bin
}

/// The contents of the tool results a provider request carried, in its format, in order.
pub fn tool_result_texts(api: Api, body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    match api {
        Api::OpenAi => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect(),
        Api::Anthropic => messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["content"].as_str().unwrap_or_default().to_owned())
            .collect(),
    }
}

/// A `glassbox-server` process on a free port, on the OpenAI-format provider at `provider_base`,
/// its data in `data`, with `extra` settings; returns it and its base URL (read from the line that
/// says where it listens). Embeddings and tools are off, and no widget or demo pages are served.
pub fn spawn_process(
    data: &std::path::Path,
    provider_base: &str,
    extra: &[(&str, &str)],
) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_glassbox-server"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GLASSBOX_ADDR", "127.0.0.1:0")
        .env("GLASSBOX_DATA_DIR", data)
        .env("GLASSBOX_PROVIDER", "openai")
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", provider_base)
        .env("GLASSBOX_EMBEDDINGS", "off")
        .env("GLASSBOX_TOOLS", "off")
        .env("GLASSBOX_WIDGET_DIR", data.join("no-widget"))
        .env("GLASSBOX_PUBLIC_DIR", data.join("no-public"))
        .env("RUST_LOG", "info")
        .envs(extra.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start glassbox-server");
    // The address it listens on is in the line that says so (plain or JSON logs alike).
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .expect("read stdout");
        if let Some(at) = line.find("http://127.0.0.1:") {
            let url: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || ":/.".contains(*c))
                .collect();
            break url.trim_end_matches('/').to_owned();
        }
    };
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, base)
}
