//! MCP tools (issue 39): one MCP call's added latency over the built-in tool loop — a whole reply
//! with one round calling the repo's MCP server over stdio or streamable HTTP beside the same reply
//! calling the built-in `get_relevant_context` (goal ≤ 2 ms p50 added on stdio); chat-ready at
//! start-up with 0 and 5 servers configured (servers connect in the background: no growth); and
//! the tool costs the demo agent's receipt shows.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use glassbox_e2e::start_server;
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::{Value, json};

use super::percentile;

/// Replies per case (after `WARMUP` of each).
const REPLIES: usize = 300;
const WARMUP: usize = 30;
/// Start-ups per case of chat-ready.
const STARTS: usize = 100;

/// The repo's MCP server, built by `cargo xtask bench context` (`GLASSBOX_MCP_DEMO`).
pub fn demo_binary() -> Result<PathBuf> {
    let bin = std::env::var_os("GLASSBOX_MCP_DEMO")
        .map(PathBuf::from)
        .context("GLASSBOX_MCP_DEMO is not set: run this through `cargo xtask bench context`")?;
    anyhow::ensure!(bin.is_file(), "{} is missing", bin.display());
    Ok(bin)
}

/// A configuration in `dir`: agent `a` (tools run unasked) with `servers` (TOML tables).
fn config(dir: &Path, servers: &[String]) -> Result<String> {
    let mut text = String::from("[[agents]]\nname = \"a\"\ntool_permission = \"allow\"\n");
    for s in servers {
        text.push_str("\n[[agents.mcp_servers]]\ninclude = \"always\"\n");
        text.push_str(s);
    }
    let file = dir.join("glassbox.toml");
    std::fs::write(&file, text)?;
    Ok(file.display().to_string())
}

fn stdio(name: &str, demo: &Path) -> String {
    format!(
        "name = \"{name}\"\ncommand = {:?}\n",
        demo.display().to_string()
    )
}

