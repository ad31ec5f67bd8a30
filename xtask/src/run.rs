//! `serve`, `test` and `bench`: each builds what it needs first.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{Context, Result, bail};

use crate::tools::{browser, root, run, say};
use crate::{build, model};

/// Builds the widget and runs the server on the demo page: an optimized server (profile `serve`),
/// built while the widget builds, or with `dev` the debug build the tests share.
pub fn serve(dev: bool) -> Result<()> {
    let server = if dev {
        None
    } else {
        // Cargo locks a target directory per run, so the server gets a directory of its own and
        // builds alongside the widget: the widget's single-threaded link steps leave a core free.
        // If the widget build fails, dropping it stops the server build.
        say(
            "building the server (profile serve: optimized where it runs hot, no LTO) while the widget builds",
        );
        Some(build::ServerBuild::start()?)
    };
    // Downloading and converting the model (network, then a minute of Python): beside the builds.
    let model = std::thread::spawn(model::provision);
    let dist = build::widget();
    // Joined before a failed build returns, so its downloads and conversion are not cut off.
    let model = model.join();
    let dist = dist?;
    // Chat works without it; a failure here is reported and the server starts anyway.
    match model {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => say(format!(
            "embedding model not provisioned ({e:#}); embeddings will be unavailable"
        )),
        Err(_) => say("provisioning the embedding model panicked; embeddings will be unavailable"),
    }
    let (mut cmd, mcp_demo) = match server {
        Some(mut build) => {
            if !build.is_finished() {
                say("waiting for the server build");
            }
            let (server, mcp_demo) = build.finish()?;
            (Command::new(server), mcp_demo)
        }
        None => {
            let mcp_demo = build_mcp_demo(false)?;
            let mut cmd = Command::new("cargo");
            cmd.args([
                "run",
                "--package",
                "glassbox-server",
                "--bin",
                "glassbox-server",
            ]);
            (cmd, mcp_demo)
        }
    };
    say("starting the server (Ctrl-C stops it)");
    cmd.current_dir(root());
    set_default(&mut cmd, "GLASSBOX_WIDGET_DIR", dist.display().to_string());
    set_default(
        &mut cmd,
        "GLASSBOX_PUBLIC_DIR",
        root().join("public").display().to_string(),
    );
    set_default(
        &mut cmd,
        "GLASSBOX_DATA_DIR",
        root().join("data").display().to_string(),
    );
    // Prometheus' text at http://127.0.0.1:9464/metrics (docs/deploy.md).
    set_default(
        &mut cmd,
        "GLASSBOX_METRICS_ADDR",
        "127.0.0.1:9464".to_owned(),
    );
    // glassbox.toml's demo agent runs it over stdio.
    set_default(
        &mut cmd,
        "GLASSBOX_MCP_DEMO",
        mcp_demo.display().to_string(),
    );
    run(&mut cmd)
}

