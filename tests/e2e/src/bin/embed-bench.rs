//! `cargo xtask bench embed`: sentence-embedding speed of our tract engine against onnxruntime on the same
//! ONNX file and sentences (onnxruntime's numbers come from `bench/ort_embed.py`, run by xtask), and
//! top-10 vector search over 10k × 384.
//!
//! Usage: embed-bench <model-dir> <sentences-file> <onnxruntime-results.json>

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use glassbox_core::vector::{normalize, top_k};
use glassbox_server::embed::{EmbedStatus, Embedder, EmbeddingService, Limits};
use serde_json::Value;

const THREADS: usize = 2;

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: embed-bench <model-dir> <sentences-file> <onnxruntime-results.json>";
    let model_dir = PathBuf::from(args.next().context(usage)?);
    let sentences_path = PathBuf::from(args.next().context(usage)?);
    let anchor: Value =
        serde_json::from_str(&std::fs::read_to_string(args.next().context(usage)?)?)?;
    let sentences: Vec<String> = std::fs::read_to_string(&sentences_path)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();

    let rate = |embedder: &Embedder, batch: usize| -> Result<f64> {
        embedder.embed(&texts[..batch])?; // warm-up
        let start = Instant::now();
        for chunk in texts.chunks(batch) {
            embedder.embed(chunk)?;
        }
        Ok(texts.len() as f64 / start.elapsed().as_secs_f64())
    };
    // The engine the server uses: the converter's tensor-parallel shards.
    let embedder = Embedder::load(&model_dir, THREADS)?;
    let batch1 = rate(&embedder, 1)?;
    let batch32 = rate(&embedder, 32)?;
    drop(embedder);
    // The same model.onnx onnxruntime runs, as one tract plan (what any other ONNX export gets).
    let whole = tempfile::tempdir()?;
    for name in ["model.onnx", "tokenizer.json"] {
        std::os::unix::fs::symlink(model_dir.join(name), whole.path().join(name))?;
    }
    let embedder = Embedder::load(whole.path(), THREADS)?;
    let (whole1, whole32) = (rate(&embedder, 1)?, rate(&embedder, 32)?);
    drop(embedder);

    // A short query's latency through the service while another caller keeps it busy with batches of 32.
    let service = EmbeddingService::start(
        "bench".into(),
        model_dir.clone(),
        Limits {
            workers: 2,
            queue: 64,
            threads: THREADS,
        },
    );
    while service.status() == EmbedStatus::Loading {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let background = {
        let (service, stop) = (service.clone(), stop.clone());
        let batch: Vec<String> = sentences[..32].to_vec();
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = service.embed(batch.clone()).await;
            }
        })
    };
    let mut latencies = Vec::with_capacity(100);
    for _ in 0..100 {
        let start = Instant::now();
        service
            .embed(vec!["How do I reset my password?".to_owned()])
            .await?;
        latencies.push(start.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    background.await?;
    latencies.sort();
    let (q50, q99) = (ms(latencies[49]), ms(latencies[98]));

    // Top-10 over 10k unit vectors of 384 dimensions.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let vectors: Vec<Vec<f32>> = (0..10_000)
        .map(|_| {
            let mut v: Vec<f32> = (0..384).map(|_| random()).collect();
            normalize(&mut v);
            v
        })
        .collect();
    let mut search = Vec::with_capacity(200);
    for _ in 0..200 {
        let mut q: Vec<f32> = (0..384).map(|_| random()).collect();
        normalize(&mut q);
        let start = Instant::now();
        let best = top_k(&q, vectors.iter().map(Vec::as_slice), 10);
        search.push(start.elapsed());
        assert_eq!(best.len(), 10);
    }
    search.sort();

    let f = |k: &str| anchor[k].as_f64().unwrap_or(f64::NAN);
    let version = anchor["version"].as_str().unwrap_or("?");
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n## Embeddings: all-MiniLM-L6-v2, {} sentences of 20–40 tokens, same weights and converter, 2 cores\n\n\
         Glassbox runs the converter's tensor-parallel shards (shards/) unless the row says otherwise; \
         onnxruntime runs model.onnx from the same conversion.\n",
        texts.len()
    )?;
    writeln!(
        out,
        "| what | Glassbox (tract, {THREADS} threads) | onnxruntime {version} (Python, 2 threads) | ratio (ours / ort) |"
    )?;
    writeln!(out, "|---|---|---|---|")?;
    writeln!(
        out,
        "| sentences/s, batch 1, whole model.onnx as one tract plan | {whole1:.1} | {:.1} | {:.2} |",
        f("batch1_per_s"),
        whole1 / f("batch1_per_s")
    )?;
    writeln!(
        out,
        "| sentences/s, batch 32, whole model.onnx as one tract plan | {whole32:.1} | {:.1} | {:.2} |",
        f("batch32_per_s"),
        whole32 / f("batch32_per_s")
    )?;
    writeln!(
        out,
        "| sentences/s, batch 1 | {batch1:.1} | {:.1} | {:.2} |",
        f("batch1_per_s"),
        batch1 / f("batch1_per_s")
    )?;
    writeln!(
        out,
        "| sentences/s, batch 32 | {batch32:.1} | {:.1} | {:.2} |",
        f("batch32_per_s"),
        batch32 / f("batch32_per_s")
    )?;
    writeln!(
        out,
        "| short query under load, p50 (ms) | {q50:.1} | {:.1} | {:.2} |",
        f("query_p50_ms"),
        q50 / f("query_p50_ms")
    )?;
    writeln!(
        out,
        "| short query under load, p99 (ms) | {q99:.1} | {:.1} | {:.2} |",
        f("query_p99_ms"),
        q99 / f("query_p99_ms")
    )?;
    writeln!(out, "\n| what | ours | goal | ratio |\n|---|---|---|---|")?;
    writeln!(
        out,
        "| top-10 of 10k × 384, p50 (ms) | {:.3} | 2.0 | {:.2} |",
        ms(search[99]),
        ms(search[99]) / 2.0
    )?;
    writeln!(
        out,
        "| top-10 of 10k × 384, p99 (ms) | {:.3} | 2.0 | {:.2} |",
        ms(search[197]),
        ms(search[197]) / 2.0
    )?;
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
