//! `cargo xtask bench context`: the cost of planning one turn (`core::context::plan_turn`: receipt and
//! provider request) for a 1,000-message session, native, with the server's own token counter
//! (o200k vocabulary from `dist/vocab`, counts cached by text as on the server), and the size of the
//! receipt as stored. Goal (issue 12): ≤ 1 ms p50, receipt ≤ 8 kB.
//!
//! Scenarios: everything fits a 128k window; a 16k window with hybrid compression (low-value messages
//! dropped, a window, a summary in place of the oldest messages); the same with a page context.
//!
//! Then the tool loop: a whole reply through the server (`POST /api/chat`, read to `done`) against the
//! fake OpenAI-compatible provider on loopback, plain vs one `set_relevant_context` round first (the
//! call is run, stored, sent back, and the model answers): the round's added latency, p50/p99.
//!
//! Then topics (issue 14): selection over 10,000 message vectors (goal ≤ 2 ms p50) beside reading
//! them from the SQLite cache and from the server's vectors in memory; offline extraction of a 200-message conversation; and the time to
//! the first token with extraction on vs off (extraction must add nothing).
//!
//! Then agents' items (issue 29, `items.rs`): 100 generated references (about 1,000 chunks) on a
//! real server with the real model: cold indexing in chunks/s beside onnxruntime embedding the
//! same chunks (passes alternating), the warm request context (goal ≤ 5 ms p50; the anchor is
//! ~10 ms per 100 documents, docs/item-selection.md) with the search alone beside it, and the
//! preview round trip over loopback (goal ≤ 15 ms p50) beside `GET /healthz`.
//!
//! Then MCP tools (issue 39, `mcp.rs`): one MCP call's added latency over a built-in tool call,
//! over stdio and streamable HTTP; chat-ready at start-up with 0 and 5 servers; the demo server's
//! tool costs as the receipt shows them.
//!
//! Then growth (issue 41, `growth.rs`): the first token in sessions of 10, 1,000 and 10,000
//! messages (goal: within 1.5× at 10,000 of that at 10).
//!
//! Usage: context-bench <python> <ort_embed.py> [mcp|growth] (the bench venv's Python, with onnxruntime, and
//! `tests/e2e/bench/ort_embed.py`); the model is `GLASSBOX_EMBED_MODEL_DIR`, else the default one.
//! `cargo xtask bench context` provisions all three.

mod growth;
mod items;
mod mcp;

use std::borrow::Cow;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use glassbox_core::context::{
    CompressionSettings, ContextInfo, Strategy, SummaryInput, TurnInput, TurnMessage, TurnSources,
    plan_turn,
};
use glassbox_core::vocab::Role;
use glassbox_e2e::{start_server, widget_dir};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use glassbox_server::tokens::TokenCounter;
use serde_json::json;

const MESSAGES: usize = 1000;
const ROUNDS: usize = 300;
/// Replies per case of the tool-loop comparison (after `WARMUP` of each).
const REPLIES: usize = 400;
const WARMUP: usize = 50;

