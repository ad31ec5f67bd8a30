//! `cargo xtask bench render`: how the widget keeps up with long streamed replies and long histories
//! (issue 11), on the demo page in headless Chromium, against a real server and the fake provider.
//!
//! **Replies.** For each size (1, 4, 16 and 64 kB by default) a fresh page in a fresh session sends
//! one message; the fake provider answers with generated mixed markdown of exactly that many bytes
//! (`glassbox_e2e::markdown_fixture`), in 4-character pieces (`--piece-chars`) with a 2 ms pause
//! before each (tokio's millisecond timer makes that about 3.3 ms: the table states the measured
//! pace; 64-character pieces make about 16 kB/s, a fast provider), which the server coalesces into at
//! most one WebSocket `delta` frame per 16 ms or 4 kB. Per size:
//!
//! - *stream*: from the provider handing its first text piece to its connection to handing the last.
//! - *render lag after last byte*: from the provider handing over the last text piece (wall clock,
//!   recorded by the fake provider) to the first animation frame in which the reply is fully rendered:
//!   the newest assistant `.gb-message` has `data-status=complete` and its `.gb-markdown` text ends
//!   with the document's closing words. Page times are `performance.timeOrigin + performance.now()`,
//!   corrected by the page–process clock offset measured just before sending (smallest round trip
//!   of five). It includes the server storing the reply before it sends `done`, and any backlog of
//!   frames the page had not handled yet; the next column is that backlog alone: until the page's
//!   WebSocket dispatched the `done` frame (a listener added by a `WebSocket` subclass installed
//!   before any page script).
//! - *longest task*: the longest main-thread task from sending until rendered, from a
//!   `PerformanceObserver` for `longtask` entries (which only reports tasks over 50 ms) installed
//!   before any page script.
//! - *longest gap of a 10 ms page timer*: a `setInterval` of 10 ms installed before any page
//!   script stands for the host page's own timers; the longest time between two of its ticks from
//!   sending until rendered is how long the page starved (issue 30's goal: under 100 ms at 16 kB/s).
//! - *script ms per kB*: the growth of Chromium's `ScriptDuration` (CDP `Performance.getMetrics`,
//!   main-thread JavaScript and WebAssembly) from just before sending until rendered, divided by the
//!   reply's kB (1 kB = 1024 bytes). It includes the widget's fixed cost per message and the little
//!   the bench itself runs in the page (a string test per WebSocket frame, one check per animation
//!   frame after `done`, a poll every 250 ms).
//!
//! With `--profile DIR`, each reply's main thread is sampled (CDP `Profiler`, every 250 µs) from
//! sending until rendered: the profile is written as `DIR/<reply>.cpuprofile` (Chrome DevTools opens
//! it) and the functions that took the time in busy stretches over 50 ms are printed. `(program)` is
//! the browser's own work (style, layout, paint); a DevTools trace, which needs a client of its own
//! (the bench prints the page's DevTools address), splits it further.
//!
//! A size whose reply is not rendered `--timeout` seconds (180 by default) after the last byte is
//! reported as timed out, with its numbers so far and how many `delta` frames the page had handled.
//!
//! **History.** A session of 1,000 user and 1,000 assistant messages (replies of 300–500 bytes of
//! markdown, written through `POST /api/chat`) is opened by the widget: its credentials are put in
//! localStorage where the widget keeps them, and the page is loaded. From navigation start: the
//! first animation frame with a `.gb-message[data-message-id]` in the DOM (painted at the end of
//! that frame), the first with the newest message, the first with all 2,000 (a list that windows
//! never gets there: the most seen is reported), and the longest task until the list settled (no
//! change for 2 s). Then, from the bottom, `.gb-messages` is scrolled up 400 px per animation frame
//! until it is at the top with the oldest message in the DOM for 10 frames: its duration, the
//! longest task and the longest frame while scrolling.
//!
//! **Hostile replies** (`--hostile false` skips them): lists nested 500 deep and a 110 kB document
//! of pathological markdown (`markdown_fixture::hostile_documents`), in 64-character pieces.
//!
//! Usage: render-bench [--sizes 1,4,16,64] [--hostile true] [--history 2000] [--timeout 180]
//! (`--history 0` skips the history). `GLASSBOX_E2E_WIDGET_DIR` measures another build of the widget.

