//! A fake LLM provider on a real loopback port, speaking the real streaming wire formats of OpenAI
//! Chat Completions (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`).
//!
//! Its behaviour can be switched while it runs: reply normally, call a tool or several in one
//! response (parallel tool calls), answer an HTTP error, stall mid-stream, cut the connection
//! mid-stream, send an in-stream error event, or hold a reply at a [`Gate`] until the test releases
//! it. Every request body is recorded so tests can assert on what reached the provider.

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
    /// Streams `text`, then a tool call whose arguments arrive in `argument_parts`: the one-call
    /// case of [`Behaviour::ToolCalls`].
    ToolCall {
        text: String,
        name: String,
        argument_parts: Vec<String>,
    },
    /// Streams `text`, then all of `calls` in the same response, as a model making parallel tool
    /// calls does. OpenAI: one `tool_calls` delta stream per call, told apart by `index` (0, 1, …),
    /// each call's id and name in its first delta, the argument fragments of the calls interleaved
    /// (first fragment of every call, then the second of every call, …), `finish_reason:
    /// "tool_calls"`. Anthropic: after the text block, one `tool_use` content block per call
    /// (`content_block_start` with id and name and `input: {}`, its `input_json_delta`s,
    /// `content_block_stop`), `stop_reason: "tool_use"`.
    ToolCalls { text: String, calls: Vec<FakeCall> },
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

    /// `text`, then these tool calls in one response (see [`Behaviour::ToolCalls`]).
    pub fn tool_calls(text: &str, calls: Vec<FakeCall>) -> Self {
        Behaviour::ToolCalls {
            text: text.to_owned(),
            calls,
        }
    }

    /// The tool calls this behaviour makes, in order (none for the behaviours that make none).
    fn calls(&self) -> Vec<FakeCall> {
        match self {
            Behaviour::ToolCall {
                name,
                argument_parts,
                ..
            } => vec![FakeCall {
                name: name.clone(),
                argument_parts: argument_parts.clone(),
            }],
            Behaviour::ToolCalls { calls, .. } => calls.clone(),
            _ => vec![],
        }
    }
}

/// One tool call of a [`Behaviour::ToolCalls`] response.
#[derive(Debug, Clone)]
pub struct FakeCall {
    /// The tool called.
    pub name: String,
    /// The arguments (a JSON text) in the fragments they stream in.
    pub argument_parts: Vec<String>,
}

impl FakeCall {
    /// A call of `name` whose arguments arrive in `argument_parts`.
    pub fn new(name: &str, argument_parts: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            argument_parts: argument_parts.iter().map(|p| p.to_string()).collect(),
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
    /// Tool calls made so far (numbers their ids, so every call's is unique).
    tool_calls: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    record: bool,
    /// Response bodies still being streamed (their connection is open).
    open_streams: Arc<AtomicUsize>,
    /// When the latest reply's first and last text chunks were handed to the connection.
    text_times: Arc<Mutex<TextTimes>>,
    /// Text chunks handed to their connection so far, all streams together.
    texts_taken: Arc<AtomicUsize>,
}

impl Shared {
    fn new(behaviour: Behaviour, record: bool) -> Self {
        Self {
            behaviour: Mutex::new(behaviour),
            queue: Mutex::default(),
            structured: Mutex::default(),
            tool_calls: AtomicUsize::new(0),
            requests: Mutex::default(),
            record,
            open_streams: Arc::default(),
            text_times: Arc::default(),
            texts_taken: Arc::default(),
        }
    }
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
        let shared = Arc::new(Shared::new(behaviour, record));
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            // As the real APIs (Anthropic takes 32 MB requests): images in base64 pass axum's
            // default of 2 MB.
            .layer(axum::extract::DefaultBodyLimit::max(32 << 20))
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
    /// Text chunks handed to their connections so far, all streams together: a chunk counts once
    /// the connection asked for what follows it (a closed connection asks for nothing more).
    pub fn texts_taken(&self) -> usize {
        self.shared.texts_taken.load(Ordering::SeqCst)
    }