/// Runs every test of the workspace, including the browser end-to-end test, then the app's
/// component tests in headless Chromium (only those whose name contains `filter`, when given).
pub fn test(filter: Option<&str>) -> Result<()> {
    let dist = build::widget()?;
    let (chromium, driver) = browser()?;
    let model_dir = model::provision()?;
    let runner = crate::tools::wasm_test_runner()?;
    let mcp_servers = crate::tools::mcp_servers()?;
    let (nginx, caddy) = crate::tools::proxies()?;
    let hadolint = crate::tools::hadolint()?;
    // The storage contract and the server's tests run on it too (each test in a database of its own).
    let postgres = crate::postgres::Cluster::start()?;
    say("running all tests (cargo test --workspace)");
    // Browser tests that fail leave a screenshot here; listed at the end of the run.
    let screenshots = crate::tools::target_dir().join("e2e-screenshots");
    let _ = std::fs::remove_dir_all(&screenshots);
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root())
        .args([
            "test",
            "--workspace",
            "--no-fail-fast",
            "--lib",
            "--bins",
            "--tests",
        ])
        .args(filter.map(|f| ["--", f]).into_iter().flatten())
        .env("GLASSBOX_E2E_WIDGET_DIR", &dist)
        .env("GLASSBOX_E2E_NODE_MODULES", crate::tools::npm_tools()?)
        .env("GLASSBOX_E2E_PUBLIC_DIR", root().join("public"))
        .env("GLASSBOX_E2E_MCP_SERVERS", &mcp_servers)
        .env("GLASSBOX_E2E_CHROMIUM", &chromium)
        .env("GLASSBOX_E2E_CHROMEDRIVER", &driver)
        .env("GLASSBOX_EMBED_MODEL_DIR", &model_dir)
        .env("GLASSBOX_E2E_SCREENSHOT_DIR", &screenshots)
        .env("GLASSBOX_E2E_NGINX", &nginx)
        .env("GLASSBOX_E2E_CADDY", &caddy)
        .env("GLASSBOX_E2E_HADOLINT", &hadolint)
        .env("GLASSBOX_TEST_POSTGRES_URL", postgres.url());
    let mut totals = TestTotals::default();
    let native = totals.run(&mut cmd)?;
    say("running the server's tests again on PostgreSQL (GLASSBOX_TEST_BACKEND=postgres)");
    let mut on_postgres = Command::new("cargo");
    on_postgres
        .current_dir(root())
        .args(["test", "--package", "glassbox-server", "--no-fail-fast"])
        .args(storage_test_targets()?)
        .args(filter.map(|f| ["--", f]).into_iter().flatten())
        .env("GLASSBOX_E2E_WIDGET_DIR", &dist)
        .env("GLASSBOX_E2E_MCP_SERVERS", &mcp_servers)
        .env("GLASSBOX_EMBED_MODEL_DIR", &model_dir)
        .env("GLASSBOX_TEST_POSTGRES_URL", postgres.url())
        .env("GLASSBOX_TEST_BACKEND", "postgres");
    let native_postgres = totals.run(&mut on_postgres)?;
    say("running the app's component tests in headless Chromium (wasm-bindgen-test-runner)");
    let components = totals.run(&mut component_tests(filter, &runner, &chromium, &driver)?)?;
    // One closing line for the whole run, summed over every test binary.
    println!(
        "tests: {} passed, {} failed, {} skipped",
        totals.passed, totals.failed, totals.ignored
    );
    for shot in std::fs::read_dir(&screenshots)
        .into_iter()
        .flatten()
        .flatten()
    {
        println!(
            "screenshot of a failed browser test: {}",
            shot.path().display()
        );
    }
    if !native.success() {
        bail!("cargo test failed ({native})");
    }
    if !native_postgres.success() {
        bail!("the server's tests failed on PostgreSQL ({native_postgres})");
    }
    if !components.success() {
        bail!("the component tests failed ({components})");
    }
    if totals.passed == 0 {
        bail!("no test ran");
    }
    Ok(())
}

/// `cargo test` of the app's integration tests (app/tests/) for wasm32, each test binary run by
/// wasm-bindgen-test-runner in headless Chromium through `driver`. Chromium's flags are
/// app/webdriver.json's (which the runner reads by itself when run by hand from app/), given here
/// with `chromium` as the browser to start.
fn component_tests(
    filter: Option<&str>,
    runner: &Path,
    chromium: &Path,
    driver: &Path,
) -> Result<Command> {
    let flags = root().join("app/webdriver.json");
    let mut capabilities: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&flags).with_context(|| format!("reading {}", flags.display()))?,
    )?;
    capabilities["goog:chromeOptions"]["binary"] = chromium.display().to_string().into();
    // Absolute: the runner reads it from app/.
    let target = std::path::absolute(crate::tools::target_dir())?;
    let webdriver = target.join("webdriver.json");
    std::fs::create_dir_all(&target)?;
    std::fs::write(&webdriver, capabilities.to_string())?;
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root())
        .args(["test", "--package", "glassbox-app"])
        .args([
            "--target",
            "wasm32-unknown-unknown",
            "--no-fail-fast",
            "--test",
            "*",
        ])
        .args(filter.map(|f| ["--", f]).into_iter().flatten())
        .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", runner)
        .env("CHROMEDRIVER", driver)
        .env("WASM_BINDGEN_TEST_WEBDRIVER_JSON", webdriver);
    Ok(cmd)
}