use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use fantoccini::Client;
use glassbox_e2e::markdown_fixture::{
    MarkdownDoc, hostile_documents, mixed_markdown, pieces, rendered_text,
};
use glassbox_e2e::widget_page::{CONNECTED, Cdp, SHADOW, allow_slow_scripts};
use glassbox_e2e::{browser, start_driver, start_server, wait_for, widget_dir};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::{Value, json};

const PIECE_CHARS: usize = 4;
/// Hostile replies stream in larger pieces (same pause), so a 110 kB one takes seconds, not minutes.
const HOSTILE_PIECE_CHARS: usize = 64;
const PIECE_PAUSE: Duration = Duration::from_millis(2);
const USAGE: &str = "usage: render-bench [--sizes 1,4,16,64] [--piece-chars 4] [--hostile true] [--history 2000] [--timeout 180] [--profile DIR]";

/// Installed before any page script: long tasks, the moment the `done` frame is dispatched, the
/// render check, and (when asked through sessionStorage) the history load watch.
const INIT_SCRIPT: &str = r#"
(() => {
  const b = window.__gbBench = { longTasks: [], longTaskError: null, deltas: 0, expect: null,
    doneAt: null, doneWall: null, checking: false, rendered: null, history: null,
    timer: { last: 0, maxGap: 0 } };
  // A host page's own timer: the longest gap between its 10 ms ticks is how long the page starved.
  setInterval(() => {
    const now = performance.now();
    if (b.timer.last) b.timer.maxGap = Math.max(b.timer.maxGap, now - b.timer.last);
    b.timer.last = now;
  }, 10);
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) b.longTasks.push([e.startTime, e.duration]);
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) { b.longTaskError = String(e); }
  const wall = () => performance.timeOrigin + performance.now();
  const root = () => document.querySelector('glassbox-chat')?.shadowRoot;
  const check = () => {
    const want = b.expect;
    if (!want || b.rendered) return;
    const all = root()?.querySelectorAll('.gb-message[data-role=assistant]');
    const m = all && all[all.length - 1];
    const text = m?.querySelector('.gb-markdown')?.textContent ?? '';
    if (m && m.dataset.status === 'complete' && text.trimEnd().endsWith(want.marker)) {
      b.rendered = { at: performance.now(), wall: wall(), textLength: text.length };
    } else {
      requestAnimationFrame(check);
    }
  };
  b.startChecking = () => {
    if (b.checking) return;
    b.checking = true;
    requestAnimationFrame(check);
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (ev) => {
        const s = ev.data;
        if (typeof s !== 'string') return;
        // Server frames are {"syncId":N,"type":"...","data":...}: the first "type" is the frame's.
        const i = s.indexOf('"type":"') + 8;
        if (s.startsWith('delta', i)) { b.deltas++; return; }
        if (!b.expect) return;
        if (s.startsWith('done', i) && b.doneAt === null) {
          b.doneAt = performance.now();
          b.doneWall = wall();
          b.startChecking();
        } else if (s.startsWith('snapshot', i)) {
          b.startChecking();
        }
      });
    }
  };
  const watch = sessionStorage.getItem('gbBenchWatch');
  if (watch) {
    const w = JSON.parse(watch);
    const h = b.history = { firstAt: null, newestAt: null, allAt: null, count: 0, maxCount: 0,
      lastChangeAt: 0, stop: false };
    const newest = `.gb-message[data-message-id="${CSS.escape(w.newest)}"]`;
    const tick = () => {
      const r = root();
      if (r) {
        const now = performance.now();
        const n = r.querySelectorAll('.gb-message[data-message-id]').length;
        if (n !== h.count) { h.count = n; h.lastChangeAt = now; }
        h.maxCount = Math.max(h.maxCount, n);
        if (n > 0 && h.firstAt === null) h.firstAt = now;
        if (h.newestAt === null && r.querySelector(newest)) h.newestAt = now;
        if (h.allAt === null && n >= w.total) h.allAt = now;
      }
      if (!h.stop) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }
})();
"#;

/// Scrolls the list from the bottom to the top, 400 px per animation frame (argument: the oldest
/// message's id).
const SCROLL_SCRIPT: &str = r#"
const root = document.querySelector('glassbox-chat').shadowRoot;
const el = root.querySelector('.gb-messages');
const oldest = `.gb-message[data-message-id="${CSS.escape(arguments[0])}"]`;
const s = window.__gbScroll = { startAt: performance.now(), endAt: null, frames: 0, maxGap: 0,
  atTop: 0, distance: el.scrollTop, timedOut: false };
