//! One MCP server of one agent, kept connected in the background: connect (a child process over
//! stdio, or streamable HTTP), list its tools (following cursors), list them again when the server
//! says they changed, and when the connection ends, say why and connect again after a backoff.
//! Chat never waits for any of it: a turn takes whatever tools are listed when it starts, and each
//! step first waits, a bounded time, for turns: starting the server for a quiet spell
//! ([`crate::background::after_quiet`]), listing its tools while a turn is running
//! ([`crate::background::after_turns`]); and a stdio server's process starts at the lowest
//! priority until it is ready ([`super::start_priority`]).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool as McpToolDef,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::start_priority;
use crate::agents::McpServerConfig;
use crate::agents::mcp_servers::Transport;

/// Longest wait for a server to connect and list its tools.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The first wait before connecting again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Longest a connecting server keeps the others waiting for their turn to connect.
const TURN: Duration = Duration::from_secs(1);
/// The longest wait before connecting again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lasted this long starts the backoff over when it ends.
const STABLE: Duration = Duration::from_secs(60);

/// Where a server stands (`/healthz` shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Connecting, or waiting to connect again.
    Connecting,
    /// Connected, with its tools listed.
    Ready { tools: usize },
    /// The last attempt failed, or the connection ended; it is tried again.
    Failed { error: String },
}

/// What the rest of the server sees of a connection.
#[derive(Clone)]
pub struct Live {
    pub status: Status,
    /// Its tools as last listed (empty unless ready).
    pub tools: Vec<McpToolDef>,
    /// Requests go through this while ready.
    pub peer: Option<Peer<RoleClient>>,
}

/// Receives the server's notifications: a changed tool list wakes the connection's task.
#[derive(Clone)]
struct Handler {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("glassbox", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        // A permit is kept when the task is busy: a change during a listing is not lost.
        self.tools_changed.notify_one();
    }
}

/// A server kept connected by a background task; dropping it (or [`Connection::stop`]) ends the
/// task and the connection (a child process is ended too).
pub struct Connection {
    pub config: McpServerConfig,
    live: Arc<RwLock<Live>>,
    stop: CancellationToken,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Connection {
    /// Starts connecting `config` in the background; `changed` is called whenever what
    /// [`Connection::live`] returns changes.
    /// Servers connect one at a time (`turns`), each for at most [`TURN`] before the next starts:
    /// several servers starting together on a small machine would compete with the first replies.
    pub fn start(
        config: McpServerConfig,
        changed: Arc<dyn Fn() + Send + Sync>,
        turns: Arc<tokio::sync::Semaphore>,
    ) -> Self {
        let live = Arc::new(RwLock::new(Live {
            status: Status::Connecting,
            tools: Vec::new(),
            peer: None,
        }));
        let stop = CancellationToken::new();
        tokio::spawn(supervise(
            config.clone(),
            live.clone(),
            stop.clone(),
            changed,
            turns,
        ));
        Self { config, live, stop }
    }

    /// Its state now.
    pub fn live(&self) -> Live {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Ends the connection and its task.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

fn set(live: &RwLock<Live>, changed: &(dyn Fn() + Send + Sync), new: Live) {
    *live.write().unwrap_or_else(|p| p.into_inner()) = new;
    changed();
}

/// Why connecting failed, in words for `/healthz` and the log.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot start {command:?}: {error}")]
    Spawn {
        command: String,
        error: std::io::Error,
    },
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("listing its tools failed: {0}")]
    List(String),
    #[error("no answer within {} s", CONNECT_TIMEOUT.as_secs())]
    Timeout,
    #[error("header {0:?} is not a valid HTTP header")]
    Header(String),
}

type Running = RunningService<RoleClient, Handler>;

/// Connects; for a stdio server, also answers its process id: the process starts at low priority
/// ([`start_priority`]) and is raised after [`start_priority::LOW_START_BOUND`] unless `starting`
/// is cancelled first (the caller raises it when ready, then cancels).
async fn connect(
    config: &McpServerConfig,
    handler: Handler,
    ct: CancellationToken,
    starting: CancellationToken,
) -> Result<(Running, Option<u32>), ConnectError> {
    match &config.transport {
        Transport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            let (transport, _) = start_priority::spawn_low(move || {
                TokioChildProcess::builder(cmd)
                    // The child's messages go to the server's log, not over the protocol.
                    .stderr(std::process::Stdio::inherit())
                    .spawn()
            })
            .await
            .map_err(|error| ConnectError::Spawn {
                command: command.clone(),
                error,
            })?;
            let pid = transport.id();
            if let Some(pid) = pid {
                tokio::spawn(async move {
                    tokio::select! {
                        () = starting.cancelled() => {}
                        () = tokio::time::sleep(start_priority::LOW_START_BOUND) => start_priority::raise(pid),
                    }
                });
            }
            let running = handler
                .serve_with_ct(transport, ct)
                .await
                .map_err(|e| ConnectError::Handshake(e.to_string()))?;
            Ok((running, pid))
        }
        Transport::Http { url, headers } => {
            // rmcp's reqwest is built without a TLS provider of its own: rustls on ring, as the
            // server's own HTTP client (only the first call installs it).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut map = std::collections::HashMap::new();
            for (name, value) in headers {
                let name = axum::http::HeaderName::try_from(name.as_str())
                    .map_err(|_| ConnectError::Header(name.clone()))?;
                let value = axum::http::HeaderValue::try_from(value.as_str())
                    .map_err(|_| ConnectError::Header(name.to_string()))?;
                map.insert(name, value);
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map),
            );
            let running = handler
                .serve_with_ct(transport, ct)
                .await
                .map_err(|e| ConnectError::Handshake(e.to_string()))?;
            Ok((running, None))
        }
    }
}

