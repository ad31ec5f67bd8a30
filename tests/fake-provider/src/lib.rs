//! A fake LLM provider on a real loopback port, speaking the real streaming wire formats of OpenAI
//! Chat Completions (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`).
//!
//! Its behaviour can be switched while it runs: reply normally, call a tool, answer an HTTP error,
//! stall mid-stream, cut the connection mid-stream, send an in-stream error event, or hold a reply
//! at a [`Gate`] until the test releases it. Every request body is recorded so tests can assert on
//! what reached the provider.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use futures::Stream;
use serde_json::{Value, json};

/// What the fake provider does with the next requests.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Streams these text chunks, `delay` apart, then finishes with usage.
    Reply {
        chunks: Vec<String>,
        delay: Duration,
    },
    /// Streams `text`, then a tool call whose arguments arrive in `argument_parts`.
    ToolCall {
        text: String,
        name: String,
        argument_parts: Vec<String>,
    },
    /// Answers this HTTP status with a JSON error body.
    Status { status: u16, message: String },
    /// Streams the first `after` chunks of `chunks`, then sends nothing more and never ends.
    Stall { chunks: Vec<String>, after: usize },
    /// Streams the first `after` chunks of `chunks`, then drops the connection.
    Cut { chunks: Vec<String>, after: usize },
    /// Streams the first `after` chunks of `chunks`, then an in-stream error event.
    ErrorEvent {
        chunks: Vec<String>,
        after: usize,
        message: String,
    },
    /// Streams `chunks`, `delay` apart, and finishes normally (as [`Behaviour::Reply`]), but for
    /// each `(n, gate)` of `holds` stops once its first `n` chunks are sent (all of them, when `n`
    /// is larger) and waits there until `gate` is released. A test holds a reply mid-stream with
    /// it, checks what it wants while the reply is known to be streaming, and lets it go on.
    Hold {
        chunks: Vec<String>,
        delay: Duration,
        holds: Vec<(usize, Gate)>,
    },
}

impl Behaviour {
    /// A normal reply of these chunks with no delay.
    pub fn reply(chunks: &[&str]) -> Self {
        Behaviour::Reply {
            chunks: chunks.iter().map(|c| c.to_string()).collect(),
            delay: Duration::ZERO,
        }
    }

    /// A reply of these chunks, with no delay, that waits at `gate` once it sent the first
    /// `after` of them.
    pub fn hold(chunks: &[&str], after: usize, gate: &Gate) -> Self {
        Behaviour::Hold {
            chunks: chunks.iter().map(|c| c.to_string()).collect(),
            delay: Duration::ZERO,
            holds: vec![(after, gate.clone())],
        }
    }
}

/// Where [`Behaviour::Hold`] replies wait until the test releases them. Clones share one gate.
/// Every stream that comes to it is counted, so a test can wait for the moment a reply is known
/// to have sent its first pieces ([`Gate::reached`]); once released, the gate stays open and later
/// streams pass straight through (still counted).
#[derive(Clone, Debug)]
pub struct Gate(Arc<GateState>);

#[derive(Debug)]
struct GateState {
    /// Streams that came to the gate so far (those waiting, and those it let through).
    reached: tokio::sync::watch::Sender<usize>,
    /// Whether the gate was released.
    open: tokio::sync::watch::Sender<bool>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate no stream has come to yet.
    pub fn new() -> Self {
        Self(Arc::new(GateState {
            reached: tokio::sync::watch::Sender::new(0),
            open: tokio::sync::watch::Sender::new(false),
        }))
    }

    /// Lets every stream waiting at the gate go on, and every later one pass.
    pub fn release(&self) {
        self.0.open.send_replace(true);
    }

    /// Returns once `n` streams in all have come to the gate, that is, have handed the pieces
    /// before it to their connection (they wait there until [`Gate::release`]).
    pub async fn reached(&self, n: usize) {
        let mut count = self.0.reached.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = count.wait_for(|&r| r >= n).await;
    }

    /// How many streams have come to the gate so far.
    pub fn count(&self) -> usize {
        *self.0.reached.borrow()
    }

    /// Counts a stream in and waits until the gate is released.
    async fn pass(&self) {
        let mut open = self.0.open.subscribe();
        self.0.reached.send_modify(|r| *r += 1);
        let _ = open.wait_for(|&o| o).await;
    }
}

