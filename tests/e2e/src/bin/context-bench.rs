//! `cargo xtask bench context`: the cost of planning one turn (`core::context::plan_turn`: receipt and
//! provider request) for a 1,000-message session, native, with the server's own token counter
//! (o200k vocabulary from `dist/vocab`, counts cached by text as on the server), and the size of the
//! receipt as stored. Goal (issue 12): ≤ 1 ms p50, receipt ≤ 8 kB.
//!
//! Scenarios: everything fits a 128k window; a 16k window with hybrid compression (low-value messages
//! dropped, a window, a summary in place of the oldest messages); the same with a page context.

use std::borrow::Cow;
use std::time::Instant;

use anyhow::{Context, Result};
use glassbox_core::context::{
    CompressionSettings, ContextInfo, Strategy, SummaryInput, TurnInput, TurnMessage, plan_turn,
};
use glassbox_core::wire::Role;
use glassbox_e2e::widget_dir;
use glassbox_server::context::TokenCounter;
use serde_json::json;

const MESSAGES: usize = 1000;
const ROUNDS: usize = 300;

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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<()> {
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
            system_prompt: Some(system),
            messages: &messages,
            page_context: with_page.then_some(page),
            summary: None,
            tools: &[],
            tool_instructions: None,
            resume: None,
        };
        // The summary the server would have written and cached for the range compression wants.
        let first = plan_turn(&input, &mut count);
        let summary_ids = first
            .summary_wanted
            .clone()
            .map(|r| (ids[r.start].clone(), ids[r.end - 1].clone()));
        if let Some((a, b)) = &summary_ids {
            input.summary = Some(SummaryInput::Written {
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
