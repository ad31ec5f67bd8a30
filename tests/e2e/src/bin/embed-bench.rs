//! `cargo xtask bench embed`: sentence-embedding speed of our tract engine against onnxruntime on the same
//! converted model and sentences, and top-10 vector search over 10k × 384.
//!
//! onnxruntime runs in `bench/ort_embed.py` (a child process driven over stdin), and its passes alternate
//! with ours, so both see the machine in the same state; each throughput is the median of `PASSES`.
//!
//! Usage: embed-bench <model-dir> <sentences-file> <python> <ort_embed.py>

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use glassbox_core::vector::{normalize, top_k};
use glassbox_e2e::ort_anchor::OrtAnchor;
use glassbox_server::embed::{EmbedStatus, Embedder, EmbeddingService, Limits};

const THREADS: usize = 2;
/// Timed passes over all sentences per throughput figure, after one warm-up pass; the median is reported.
const PASSES: usize = 7;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: embed-bench <model-dir> <sentences-file> <python> <ort_embed.py>";
    let model_dir = PathBuf::from(args.next().context(usage)?);
    let sentences_path = PathBuf::from(args.next().context(usage)?);
    let (python, script) = (args.next().context(usage)?, args.next().context(usage)?);
    let sentences: Vec<String> = std::fs::read_to_string(&sentences_path)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let pass = |embedder: &Embedder, batch: usize| -> Result<f64> {
        let start = Instant::now();
        for chunk in texts.chunks(batch) {
            embedder.embed(chunk)?;
        }
        Ok(texts.len() as f64 / start.elapsed().as_secs_f64())
    };

    let mut anchor = OrtAnchor::start(&python, &script, &model_dir, Some(&sentences_path))?;
    let version = anchor.version()?;
    // The engine the server uses: the converter's tensor-parallel shards; passes alternate with the anchor's.
    let embedder = Embedder::load(&model_dir, THREADS)?;
    let (mut ours, mut theirs) = ([vec![], vec![]], [vec![], vec![]]);
    for round in 0..=PASSES {
        for (i, batch) in [1, 32].into_iter().enumerate() {
            let (us, them) = (
                pass(&embedder, batch)?,
                anchor.ask(&format!("pass {batch}"))?["per_s"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
            );
            if round > 0 {
                ours[i].push(us);
                theirs[i].push(them);
            }
        }
    }
    drop(embedder);
    let [batch1, batch32] = ours.map(median);
    let [ort1, ort32] = theirs.map(median);
    // The same model.onnx onnxruntime runs, as one tract plan (what any other ONNX export gets).
    let whole = tempfile::tempdir()?;
    for name in ["model.onnx", "tokenizer.json"] {
        std::os::unix::fs::symlink(model_dir.join(name), whole.path().join(name))?;
    }
    let embedder = Embedder::load(whole.path(), THREADS)?;
    let mut whole_rates = [vec![], vec![]];
    for round in 0..=3 {
        for (i, batch) in [1, 32].into_iter().enumerate() {
            let rate = pass(&embedder, batch)?;
            if round > 0 {
                whole_rates[i].push(rate);
            }
        }
    }
    drop(embedder);
    let [whole1, whole32] = whole_rates.map(median);

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
    drop(service);
    let load = anchor.ask("query_load")?;
    let (ort_q50, ort_q99) = (
        load["p50_ms"].as_f64().unwrap_or(f64::NAN),
        load["p99_ms"].as_f64().unwrap_or(f64::NAN),
    );
    drop(anchor);

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

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n## Embeddings: all-MiniLM-L6-v2, {} sentences of 20–40 tokens, same weights and converter, 2 cores\n\n\
         Glassbox runs the converter's tensor-parallel shards (shards/) unless the row says otherwise; \
         onnxruntime runs model.onnx from the same conversion. Throughput: median of {PASSES} passes, \
         ours and onnxruntime's alternating.\n",
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
        ort1,
        whole1 / ort1
    )?;
    writeln!(
        out,
        "| sentences/s, batch 32, whole model.onnx as one tract plan | {whole32:.1} | {:.1} | {:.2} |",
        ort32,
        whole32 / ort32
    )?;
    writeln!(
        out,
        "| sentences/s, batch 1 | {batch1:.1} | {:.1} | {:.2} |",
        ort1,
        batch1 / ort1
    )?;
    writeln!(
        out,
        "| sentences/s, batch 32 | {batch32:.1} | {:.1} | {:.2} |",
        ort32,
        batch32 / ort32
    )?;
    writeln!(
        out,
        "| short query under load, p50 (ms) | {q50:.1} | {:.1} | {:.2} |",
        ort_q50,
        q50 / ort_q50
    )?;
    writeln!(
        out,
        "| short query under load, p99 (ms) | {q99:.1} | {:.1} | {:.2} |",
        ort_q99,
        q99 / ort_q99
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