/// Connects, lists, relists on change; on an end, waits and connects again; until `stop`.
async fn supervise(
    config: McpServerConfig,
    live: Arc<RwLock<Live>>,
    stop: CancellationToken,
    changed: Arc<dyn Fn() + Send + Sync>,
    turns: Arc<tokio::sync::Semaphore>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        set(
            &live,
            &*changed,
            Live {
                status: Status::Connecting,
                tools: Vec::new(),
                peer: None,
            },
        );
        let tools_changed = Arc::new(Notify::new());
        let handler = Handler {
            tools_changed: tools_changed.clone(),
        };
        let ct = stop.child_token();
        // Cancelled (by `ct` too) once the process, if any, has its priority back.
        let starting = ct.child_token();
        let attempt = async {
            let (running, pid) = connect(&config, handler, ct.clone(), starting.clone()).await?;
            crate::background::after_turns().await;
            let tools = running
                .list_all_tools()
                .await
                .map_err(|e| ConnectError::List(e.to_string()))?;
            if let Some(pid) = pid {
                start_priority::raise(pid);
            }
            starting.cancel();
            Ok::<_, ConnectError>((running, tools))
        };
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, attempt);
        tokio::pin!(attempt);
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            r = async {
                // Its turn, kept until it is connected or `TURN` has passed.
                let turn = turns.acquire().await;
                // Background work gives way to turns, before its turn's time starts: a process
                // waits for a quiet spell (a message sent as the instance starts gets its reply
                // without a server process starting beside it), a connection over HTTP only
                // while a turn is running.
                match config.transport {
                    Transport::Stdio { .. } => crate::background::after_quiet().await,
                    Transport::Http { .. } => crate::background::after_turns().await,
                }
                tokio::select! {
                    r = &mut attempt => return r,
                    () = tokio::time::sleep(TURN) => {}
                }
                drop(turn);
                (&mut attempt).await
            } => r.unwrap_or(Err(ConnectError::Timeout)),
        };
        let error = match outcome {
            Err(e) => {
                ct.cancel();
                e.to_string()
            }
            Ok((running, tools)) => {
                let up = tokio::time::Instant::now();
                let why = serve(
                    &config,
                    running,
                    tools,
                    &live,
                    &*changed,
                    &tools_changed,
                    &stop,
                )
                .await;
                ct.cancel();
                let Some(why) = why else { return };
                if up.elapsed() >= STABLE {
                    backoff = FIRST_BACKOFF;
                }
                why
            }
        };
        tracing::warn!(server = %config.name, error = %error, retry_in_ms = backoff.as_millis() as u64, "MCP server unavailable");
        set(
            &live,
            &*changed,
            Live {
                status: Status::Failed { error },
                tools: Vec::new(),
                peer: None,
            },
        );
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Keeps a connected server's tools current until it ends (`Some(why)`) or `stop` (`None`).
async fn serve(
    config: &McpServerConfig,
    running: Running,
    tools: Vec<McpToolDef>,
    live: &RwLock<Live>,
    changed: &(dyn Fn() + Send + Sync),
    tools_changed: &Notify,
    stop: &CancellationToken,
) -> Option<String> {
    let peer = running.peer().clone();
    tracing::info!(server = %config.name, tools = tools.len(), "MCP server ready");
    let ready = |tools: Vec<McpToolDef>| Live {
        status: Status::Ready { tools: tools.len() },
        tools,
        peer: Some(peer.clone()),
    };
    set(live, changed, ready(tools));
    let ended = running.waiting();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            () = stop.cancelled() => return None,
            quit = &mut ended => {
                return Some(match quit {
                    Ok(reason) => format!("the connection ended ({reason:?})"),
                    Err(e) => format!("the connection failed: {e}"),
                });
            }
            () = tools_changed.notified() => match peer.list_all_tools().await {
                Ok(tools) => {
                    tracing::info!(server = %config.name, tools = tools.len(), "MCP server's tools changed");
                    set(live, changed, ready(tools));
                }
                Err(e) => tracing::warn!(server = %config.name, error = %e, "listing changed tools failed; the old list stays"),
            },
        }
    }
}