let last = s.startAt;
const step = () => {
  const now = performance.now();
  s.maxGap = Math.max(s.maxGap, now - last);
  last = now;
  s.frames++;
  if (el.scrollTop > 0) {
    el.scrollTop = Math.max(0, el.scrollTop - 400);
    s.atTop = 0;
  } else if (root.querySelector(oldest)) {
    s.atTop++;
  }
  if (s.atTop >= 10 || now - s.startAt > 120000) {
    s.timedOut = s.atTop < 10;
    s.endAt = now;
    return;
  }
  requestAnimationFrame(step);
};
requestAnimationFrame(step);
"#;

struct Args {
    sizes_kb: Vec<usize>,
    hostile: bool,
    history: usize,
    timeout: Duration,
    /// Write each reply's CPU profile here and print where its long busy stretches went.
    profile: Option<std::path::PathBuf>,
    /// Characters per provider piece (the pace: about this many per 3.3 ms).
    piece_chars: usize,
}

fn args() -> Result<Args> {
    let mut a = Args {
        sizes_kb: vec![1, 4, 16, 64],
        hostile: true,
        history: 2000,
        timeout: Duration::from_secs(180),
        profile: None,
        piece_chars: PIECE_CHARS,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--sizes" => {
                a.sizes_kb = value
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("--sizes {value}\n{USAGE}"))?;
                if a.sizes_kb.contains(&0) {
                    bail!("sizes are in kB and at least 1\n{USAGE}");
                }
            }
            "--hostile" => a.hostile = value.parse().context(USAGE)?,
            "--history" => a.history = value.parse().context(USAGE)?,
            "--timeout" => a.timeout = Duration::from_secs(value.parse().context(USAGE)?),
            "--profile" => a.profile = Some(value.into()),
            "--piece-chars" => {
                a.piece_chars = value.parse().context(USAGE)?;
                if a.piece_chars == 0 {
                    bail!("--piece-chars is at least 1\n{USAGE}");
                }
            }
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    Ok(a)
}

/// What one reply size measured.
struct ReplyRun {
    label: String,
    size: usize,
    pieces: usize,
    stream: Option<Duration>,
    /// Rendered: lag after the last byte (ms). `None`: timed out.
    lag_ms: Option<f64>,
    done_wait_ms: Option<f64>,
    longest_task_ms: Option<f64>,
    long_tasks: usize,
    script_ms: f64,
    /// `delta` frames the page had handled when it stopped waiting.
    deltas_handled: u64,
    text_short_by: Option<i64>,
    /// The longest gap between a 10 ms page timer's ticks from sending until rendered.
    timer_gap_ms: f64,
}

impl ReplyRun {
    fn script_per_kb(&self) -> f64 {
        self.script_ms / (self.size as f64 / 1024.0)
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = args()?;
    let fake = FakeProvider::start_with(Behaviour::reply(&["ok"]), false).await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("GLASSBOX_MODEL", "gpt-4o-mini"),
        // The history must reach the model whole: no compression, no summaries.
        ("GLASSBOX_MODEL_LIMITS", "gpt-4o-mini=4000000"),
        ("OPENAI_API_KEY", "sk-bench"),
        ("OPENAI_BASE_URL", &base),
    ])
    .await?;
    let url = format!("http://{}/", server.addr);

    let driver = start_driver().await?;
    let profile = tempfile::tempdir()?;
    let client = browser(&driver, profile.path()).await?;
    let cdp = Cdp::new(&driver, &client).await?;
    if let Some(address) = client
        .capabilities()
        .and_then(|c| c.get("goog:chromeOptions"))
        .and_then(|o| o.get("debuggerAddress"))
    {
        // For an outside DevTools client (a trace of the page while the bench runs).
        eprintln!("render-bench: DevTools at {address}");
    }
    allow_slow_scripts(&client, args.timeout.max(Duration::from_secs(60))).await?;
    cdp.on_new_document(INIT_SCRIPT).await?;

    let mut runs = Vec::new();
    for &kb in &args.sizes_kb {
        eprintln!("render-bench: {kb} kB reply");
        let size = kb * 1024;
        let doc = mixed_markdown(size, size as u64);
        let reply = Reply {
            label: format!("{kb} kB"),
            doc,
            piece_chars: args.piece_chars,
        };
        runs.push(reply_run(&client, &cdp, &fake, &url, reply, &args).await?);
    }
    if args.hostile {
        for (label, doc) in hostile_documents() {
            eprintln!("render-bench: hostile reply: {label}");
            let label = format!("hostile: {label} ({} kB)", doc.text.len() / 1024);
            let reply = Reply {
                label,
                doc,
                piece_chars: HOSTILE_PIECE_CHARS,
            };
            runs.push(reply_run(&client, &cdp, &fake, &url, reply, &args).await?);
        }
    }
    let history = if args.history >= 2 {
        eprintln!(
            "render-bench: writing a {}-message history through POST /api/chat",
            args.history
        );
        Some(history_run(&client, &fake, &url, args.history).await)
    } else {
        None
    };
    client.close().await?;

    let mut out = String::new();
    report(
        &mut out,
        &runs,
        history.as_ref(),
        args.timeout,
        args.piece_chars,
    )?;
    print!("{out}");
    match history {
        Some(Err(e)) => Err(e.context("the history measurement failed")),
        _ => Ok(()),
    }
}

