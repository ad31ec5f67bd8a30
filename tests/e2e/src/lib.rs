//! Helpers for end-to-end tests and benchmarks: a real Glassbox server on a loopback port, and a
//! headless Chromium driven over WebDriver (Debian's `chromium` + `chromedriver`).

pub mod bench_postgres;
pub mod cpu_profile;
pub mod markdown_fixture;
pub mod ort_anchor;
pub mod pass_through;
pub mod widget_page;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use glassbox_server::config::Config;
use serde_json::{Value, json};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn env_path(key: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(key).map(PathBuf::from).unwrap_or(default)
}

/// The built widget folder (`dist/`), holding the vocabularies under `vocab/`.
pub fn widget_dir() -> PathBuf {
    env_path("GLASSBOX_E2E_WIDGET_DIR", root().join("dist"))
}

/// Where the built chat's wasm chunks are (`glassbox_widget_chunks.json`, which `cargo xtask
/// build` writes beside them).
pub struct WidgetChunks {
    /// The chunks' folder, relative to [`widget_dir`].
    pub folder: String,
}

/// The built chat's chunks.
pub fn widget_chunks() -> Result<WidgetChunks> {
    let path = widget_dir().join("glassbox_widget_chunks.json");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let folder = manifest["folder"]
        .as_str()
        .context("the chunks manifest names no folder")?
        .to_owned();
    Ok(WidgetChunks { folder })
}

/// The `node_modules` folder xtask installed (reference tokenizers, wasm-opt).
pub fn node_modules() -> PathBuf {
    env_path("GLASSBOX_E2E_NODE_MODULES", {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        home.join(".cache/glassbox/tools/npm/node_modules")
    })
}

/// A server running in this process, with its data in a temporary directory.
pub struct Server {
    pub addr: SocketAddr,
    /// The server's own state, for benchmarks that call its Rust API directly.
    pub state: glassbox_server::AppState,
    _data: tempfile::TempDir,
}

/// Starts the server with `vars` as its environment (plus a temp data dir and the built widget).
/// The repo's MCP server's binary (`glassbox-mcp-demo`), built into the same target directory as
/// the test running (`cargo xtask test` builds the workspace).
pub fn demo_mcp_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the target directory")?;
    let bin = dir.join(format!("glassbox-mcp-demo{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        bin.is_file(),
        "{} is missing: `cargo xtask test` builds it",
        bin.display()
    );
    Ok(bin)
}

/// A configuration in `dir` with agent `a` (`tool_permission = "ask"`) and the repo's MCP server
/// as `demo`; answers its path.
pub fn ask_demo_config(dir: &Path) -> Result<String> {
    let config = dir.join("glassbox.toml");
    std::fs::write(
        &config,
        format!(
            "[[agents]]\nname = \"a\"\ntool_permission = \"ask\"\n\n[[agents.mcp_servers]]\nname = \"demo\"\ncommand = {:?}\n",
            demo_mcp_binary()?.display().to_string()
        ),
    )?;
    Ok(config.display().to_string())
}