    /// When the latest reply's first and last text chunks were handed to the connection.
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
) -> Result<(Behaviour, Value), Box<Response>> {
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
    Ok((behaviour, body))
}

/// The calls `behaviour` makes, each with the number of its id (the next unused ones, in order).
fn numbered_calls(shared: &Shared, behaviour: &Behaviour) -> Vec<(usize, FakeCall)> {
    let calls = behaviour.calls();
    let first = shared.tool_calls.fetch_add(calls.len(), Ordering::Relaxed) + 1;
    (first..).zip(calls).collect()
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
    /// The text chunk before this one was taken by the connection (counted).
    Taken,
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
        shared.texts_taken.clone(),
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
    texts_taken: Arc<AtomicUsize>,
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
                Piece::Taken => {
                    texts_taken.fetch_add(1, Ordering::SeqCst);
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

/// The text chunks a request may have: at most its output cap (`max_tokens`, or OpenAI's
/// `max_completion_tokens`), a chunk being a token here, as a real provider stops at its cap.
/// True when they were cut.
fn capped(mut texts: Vec<String>, body: &Value) -> (Vec<String>, bool) {
    let cap = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
        .map_or(usize::MAX, |c| c as usize);
    let cut = texts.len() > cap;
    texts.truncate(cap);
    (texts, cut)
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
        pieces.push(Piece::Taken);
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
        Behaviour::ToolCall { text, .. } | Behaviour::ToolCalls { text, .. } => {
            (vec![text.clone()], None, None)
        }
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
    let (behaviour, body) = match record(&shared, "openai", &headers, &body) {
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
    let (texts, cut) = capped(texts, &body);
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
    // A reply stopped at its cap makes no calls.
    let calls = if cut {
        Vec::new()
    } else {
        numbered_calls(&shared, &behaviour)
    };
    // Each call's deltas: the first names it (id and name, no arguments yet), then one per
    // argument fragment; `index` tells the calls apart.
    let deltas: Vec<Vec<Value>> = calls
        .iter()
        .enumerate()
        .map(|(index, (id, call))| {
            let first = json!({"index": index, "id": format!("call_fake_{id}"), "type": "function",
                "function": {"name": call.name, "arguments": ""}});
            std::iter::once(first)
                .chain(
                    call.argument_parts
                        .iter()
                        .map(|part| json!({"index": index, "function": {"arguments": part}})),
                )
                .collect()
        })
        .collect();
    // Interleaved: every call's first delta, then every call's second, and so on.
    let longest = deltas.iter().map(Vec::len).max().unwrap_or(0);
    for step in 0..longest {
        for delta in deltas.iter().filter_map(|d| d.get(step)) {
            pieces.push(chunk(json!({"tool_calls": [delta]}), Value::Null));
        }
    }
    let finish = if cut {
        "length"
    } else if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    pieces.push(chunk(json!({}), json!(finish)));
    let usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
        "usage": {"prompt_tokens": prompt_words(&body), "completion_tokens": texts.len(), "total_tokens": prompt_words(&body) + texts.len() as u64}});
    pieces.push(Piece::Data(format!("data: {usage}\n\n")));
    pieces.push(Piece::Data("data: [DONE]\n\n".into()));
    sse(&shared, pieces)
}

async fn anthropic(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let (behaviour, body) = match record(&shared, "anthropic", &headers, &body) {
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
    let (texts, cut) = capped(texts, &body);
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
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        )
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
    // A reply stopped at its cap makes no calls.
    let calls = if cut {
        Vec::new()
    } else {
        numbered_calls(&shared, &behaviour)
    };
    // One tool_use block per call, in order, after the text block (index 0).
    for (block, (id, call)) in (1..).zip(&calls) {
        pieces.push(event("content_block_start", json!({"type": "content_block_start", "index": block,
            "content_block": {"type": "tool_use", "id": format!("toolu_fake_{id}"), "name": call.name, "input": {}}})));
        for part in &call.argument_parts {
            pieces.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": block,
                "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        pieces.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": block}),
        ));
    }
    let stop = if cut {
        "max_tokens"
    } else if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    pieces.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": texts.len()}}),
    ));
    pieces.push(event("message_stop", json!({"type": "message_stop"})));
    sse(&shared, pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `data` of every SSE event `behaviour` streams to a request of `api`, with the event
    /// names (empty for OpenAI, which names none); `shared` carries the tool-call numbering.
    async fn stream(shared: &Arc<Shared>, api: &str, behaviour: Behaviour) -> Vec<(String, Value)> {
        shared.queue.lock().unwrap().push_back(behaviour);
        let request = Bytes::from(
            json!({"model": "m", "messages": [{"role": "user", "content": "two words"}]})
                .to_string(),
        );
        let response = match api {
            "openai" => openai(State(shared.clone()), HeaderMap::new(), request).await,
            _ => anthropic(State(shared.clone()), HeaderMap::new(), request).await,
        };
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let name = e
                    .lines()
                    .find_map(|l| l.strip_prefix("event: "))
                    .unwrap_or_default();
                let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                let data = serde_json::from_str(data).unwrap_or(Value::String(data.into()));
                (name.to_owned(), data)
            })
            .collect()
    }

    fn three_calls() -> Behaviour {
        Behaviour::tool_calls(
            "On it. ",
            vec![
                FakeCall::new("first", &[r#"{"a":"#, r#"1}"#]),
                FakeCall::new("second", &[r#"{"b":"#, r#"2,"#, r#""c":3}"#]),
                FakeCall::new("third", &["{}"]),
            ],
        )
    }

    #[tokio::test]
    async fn openai_streams_parallel_calls_as_interleaved_deltas_told_apart_by_index() {
        let shared = Arc::new(Shared::new(Behaviour::reply(&["unused"]), false));
        let events = stream(&shared, "openai", three_calls()).await;
        let deltas: Vec<&Value> = events
            .iter()
            .filter_map(|(_, d)| d.pointer("/choices/0/delta/tool_calls"))
            .map(|calls| {
                let calls = calls.as_array().unwrap();
                assert_eq!(calls.len(), 1, "one call's delta per chunk");
                &calls[0]
            })
            .collect();
        // Each call's first delta names it; its fragments follow, interleaved with the others'.
        let order: Vec<(u64, bool)> = deltas
            .iter()
            .map(|d| (d["index"].as_u64().unwrap(), d.get("id").is_some()))
            .collect();
        assert_eq!(
            order,
            [
                (0, true),
                (1, true),
                (2, true),
                (0, false),
                (1, false),
                (2, false),
                (0, false),
                (1, false),
                (1, false),
            ]
        );
        for (index, (id, name)) in [
            ("call_fake_1", "first"),
            ("call_fake_2", "second"),
            ("call_fake_3", "third"),
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(
                *deltas[index],
                json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}})
            );
            let arguments: String = deltas
                .iter()
                .filter(|d| d["index"] == index)
                .map(|d| d["function"]["arguments"].as_str().unwrap())
                .collect();
            let expected = [r#"{"a":1}"#, r#"{"b":2,"c":3}"#, "{}"][index];
            assert_eq!(arguments, expected);
        }
        let finishes: Vec<&Value> = events
            .iter()
            .filter_map(|(_, d)| d.pointer("/choices/0/finish_reason"))
            .filter(|f| !f.is_null())
            .collect();
        assert_eq!(finishes, [&json!("tool_calls")]);
        // Usage as for every reply: prompt words, one output token per text chunk.
        let usage = events.iter().find_map(|(_, d)| d.get("usage")).unwrap();
        assert_eq!(
            *usage,
            json!({"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3})
        );
        assert_eq!(events.last().unwrap().1, json!("[DONE]"));

        // The next response's calls get the next ids.
        let events = stream(&shared, "openai", three_calls()).await;
        let ids: Vec<&str> = events
            .iter()
            .filter_map(|(_, d)| d.pointer("/choices/0/delta/tool_calls/0/id"))
            .map(|id| id.as_str().unwrap())
            .collect();
        assert_eq!(ids, ["call_fake_4", "call_fake_5", "call_fake_6"]);
    }

    #[tokio::test]
    async fn anthropic_streams_parallel_calls_as_one_tool_use_block_each() {
        let shared = Arc::new(Shared::new(Behaviour::reply(&["unused"]), false));
        let events = stream(&shared, "anthropic", three_calls()).await;
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        for (name, data) in &events {
            assert_eq!(data["type"], *name, "the event's name is its data's type");
        }
        let block = |index: usize, id: &str, name: &str, parts: &[&str]| {
            let mut events = vec![json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})];
            events.extend(parts.iter().map(|p| {
                json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p}})
            }));
            events.push(json!({"type": "content_block_stop", "index": index}));
            events
        };
        let after_text: Vec<Value> = events
            .iter()
            .skip_while(|(_, d)| d != &json!({"type": "content_block_stop", "index": 0}))
            .skip(1)
            .map(|(_, d)| d.clone())
            .collect();
        let mut expected = block(1, "toolu_fake_1", "first", &[r#"{"a":"#, r#"1}"#]);
        expected.extend(block(
            2,
            "toolu_fake_2",
            "second",
            &[r#"{"b":"#, r#"2,"#, r#""c":3}"#],
        ));
        expected.extend(block(3, "toolu_fake_3", "third", &["{}"]));
        expected.push(json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 1}}));
        expected.push(json!({"type": "message_stop"}));
        assert_eq!(after_text, expected);
        assert_eq!(
            names[..5],
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop"
            ]
        );
        assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 2);
        assert_eq!(
            events[3].1["delta"],
            json!({"type": "text_delta", "text": "On it. "})
        );
    }

    #[tokio::test]
    async fn one_tool_call_is_the_one_call_case() {
        let shared = Arc::new(Shared::new(Behaviour::reply(&["unused"]), false));
        let one = Behaviour::ToolCall {
            text: "Hm. ".into(),
            name: "only".into(),
            argument_parts: vec![r#"{"x":"#.into(), "1}".into()],
        };
        let events = stream(&shared, "openai", one).await;
        let deltas: Vec<Value> = events
            .iter()
            .filter_map(|(_, d)| d.pointer("/choices/0/delta/tool_calls/0"))
            .cloned()
            .collect();
        assert_eq!(
            deltas,
            [
                json!({"index": 0, "id": "call_fake_1", "type": "function", "function": {"name": "only", "arguments": ""}}),
                json!({"index": 0, "function": {"arguments": r#"{"x":"#}}),
                json!({"index": 0, "function": {"arguments": "1}"}}),
            ]
        );
        // A reply without calls takes no id and stops as usual.
        let events = stream(&shared, "anthropic", Behaviour::reply(&["Hi"])).await;
        assert!(
            events
                .iter()
                .any(|(_, d)| d.pointer("/delta/stop_reason") == Some(&json!("end_turn")))
        );
        let events = stream(&shared, "anthropic", three_calls()).await;
        assert_eq!(events[5].1["content_block"]["id"], "toolu_fake_2");
    }
}