/// Waits until every configured MCP server is ready.
async fn all_ready(server: &glassbox_e2e::Server, count: usize) -> Result<()> {
    for _ in 0..600 {
        let health = server.state.mcp.health();
        if health.len() == count && health.iter().all(|h| h.status == "ready") {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the MCP servers did not get ready")
}

fn call(name: &str, args: &str) -> Behaviour {
    Behaviour::ToolCall {
        text: String::new(),
        name: name.into(),
        argument_parts: vec![args.into()],
    }
}

/// One reply through `POST /api/chat` (JSON), the fake provider answering `behaviours` in turn.
async fn reply(
    http: &reqwest::Client,
    url: &str,
    fake: &FakeProvider,
    behaviours: Vec<Behaviour>,
) -> Result<(Duration, Value)> {
    fake.queue(behaviours);
    let t = Instant::now();
    let body: Value = http
        .post(url)
        .json(&json!({"message": "How far is a mile in kilometres?"}))
        .send()
        .await?
        .json()
        .await?;
    let elapsed = t.elapsed();
    anyhow::ensure!(
        body["reply"]["status"] == "complete",
        "not complete: {body}"
    );
    Ok((elapsed, body))
}

pub async fn mcp() -> Result<()> {
    let demo = demo_binary()?;
    let answer = Behaviour::reply(&["A mile ", "is 1.609 km."]);
    let fake = FakeProvider::start_with(answer.clone(), false).await?;
    let base = fake.openai_base();
    // The HTTP server: the same binary, serving on loopback.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut web = tokio::process::Command::new(&demo)
        .args(["--http", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let dir = tempfile::tempdir()?;
    let file = config(
        dir.path(),
        &[
            stdio("s", &demo),
            format!("name = \"h\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
        ],
    )?;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "bench"),
        ("OPENAI_BASE_URL", &base),
        ("GLASSBOX_TOOLS", "context"),
        ("GLASSBOX_CONFIG", &file),
        ("GLASSBOX_EMBEDDINGS", "off"),
    ])
    .await?;
    all_ready(&server, 2).await?;
    let http = reqwest::Client::new();
    let url = format!("http://{}/api/chat", server.addr);
    let convert = r#"{"value": 1, "from": "mi", "to": "km"}"#;
    let cases = [
        (
            "built-in get_relevant_context (anchor)",
            "get_relevant_context",
            "{}",
        ),
        ("MCP over stdio", "s__convert_units", convert),
        ("MCP over streamable HTTP", "h__convert_units", convert),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    // Interleaved, so drift on the machine hits every case alike.
    for i in 0..WARMUP + REPLIES {
        for (c, (_, name, args)) in cases.iter().enumerate() {
            let (t, body) =
                reply(&http, &url, &fake, vec![call(name, args), answer.clone()]).await?;
            let exchange = &body["reply"]["toolRounds"][0]["exchanges"][0];
            anyhow::ensure!(exchange["isError"] == false, "{name} failed: {exchange}");
            if i >= WARMUP {
                times[c].push(t.as_secs_f64() * 1e3);
            }
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    println!(
        "\n## One MCP tool call vs a built-in tool call (whole reply with one tool round through the server, fake OpenAI provider and the repo's MCP server on loopback, {REPLIES} each, interleaved)\n"
    );
    println!("| case | p50 (ms) | p99 (ms) | added p50 (ms) | added p99 (ms) | ratio p50 |");
    println!("|---|---|---|---|---|---|");
    let (a50, a99) = (percentile(&times[0], 0.5), percentile(&times[0], 0.99));
    for ((label, _, _), t) in cases.iter().zip(&times) {
        let (p50, p99) = (percentile(t, 0.5), percentile(t, 0.99));
        println!(
            "| {label} | {p50:.3} | {p99:.3} | {:.3} | {:.3} | {:.2} |",
            p50 - a50,
            p99 - a99,
            p50 / a50
        );
    }
    println!(
        "\nGoal: ≤ 2 ms p50 added on stdio (the call's round trip to the server process and back)."
    );

    // The demo agent's tools as its receipt costs them (the repo's MCP server without test tools).
    let (_, body) = reply(&http, &url, &fake, vec![answer.clone()]).await?;
    let receipt = &body["reply"]["receipt"];
    println!("\n## What each of the demo server's tools costs (receipt of one message, o200k)\n");
    println!("| tool | tokens |");
    println!("|---|---|");
    let mut total = 0;
    for p in receipt["parts"].as_array().context("receipt parts")? {
        if p["kind"] == "item" && p["type"] == "tool" && p["server"] == "s" {
            let tokens = p["tokens"].as_u64().unwrap_or(0);
            total += tokens;
            println!("| {} | {tokens} |", p["name"].as_str().unwrap_or("?"));
        }
        if p["kind"] == "tools" {
            println!("| (built-in tools and instructions) | {} |", p["tokens"]);
        }
    }
    println!("| **the server's tools** | **{total}** |");
    println!(
        "\nbreakdown.tools (both servers and the built-ins): {}; the whole request: {} tokens",
        receipt["breakdown"]["tools"], receipt["countedInputTokens"]
    );
    server.state.mcp.stop_all();
    drop(server);
    web.kill().await.ok();

    chat_ready(&demo).await
}

/// From start-up to the first reply, with 0 and 5 MCP servers configured: start-ups alternate
/// between the cases in a rotating order (every server started stays in this process, so later
/// start-ups share it with more of them: alternating lets that drift hit every case alike). The
/// case with none runs twice, so the table shows how far two runs of the same case differ: the
/// noise a difference with servers must stand out from.
pub async fn chat_ready(demo: &Path) -> Result<()> {
    let answer = Behaviour::reply(&["Ready."]);
    let fake = FakeProvider::start_with(answer.clone(), false).await?;
    let base = fake.openai_base();
    let http = reqwest::Client::new();
    let cases = [0usize, 5, 0];
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(STARTS); cases.len()];
    // Of the same start-ups: to the server's state built and listening, and from there to the reply.
    let mut listening: Vec<Vec<f64>> = vec![Vec::with_capacity(STARTS); cases.len()];
    let mut replying: Vec<Vec<f64>> = vec![Vec::with_capacity(STARTS); cases.len()];
    // Child processes that are not this section's (none, unless a caller left some running).
    let others = children()?;
    for k in 0..STARTS {
        // The order rotates, so no case always follows the same one.
        for j in 0..cases.len() {
            let c = (k + j) % cases.len();
            let servers = cases[c];
            let dir = tempfile::tempdir()?;
            let tables: Vec<String> = (0..servers)
                .map(|i| stdio(&format!("s{i}"), demo))
                .collect();
            let file = config(dir.path(), &tables)?;
            let t = Instant::now();
            let server = start_server(&[
                ("GLASSBOX_PROVIDER", "openai"),
                ("OPENAI_API_KEY", "bench"),
                ("OPENAI_BASE_URL", &base),
                ("GLASSBOX_CONFIG", &file),
                ("GLASSBOX_EMBEDDINGS", "off"),
            ])
            .await?;
            let up = t.elapsed();
            let url = format!("http://{}/api/chat", server.addr);
            reply(&http, &url, &fake, vec![answer.clone()]).await?;
            let all = t.elapsed();
            times[c].push(all.as_secs_f64() * 1e3);
            listening[c].push(up.as_secs_f64() * 1e3);
            replying[c].push((all - up).as_secs_f64() * 1e3);
            all_ready(&server, servers).await?;
            // The next start-up is timed on a quiet machine: this one's server processes ended
            // (they would otherwise exit beside it, which only the case with servers pays).
            server.state.mcp.stop_all();
            drop(server);
            settle(others).await?;
        }
    }
    println!(
        "\n## Chat-ready at start-up: from starting the server to the first reply ({STARTS} start-ups each, alternating)\n"
    );
    println!(
        "| MCP servers | p25 (ms) | median (ms) | p75 (ms) | slowest (ms) | median's ratio to none's first run | median to listening (ms) | median listening to reply (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut none = None;
    for (c, servers) in cases.iter().enumerate() {
        let t = &mut times[c];
        t.sort_by(f64::total_cmp);
        listening[c].sort_by(f64::total_cmp);
        replying[c].sort_by(f64::total_cmp);
        let median = percentile(t, 0.5);
        let none = *none.get_or_insert(median);
        println!(
            "| {servers} | {:.1} | {median:.1} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} |",
            percentile(t, 0.25),
            percentile(t, 0.75),
            t[t.len() - 1],
            median / none,
            percentile(&listening[c], 0.5),
            percentile(&replying[c], 0.5),
        );
    }
    println!(
        "\nServers connect in the background: the first reply does not wait for them. The second \
         run with none is the noise: 5 servers cost nothing measurable when their ratio is within \
         its distance from 1.00."
    );
    Ok(())
}

/// Waits until this process has no more child processes than `others` (the MCP servers of a
/// stopped server have exited), then a moment more for the exits to be reaped.
async fn settle(others: usize) -> Result<()> {
    for _ in 0..500 {
        if children()? <= others {
            tokio::time::sleep(Duration::from_millis(100)).await;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the MCP server processes did not exit")
}

/// This process's live child processes (from /proc: each process's parent id).
fn children() -> Result<usize> {
    let me = std::process::id().to_string();
    let mut n = 0;
    for entry in std::fs::read_dir("/proc")? {
        let path = entry?.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the name may hold spaces, so read after its last ')'.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let mut fields = after.split_whitespace();
        let state = fields.next();
        if fields.next() == Some(me.as_str()) && state != Some("Z") {
            n += 1;
        }
    }
    Ok(n)
}
