//! `cargo xtask bench tokens`: token counting in headless Chromium, on one page with the same texts
//! (1 MB of English prose and a 2k-token chat): ours (`glassbox-token-worker` + the `.gbv`
//! vocabulary) against gpt-tokenizer and tiktoken from npm. Throughput is measured in a dedicated
//! worker for each; loading is also timed on the main thread, where tasks over 50 ms are counted.
//!
//! Usage: tokens-bench <node_modules>

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use glassbox_core::tokens::BpeTokenizer;
use glassbox_e2e::{browser, root, start_driver, widget_dir};
use serde_json::Value;
use tower_http::services::ServeDir;

const CONTENDERS: [&str; 3] = ["glassbox", "gpt-tokenizer", "tiktoken"];

/// English prose: every README and doc of the pinned npm packages and of this repository,
/// repeated to 1 MB.
fn corpus(modules: &Path) -> Result<(String, String)> {
    let mut docs = Vec::new();
    for dir in [modules.to_path_buf(), root().join("docs")] {
        collect_markdown(&dir, &mut docs, 0);
    }
    docs.sort();
    docs.push(root().join("README.md"));
    let mut prose = String::new();
    for path in &docs {
        prose.push_str(&std::fs::read_to_string(path).unwrap_or_default());
        prose.push('\n');
    }
    if prose.len() < 10_000 {
        bail!(
            "found too little prose to benchmark with ({} bytes)",
            prose.len()
        );
    }
    let mut big = String::with_capacity(1 << 20);
    while big.len() < 1_000_000 {
        big.push_str(&prose);
    }
    let cut = (0..=1_000_000)
        .rev()
        .find(|&i| big.is_char_boundary(i))
        .unwrap_or(0);
    big.truncate(cut);
    // The chat: the first ~8 kB of prose, about 2k tokens.
    let end = (0..=8_000.min(prose.len()))
        .rev()
        .find(|&i| prose.is_char_boundary(i))
        .unwrap_or(0);
    Ok((big, prose[..end].to_owned()))
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && depth < 4 {
            collect_markdown(&path, out, depth + 1);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

#[derive(Clone)]
struct Files {
    modules: PathBuf,
    big: String,
    chat: String,
}

/// Resolves `/node_modules/...` like a bundler would: the path, else the path with `.js`.
fn module_file(modules: &Path, rel: &str) -> Option<PathBuf> {
    let path = modules.join(rel);
    if path.is_file() {
        return Some(path);
    }
    let js = modules.join(format!("{rel}.js"));
    js.is_file().then_some(js)
}

async fn node_module(
    State(files): State<Files>,
    UrlPath(rel): UrlPath<String>,
) -> impl IntoResponse {
    let Some(path) = module_file(&files.modules, &rel) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain")],
            Vec::new(),
        );
    };
    let kind = match path.extension().and_then(|e| e.to_str()) {
        Some("js" | "mjs") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, kind)],
        std::fs::read(path).unwrap_or_default(),
    )
}

async fn serve(files: Files) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (big, chat) = (files.big.clone(), files.chat.clone());
    let app = Router::new()
        .route(
            "/bench/text-1mb.txt",
            axum::routing::get(move || async move { big }),
        )
        .route(
            "/bench/chat-2k.txt",
            axum::routing::get(move || async move { chat }),
        )
        .route("/node_modules/{*rel}", axum::routing::get(node_module))
        .nest_service("/bench", ServeDir::new(root().join("tests/e2e/bench")))
        .nest_service("/dist", ServeDir::new(widget_dir()).precompressed_br())
        .with_state(files);
    // As the Glassbox server does: without TCP_NODELAY every small file after the first on a
    // connection waits up to 40 ms for a delayed ACK, which charges a page by its number of files.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

/// Brotli (quality 11) size of a file, as a server would precompress it.
fn brotli_size(path: &Path) -> u64 {
    let Ok(data) = std::fs::read(path) else {
        return 0;
    };
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    let _ = brotli::BrotliCompress(&mut &data[..], &mut out, &params);
    out.len() as u64
}

/// Brotli bytes a worker downloaded (its resource list, mapped back to files).
fn download_bytes(resources: &Value, modules: &Path) -> u64 {
    resources
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|p| {
            if let Some(rel) = p.strip_prefix("/dist/") {
                Some(widget_dir().join(rel))
            } else {
                p.strip_prefix("/node_modules/")
                    .and_then(|rel| module_file(modules, rel))
            }
        })
        .map(|f| brotli_size(&f))
        .sum()
}

/// Fresh-browser page loads for the first exact count: a multiple of the contenders' number, so
/// each loads first, second and third equally often.
const LOAD_ROUNDS: usize = 9;