fn wall_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3
}

/// Page wall clock minus this process's, in ms, from the quickest of five round trips.
async fn clock_offset(client: &Client) -> Result<f64> {
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..5 {
        let t0 = SystemTime::now();
        let page = client
            .execute("return performance.timeOrigin + performance.now();", vec![])
            .await?
            .as_f64()
            .context("page clock")?;
        let t1 = SystemTime::now();
        let (a, b) = (wall_ms(t0), wall_ms(t1));
        let rtt = b - a;
        if best.is_none_or(|(r, _)| rtt < r) {
            best = Some((rtt, page - (a + b) / 2.0));
        }
    }
    Ok(best.map_or(0.0, |(_, off)| off))
}

/// A fresh page in a fresh session, connected and given time to settle.
async fn fresh_page(client: &Client, url: &str, tag: &str) -> Result<()> {
    client.goto(url).await?;
    client
        .execute("localStorage.clear(); sessionStorage.clear();", vec![])
        .await?;
    client.goto(&format!("{url}?bench={tag}")).await?;
    wait_for(client, "the widget to connect", CONNECTED).await?;
    // Let the vocabulary download and the first count finish before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

async fn bench_state(client: &Client) -> Result<Value> {
    Ok(client
        .execute(
            "const b = window.__gbBench; return {rendered: b.rendered, doneWall: b.doneWall, deltas: b.deltas, longTaskError: b.longTaskError};",
            vec![],
        )
        .await?)
}

/// A reply to stream: what the table calls it, the document, the piece length.
struct Reply {
    label: String,
    doc: MarkdownDoc,
    piece_chars: usize,
}

async fn reply_run(
    client: &Client,
    cdp: &Cdp,
    fake: &FakeProvider,
    url: &str,
    reply: Reply,
    args: &Args,
) -> Result<ReplyRun> {
    let timeout = args.timeout;
    let Reply {
        label,
        doc,
        piece_chars,
    } = reply;
    let size = doc.text.len();
    let expected_text = rendered_text(&doc.text).len();
    let chunks = pieces(&doc.text, piece_chars);
    let count = chunks.len();
    fresh_page(client, url, &format!("reply-{size}")).await?;
    cdp.enable_metrics().await?;
    fake.set(Behaviour::Reply {
        chunks,
        delay: PIECE_PAUSE,
    });
    let before_times = fake.last_reply_text_times();
    let offset = clock_offset(client).await?;
    client
        .execute(
            "window.__gbBench.expect = {marker: arguments[0]};",
            vec![json!(doc.end_marker)],
        )
        .await?;
    if args.profile.is_some() {
        cdp.call("Profiler.enable", json!({})).await?;
        cdp.call("Profiler.setSamplingInterval", json!({"interval": 250}))
            .await?;
        cdp.call("Profiler.start", json!({})).await?;
    }
    let script_before = cdp.script_ms().await?;
    let sent_at = client
        .execute(
            "window.__gbBench.timer = {last: performance.now(), maxGap: 0};
             document.querySelector('glassbox-chat').sendMessage(arguments[0]); return performance.now();",
            vec![json!(format!("Explain it all in detail, about {size} bytes please."))],
        )
        .await?
        .as_f64()
        .context("send time")?;

    let started = Instant::now();
    // Generous for the stream itself; the timeout proper counts from the last byte.
    let stream_cap = PIECE_PAUSE * 4 * count as u32 + Duration::from_secs(30);
    let mut kicked = false;
    let state = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let state = bench_state(client).await?;
        if let Some(e) = state["longTaskError"].as_str() {
            bail!("long tasks cannot be observed in this Chromium: {e}");
        }
        if !state["rendered"].is_null() {
            break state;
        }
        let times = fake
            .last_reply_text_times()
            .filter(|t| Some(*t) != before_times);
        match times {
            Some((_, last)) => {
                if !kicked {
                    // In case the page never sees `done` (e.g. it fell behind and got a snapshot).
                    client
                        .execute("window.__gbBench.startChecking();", vec![])
                        .await?;
                    kicked = true;
                }
                if last.elapsed().unwrap_or_default() > timeout {
                    break state;
                }
            }
            None if started.elapsed() > stream_cap + timeout => {
                bail!("the fake provider never finished the {size}-byte reply")
            }
            None => {}
        }
    };
    let script_after = cdp.script_ms().await?;
    let timer_gap_ms = client
        .execute("return window.__gbBench.timer.maxGap;", vec![])
        .await?
        .as_f64()
        .unwrap_or(0.0);
    if let Some(dir) = &args.profile {
        let stopped = cdp.call("Profiler.stop", json!({})).await?;
        write_profile(dir, &label, &stopped["profile"])?;
    }
    let tasks: Vec<f64> = client
        .execute(
            "return window.__gbBench.longTasks.filter(([s]) => s >= arguments[0]).map(([, d]) => d);",
            vec![json!(sent_at)],
        )
        .await?
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect();
    let times = fake
        .last_reply_text_times()
        .filter(|t| Some(*t) != before_times);
    let last_ms = times.map(|(_, last)| wall_ms(last));
    let page_to_local = |page: f64| page - offset;
    let lag_ms = state["rendered"]["wall"]
        .as_f64()
        .zip(last_ms)
        .map(|(r, l)| page_to_local(r) - l);
    let done_wait_ms = state["doneWall"]
        .as_f64()
        .zip(last_ms)
        .map(|(d, l)| page_to_local(d) - l);
    let text_short_by = state["rendered"]["textLength"]
        .as_i64()
        .map(|n| expected_text as i64 - n)
        .filter(|d| *d > 0);
    Ok(ReplyRun {
        label,
        size,
        pieces: count,
        stream: times.and_then(|(first, last)| last.duration_since(first).ok()),
        lag_ms,
        done_wait_ms,
        longest_task_ms: tasks.iter().copied().reduce(f64::max),
        long_tasks: tasks.len(),
        script_ms: script_after - script_before,
        deltas_handled: state["deltas"].as_u64().unwrap_or(0),
        text_short_by,
        timer_gap_ms,
    })
}