/// Waits (up to 15 s) until the server's first MCP server is ready.
pub async fn mcp_ready(server: &Server) -> Result<()> {
    for _ in 0..300 {
        if server
            .state
            .mcp
            .health()
            .first()
            .is_some_and(|h| h.status == "ready")
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!(
        "the MCP server did not get ready: {:?}",
        server.state.mcp.health().first().map(|h| h.status)
    )
}

pub async fn start_server(vars: &[(&str, &str)]) -> Result<Server> {
    let widget_dir = widget_dir();
    if !["glassbox_widget_bg.wasm", "glassbox_meter_bg.wasm"]
        .iter()
        .all(|f| widget_dir.join(f).exists())
    {
        bail!(
            "the widget is not built in {}; run `cargo xtask test`",
            widget_dir.display()
        );
    }
    let public_dir = env_path("GLASSBOX_E2E_PUBLIC_DIR", root().join("public"));
    let data = tempfile::tempdir()?;
    let mut all: Vec<(String, String)> = vec![
        (
            "GLASSBOX_DATA_DIR".into(),
            data.path().display().to_string(),
        ),
        (
            "GLASSBOX_WIDGET_DIR".into(),
            widget_dir.display().to_string(),
        ),
        (
            "GLASSBOX_PUBLIC_DIR".into(),
            public_dir.display().to_string(),
        ),
    ];
    // Tests and benchmarks send many messages from one address; a test of the limits or budgets
    // sets them.
    for limit in glassbox_server::config::LIMIT_VARS {
        all.push((limit, "0".into()));
    }
    // Topic extraction calls the provider after every reply; the topic tests switch it on.
    all.push(("GLASSBOX_TOPICS".into(), "off".into()));
    all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let config = Config::from_lookup(|k| {
        all.iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    })?;
    let state = glassbox_server::build_state(config).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let served = state.clone();
    tokio::spawn(async move {
        let _ = axum_serve(listener, served).await;
    });
    Ok(Server {
        addr,
        state,
        _data: data,
    })
}

async fn axum_serve(
    listener: tokio::net::TcpListener,
    state: glassbox_server::AppState,
) -> std::io::Result<()> {
    glassbox_server::serve(listener, state).await
}

/// A plain web server on loopback serving the files of a folder: a host page on an origin of its
/// own, which our server did not make.
pub struct StaticSite {
    pub addr: SocketAddr,
    headers: Arc<std::sync::Mutex<Vec<(HeaderName, HeaderValue)>>>,
}

use axum::http::{HeaderName, HeaderValue};

impl StaticSite {
    /// Serves `dir` on a free loopback port.
    pub async fn start(dir: &Path) -> Result<Self> {
        let headers: Arc<std::sync::Mutex<Vec<(HeaderName, HeaderValue)>>> = Arc::default();
        let added = headers.clone();
        let app = axum::Router::new()
            .fallback_service(tower_http::services::ServeDir::new(dir))
            .layer(axum::middleware::map_response(
                move |mut response: axum::response::Response| {
                    let added = added.lock().map(|h| h.clone()).unwrap_or_default();
                    async move {
                        for (name, value) in added {
                            response.headers_mut().insert(name, value);
                        }
                        response
                    }
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        // As the Glassbox server does (no 40 ms waits for delayed ACKs between small files).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, headers })
    }

    /// Adds `name: value` to every later response (a Content-Security-Policy, say).
    pub fn set_header(&self, name: &'static str, value: &str) -> Result<()> {
        let value = HeaderValue::from_str(value)?;
        self.headers
            .lock()
            .map_err(|_| anyhow::anyhow!("the header list is poisoned"))?
            .push((HeaderName::from_static(name), value));
        Ok(())
    }

    /// `http://addr`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A chromedriver process, killed on drop.
pub struct Driver {
    pub url: String,
    child: Child,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts chromedriver on a free loopback port and waits until it listens.
pub async fn start_driver() -> Result<Driver> {
    let driver = env_path(
        "GLASSBOX_E2E_CHROMEDRIVER",
        PathBuf::from("/usr/bin/chromedriver"),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(&driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (run `cargo xtask test`, which installs it)",
                driver.display()
            )
        })?;
    let driver = Driver {
        url: format!("http://127.0.0.1:{port}"),
        child,
    };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(driver);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("chromedriver did not start listening on port {port}")
}

/// How many times a browser session is asked for before giving up.
const SESSION_ATTEMPTS: usize = 3;

/// A headless Chromium session with a fresh profile under `profile`.
///
/// On a loaded machine chromedriver now and then fails to start Chromium and answers the new
/// session request with an empty body; that attempt is retried with a profile of its own (the
/// failed one may still be locked). Failures after the session exists are never retried.
pub async fn browser(driver: &Driver, profile: &Path) -> Result<fantoccini::Client> {
    let mut last = None;
    for attempt in 1..=SESSION_ATTEMPTS {
        match new_session(driver, &profile.join(format!("attempt-{attempt}"))).await {
            Ok(client) => return Ok(client),
            Err(error) => {
                eprintln!(
                    "browser session attempt {attempt} of {SESSION_ATTEMPTS} failed: {error}"
                );
                last = Some(error);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    Err(last.map_or_else(
        || anyhow::anyhow!("no browser session"),
        |error| error.into(),
    ))
}

async fn new_session(
    driver: &Driver,
    profile: &Path,
) -> Result<fantoccini::Client, fantoccini::error::NewSessionError> {
    let chromium = env_path("GLASSBOX_E2E_CHROMIUM", PathBuf::from("/usr/bin/chromium"));
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1200,800",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    // chromedriver listens on plain HTTP on loopback: no TLS stack needed.
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    fantoccini::ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
}

/// A TCP proxy on loopback in front of the server that behaves as reverse proxies do with quiet
/// connections: one that carries no byte either way for `idle` is cut (nginx's 60 s
/// `proxy_read_timeout`, here shorter). Counts what it cut; [`IdleCuttingProxy::mute`] makes every
/// connection open now carry nothing more without closing it, as a dead network path does.
pub struct IdleCuttingProxy {
    pub addr: SocketAddr,
    cuts: Arc<std::sync::atomic::AtomicUsize>,
    muted: tokio::sync::broadcast::Sender<()>,
}

impl IdleCuttingProxy {
    /// Starts forwarding a free loopback port to `target`, cutting connections idle for `idle`.
    pub async fn start(target: SocketAddr, idle: Duration) -> Result<Self> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cuts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (muted, _) = tokio::sync::broadcast::channel::<()>(4);
        let (counted, mutes) = (cuts.clone(), muted.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let counted = counted.clone();
                let mut mute = mutes.subscribe();
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
                    let mut last = tokio::time::Instant::now();
                    loop {
                        tokio::select! {
                            n = in_read.read(&mut up) => match n {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if out_write.write_all(&up[..n]).await.is_err() { return; }
                                    last = tokio::time::Instant::now();
                                }
                            },
                            n = out_read.read(&mut down) => match n {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if in_write.write_all(&down[..n]).await.is_err() { return; }
                                    last = tokio::time::Instant::now();
                                }
                            },
                            () = tokio::time::sleep_until(last + idle) => {
                                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                return;
                            }
                            _ = mute.recv() => break,
                        }
                    }
                    // Muted: open, and silent both ways, until the test ends.
                    let _keep = (in_read, in_write, out_read, out_write);
                    futures::future::pending::<()>().await;
                });
            }
        });
        Ok(Self { addr, cuts, muted })
    }

    /// Connections cut so far for carrying nothing for the idle time.
    pub fn cuts(&self) -> usize {
        self.cuts.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Every connection open now carries nothing more, and is never closed by the proxy.
    pub fn mute(&self) {
        let _ = self.muted.send(());
    }
}

/// A TCP proxy on loopback in front of the server whose open connections can be cut at will, as a
/// network drop would (new connections keep working), and whose new WebSocket connections can be
/// held back until the test lets them through.
pub struct CuttableProxy {
    pub addr: SocketAddr,
    cut: tokio::sync::broadcast::Sender<()>,
    /// Whether new WebSocket connections wait before they are forwarded.
    hold: Arc<tokio::sync::watch::Sender<bool>>,
    /// WebSocket connections that came while holding.
    held: Arc<tokio::sync::watch::Sender<usize>>,
}

impl CuttableProxy {
    /// Starts forwarding a free loopback port to `target`.
    pub async fn start(target: SocketAddr) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, _) = tokio::sync::broadcast::channel(4);
        let hold = Arc::new(tokio::sync::watch::Sender::new(false));
        let held = Arc::new(tokio::sync::watch::Sender::new(0));
        let (cuts, holding, counted) = (cut.clone(), hold.clone(), held.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut stop = cuts.subscribe();
                let (holding, counted) = (holding.clone(), counted.clone());
                tokio::spawn(async move {
                    if *holding.borrow() && is_websocket(&inbound).await {
                        counted.send_modify(|n| *n += 1);
                        let _ = holding.subscribe().wait_for(|h| !*h).await;
                    }
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = stop.recv() => {}
                    }
                });
            }
        });
        Ok(Self {
            addr,
            cut,
            hold,
            held,
        })
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        let _ = self.cut.send(());
    }

    /// From now on, new WebSocket connections (`GET /ws`) wait, unanswered, until
    /// [`Self::release_websockets`]; other requests go through.
    pub fn hold_websockets(&self) {
        self.hold.send_replace(true);
    }

    /// Forwards the WebSocket connections held back, and new ones at once.
    pub fn release_websockets(&self) {
        self.hold.send_replace(false);
    }

    /// Waits (20 s at most) until `n` WebSocket connections in all were held back.
    pub async fn websockets_held(&self, n: usize) -> Result<()> {
        let mut held = self.held.subscribe();
        tokio::time::timeout(Duration::from_secs(20), held.wait_for(|&h| h >= n))
            .await
            .with_context(|| format!("no {n} WebSocket connections held within 20 s"))??;
        Ok(())
    }
}