/// A topic model's answer in the extraction schema (`core::context::topics::extraction_schema`):
/// these topics (label, count) and standing instructions (message ids), as the reply's text (what
/// an OpenAI-compatible server answers to a `response_format` request).
pub fn topics_answer(topics: &[(&str, u32)], sticky: &[&str]) -> Behaviour {
    let topics: Vec<Value> = topics
        .iter()
        .map(|(label, count)| json!({"label": label, "count": count}))
        .collect();
    let answer = json!({
        "topics": topics,
        "instructions": {"label": "Instructions & Preferences", "message_ids": sticky},
    });
    Behaviour::reply(&[answer.to_string().as_str()])
}

/// A request the fake provider received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `openai` or `anthropic`.
    pub api: &'static str,
    pub body: Value,
    /// The `Authorization` or `x-api-key` header value.
    pub key: Option<String>,
}

struct Shared {
    behaviour: Mutex<Behaviour>,
    /// Behaviours for the next requests, one each, before `behaviour`.
    queue: Mutex<std::collections::VecDeque<Behaviour>>,
    /// What requests for a structured answer get (an OpenAI `response_format`, an Anthropic forced
    /// `tool_choice`), before the queue and `behaviour`, when set.
    structured: Mutex<Option<Behaviour>>,
    /// Requests served so far (numbers tool-call ids, so each round's are unique).
    served: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    record: bool,
    /// Response bodies still being streamed (their connection is open).
    open_streams: Arc<AtomicUsize>,
    /// When the latest reply's first and last text chunks were handed to the connection.
    text_times: Arc<Mutex<TextTimes>>,
}

/// Wall-clock times of a reply's text chunks, for measuring what happens after the last one.
#[derive(Debug, Clone, Copy, Default)]
struct TextTimes {
    first: Option<SystemTime>,
    last: Option<SystemTime>,
}

/// Counts a streaming body while it lives; hyper drops the body when the client goes away.
struct OpenStream(Arc<AtomicUsize>);

impl OpenStream {
    fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running fake provider.
#[derive(Clone)]
pub struct FakeProvider {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeProvider {
    /// Starts on a free loopback port, recording requests.
    pub async fn start(behaviour: Behaviour) -> std::io::Result<Self> {
        Self::start_with(behaviour, true).await
    }

    /// Starts on a free loopback port; `record` keeps request bodies (off for benchmarks).
    pub async fn start_with(behaviour: Behaviour, record: bool) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            behaviour: Mutex::new(behaviour),
            queue: Mutex::default(),
            structured: Mutex::default(),
            served: AtomicUsize::new(0),
            requests: Mutex::default(),
            record,
            open_streams: Arc::default(),
            text_times: Arc::default(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        // Small SSE writes must not wait for Nagle's algorithm.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared })
    }

    /// Base URL for an OpenAI-compatible client (`…/v1`).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for an Anthropic client (host only).
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next requests get these, one each, in order; then the behaviour set last.
    pub fn queue(&self, behaviours: Vec<Behaviour>) {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(behaviours);
    }

    /// What requests for a structured answer (topic extraction: an OpenAI `response_format`, an
    /// Anthropic forced tool) get from now on, whatever the queue and [`FakeProvider::set`] say;
    /// `None`: they are served like the others.
    pub fn set_structured(&self, behaviour: Option<Behaviour>) {
        *self
            .shared
            .structured
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = behaviour;
    }

    /// Changes what the next requests get.
    pub fn set(&self, behaviour: Behaviour) {
        *self
            .shared
            .behaviour
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = behaviour;
    }

    /// How many streamed responses are still open (0 once every client hung up or got the end).
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::SeqCst)
    }