/// Opens `url` in a fresh headless Chromium (its own empty profile) and waits for the page's
/// `window.benchResult`.
async fn run_page(driver: &glassbox_e2e::Driver, url: &str) -> Result<Value> {
    let profile = tempfile::tempdir()?;
    let client = browser(driver, profile.path()).await?;
    client.goto(url).await?;
    let started = Instant::now();
    let result = loop {
        let v = client
            .execute("return window.benchResult || null;", vec![])
            .await?;
        if !v.is_null() {
            break v;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let log = client
                .execute("return document.getElementById('log').textContent;", vec![])
                .await?;
            bail!("the benchmark page did not finish: {log}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    client.close().await?;
    Ok(result)
}

/// The median (the mean of the middle two for an even count); 0 for none.
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let modules = PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: tokens-bench <node_modules>")?,
    );
    let (big, chat) = corpus(&modules)?;
    let ours =
        BpeTokenizer::from_compact(&std::fs::read(widget_dir().join("vocab/o200k_base.gbv"))?)?;
    let (big_tokens, chat_tokens) = (ours.count(&big), ours.count(&chat));
    let addr = serve(Files {
        modules: modules.clone(),
        big: big.clone(),
        chat: chat.clone(),
    })
    .await?;

    let driver = start_driver().await?;
    let result = run_page(&driver, &format!("http://{addr}/bench/tokens.html")).await?;

    // The first exact count from a cold page, again in fresh browsers (empty caches), each
    // contender first, second and third in turn: a single cold load varies by tens of ms here.
    let mut first_counts: Vec<Vec<f64>> = vec![Vec::new(); CONTENDERS.len()];
    for round in 0..LOAD_ROUNDS {
        let mut order = CONTENDERS.to_vec();
        order.rotate_left(round % CONTENDERS.len());
        let url = format!(
            "http://{addr}/bench/tokens.html?loadOnly&order={}",
            order.join(",")
        );
        let loads = run_page(&driver, &url).await?;
        for (i, c) in CONTENDERS.iter().enumerate() {
            let entry = loads["main"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["name"] == *c);
            if let Some(ms) = entry.and_then(|m| m["readyMs"].as_f64()) {
                first_counts[i].push(ms);
            }
        }
    }

    let workers: Vec<&Value> = result["workers"]
        .as_array()
        .context("workers")?
        .iter()
        .collect();
    for w in &workers {
        if let Some(e) = w.get("error") {
            bail!("{} failed in the worker: {e}", w["contender"]);
        }
    }
    let main: Vec<&Value> = result["main"].as_array().context("main")?.iter().collect();
    let by = |list: &[&Value], name: &str| -> Value {
        list.iter()
            .find(|v| v["contender"] == name || v["name"] == name)
            .map(|v| (*v).clone())
            .unwrap_or(Value::Null)
    };
    let throughput = |w: &Value| -> f64 {
        let mut ms: Vec<f64> = w["bigMs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .skip(1)
            .collect();
        w["bigTokens"].as_f64().unwrap_or(0.0) / (median(&mut ms) / 1000.0) / 1e6
    };

    println!("\nToken counting, headless Chromium, o200k_base, same page and texts (one run):");
    println!(
        "1 MB text: {} bytes, {big_tokens} tokens; chat: {} bytes, {chat_tokens} tokens\n",
        result["bigBytes"],
        chat.len()
    );
    println!("| what | glassbox | gpt-tokenizer | tiktoken | glassbox ÷ gpt-tokenizer | goal |");
    println!("|---|---|---|---|---|---|");
    let row = |what: &str, vals: [String; 3], ratio: String, goal: &str| {
        println!(
            "| {what} | {} | {} | {} | {ratio} | {goal} |",
            vals[0], vals[1], vals[2]
        );
    };
    let t: Vec<f64> = CONTENDERS
        .iter()
        .map(|c| throughput(&by(&workers, c)))
        .collect();
    row(
        "1 MB throughput, worker (M tokens/s, median of 3 warm runs)",
        t.map_fmt(2),
        format!("{:.2}×", t[0] / t[1]),
        "≥ 3×",
    );
    let chat_us: Vec<f64> = CONTENDERS
        .iter()
        .map(|c| by(&workers, c)["chatUs"].as_f64().unwrap_or(0.0))
        .collect();
    row(
        "2k-token chat, worker (µs per count)",
        chat_us.map_fmt(0),
        format!("{:.2}×", chat_us[1] / chat_us[0]),
        "—",
    );
    let ready: Vec<f64> = CONTENDERS
        .iter()
        .map(|c| by(&workers, c)["readyMs"].as_f64().unwrap_or(0.0))
        .collect();
    row(
        "time to ready in a worker, loopback (ms)",
        ready.map_fmt(0),
        format!("{:.2}×", ready[1] / ready[0]),
        "—",
    );
    let ours_w = by(&workers, "glassbox");
    let after_download = ready[0] - ours_w["fetchMs"].as_f64().unwrap_or(0.0);
    row(
        "ready after the vocabulary is downloaded (ms)",
        [format!("{after_download:.0}"), "—".into(), "—".into()],
        "—".into(),
        "≤ 300",
    );
    let bytes: Vec<u64> = CONTENDERS
        .iter()
        .map(|c| download_bytes(&by(&workers, c)["resources"], &modules))
        .collect();
    row(
        "download for counting, brotli (kB)",
        bytes
            .iter()
            .map(|b| format!("{:.0}", *b as f64 / 1000.0))
            .collect::<Vec<_>>()
            .try_into()
            .unwrap_or_default(),
        format!("{:.2}×", bytes[0] as f64 / bytes[1].max(1) as f64),
        "—",
    );
    let vocab_br = std::fs::metadata(widget_dir().join("vocab/o200k_base.gbv.br"))
        .map(|m| m.len())
        .unwrap_or(0);
    row(
        "o200k vocabulary alone, brotli (kB)",
        [
            format!("{:.0}", vocab_br as f64 / 1000.0),
            "—".into(),
            "—".into(),
        ],
        "—".into(),
        "≤ 800",
    );
    if first_counts.iter().any(|xs| xs.len() != LOAD_ROUNDS) {
        bail!("a cold load gave no first exact count: {first_counts:?}");
    }
    let main_ready: Vec<f64> = first_counts.iter_mut().map(|xs| median(xs)).collect();
    row(
        &format!(
            "first exact count, loaded from the page (ms, median of {LOAD_ROUNDS} cold loads in fresh browsers)"
        ),
        main_ready.map_fmt(0),
        format!("{:.2}×", main_ready[1] / main_ready[0]),
        "≥ 1×",
    );
    let long: Vec<String> = CONTENDERS
        .iter()
        .map(|c| {
            let tasks: Vec<f64> = by(&main, c)["longTasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect();
            let worst = tasks.iter().copied().fold(0.0, f64::max);
            format!("{} (longest {worst:.0} ms)", tasks.len())
        })
        .collect();
    row(
        "main-thread tasks > 50 ms during load",
        long.try_into().unwrap_or_default(),
        "—".into(),
        "0",
    );
    let mut updates: Vec<f64> = result["updates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect();
    let p50 = median(&mut updates);
    let max = updates.iter().copied().fold(0.0, f64::max);
    row(
        &format!(
            "meter update after the worker's answer, {}-token conversation (ms, p50 / max)",
            result["conversationTokens"]
        ),
        [format!("{p50:.2} / {max:.2}"), "—".into(), "—".into()],
        "—".into(),
        "≤ 1",
    );
    // Llama 3 through `tokenizers` in wasm: no goal, for the record.
    let llama = by(&workers, "glassbox-llama3");
    let native = glassbox_core::tokens::Tokenizer::load(&std::fs::read(
        widget_dir().join("vocab/llama3.gbv"),
    )?)?;
    let (llama_big, llama_chat) = (native.count(&big), native.count(&chat));
    println!(
        "\nLlama 3 (Hugging Face tokenizer.json, `tokenizers` crate in the worker's second wasm module):"
    );
    println!("| what | value |\n|---|---|");
    println!(
        "| ready in a worker, loopback (ms) | {:.0} |",
        llama["readyMs"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| ready after the vocabulary is downloaded (ms) | {:.0} |",
        llama["readyMs"].as_f64().unwrap_or(0.0) - llama["fetchMs"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| 1 MB throughput (M tokens/s) | {:.2} |",
        throughput(&llama)
    );
    println!(
        "| 2k-token chat (µs per count) | {:.0} |",
        llama["chatUs"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| download, brotli (kB) | {:.0} |",
        download_bytes(&llama["resources"], &modules) as f64 / 1000.0
    );
    if llama["bigTokens"].as_u64() != Some(llama_big as u64)
        || llama["chatTokens"].as_u64() != Some(llama_chat as u64)
    {
        bail!(
            "llama3 in the browser counted {} / {}, natively {llama_big} / {llama_chat}",
            llama["bigTokens"],
            llama["chatTokens"]
        );
    }
    // Every o200k contender must agree on the counts.
    for w in workers
        .iter()
        .filter(|w| w["contender"] != "glassbox-llama3")
    {
        let (b, c) = (
            w["bigTokens"].as_u64().unwrap_or(0) as usize,
            w["chatTokens"].as_u64().unwrap_or(0) as usize,
        );
        if b != big_tokens || c != chat_tokens {
            bail!(
                "{} counted {b} / {c} tokens, ours natively {big_tokens} / {chat_tokens}",
                w["contender"]
            );
        }
    }
    println!("\nAll three count the same tokens on both texts.");
    Ok(())
}

/// Formats floats with `decimals` places, three at a time.
trait MapFmt {
    fn map_fmt(&self, decimals: usize) -> [String; 3];
}

impl MapFmt for Vec<f64> {
    fn map_fmt(&self, decimals: usize) -> [String; 3] {
        [0, 1, 2].map(|i| format!("{:.*}", decimals, self.get(i).copied().unwrap_or(0.0)))
    }
}