/// Sums the `test result:` lines of cargo test.
#[derive(Default)]
struct TestTotals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl TestTotals {
    /// Runs `cmd` (a `cargo test`), echoing its output and adding up its results.
    fn run(&mut self, cmd: &mut Command) -> Result<ExitStatus> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        if let Some(out) = child.stdout.take() {
            for line in BufReader::new(out).lines() {
                let line = line?;
                println!("{line}");
                self.add(&line);
            }
        }
        Ok(child.wait()?)
    }

    fn add(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(kind), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match kind {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

/// Measures the gateway's added latency and the widget's payload.
pub fn bench_gateway() -> Result<()> {
    let dist = build::widget()?;
    // The PostgreSQL cases (one instance and two on one database) run on a private cluster; the
    // SQLite case runs without one.
    let postgres = bench_cluster();
    let url = postgres.as_ref().map(crate::postgres::Cluster::url);
    let env: Vec<(&str, &std::ffi::OsStr)> = url
        .iter()
        .map(|u| ("GLASSBOX_BENCH_POSTGRES_URL", std::ffi::OsStr::new(u)))
        .collect();
    release_bin_with("gateway-bench", &[dist.as_os_str()], &env)
}

/// A private PostgreSQL cluster for a bench's PostgreSQL cases; none (said why) leaves the bench to
/// SQLite alone.
fn bench_cluster() -> Option<crate::postgres::Cluster> {
    match crate::postgres::Cluster::start_for(crate::postgres::Purpose::Bench) {
        Ok(cluster) => Some(cluster),
        Err(e) => {
            say(format!(
                "no PostgreSQL cluster ({e:#}); the bench runs on SQLite alone"
            ));
            None
        }
    }
}

/// The server's test files that never open a store: the PostgreSQL pass would only run them
/// again (the offline topic-extraction fixtures alone take 7 minutes).
const STORAGE_FREE_TESTS: &[&str] = &["topic_fixture", "providers"];

/// `--test NAME` for each of the server's integration test files except [`STORAGE_FREE_TESTS`]
/// (each of which must still exist, so a renamed one is not run twice unnoticed).
fn storage_test_targets() -> Result<Vec<String>> {
    let dir = root().join("server/tests");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        {
            names.push(stem.to_owned());
        }
    }
    for free in STORAGE_FREE_TESTS {
        if !names.iter().any(|n| n == free) {
            bail!("server/tests/{free}.rs is gone: update STORAGE_FREE_TESTS in xtask/src/run.rs");
        }
    }
    names.sort();
    Ok(names
        .into_iter()
        .filter(|n| !STORAGE_FREE_TESTS.contains(&n.as_str()))
        .flat_map(|n| ["--test".to_owned(), n])
        .collect())
}

/// Measures embedding speed against onnxruntime on the same model and sentences (the bench drives
/// `ort_embed.py` itself, alternating passes).
pub fn bench_embed() -> Result<()> {
    let model_dir = model::provision()?;
    let bench = root().join("tests/e2e/bench");
    let python = crate::tools::venv("bench-venv", &bench.join("requirements.txt"))?;
    let sentences = bench.join("sentences.txt");
    let script = bench.join("ort_embed.py");
    release_bin(
        "embed-bench",
        &[
            model_dir.as_os_str(),
            sentences.as_os_str(),
            python.as_os_str(),
            script.as_os_str(),
        ],
    )
}

/// Token counting in headless Chromium: ours vs gpt-tokenizer vs tiktoken (npm), same page and texts.
pub fn bench_tokens() -> Result<()> {
    build::widget()?;
    browser()?;
    let modules = crate::tools::npm_tools()?;
    release_bin("tokens-bench", &[modules.as_os_str()])
}

/// Long streamed replies and a long history in headless Chromium (issue 11): render lag, longest
/// task, script time per kB. `args` go to the bench (`--sizes`, `--history`, `--timeout`).
pub fn bench_render(args: &[&str]) -> Result<()> {
    build::widget()?;
    browser()?;
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    release_bin("render-bench", &args)
}

/// Planning one turn for a 1,000-message session (issue 12): p50/p99 and the stored receipt's size;
/// one tool round's added latency over a plain reply against the fake provider; then topics (issue
/// 14): selection over 10,000 vectors, offline extraction, first token with extraction on vs off;
/// then agents' items (issue 29) over 100 items / 1,000 chunks: cold indexing beside onnxruntime
/// on the same chunks (the venv of `bench embed`), the warm request context, the preview round trip;
/// then MCP tools (issue 39). `only`: `["mcp"]` runs that section alone.
pub fn bench_context(only: &[&str]) -> Result<()> {
    build::widget()?;
    // The repo's MCP server (stdio and HTTP) for the MCP section.
    let mcp_demo = build_mcp_demo(true)?;
    // Topic extraction, the filter and the item search run with the real embedding model.
    let model_dir = model::provision()?;
    // The anchor of cold indexing: onnxruntime on the same model and chunks.
    let bench = root().join("tests/e2e/bench");
    let python = crate::tools::venv("bench-venv", &bench.join("requirements.txt"))?;
    let script = bench.join("ort_embed.py");
    let mut args = vec![python.as_os_str(), script.as_os_str()];
    args.extend(only.iter().map(std::ffi::OsStr::new));
    // The growth scenario runs on PostgreSQL too.
    let postgres = (only.is_empty() || only.contains(&"growth"))
        .then(bench_cluster)
        .flatten();
    let url = postgres.as_ref().map(crate::postgres::Cluster::url);
    let mut env = vec![
        ("GLASSBOX_EMBED_MODEL_DIR", model_dir.as_os_str()),
        ("GLASSBOX_MCP_DEMO", mcp_demo.as_os_str()),
    ];
    env.extend(
        url.iter()
            .map(|u| ("GLASSBOX_BENCH_POSTGRES_URL", std::ffi::OsStr::new(u))),
    );
    release_bin_with("context-bench", &args, &env)
}

/// Builds the repo's MCP server (`glassbox-mcp-demo`), optimized or not; answers its path.
fn build_mcp_demo(release: bool) -> Result<std::path::PathBuf> {
    let profile = if release { "release" } else { "debug" };
    say(format!("building the demo MCP server ({profile})"));
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root()).args([
        "build",
        "--quiet",
        "--package",
        "glassbox-mcp-demo",
        "--bin",
        "glassbox-mcp-demo",
    ]);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    Ok(crate::tools::target_dir().join(format!(
        "{profile}/glassbox-mcp-demo{}",
        std::env::consts::EXE_SUFFIX
    )))
}