fn session() -> (Vec<String>, Vec<String>) {
    let words = [
        "the",
        "widget",
        "streams",
        "a",
        "reply",
        "while",
        "the",
        "server",
        "plans",
        "what",
        "goes",
        "to",
        "model",
        "context",
        "window",
        "tokens",
        "budget",
        "compression",
        "ok",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let texts = (0..MESSAGES)
        .map(|i| {
            if i % 23 == 5 {
                return "ok".to_owned(); // low-value acknowledgements for compression to drop
            }
            let n = 40 + (next() % 80) as usize;
            let body: Vec<&str> = (0..n)
                .map(|_| words[(next() % words.len() as u64) as usize])
                .collect();
            format!("Message {i}: {}.", body.join(" "))
        })
        .collect();
    let ids = (0..MESSAGES).map(|i| format!("01JD{i:022}")).collect();
    (texts, ids)
}

fn info(limit: u32, strategy: Strategy) -> ContextInfo {
    ContextInfo {
        model: "gpt-4o-mini".into(),
        context_limit: limit,
        encoding: "o200k_base".into(),
        exact: true,
        system_prompt_tokens: 0,
        memory_tokens: 0,
        tool_tokens: 0,
        output_reserve: 1024,
        compression: CompressionSettings {
            strategy,
            ..Default::default()
        },
    }
}

/// Sends `message` in session `id` (`POST /api/chat`, SSE) and reads the reply to `done`: the
/// time to its first token (ms).
async fn first_token(
    http: &reqwest::Client,
    addr: std::net::SocketAddr,
    (id, token): (&str, &str),
    message: &str,
) -> Result<f64> {
    let t = Instant::now();
    let mut resp = http
        .post(format!("http://{addr}/api/chat"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .json(&json!({"sessionId": id, "message": message}))
        .send()
        .await?;
    let mut first = None;
    let mut body = String::new();
    while let Some(chunk) = resp.chunk().await? {
        body.push_str(&String::from_utf8_lossy(&chunk));
        if first.is_none() && body.contains("event: delta") {
            first = Some(t.elapsed());
        }
    }
    anyhow::ensure!(body.contains("event: done"), "no done event: {body}");
    Ok(first.unwrap_or_default().as_secs_f64() * 1e3)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> Result<()> {
    let items_args = items_args()?;
    // `mcp`, `mcp-ready` (its chat-ready part) or `growth` as the third argument runs that
    // section alone.
    match std::env::args().nth(3).as_deref() {
        Some("mcp") => return mcp::mcp().await,
        Some("mcp-ready") => return mcp::chat_ready(&mcp::demo_binary()?).await,
        Some("growth") => return growth::growth().await,
        _ => {}
    }
    mcp::demo_binary()?;
    planning()?;
    tool_round().await?;
    selection().await?;
    extraction();
    first_token_with_extraction().await?;
    items::items(&items_args).await?;
    mcp::mcp().await?;
    growth::growth().await
}

/// The items section's anchor (from the command line) and model (from the environment), read
/// before anything runs, so a missing one fails at once.
fn items_args() -> Result<items::ItemsBenchArgs> {
    let usage = "usage: context-bench <python> <ort_embed.py> (run by `cargo xtask bench context`)";
    let mut args = std::env::args_os().skip(1);
    let python = args.next().context(usage)?;
    let script = args.next().context(usage)?;
    let model_dir = std::env::var_os("GLASSBOX_EMBED_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(glassbox_server::config::default_model_dir);
    Ok(items::ItemsBenchArgs {
        python,
        script,
        model_dir,
    })
}

/// A deterministic pseudo-random stream (xorshift), so runs compare.
struct Rng(u64);

impl Rng {
    /// The next 64 bits.
    fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn next(&mut self) -> f32 {
        (self.bits() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }

    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        (self.bits() % n.max(1) as u64) as usize
    }

    /// A unit vector near `center` (noise of weight `noise`).
    fn near(&mut self, center: &[f32], noise: f32) -> Vec<f32> {
        let mut v: Vec<f32> = center.iter().map(|c| c + noise * self.next()).collect();
        glassbox_core::vector::normalize(&mut v);
        v
    }
}

const DIM: usize = 384;
const VECTORS: usize = 10_000;

/// Topic selection over 10,000 message vectors: scoring against two labels and the choices, in
/// memory (goal ≤ 2 ms p50); beside it, reading those vectors from the embedding cache in SQLite,
/// as a turn does today.
async fn selection() -> Result<()> {
    use glassbox_core::context::selection::{Candidate, select, topic_scores};
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let centers: Vec<Vec<f32>> = (0..5).map(|_| rng.near(&[0.0; DIM], 1.0)).collect();
    let vectors: Vec<Vec<f32>> = (0..VECTORS)
        .map(|i| {
            let c = centers[i / 400 % 5].clone();
            rng.near(&c, 0.06)
        })
        .collect();
    let labels = vec![centers[1].clone(), centers[3].clone()];
    let mut times = Vec::with_capacity(ROUNDS);
    let mut kept = 0;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let refs: Vec<Option<&[f32]>> = vectors.iter().map(|v| Some(v.as_slice())).collect();
        let scores = topic_scores(&refs, &labels);
        let candidates: Vec<Candidate> = scores
            .iter()
            .map(|s| Candidate {
                score: *s,
                ..Default::default()
            })
            .collect();
        let choices = select(&candidates, Some(0.4));
        kept = choices.iter().filter(|c| c.is_kept()).count();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);

    // The same vectors through the store, as `embed_cached` reads them for a turn.
    let dir = tempfile::tempdir()?;
    let store = glassbox_server::storage::Store::open(dir.path()).await?;
    let items: Vec<(String, Vec<f32>)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("m{i}:hash"), v.clone()))
        .collect();
    for chunk in items.chunks(500) {
        store.put_embeddings("bench", chunk).await?;
    }
    let keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
    let mut reads = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let found = store.cached_embeddings("bench", &keys).await?;
        anyhow::ensure!(found.len() == VECTORS, "read {} vectors", found.len());
        reads.push(t.elapsed().as_secs_f64() * 1e3);
    }
    reads.sort_by(f64::total_cmp);
    // What a live session's turns and commands read instead: the server's vectors in memory.
    let memory = glassbox_server::embed::memory::VectorMemory::new(
        glassbox_server::embed::memory::DEFAULT_ENTRIES,
    );
    memory.put_many(
        items
            .iter()
            .map(|(k, v)| (k.clone(), std::sync::Arc::from(v.as_slice()))),
    );
    let mut recalls = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let found = memory.get_many(&keys);
        anyhow::ensure!(found.iter().all(Option::is_some), "memory lost a vector");
        recalls.push(t.elapsed().as_secs_f64() * 1e3);
    }
    recalls.sort_by(f64::total_cmp);
    println!(
        "\n## Topic selection over {VECTORS} message vectors ({DIM} dimensions, 2 selected topics; {kept} kept)\n"
    );
    println!("| | p50 (ms) | p99 (ms) |");
    println!("|---|---|---|");
    println!(
        "| scoring + choices, vectors in memory (goal ≤ 2 ms p50) | {:.3} | {:.3} |",
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    println!(
        "| reading the {VECTORS} vectors from the SQLite cache (what a turn does first) | {:.3} | {:.3} |",
        percentile(&reads, 0.5),
        percentile(&reads, 0.99)
    );
    println!(
        "| the same from the server's vectors in memory (a live session, after its first turn) | {:.3} | {:.3} |",
        percentile(&recalls, 0.5),
        percentile(&recalls, 0.99)
    );
    Ok(())
}

/// Offline extraction (sticky detection, clustering of exchanges, labels) for a 200-message
/// conversation wandering over five subjects.
fn extraction() {
    use glassbox_analysis::topic_extract::{ExtractMessage, extract_offline};
    let mut rng = Rng(42);
    let centers: Vec<Vec<f32>> = (0..5).map(|_| rng.near(&[0.0; DIM], 1.0)).collect();
    let subjects = [
        "kubernetes networking",
        "sourdough baking",
        "chess openings",
        "tax forms",
        "bike repair",
    ];
    let texts: Vec<String> = (0..200)
        .map(|i| {
            let s = subjects[i / 40];
            if i == 16 {
                "Be concise from now on, please.".to_owned()
            } else if i % 2 == 0 {
                format!("Question {i} about {s}: what should I check next about the {s} setup?")
            } else {
                format!("Answer {i}: for {s}, start with the basics of {s} and then look at the details.")
            }
        })
        .collect();
    let vectors: Vec<Vec<f32>> = (0..200).map(|i| rng.near(&centers[i / 40], 0.9)).collect();
    let ids: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let messages: Vec<ExtractMessage> = (0..200)
        .map(|i| ExtractMessage {
            id: &ids[i],
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            text: &texts[i],
            vector: Some(&vectors[i]),
        })
        .collect();
    let mut times = Vec::new();
    let mut found = Default::default();
    for _ in 0..50 {
        let t = Instant::now();
        found = extract_offline(&messages);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let topics: Vec<String> = found
        .topics
        .iter()
        .map(|t| format!("{} ({})", t.label, t.count))
        .collect();
    println!("\n## Offline topic extraction, 200 messages over 5 subjects\n");
    println!("| p50 (ms) | p99 (ms) | topics found | sticky |");
    println!("|---|---|---|---|");
    println!(
        "| {:.3} | {:.3} | {} | {} |",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        topics.join(", "),
        found.sticky_ids.len()
    );
}

/// The servers of the time-to-first-token comparison: extraction off (the anchor), off again (the
/// control: what two identical servers differ by in this run), on, and on with a topic selected
/// (its turns score the history, and wait for any lock extraction holds).
const TTFT_SERVERS: [(&str, &str); 4] = [
    ("extraction off (anchor)", "off"),
    ("off again (control)", "off"),
    ("extraction on", "on"),
    ("on, a topic selected", "on"),
];

/// One server of the comparison and its session.
struct Timed {
    addr: std::net::SocketAddr,
    id: String,
    token: String,
    _server: glassbox_e2e::Server,
}

impl Timed {
    /// Sends `text` and reads the reply to `done`: the time to its first token (ms).
    async fn turn(&self, http: &reqwest::Client, text: &str) -> Result<f64> {
        first_token(http, self.addr, (&self.id, &self.token), text).await
    }

    /// The session's stored topics (`GET /api/sessions/{id}/topics`).
    async fn topics(&self, http: &reqwest::Client) -> Result<serde_json::Value> {
        let url = format!("http://{}/api/sessions/{}/topics", self.addr, self.id);
        Ok(http
            .get(url)
            .bearer_auth(&self.token)
            .send()
            .await?
            .json()
            .await?)
    }

    /// Selects the session's first topic (the filter then scores every turn's history).
    async fn select_first_topic(&self, http: &reqwest::Client) -> Result<()> {
        let r = self.topics(http).await?;
        let label = r["topics"]["topics"][0]["label"].clone();
        anyhow::ensure!(label.is_string(), "no topic to select: {r}");
        let view: serde_json::Value = http
            .put(format!(
                "http://{}/api/sessions/{}/filter",
                self.addr, self.id
            ))
            .bearer_auth(&self.token)
            .json(&json!({"labels": [label]}))
            .send()
            .await?
            .json()
            .await?;
        anyhow::ensure!(
            view["labels"].as_array().is_some_and(|l| l.len() == 1),
            "filter not set: {view}"
        );
        Ok(())
    }

    /// Waits until the stored topics were extracted from `messages` messages (at most 60 s).
    async fn topics_of(&self, http: &reqwest::Client, messages: u64) -> Result<()> {
        for _ in 0..600 {
            let r = self.topics(http).await?;
            if r["topics"]["messageCount"].as_u64() == Some(messages) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("no topics of {messages} messages within 60 s")
    }
}

/// Time to the first reply token with topic extraction off (the anchor) vs on, beside a second
/// server with it off (the control), all interleaved in one run, in two cases:
/// - a message sent right after the previous reply finished (extraction of that reply is pending);
/// - a message sent as the extraction of the previous reply starts (1.5 s after it), so both run
///   at once on the machine's cores: the worst moment for a user to send.
async fn first_token_with_extraction() -> Result<()> {
    let reply = Behaviour::reply(&["Noted: ", "the ", "plan ", "stands."]);
    let fake = FakeProvider::start_with(reply, false).await?;
    let base = fake.openai_base();
    let model_dir = std::env::var("GLASSBOX_EMBED_MODEL_DIR").unwrap_or_default();
    let http = reqwest::Client::new();
    let mut servers = Vec::new();
    for (_, topics) in TTFT_SERVERS {
        let server = start_server(&[
            ("GLASSBOX_PROVIDER", "openai"),
            ("OPENAI_API_KEY", "bench"),
            ("OPENAI_BASE_URL", &base),
            ("GLASSBOX_TOPICS", topics),
            ("GLASSBOX_TOPIC_MODEL", "offline"),
            ("GLASSBOX_EMBED_MODEL_DIR", &model_dir),
        ])
        .await?;
        // Waits for the server's embedding model.
        for _ in 0..600 {
            let h: serde_json::Value = http
                .get(format!("http://{}/healthz", server.addr))
                .send()
                .await?
                .json()
                .await?;
            if h["embeddings"]["status"] != "loading" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let r: serde_json::Value = http
            .post(format!("http://{}/api/sessions", server.addr))
            .json(&json!({}))
            .send()
            .await?
            .json()
            .await?;
        servers.push(Timed {
            addr: server.addr,
            id: r["sessionId"].as_str().unwrap_or_default().to_owned(),
            token: r["token"].as_str().unwrap_or_default().to_owned(),
            _server: server,
        });
    }
    let subjects = [
        "my Kubernetes ingress",
        "my sourdough starter",
        "the Sicilian defence",
    ];
    let text = |i: usize| format!("Message {i}: tell me more about {}.", subjects[i / 10 % 3]);
    let n = servers.len();

    // Right after a reply: each message as soon as the previous reply is done.
    const TURNS: usize = 120;
    let mut after_reply: Vec<Vec<f64>> = vec![Vec::new(); n];
    let (on, filtered) = (2, 3);
    for i in 0..TURNS {
        if i == 10 {
            // The first topics of the filtered session, and its filter on the first of them.
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            servers[filtered].topics_of(&http, 20).await?;
            servers[filtered].select_first_topic(&http).await?;
        }
        // Rotating which goes first, so none pays for another's leftover work more than the rest.
        for j in 0..n {
            let k = (i + j) % n;
            let ms = servers[k].turn(&http, &text(i)).await?;
            if i >= 10 {
                after_reply[k].push(ms);
            }
        }
    }
    // The sessions now hold 240 messages; the first extraction embeds them all (not measured).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for k in [on, filtered] {
        servers[k].topics_of(&http, 2 * TURNS as u64).await?;
    }

    // As extraction starts: a reply, 1.5 s (extraction's settling time), the measured message.
    // One server at a time; after the one with extraction on, its next extraction is waited for,
    // so it never overlaps another server's turn.
    const ROUNDS_AT_START: usize = 30;
    let mut at_start: Vec<Vec<f64>> = vec![Vec::new(); n];
    // Per server: rounds in which extraction's background work (embedding, clustering) ran while
    // the measured message waited for its first token.
    let mut overlapped = vec![0; n];
    let mut quiet: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut messages = 2 * TURNS as u64;
    for i in 0..ROUNDS_AT_START {
        for j in 0..n {
            let k = (i + j) % n;
            // Nothing runs in the background now: the round's quiet turn.
            quiet[k].push(servers[k].turn(&http, &text(TURNS + 2 * i)).await?);
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let before = glassbox_server::background::finished();
            at_start[k].push(servers[k].turn(&http, &text(TURNS + 2 * i + 1)).await?);
            if glassbox_server::background::finished() > before {
                overlapped[k] += 1;
            }
            if k == on || k == filtered {
                servers[k].topics_of(&http, messages + 4).await?;
                // The rest of the extraction (the view, vectors computed ahead) before another
                // server's turn.
                while glassbox_server::background::pending() > 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if k == filtered {
                // Extraction regenerates the labels: the filter stays on the first topic.
                servers[k].select_first_topic(&http).await?;
            }
        }
        messages += 4;
    }

    for (title, times) in [
        (
            format!(
                "a message right after a reply ({} each, interleaved; the sessions grow to {} messages)",
                TURNS - 10,
                TURNS * 2
            ),
            &mut after_reply,
        ),
        (
            format!(
                "a message sent as the extraction of the previous reply starts ({ROUNDS_AT_START} each, sessions of {}–{} messages)",
                TURNS * 2,
                messages
            ),
            &mut at_start,
        ),
    ] {
        for v in times.iter_mut() {
            v.sort_by(f64::total_cmp);
        }
        println!("\n## Time to first token, {title}\n");
        println!(
            "| | {} | {} | {} | {} | control / anchor | on / anchor |",
            TTFT_SERVERS[0].0, TTFT_SERVERS[1].0, TTFT_SERVERS[2].0, TTFT_SERVERS[3].0
        );
        println!("|---|---|---|---|---|---|---|");
        for (name, p) in [("p50 (ms)", 0.5), ("p90 (ms)", 0.9), ("p99 (ms)", 0.99)] {
            let [a, c, b, f] = [0, 1, 2, 3].map(|k| percentile(&times[k], p));
            println!(
                "| {name} | {a:.3} | {c:.3} | {b:.3} | {f:.3} | {:.2} | {:.2} |",
                c / a,
                b / a
            );
        }
    }
    // Each server's at-start turn over the quiet turn just before it in the same round (same
    // history within two messages): what an extraction starting adds, the filter's own cost of a
    // turn (the label embedded, the history scored) being in both.
    for v in quiet.iter_mut() {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "\n## The same rounds: the turn as an extraction starts / the round's quiet turn before it\n"
    );
    println!("| | quiet p50 (ms) | at start p50 (ms) | ratio p50 | ratio p90 |");
    println!("|---|---|---|---|---|");
    for (k, (name, _)) in TTFT_SERVERS.iter().enumerate() {
        let [q50, q90] = [0.5, 0.9].map(|p| percentile(&quiet[k], p));
        let [b50, b90] = [0.5, 0.9].map(|p| percentile(&at_start[k], p));
        println!(
            "| {name} | {q50:.3} | {b50:.3} | {:.2} | {:.2} |",
            b50 / q50,
            b90 / q90
        );
    }
    println!(
        "Rounds in which a background job (extraction's embedding or clustering) finished while \
         the measured message waited: {} (of {ROUNDS_AT_START} each).",
        TTFT_SERVERS
            .iter()
            .zip(&overlapped)
            .map(|((name, _), c)| format!("{name} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

fn planning() -> Result<()> {
    let counter = TokenCounter::load(&widget_dir().join("vocab"), &["gpt-4o-mini"]);
    if !counter.has("o200k_base") {
        anyhow::bail!(
            "no o200k vocabulary in {}: run `cargo xtask build`",
            widget_dir().display()
        );
    }
    let (texts, ids) = session();
    let messages: Vec<TurnMessage> = texts
        .iter()
        .zip(&ids)
        .enumerate()
        .map(|(i, (t, id))| TurnMessage {
            id: Some(id),
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            text: Cow::Borrowed(t),
            attachments: &[],
            rounds: &[],
        })
        .collect();
    let page =
        json!({"page": "pack-detail", "entity": "Illustrious-XL", "filters": {"tag": ["a", "b"]}});
    let page = page.as_object().context("page context")?;
    let system = "You are a helpful assistant embedded in a web page. Answer concisely.";
    let fits = info(128_000, Strategy::Hybrid);
    let tight = info(16_000, Strategy::Hybrid);
    let scenarios: [(&str, &ContextInfo, bool); 3] = [
        ("all 1,000 messages fit (128k window)", &fits, false),
        ("16k window, hybrid compression, summary", &tight, false),
        ("16k window, hybrid, summary, page context", &tight, true),
    ];
    println!(
        "## Planning one turn: receipt and provider request (native, {MESSAGES} messages, {ROUNDS} runs each)\n"
    );
    println!(
        "| scenario | p50 (ms) | p99 (ms) | parts | left out | messages sent | receipt stored (bytes) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (label, info, with_page) in scenarios {
        let mut count = |_: Option<&str>, text: &str| counter.count(&info.encoding, text);
        let mut input = TurnInput {
            info,
            messages: &messages,
            sources: TurnSources {
                system_prompt: Some(system),
                page_context: with_page.then_some(page),
                ..Default::default()
            },
        };
        // The summary the server would have written and cached for the range compression wants.
        let first = plan_turn(&input, &mut count);
        let summary_ids = first
            .summary_wanted
            .clone()
            .filter(|r| !r.is_empty())
            .map(|r| (ids[r[0]].clone(), ids[r[r.len() - 1]].clone()));
        if let Some((a, b)) = &summary_ids {
            input.sources.summary = Some(SummaryInput::Written {
                first_id: a,
                last_id: b,
                text: "The user and the assistant discussed how the widget streams replies and plans context.",
            });
        }
        let mut times = Vec::with_capacity(ROUNDS);
        let mut plan = None;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let p = plan_turn(&input, &mut count);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            plan = Some(p);
        }
        let plan = plan.context("no run")?;
        times.sort_by(f64::total_cmp);
        let stored = serde_json::to_string(&plan.receipt)?.len();
        println!(
            "| {label} | {:.3} | {:.3} | {} | {} | {} | {stored} |",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            plan.receipt.parts.len(),
            plan.receipt.left_out.len(),
            plan.request.messages.len(),
        );
    }
    println!("\nGoals (issue 12): p50 ≤ 1 ms, receipt ≤ 8 kB (8,192 bytes).");
    Ok(())
}

/// One tool round's added latency: the same reply with and without a `set_relevant_context` round.
async fn tool_round() -> Result<()> {
    let reply = Behaviour::reply(&["The ", "files ", "are ", "noted."]);
    let fake = FakeProvider::start_with(reply.clone(), false).await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "bench"),
        ("OPENAI_BASE_URL", &base),
        ("GLASSBOX_TOOLS", "context"),
    ])
    .await?;
    let http = reqwest::Client::new();
    let url = format!("http://{}/api/chat", server.addr);
    let body = json!({"message": "Please keep docs/spec.md in mind."});
    let tool_call = || Behaviour::ToolCall {
        text: "Noting the file. ".into(),
        name: "set_relevant_context".into(),
        argument_parts: vec![
            r#"{"setName":"files","#.into(),
            r#""items":["docs/spec.md"],"mode":"merge"}"#.into(),
        ],
    };
    let one = |with_tool: bool| {
        let (http, url, body) = (&http, &url, &body);
        let fake = &fake;
        let reply = reply.clone();
        async move {
            if with_tool {
                fake.queue(vec![tool_call(), reply]);
            }
            let t = Instant::now();
            let text = http
                .post(url)
                .header("accept", "text/event-stream")
                .json(body)
                .send()
                .await?
                .text()
                .await?;
            let elapsed = t.elapsed();
            anyhow::ensure!(text.contains("event: done"), "no done event: {text}");
            if with_tool {
                anyhow::ensure!(text.contains("event: tool"), "no tool event: {text}");
            }
            Ok::<Duration, anyhow::Error>(elapsed)
        }
    };
    // Interleaved, so drift on the machine hits both cases alike.
    let (mut plain, mut tool) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + REPLIES {
        let p = one(false).await?;
        let t = one(true).await?;
        if i >= WARMUP {
            plain.push(p.as_secs_f64() * 1e3);
            tool.push(t.as_secs_f64() * 1e3);
        }
    }
    plain.sort_by(f64::total_cmp);
    tool.sort_by(f64::total_cmp);
    println!(
        "\n## One tool round vs a plain reply (whole reply through the server, fake OpenAI provider on loopback, {REPLIES} each, sequential)\n"
    );
    println!("| | plain reply (anchor) | with one tool round | added | ratio |");
    println!("|---|---|---|---|---|");
    for (name, p) in [("p50 (ms)", 0.5), ("p99 (ms)", 0.99)] {
        let (a, b) = (percentile(&plain, p), percentile(&tool, p));
        println!("| {name} | {a:.3} | {b:.3} | {:.3} | {:.2} |", b - a, b / a);
    }
    println!(
        "\nA tool round is a second provider call plus running the tool and storing the change; the fake \
         provider answers at once, so this is all Glassbox's own time."
    );
    Ok(())
}
