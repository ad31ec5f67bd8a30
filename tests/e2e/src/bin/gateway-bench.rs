//! `cargo xtask bench gateway`: the latency our server adds to a streamed chat request, against calling
//! the fake provider directly, in one run on loopback; and the widget's download size.
//!
//! Usage: gateway-bench <dist-dir> [requests] [concurrency]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use glassbox_e2e::start_server;
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::json;

const WARMUP: usize = 500;

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dist = PathBuf::from(
        args.next()
            .context("usage: gateway-bench <dist-dir> [requests] [concurrency]")?,
    );
    let requests: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000);
    let concurrency: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(16);

    let chunks: Vec<String> = (0..16).map(|i| format!("word{i} ")).collect();
    let fake = FakeProvider::start_with(
        Behaviour::Reply {
            chunks,
            delay: Duration::ZERO,
        },
        false,
    )
    .await?;
    // SAFETY: set before any other thread reads the environment; the server only needs the path.
    unsafe { std::env::set_var("GLASSBOX_E2E_WIDGET_DIR", &dist) };
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "bench"),
        ("OPENAI_BASE_URL", &base),
    ])
    .await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .build()?;

    let direct_url = format!("{base}/chat/completions");
    let direct_body = json!({"model": "bench", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hello there"}]});
    let ours_url = format!("http://{}/api/chat", server.addr);
    let ours_body = json!({"message": "hello there", "context": {"page": "bench"}});

    eprintln!(
        "gateway-bench: {requests} streamed requests each, concurrency {concurrency}, after {WARMUP} warm-up"
    );
    load(
        &http,
        &direct_url,
        &direct_body,
        WARMUP,
        concurrency,
        "data: [DONE]",
    )
    .await?;
    load(
        &http,
        &ours_url,
        &ours_body,
        WARMUP,
        concurrency,
        "event: done",
    )
    .await?;
    let mut out = std::io::stdout().lock();
    // Unloaded first (what one user feels), then the loaded run the anchor is about.
    for (n, c) in [(2_000.min(requests), 1), (requests, concurrency)] {
        let direct = load(&http, &direct_url, &direct_body, n, c, "data: [DONE]").await?;
        let ours = load(&http, &ours_url, &ours_body, n, c, "event: done").await?;
        latency_table(&mut out, n, c, &direct, &ours)?;
    }

    writeln!(out, "\n## Widget payload ({})\n", dist.display())?;
    writeln!(out, "| file | raw (B) | gzip -9 (B) | brotli q11 (B) |")?; // as precompressed by xtask build
    writeln!(out, "|---|---|---|---|")?;
    let mut total = (0, 0, 0);
    for name in [
        "glassbox_widget_bg.wasm",
        "glassbox_widget.js",
        "glassbox-chat.js",
        "shadow-shell.js",
        "launcher.js",
        "glassbox-wasm.js",
        "token-worker-start.js",
        "glassbox.css",
    ] {
        let (raw, gz, br) = sizes(&dist.join(name))?;
        total = (total.0 + raw, total.1 + gz, total.2 + br);
        writeln!(out, "| {name} | {raw} | {gz} | {br} |")?;
    }
    writeln!(
        out,
        "| **total** | {} | {} | {} |",
        total.0, total.1, total.2
    )?;
    writeln!(out, "\n| what | ours | anchor | ratio |\n|---|---|---|---|")?;
    writeln!(
        out,
        "| widget brotli (kB) | {:.1} | 28 (Leptos hello-world after wasm-opt) | {:.1} |",
        total.2 as f64 / 1e3,
        total.2 as f64 / 28e3
    )?;
    Ok(())
}

fn latency_table(
    out: &mut impl Write,
    requests: usize,
    concurrency: usize,
    direct: &Run,
    ours: &Run,
) -> Result<()> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (d50, d99) = (
        ms(percentile(&direct.latencies, 50.0)),
        ms(percentile(&direct.latencies, 99.0)),
    );
    let (o50, o99) = (
        ms(percentile(&ours.latencies, 50.0)),
        ms(percentile(&ours.latencies, 99.0)),
    );
    writeln!(
        out,
        "\n## Gateway latency ({requests} streamed requests, concurrency {concurrency}, loopback, 16-chunk reply)\n"
    )?;
    writeln!(
        out,
        "| what | direct to fake provider | through Glassbox | added | anchor | ratio (added / anchor) |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    writeln!(
        out,
        "| p50 latency (ms) | {d50:.3} | {o50:.3} | {:.3} | — | — |",
        o50 - d50
    )?;
    writeln!(
        out,
        "| p99 latency (ms) | {d99:.3} | {o99:.3} | {:.3} | 0.94 (TensorZero p99 added, 10k QPS, 4 vCPU) | {:.2} |",
        o99 - d99,
        (o99 - d99) / 0.94
    )?;
    writeln!(
        out,
        "| throughput (req/s) | {:.0} | {:.0} | — | 10000 (TensorZero) | {:.2} |",
        direct.rate,
        ours.rate,
        ours.rate / 10_000.0
    )?;
    writeln!(
        out,
        "| failed requests | {} | {} | — | 0 | — |",
        direct.failures, ours.failures
    )?;
    Ok(())
}

struct Run {
    latencies: Vec<Duration>,
    rate: f64,
    failures: usize,
}

/// Sends `n` POSTs with `concurrency` in flight, each read to the end; a request fails if its body
/// lacks `end_marker`.
async fn load(
    http: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    n: usize,
    concurrency: usize,
    end_marker: &str,
) -> Result<Run> {
    let start = Instant::now();
    let results: Vec<Option<Duration>> = futures::stream::iter(0..n)
        .map(|_| async move {
            let t = Instant::now();
            let resp = http
                .post(url)
                .header("accept", "text/event-stream")
                .json(body)
                .send()
                .await
                .ok()?;
            let text = resp.text().await.ok()?;
            text.contains(end_marker).then(|| t.elapsed())
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let elapsed = start.elapsed();
    let failures = results.iter().filter(|r| r.is_none()).count();
    let mut latencies: Vec<Duration> = results.into_iter().flatten().collect();
    latencies.sort();
    Ok(Run {
        latencies,
        rate: n as f64 / elapsed.as_secs_f64(),
        failures,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Raw size and the sizes of the `.gz` and `.br` files `cargo xtask build` writes beside it (what the
/// server actually sends).
fn sizes(path: &Path) -> Result<(usize, usize, usize)> {
    let len = |p: PathBuf| {
        std::fs::metadata(&p)
            .map(|m| m.len() as usize)
            .with_context(|| format!("reading {}", p.display()))
    };
    let with = |ext: &str| PathBuf::from(format!("{}.{ext}", path.display()));
    Ok((len(path.to_path_buf())?, len(with("gz"))?, len(with("br"))?))
}