/// Writes `profile` to `dir/<label>.cpuprofile` (opens in Chrome DevTools' Performance panel) and
/// prints where the busy stretches over 50 ms spent their time.
fn write_profile(dir: &std::path::Path, label: &str, profile: &Value) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let file: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = dir.join(format!("{file}.cpuprofile"));
    std::fs::write(&path, serde_json::to_vec(profile)?)?;
    let parsed: glassbox_e2e::cpu_profile::CpuProfile =
        serde_json::from_value(profile.clone()).context("reading the CPU profile")?;
    let busy = parsed.busy(50.0);
    eprintln!(
        "render-bench: {label}: profile in {}; {} busy stretches over 50 ms: {:?}",
        path.display(),
        busy.stretches_ms.len(),
        busy.stretches_ms
            .iter()
            .map(|m| m.round())
            .collect::<Vec<_>>()
    );
    for (title, rows) in [("self", &busy.self_ms), ("total", &busy.total_ms)] {
        eprintln!("  {title} time in them:");
        for (name, ms) in rows.iter().take(25) {
            eprintln!("    {ms:>8.1} ms  {name}");
        }
    }
    Ok(())
}

/// What the history load and scroll measured.
struct HistoryRun {
    messages: usize,
    write_time: Duration,
    first_ms: Option<f64>,
    newest_ms: Option<f64>,
    all_ms: Option<f64>,
    max_in_dom: u64,
    load_longest_ms: Option<f64>,
    scroll_px: f64,
    scroll_ms: f64,
    scroll_frames: u64,
    scroll_timed_out: bool,
    scroll_longest_ms: Option<f64>,
    scroll_longest_frame_ms: f64,
}