    /// When the latest streamed reply's first and last text chunks were handed to its connection
    /// (wall clock); `None` until a reply has sent its last text chunk.
    pub fn last_reply_text_times(&self) -> Option<(SystemTime, SystemTime)> {
        let t = *self
            .shared
            .text_times
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Some((t.first?, t.last?))
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

fn record(
    shared: &Shared,
    api: &'static str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Behaviour, Value, usize), Box<Response>> {
    let body: Value = serde_json::from_slice(body).map_err(|e| {
        Box::new((StatusCode::BAD_REQUEST, format!("bad json: {e}")).into_response())
    })?;
    if shared.record {
        let key = headers
            .get(header::AUTHORIZATION)
            .or_else(|| headers.get("x-api-key"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Recorded {
                api,
                body: body.clone(),
                key,
            });
    }
    let wants_structure = body.get("response_format").is_some()
        || body.pointer("/tool_choice/type").and_then(Value::as_str) == Some("tool");
    let structured = wants_structure
        .then(|| {
            shared
                .structured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        })
        .flatten();
    let queued = structured.or_else(|| {
        shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
    });
    let behaviour = queued.unwrap_or_else(|| {
        shared
            .behaviour
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    });
    let n = shared
        .served
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    Ok((behaviour, body, n))
}

/// Counts words of every message, as a deterministic stand-in for prompt tokens.
fn prompt_words(body: &Value) -> u64 {
    let mut n = 0;
    if let Some(s) = body.get("system").and_then(Value::as_str) {
        n += words(s);
    }
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        n += match m.get("content") {
            Some(Value::String(c)) => words(c),
            // Content parts (OpenAI) or blocks (Anthropic): their texts.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .map(words)
                .sum(),
            _ => 0,
        };
    }
    n as u64
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// One SSE piece of the stream, or a step that is not data.
enum Piece {
    Data(String),
    Sleep(Duration),
    /// The text chunk before this one was the reply's first (`true`) or last (`false`) text.
    TextSent {
        first: bool,
    },
    Stall,
    Cut,
    /// Waits at the gate (polled once the chunk before was taken by the connection).
    Wait(Gate),
}

fn sse(shared: &Shared, pieces: Vec<Piece>) -> Response {
    let stream = body_stream(
        pieces,
        OpenStream::new(&shared.open_streams),
        shared.text_times.clone(),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn body_stream(
    pieces: Vec<Piece>,
    open: OpenStream,
    text_times: Arc<Mutex<TextTimes>>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    async_stream::stream! {
        let _open = open;
        for piece in pieces {
            match piece {
                Piece::Data(d) => yield Ok(Bytes::from(d)),
                Piece::Sleep(d) => tokio::time::sleep(d).await,
                // Polled again only once the chunk before was taken by the connection.
                Piece::TextSent { first } => {
                    let mut t = text_times.lock().unwrap_or_else(|p| p.into_inner());
                    let now = Some(SystemTime::now());
                    if first {
                        *t = TextTimes { first: now, last: None };
                    } else {
                        t.last = now;
                    }
                }
                Piece::Stall => futures::future::pending::<()>().await,
                Piece::Wait(gate) => gate.pass().await,
                Piece::Cut => {
                    // Let what was sent reach the client before the connection drops, as on a real network.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    yield Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "cut by fake provider"));
                    return;
                }
            }
        }
    }
}

fn error_response(status: u16, message: &str, kind: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

/// Notes the time after the first and the last of `count` text chunks (`index` was just pushed).
fn mark_text(pieces: &mut Vec<Piece>, index: usize, count: usize) {
    if index == 0 {
        pieces.push(Piece::TextSent { first: true });
    }
    if index + 1 == count {
        pieces.push(Piece::TextSent { first: false });
    }
}

/// Pushes the text chunks `texts` as `piece` makes them, each after the behaviour's delay, with
/// the marks of the first and last, and the waits of a [`Behaviour::Hold`] where they belong.
fn push_texts(
    pieces: &mut Vec<Piece>,
    behaviour: &Behaviour,
    texts: &[String],
    piece: impl Fn(&str) -> Piece,
) {
    let (delay, holds) = match behaviour {
        Behaviour::Reply { delay, .. } => (*delay, &[][..]),
        Behaviour::Hold { delay, holds, .. } => (*delay, holds.as_slice()),
        _ => (Duration::ZERO, &[][..]),
    };
    // The holds after `sent` chunks (those past the end wait after the last one).
    let waits = |pieces: &mut Vec<Piece>, sent: usize| {
        for (n, gate) in holds {
            if (*n).min(texts.len()) == sent {
                pieces.push(Piece::Wait(gate.clone()));
            }
        }
    };
    waits(pieces, 0);
    for (i, t) in texts.iter().enumerate() {
        if !delay.is_zero() {
            pieces.push(Piece::Sleep(delay));
        }
        pieces.push(piece(t));
        mark_text(pieces, i, texts.len());
        waits(pieces, i + 1);
    }
}

/// Text chunks of a behaviour and what follows them.
fn plan(b: &Behaviour) -> (Vec<String>, Option<Piece>, Option<String>) {
    match b {
        Behaviour::Reply { chunks, .. } | Behaviour::Hold { chunks, .. } => {
            (chunks.clone(), None, None)
        }
        Behaviour::ToolCall { text, .. } => (vec![text.clone()], None, None),
        Behaviour::Stall { chunks, after } => (
            chunks.iter().take(*after).cloned().collect(),
            Some(Piece::Stall),
            None,
        ),
        Behaviour::Cut { chunks, after } => (
            chunks.iter().take(*after).cloned().collect(),
            Some(Piece::Cut),
            None,
        ),
        Behaviour::ErrorEvent {
            chunks,
            after,
            message,
        } => (
            chunks.iter().take(*after).cloned().collect(),
            None,
            Some(message.clone()),
        ),
        Behaviour::Status { .. } => (vec![], None, None),
    }
}

async fn openai(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let (behaviour, body, n) = match record(&shared, "openai", &headers, &body) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    if let Behaviour::Status { status, message } = &behaviour {
        return error_response(*status, message, "server_error");
    }
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_owned();
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Piece::Data(format!("data: {c}\n\n"))
    };
    let (texts, tail, error) = plan(&behaviour);
    let mut pieces = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    push_texts(&mut pieces, &behaviour, &texts, |t| {
        chunk(json!({"content": t}), Value::Null)
    });
    if let Some(tail) = tail {
        pieces.push(tail);
        return sse(&shared, pieces);
    }
    if let Some(message) = error {
        pieces.push(Piece::Data(format!(
            "data: {}\n\n",
            json!({"error": {"message": message, "type": "server_error"}})
        )));
        return sse(&shared, pieces);
    }
    let mut finish = "stop";
    if let Behaviour::ToolCall {
        name,
        argument_parts,
        ..
    } = &behaviour
    {
        pieces.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": format!("call_fake_{n}"), "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for part in argument_parts {
            pieces.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                Value::Null,
            ));
        }
        finish = "tool_calls";
    }
    pieces.push(chunk(json!({}), json!(finish)));
    let usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
        "usage": {"prompt_tokens": prompt_words(&body), "completion_tokens": texts.len(), "total_tokens": prompt_words(&body) + texts.len() as u64}});
    pieces.push(Piece::Data(format!("data: {usage}\n\n")));
    pieces.push(Piece::Data("data: [DONE]\n\n".into()));
    sse(&shared, pieces)
}

async fn anthropic(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let (behaviour, body, n) = match record(&shared, "anthropic", &headers, &body) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    if let Behaviour::Status { status, message } = &behaviour {
        return error_response(*status, message, "api_error");
    }
    let event = |name: &str, data: Value| Piece::Data(format!("event: {name}\ndata: {data}\n\n"));
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_owned();
    let (texts, tail, error) = plan(&behaviour);
    let mut pieces = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant",
            "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": prompt_words(&body), "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", json!({"type": "ping"})),
    ];
    push_texts(&mut pieces, &behaviour, &texts, |t| {
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}))
    });
    if let Some(tail) = tail {
        pieces.push(tail);
        return sse(&shared, pieces);
    }
    if let Some(message) = error {
        pieces.push(event(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        ));
        return sse(&shared, pieces);
    }
    pieces.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    let mut stop = "end_turn";
    if let Behaviour::ToolCall {
        name,
        argument_parts,
        ..
    } = &behaviour
    {
        pieces.push(event("content_block_start", json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": format!("toolu_fake_{n}"), "name": name, "input": {}}})));
        for part in argument_parts {
            pieces.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        pieces.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ));
        stop = "tool_use";
    }
    pieces.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": texts.len()}}),
    ));
    pieces.push(event("message_stop", json!({"type": "message_stop"})));
    sse(&shared, pieces)
}
