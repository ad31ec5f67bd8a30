//! `cargo xtask bench gateway`: the latency our server adds to a streamed chat request, against calling
//! the fake provider directly, in one run on loopback: on SQLite, beside the least proxies (bytes
//! forwarded unread, with and without the request and reply stored: this machine's floor), then (when
//! `GLASSBOX_BENCH_POSTGRES_URL` names a cluster, as `cargo xtask bench gateway` does) on
//! PostgreSQL with one instance and with two instances on one database, with what each request
//! costs the database (statements, commits, NOTIFYs) and the machine (CPU); and the widget's
//! download size.
//!
//! Usage: gateway-bench <dist-dir> [requests] [concurrency]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use glassbox_e2e::pass_through::{self, Keeping};
use glassbox_e2e::{bench_postgres, start_server};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::json;

const WARMUP: usize = 500;

/// The server binary's allocator (`glassbox-server`'s `main.rs`), so the server measured here is
/// the one that ships; the load and the fake provider in this process use it too.
#[global_allocator]
static ALLOCATOR: glassbox_server::Allocator = glassbox_server::Allocator;

mod cpu {
    //! The whole machine's CPU over a run, from `/proc/stat`.

    use anyhow::{Context, Result};

    /// Busy jiffies summed over every core.
    fn read() -> Result<u64> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let line = stat.lines().next().context("/proc/stat is empty")?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
        let total: u64 = fields.iter().take(8).sum();
        let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
        Ok(total - idle)
    }

    /// The cores `/proc/stat` sums over (every online one, whatever this process may use).
    pub fn cores() -> usize {
        std::fs::read_to_string("/proc/stat").map_or(1, |stat| {
            stat.lines()
                .filter(|l| {
                    l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)
                })
                .count()
                .max(1)
        })
    }

    /// The CPU a run used.
    #[derive(Debug, Clone, Copy)]
    pub struct Use {
        /// Cores kept busy on average.
        pub cores_busy: f64,
        /// Busy CPU time per request, every process counted.
        pub ms_per_request: f64,
    }

    pub struct Meter {
        busy: u64,
        started: std::time::Instant,
    }

    impl Meter {
        pub fn start() -> Result<Self> {
            let busy = read()?;
            Ok(Self {
                busy,
                started: std::time::Instant::now(),
            })
        }

        pub fn stop(self, requests: usize) -> Result<Use> {
            let busy = read()?;
            // Jiffies are 10 ms (USER_HZ = 100).
            let busy_ms = busy.saturating_sub(self.busy) as f64 * 10.0;
            let wall_ms = (self.started.elapsed().as_secs_f64() * 1e3).max(1.0);
            Ok(Use {
                cores_busy: busy_ms / wall_ms,
                ms_per_request: busy_ms / requests.max(1) as f64,
            })
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    // As the server's `main` does, so the process measured behaves as the one that ships.
    glassbox_server::allocator::disable_transparent_huge_pages()?;
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
    let provider = [
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "bench"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    let server = start_server(&provider).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .build()?;

    let direct = Target {
        urls: vec![format!("{base}/chat/completions")],
        body: json!({"model": "bench", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hello there"}]}),
        end_marker: "data: [DONE]",
    };
    let ours = |servers: &[&glassbox_e2e::Server]| Target {
        urls: servers
            .iter()
            .map(|s| format!("http://{}/api/chat", s.addr))
            .collect(),
        body: json!({"message": "hello there", "context": {"page": "bench"}}),
        end_marker: "event: done",
    };
    let sqlite = ours(&[&server]);
    // The floor: what a proxy that only forwards bytes adds on this machine, and one that also
    // stores the request before forwarding it and the reply before ending.
    let kept = tempfile::tempdir()?;
    let bare = pass_through::start(format!("{base}/chat/completions"), Keeping::Nothing).await?;
    let stored = pass_through::start(
        format!("{base}/chat/completions"),
        Keeping::Sqlite(kept.path()),
    )
    .await?;
    let via = |proxy: &pass_through::PassThrough| Target {
        urls: vec![format!("http://{}/", proxy.addr)],
        body: direct.body.clone(),
        end_marker: direct.end_marker,
    };
    let (floor, floor_stored) = (via(&bare), via(&stored));

    eprintln!(
        "gateway-bench: {requests} streamed requests each, concurrency {concurrency}, after {WARMUP} warm-up"
    );
    load(&http, &direct, WARMUP, concurrency).await?;
    load(&http, &floor, WARMUP, concurrency).await?;
    load(&http, &floor_stored, WARMUP, concurrency).await?;
    load(&http, &sqlite, WARMUP, concurrency).await?;
    let mut out = std::io::stdout().lock();
    // Unloaded first (what one user feels), then the loaded run the anchor is about.
    let cases = [(2_000.min(requests), 1), (requests, concurrency)];
    let mut floors = Vec::new();
    for (n, c) in cases {
        let d = load(&http, &direct, n, c).await?;
        let f = load(&http, &floor, n, c).await?;
        let fs = load(&http, &floor_stored, n, c).await?;
        let o = load(&http, &sqlite, n, c).await?;
        latency_table(&mut out, "SQLite, one instance", n, c, &d, &o)?;
        floors.push((c, d, [f, fs], o));
    }
    floor_table(&mut out, &floors)?;
    drop((server, bare, stored));

    if let Some(admin) = bench_postgres::cluster() {
        let db = bench_postgres::Database::create(&admin, "glassbox_gateway_bench").await?;
        let with_db: Vec<(&str, &str)> = provider
            .iter()
            .copied()
            .chain([("GLASSBOX_DATABASE_URL", db.url.as_str())])
            .collect();
        let a = start_server(&with_db).await?;
        let one = ours(&[&a]);
        load(&http, &one, WARMUP, concurrency).await?;
        let mut rows = Vec::new();
        for (n, c) in cases {
            let d = load(&http, &direct, n, c).await?;
            let before = db.counts().await?;
            let o = load(&http, &one, n, c).await?;
            let cost = db.counts().await?.since(&before, n);
            latency_table(&mut out, "PostgreSQL, one instance", n, c, &d, &o)?;
            rows.push(("one instance", n, c, o.rate, o.cpu, cost));
        }
        let b = start_server(&with_db).await?;
        let two = ours(&[&a, &b]);
        load(&http, &two, WARMUP, concurrency).await?;
        for (n, c) in cases {
            let d = load(&http, &direct, n, c).await?;
            let before = db.counts().await?;
            let o = load(&http, &two, n, c).await?;
            let cost = db.counts().await?.since(&before, n);
            latency_table(
                &mut out,
                "PostgreSQL, two instances (requests alternate)",
                n,
                c,
                &d,
                &o,
            )?;
            rows.push(("two instances", n, c, o.rate, o.cpu, cost));
        }
        cost_table(&mut out, &rows)?;
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
    setup: &str,
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
        "\n## Gateway latency: {setup} ({requests} streamed requests, concurrency {concurrency}, loopback, 16-chunk reply)\n"
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
    // The tail past p99: a stall that holds every request in flight shows here first.
    for (name, p) in [("p99.9", 99.9), ("max", 100.0)] {
        let (d, o) = (
            ms(percentile(&direct.latencies, p)),
            ms(percentile(&ours.latencies, p)),
        );
        writeln!(
            out,
            "| {name} latency (ms) | {d:.3} | {o:.3} | {:.3} | — | — |",
            o - d
        )?;
    }
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

/// Glassbox's added latency beside the pass-through proxies', per concurrency: `(concurrency,
/// direct, [pass-through, pass-through storing], Glassbox)` runs of one case each.
fn floor_table(out: &mut impl Write, runs: &[(usize, Run, [Run; 2], Run)]) -> Result<()> {
    let ms = |r: &Run, p: f64| percentile(&r.latencies, p).as_secs_f64() * 1e3;
    writeln!(
        out,
        "\n## The floor: what the least proxy adds on this machine (same run, SQLite case)\n"
    )?;
    writeln!(
        out,
        "| concurrency | what | p50 / p99 added (ms) | req/s | Glassbox's p99 added / this one's |"
    )?;
    writeln!(out, "|---|---|---|---|---|")?;
    for (c, d, [bare, stored], ours) in runs {
        let added = |r: &Run, p: f64| ms(r, p) - ms(d, p);
        for (what, run) in [
            ("pass-through: bytes forwarded unread", bare),
            (
                "pass-through storing the request before forwarding, the reply after (SQLite)",
                stored,
            ),
            ("Glassbox", ours),
        ] {
            writeln!(
                out,
                "| {c} | {what} | {:.3} / {:.3} | {:.0} | {:.2} |",
                added(run, 50.0),
                added(run, 99.0),
                run.rate,
                added(ours, 99.0) / added(run, 99.0).max(f64::MIN_POSITIVE)
            )?;
        }
    }
    Ok(())
}

/// Where requests go: each to the next of `urls` in turn, with `body`; a reply is whole when it
/// holds `end_marker`.
struct Target {
    urls: Vec<String>,
    body: serde_json::Value,
    end_marker: &'static str,
}

struct Run {
    latencies: Vec<Duration>,
    rate: f64,
    failures: usize,
    /// The whole machine's CPU meanwhile (every process: the load, the servers, the database).
    cpu: cpu::Use,
}

/// Sends `n` POSTs to `target` with `concurrency` in flight, each read to the end; a request
/// fails if its body lacks the end marker.
async fn load(
    http: &reqwest::Client,
    target: &Target,
    n: usize,
    concurrency: usize,
) -> Result<Run> {
    let cpu = cpu::Meter::start()?;
    let start = Instant::now();
    // Each request runs as a task on the runtime's workers, beside the servers' tasks: the thread
    // that waits here is woken once per request, not once per chunk its reply arrives in (a third
    // busy thread the OS would preempt the workers for, on a machine with two cores).
    let results: Vec<Option<Duration>> = futures::stream::iter(0..n)
        .map(|i| {
            let (http, url) = (http.clone(), target.urls[i % target.urls.len()].clone());
            let (body, end_marker) = (target.body.clone(), target.end_marker);
            tokio::spawn(async move {
                let t = Instant::now();
                let resp = http
                    .post(&url)
                    .header("accept", "text/event-stream")
                    .json(&body)
                    .send()
                    .await
                    .ok()?;
                let text = resp.text().await.ok()?;
                text.contains(end_marker).then(|| t.elapsed())
            })
        })
        .buffer_unordered(concurrency)
        .map(|joined| joined.ok().flatten())
        .collect()
        .await;
    let elapsed = start.elapsed();
    let cpu = cpu.stop(n)?;
    let failures = results.iter().filter(|r| r.is_none()).count();
    let mut latencies: Vec<Duration> = results.into_iter().flatten().collect();
    latencies.sort();
    Ok(Run {
        latencies,
        rate: n as f64 / elapsed.as_secs_f64(),
        failures,
        cpu,
    })
}

/// What each request cost on PostgreSQL, per setup and concurrency.
fn cost_table(
    out: &mut impl Write,
    rows: &[(
        &str,
        usize,
        usize,
        f64,
        cpu::Use,
        bench_postgres::PerRequest,
    )],
) -> Result<()> {
    writeln!(
        out,
        "\n## PostgreSQL: where a request's time goes (per request; the load, both instances and the database share this machine's {} cores)\n",
        cpu::cores()
    )?;
    writeln!(
        out,
        "| setup | concurrency | req/s | cores busy | req/s per busy core | CPU ms per request (machine) | statements | commits | NOTIFYs | frames written |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|")?;
    for (setup, _, c, rate, cpu, cost) in rows {
        writeln!(
            out,
            "| {setup} | {c} | {rate:.0} | {:.2} | {:.0} | {:.3} | {:.1} | {:.1} | {:.1} | {:.1} |",
            cpu.cores_busy,
            rate / cpu.cores_busy.max(0.01),
            cpu.ms_per_request,
            cost.statements,
            cost.commits,
            cost.notifies,
            cost.frames
        )?;
    }
    let rate = |setup: &str, c: usize| {
        rows.iter()
            .find(|r| r.0 == setup && r.2 == c)
            .map_or(0.0, |r| r.3)
    };
    if let Some(&(_, _, c, ..)) = rows.last() {
        let (one, two) = (rate("one instance", c), rate("two instances", c));
        writeln!(
            out,
            "\n| what | one instance | two instances | ratio | goal |\n|---|---|---|---|---|\n| req/s at concurrency {c} | {one:.0} | {two:.0} | {:.2} | ≥ 1.8 on a machine with cores to spare |",
            two / one.max(f64::MIN_POSITIVE)
        )?;
    }
    Ok(())
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