/// A session with `messages` messages (half user, half assistant); returns its id, token, and the
/// oldest and newest message ids.
async fn write_history(
    url: &str,
    fake: &FakeProvider,
    messages: usize,
) -> Result<(String, String, String, String)> {
    let http = reqwest::Client::new();
    let (mut session, mut token, mut oldest, mut newest) =
        (String::new(), String::new(), String::new(), String::new());
    for turn in 0..messages / 2 {
        let reply = mixed_markdown(300 + (turn * 37) % 200, turn as u64);
        fake.set(Behaviour::Reply {
            chunks: pieces(&reply.text, 16),
            delay: Duration::ZERO,
        });
        let mut body =
            json!({"message": format!("Question {}: how does part {} work?", turn + 1, turn % 17)});
        let mut req = http.post(format!("{url}api/chat"));
        if turn > 0 {
            body["sessionId"] = json!(session);
            req = req.bearer_auth(&token);
        }
        let resp = req.json(&body).send().await?;
        let status = resp.status();
        let answer: Value = resp.json().await?;
        if !status.is_success() || answer["reply"]["status"] != "complete" {
            bail!("turn {turn}: POST /api/chat answered {status}: {answer}");
        }
        if turn == 0 {
            session = answer["session"]["sessionId"]
                .as_str()
                .context("sessionId")?
                .to_owned();
            token = answer["session"]["token"]
                .as_str()
                .context("token")?
                .to_owned();
            oldest = answer["message"]["id"]
                .as_str()
                .context("message id")?
                .to_owned();
        }
        newest = answer["reply"]["id"]
            .as_str()
            .context("reply id")?
            .to_owned();
        if (turn + 1) % 200 == 0 {
            eprintln!("render-bench: {} messages written", (turn + 1) * 2);
        }
    }
    Ok((session, token, oldest, newest))
}

async fn history_run(
    client: &Client,
    fake: &FakeProvider,
    url: &str,
    messages: usize,
) -> Result<HistoryRun> {
    let started = Instant::now();
    let (session, token, oldest, newest) = write_history(url, fake, messages).await?;
    let write_time = started.elapsed();
    let messages = messages / 2 * 2;

    // The widget keeps its session under glassbox:session:{server}:{slot}.
    client.goto(url).await?;
    wait_for(client, "the widget to connect", CONNECTED).await?;
    client
        .execute(
            "const [session, token, newest, total] = arguments;
             const el = document.querySelector('glassbox-chat');
             const server = el.getAttribute('server') || location.origin;
             const slot = el.getAttribute('session') || 'default';
             localStorage.setItem(`glassbox:session:${server}:${slot}`, JSON.stringify({sessionId: session, token}));
             sessionStorage.setItem('gbBenchWatch', JSON.stringify({newest, total}));",
            vec![json!(session), json!(token), json!(newest), json!(messages)],
        )
        .await?;
    eprintln!("render-bench: opening the {messages}-message history");
    client.goto(&format!("{url}?bench=history")).await?;
    let load_started = Instant::now();
    let h = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let h = client
            .execute(
                "const h = window.__gbBench.history; return h && {...h, now: performance.now()};",
                vec![],
            )
            .await?;
        if h.is_null() {
            bail!("the history watch did not start");
        }
        let now = h["now"].as_f64().unwrap_or(0.0);
        let quiet = now - h["lastChangeAt"].as_f64().unwrap_or(now);
        if !h["newestAt"].is_null() && quiet > 2000.0 {
            break h;
        }
        if load_started.elapsed() > Duration::from_secs(180) {
            bail!(
                "the history did not load in 180 s: {} messages in the DOM, newest shown: {}",
                h["count"],
                !h["newestAt"].is_null()
            );
        }
    };
    client
        .execute(
            "window.__gbBench.history.stop = true; sessionStorage.removeItem('gbBenchWatch');",
            vec![],
        )
        .await?;
    let load_tasks = long_tasks(client, 0.0, f64::MAX).await?;

    // Scroll from the bottom to the top.
    client
        .execute(
            &format!(
                "const el = {SHADOW}.querySelector('.gb-messages'); el.scrollTop = el.scrollHeight;"
            ),
            vec![],
        )
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.execute(SCROLL_SCRIPT, vec![json!(oldest)]).await?;
    let s = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let s = client.execute("return window.__gbScroll;", vec![]).await?;
        if !s["endAt"].is_null() {
            break s;
        }
    };
    let (start, end) = (
        s["startAt"].as_f64().unwrap_or(0.0),
        s["endAt"].as_f64().unwrap_or(0.0),
    );
    let scroll_tasks = long_tasks(client, start, end).await?;
    Ok(HistoryRun {
        messages,
        write_time,
        first_ms: h["firstAt"].as_f64(),
        newest_ms: h["newestAt"].as_f64(),
        all_ms: h["allAt"].as_f64(),
        max_in_dom: h["maxCount"].as_u64().unwrap_or(0),
        load_longest_ms: load_tasks.into_iter().reduce(f64::max),
        scroll_px: s["distance"].as_f64().unwrap_or(0.0),
        scroll_ms: end - start,
        scroll_frames: s["frames"].as_u64().unwrap_or(0),
        scroll_timed_out: s["timedOut"].as_bool().unwrap_or(false),
        scroll_longest_ms: scroll_tasks.into_iter().reduce(f64::max),
        scroll_longest_frame_ms: s["maxGap"].as_f64().unwrap_or(0.0),
    })
}

