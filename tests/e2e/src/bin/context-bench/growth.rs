//! Growth (issue 41): the time to the first token of a reply in a session of 10, 1,000 and
//! 10,000 messages, same run, through the server (`POST /api/chat` read to `done`, the offline
//! provider with no delay, limits off), on SQLite and then, given a cluster, on PostgreSQL.
//! Sessions are filled through the server's own store (user messages and finished replies with a
//! real receipt), then the measured turns go round-robin over the three sessions. Goal: p50 at
//! 10,000 within 1.5× of that at 10.

use std::time::Instant;

use anyhow::{Context, Result};
use glassbox_core::vocab::{MessageStatus, Usage};
use glassbox_e2e::{bench_postgres, start_server};
use glassbox_server::storage::{NewUserMessage, ReplyOutcome};
use serde_json::json;

use super::{first_token, percentile};

/// Session sizes measured.
const SIZES: [usize; 3] = [10, 1_000, 10_000];
/// Measured turns per size (after `WARMUP`).
const TURNS: usize = 100;
const WARMUP: usize = 5;

/// A user message or a reply of the filled history: 30–150 words, a few hundred bytes.
fn text(i: usize) -> String {
    let words = [
        "the", "session", "grows", "while", "each", "turn", "reads", "what", "fits", "window",
        "model", "reply", "history", "tokens", "plan", "summary", "pinned", "ok",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let n = 30 + (next() % 120) as usize;
    let body: Vec<&str> = (0..n)
        .map(|_| words[(next() % words.len() as u64) as usize])
        .collect();
    format!("Message {i}: {}.", body.join(" "))
}

/// A session of `size` messages: one real turn (its reply's receipt is the one the filled replies
/// carry), then exchanges stored through the server's store. Returns its id, token and fill time.
async fn filled(
    server: &glassbox_e2e::Server,
    http: &reqwest::Client,
    size: usize,
) -> Result<(String, String, std::time::Duration)> {
    let store = &server.state.store;
    let r: serde_json::Value = http
        .post(format!("http://{}/api/sessions", server.addr))
        .json(&json!({}))
        .send()
        .await?
        .json()
        .await?;
    let id = r["sessionId"].as_str().context("no sessionId")?.to_owned();
    let token = r["token"].as_str().context("no token")?.to_owned();
    first_token(http, server.addr, (&id, &token), &text(0)).await?;
    let stored = store.messages(&id).await?;
    let receipt = stored
        .iter()
        .rev()
        .find_map(|m| m.receipt.as_ref())
        .context("the first reply has no receipt")?
        .read()?;
    let usage = Usage {
        input_tokens: u64::from(receipt.totals.counted_input_tokens),
        output_tokens: 40,
        counted: false,
    };
    let t = Instant::now();
    for i in 1..size.saturating_sub(2) / 2 + 1 {
        let now = glassbox_server::ids::now_ms();
        let user_id = glassbox_server::ids::new_id();
        let question = text(2 * i);
        let reply_id = glassbox_server::ids::new_id();
        store
            .insert_turn(
                &id,
                &NewUserMessage {
                    id: &user_id,
                    content: &question,
                    client_message_id: None,
                    context: None,
                    attachments: &[],
                    created_at: now,
                },
                &reply_id,
                now,
            )
            .await?;
        let answer = text(2 * i + 1);
        store
            .finish_reply(
                &id,
                &reply_id,
                ReplyOutcome {
                    content: &answer,
                    status: MessageStatus::Complete,
                    usage: Some(usage),
                    receipt: Some(&receipt),
                    tool_rounds: &[],
                    error: None,
                },
                None,
            )
            .await?;
    }
    Ok((id, token, t.elapsed()))
}

/// The growth scenario on SQLite, then on PostgreSQL when the bench was given a cluster
/// (`GLASSBOX_BENCH_POSTGRES_URL`, as `cargo xtask bench context` starts one).
pub async fn growth() -> Result<()> {
    growth_on("SQLite", &[]).await?;
    match bench_postgres::cluster() {
        Some(admin) => {
            let db = bench_postgres::Database::create(&admin, "glassbox_growth_bench").await?;
            growth_on("PostgreSQL", &[("GLASSBOX_DATABASE_URL", db.url.as_str())]).await
        }
        None => {
            println!("\n(No PostgreSQL cluster: the growth scenario ran on SQLite only.)");
            Ok(())
        }
    }
}

/// The scenario on one backend: the server started with `vars` on top of the offline provider.
async fn growth_on(backend: &str, vars: &[(&str, &str)]) -> Result<()> {
    let mut all = vec![
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "0"),
        ("GLASSBOX_EMBEDDINGS", "off"),
    ];
    all.extend_from_slice(vars);
    let server = start_server(&all).await?;
    let http = reqwest::Client::new();
    let mut sessions = Vec::new();
    for size in SIZES {
        sessions.push(filled(&server, &http, size).await?);
    }
    // Round-robin, the first rotating, so every size meets the same conditions (the database's
    // size, its checkpoints, the machine's other work).
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(TURNS); SIZES.len()];
    for k in 0..WARMUP + TURNS {
        for j in 0..SIZES.len() {
            let s = (k + j) % SIZES.len();
            let (id, token, _) = &sessions[s];
            let ms = first_token(&http, server.addr, (id, token), &text(SIZES[s] + k)).await?;
            if k >= WARMUP {
                times[s].push(ms);
            }
        }
    }
    println!(
        "\n## Growth on {backend}: first token by session length ({TURNS} turns each after {WARMUP}, round-robin, offline provider, no delay)\n"
    );
    println!("| messages at start | at end | p50 (ms) | p99 (ms) | p50 ratio to 10 | filled in |");
    println!("|---|---|---|---|---|---|");
    let mut base = None;
    for (s, size) in SIZES.iter().enumerate() {
        let t = &mut times[s];
        t.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(t, 0.5), percentile(t, 0.99));
        let base = *base.get_or_insert(p50);
        let (id, _, fill) = &sessions[s];
        let count = server.state.store.messages(id).await?.len();
        println!(
            "| {size} | {count} | {p50:.2} | {p99:.2} | {:.2} | {:.1} s |",
            p50 / base,
            fill.as_secs_f64()
        );
    }
    println!("\nGoal: p50 at 10,000 within 1.5× of that at 10.");
    Ok(())
}