/// Whether a new connection's request is a WebSocket upgrade to `/ws` (read without taking it).
async fn is_websocket(stream: &tokio::net::TcpStream) -> bool {
    let mut start = [0u8; 8];
    loop {
        match stream.peek(&mut start).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if n >= start.len() => {
                return start.starts_with(b"GET /ws") && matches!(start[7], b' ' | b'?');
            }
            // The request line is still coming.
            Ok(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

/// Runs `script` in the page until it returns something truthy; returns that value.
pub async fn wait_for(client: &fantoccini::Client, what: &str, script: &str) -> Result<Value> {
    let start = Instant::now();
    loop {
        let v = client.execute(script, vec![]).await?;
        if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
            return Ok(v);
        }
        if start.elapsed() > Duration::from_secs(20) {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Runs `scenario` in a fresh headless Chromium on `url`; saves a screenshot if it fails.
pub async fn in_browser<F, Fut>(url: String, name: &str, scenario: F) -> Result<()>
where
    F: FnOnce(fantoccini::Client, String) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    use futures::FutureExt;
    let driver = start_driver().await?;
    let profile = tempfile::tempdir()?;
    let client = browser(&driver, profile.path()).await?;
    // A failed assertion panics: caught here so that it, too, leaves its screenshot and closes
    // the browser, then goes on as the panic it was.
    let outcome = std::panic::AssertUnwindSafe(scenario(client.clone(), url))
        .catch_unwind()
        .await;
    let failed = !matches!(outcome, Ok(Ok(())));
    if failed && let Ok(png) = client.screenshot().await {
        // `cargo xtask test` names the folder and lists what was written there at the end.
        let dir = std::env::var_os("GLASSBOX_E2E_SCREENSHOT_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}-failure.png"));
        let _ = std::fs::write(&path, png);
        eprintln!("screenshot of the failure: {}", path.display());
    }
    let closed = client.close().await;
    match outcome {
        Ok(result) => {
            result?;
            closed?;
            Ok(())
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