/// Builds and runs a benchmark binary of the e2e package in release mode.
fn release_bin(name: &str, args: &[&std::ffi::OsStr]) -> Result<()> {
    release_bin_with(name, args, &[])
}

/// [`release_bin`] with environment variables for the benchmark.
fn release_bin_with(
    name: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<()> {
    e2e_bin(name, true, args, env)
}

/// Builds and runs the e2e crate's binary `name`, optimized or as the tests build it.
fn e2e_bin(
    name: &str,
    release: bool,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<()> {
    let profile = if release { "release" } else { "debug" };
    say(format!("building and running {name} ({profile})"));
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root()).arg("run");
    if release {
        cmd.arg("--release");
    }
    run(cmd
        .args(["--package", "glassbox-e2e", "--bin", name, "--"])
        .args(args)
        .envs(env.iter().copied()))
}

/// The README's picture (`docs/screenshot.png`): the demo page in headless Chromium with the demo
/// agent, a tool call approved and answered. The tests' debug build, so it is quick after
/// `cargo xtask test`.
pub fn screenshot() -> Result<()> {
    build::widget()?;
    browser()?;
    let mcp_demo = build_mcp_demo(false)?;
    let model_dir = model::provision()?;
    e2e_bin(
        "screenshot",
        false,
        &[],
        &[
            ("GLASSBOX_MCP_DEMO", mcp_demo.as_os_str()),
            ("GLASSBOX_EMBED_MODEL_DIR", model_dir.as_os_str()),
        ],
    )
}

fn set_default(cmd: &mut Command, key: &str, value: String) {
    if std::env::var_os(key).is_none() {
        cmd.env(key, value);
    }
}