/// Durations of the long tasks that started between `from` and `to` (page ms).
async fn long_tasks(client: &Client, from: f64, to: f64) -> Result<Vec<f64>> {
    let to = if to.is_finite() { to } else { 1e15 };
    Ok(client
        .execute(
            "const [from, to] = arguments; return window.__gbBench.longTasks.filter(([s]) => s >= from && s <= to).map(([, d]) => d);",
            vec![json!(from), json!(to)],
        )
        .await?
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect())
}

fn kb(size: usize) -> String {
    format!("{} kB", size / 1024)
}

fn task_cell(longest: Option<f64>) -> String {
    longest.map_or("none over 50".into(), |ms| format!("{ms:.0}"))
}

fn report(
    out: &mut String,
    runs: &[ReplyRun],
    history: Option<&Result<HistoryRun>>,
    timeout: Duration,
    piece_chars: usize,
) -> Result<()> {
    let rate = runs
        .iter()
        .filter_map(|r| r.stream.map(|s| (r.pieces, s)))
        .max_by_key(|(p, _)| *p)
        .map(|(p, s)| p as f64 / s.as_secs_f64().max(1e-3));
    writeln!(
        out,
        "\n## Long streamed replies: the demo page in headless Chromium ({})\n",
        widget_dir().display()
    )?;
    writeln!(
        out,
        "Fake provider: mixed markdown in {piece_chars}-character pieces, a {} ms pause before each{}; the server coalesces them into at most one WebSocket `delta` frame per 16 ms or 4 kB. One fresh page and session per size.\n",
        PIECE_PAUSE.as_millis(),
        rate.map_or(String::new(), |r| format!(
            " (measured {r:.0} pieces/s, {:.2} kB/s)",
            r * piece_chars as f64 / 1024.0
        ))
    )?;
    writeln!(
        out,
        "| reply | pieces | stream (s) | render lag after last byte (ms) | of which until the page handled `done` (ms) | longest task (ms) | tasks > 50 ms | script ms per kB | longest gap of a 10 ms page timer (ms) |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|")?;
    for r in runs {
        let lag = match r.lag_ms {
            Some(ms) => format!("{ms:.0}"),
            None => format!(
                "> {} s (timed out; the page had handled {} of {} pieces)",
                timeout.as_secs(),
                r.deltas_handled,
                r.pieces
            ),
        };
        let done = r.done_wait_ms.map_or("—".into(), |ms| format!("{ms:.0}"));
        let so_far = if r.lag_ms.is_none() { " (so far)" } else { "" };
        writeln!(
            out,
            "| {} | {} | {} | {lag} | {done} | {}{so_far} | {}{so_far} | {:.1}{so_far} | {:.0}{so_far} |",
            r.label,
            r.pieces,
            r.stream
                .map_or("—".into(), |s| format!("{:.1}", s.as_secs_f64())),
            task_cell(r.longest_task_ms),
            r.long_tasks,
            r.script_per_kb(),
            r.timer_gap_ms,
        )?;
    }
    for r in runs {
        if let Some(short) = r.text_short_by {
            writeln!(
                out,
                "\nNote: the rendered {} reply's text is {short} characters shorter than the markdown's text.",
                r.label
            )?;
        }
    }

    let mut history_longest = None;
    match history {
        None => {}
        Some(Err(e)) => writeln!(out, "\n## History\n\nfailed: {e:#}")?,
        Some(Ok(h)) => {
            writeln!(
                out,
                "\n## A {}-message history (written through POST /api/chat in {:.0} s)\n",
                h.messages,
                h.write_time.as_secs_f64()
            )?;
            writeln!(out, "| what | value |\n|---|---|")?;
            let ms = |v: Option<f64>| v.map_or("never".into(), |v| format!("{v:.0}"));
            writeln!(
                out,
                "| first message painted, after navigation start (ms) | {} |",
                ms(h.first_ms)
            )?;
            writeln!(
                out,
                "| newest message in the DOM, after navigation start (ms) | {} |",
                ms(h.newest_ms)
            )?;
            writeln!(
                out,
                "| all {} messages in the DOM, after navigation start (ms) | {} |",
                h.messages,
                match h.all_ms {
                    Some(v) => format!("{v:.0}"),
                    None => format!("never (at most {} at once: windowed)", h.max_in_dom),
                }
            )?;
            writeln!(
                out,
                "| longest task while loading (ms) | {} |",
                task_cell(h.load_longest_ms)
            )?;
            writeln!(
                out,
                "| scrolling to the top, 400 px per frame | {:.0} px in {:.1} s, {} frames{} |",
                h.scroll_px,
                h.scroll_ms / 1e3,
                h.scroll_frames,
                if h.scroll_timed_out {
                    " (gave up after 120 s)"
                } else {
                    ""
                }
            )?;
            writeln!(
                out,
                "| longest task while scrolling (ms) | {} |",
                task_cell(h.scroll_longest_ms)
            )?;
            writeln!(
                out,
                "| longest frame while scrolling (ms) | {:.0} |",
                h.scroll_longest_frame_ms
            )?;
            history_longest = Some(
                h.load_longest_ms
                    .unwrap_or(0.0)
                    .max(h.scroll_longest_ms.unwrap_or(0.0)),
            );
        }
    }

    writeln!(out, "\n## Goals (issues 11 and 30)\n")?;
    writeln!(out, "| goal | measured | met |\n|---|---|---|")?;
    let yes = |ok: bool| if ok { "yes" } else { "no" };
    if let Some(worst) = runs
        .iter()
        .max_by(|a, b| a.timer_gap_ms.total_cmp(&b.timer_gap_ms))
    {
        writeln!(
            out,
            "| the page's 10 ms timer never waits ≥ 100 ms (issue 30, meant at 16 kB/s: `--piece-chars 64`) | {:.0} ms at {} | {} |",
            worst.timer_gap_ms,
            worst.label,
            yes(worst.timer_gap_ms < 100.0)
        )?;
    }
    let worst_task = runs
        .iter()
        .filter_map(|r| r.longest_task_ms.map(|t| (t, &r.label)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    writeln!(
        out,
        "| longest task ≤ 50 ms at every reply size (hostile ones too) | {} | {} |",
        worst_task.map_or("no task over 50 ms".into(), |(t, label)| format!(
            "{t:.0} ms at {label}"
        )),
        yes(worst_task.is_none())
    )?;
    let mixed = || runs.iter().filter(|r| !r.label.starts_with("hostile"));
    let (small, large) = (
        mixed().min_by_key(|r| r.size),
        mixed().max_by_key(|r| r.size),
    );
    match (small, large) {
        (Some(s), Some(l)) if s.size < l.size => {
            let ratio = l.script_per_kb() / s.script_per_kb().max(1e-9);
            let partial = if l.lag_ms.is_none() {
                " (the larger timed out: so far)"
            } else {
                ""
            };
            writeln!(
                out,
                "| script per kB at {} within 1.5× of {} | {:.1} / {:.1} ms per kB = {ratio:.2}×{partial} | {} |",
                kb(l.size),
                kb(s.size),
                l.script_per_kb(),
                s.script_per_kb(),
                yes(ratio <= 1.5 && l.lag_ms.is_some())
            )?;
        }
        _ => writeln!(
            out,
            "| script per kB at the largest size within 1.5× of the smallest | needs two sizes | — |"
        )?,
    }
    let worst_lag = runs
        .iter()
        .try_fold(0.0f64, |w, r| r.lag_ms.map(|l| w.max(l)));
    writeln!(
        out,
        "| render lag after the last byte ≤ 100 ms | {} | {} |",
        match worst_lag {
            Some(l) => format!("worst {l:.0} ms"),
            None => "a size timed out".into(),
        },
        yes(worst_lag.is_some_and(|l| l <= 100.0))
    )?;
    if let Some(t) = history_longest {
        writeln!(
            out,
            "| (no goal stated) longest task with the history, loading or scrolling | {} | — |",
            if t > 0.0 {
                format!("{t:.0} ms")
            } else {
                "no task over 50 ms".into()
            }
        )?;
    }
    Ok(())
}
