//! The tools and the MCP handler that offers them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::notes::Notes;
use crate::units;

/// The request `_meta` key a client sets to scope notes (Glassbox sends an opaque id of the chat
/// session; without it, notes belong to the MCP connection).
pub const SESSION_META_KEY: &str = "glassbox/session";

/// Tools only the tests are offered.
const TEST_TOOLS: &[&str] = &["slow", "crash", "big", "reveal_tool", "late_tool", "echo"];

/// How the server runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Offer the test tools too (and list tools in pages of three, to exercise cursors).
    pub test_tools: bool,
}

/// One MCP connection's handler.
#[derive(Clone)]
pub struct DemoServer {
    options: Options,
    notes: Arc<Notes>,
    /// The scope of notes when the client sends none: this connection.
    connection: Arc<str>,
    /// Whether `late_tool` was revealed (test tools).
    revealed: Arc<AtomicBool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct TimeArgs {
    /// An IANA time zone, such as "Europe/Paris" or "America/New_York"; "UTC" when left out.
    #[serde(default)]
    pub zone: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ConvertArgs {
    /// The amount to convert.
    pub value: f64,
    /// The unit it is in, such as "km", "lb", "°F", "gallon", "mph".
    pub from: String,
    /// The unit wanted.
    pub to: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct NoteArgs {
    /// What to remember (up to 2000 characters).
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
pub struct SlowArgs {
    /// How long the call takes, in milliseconds.
    pub ms: u64,
    /// Report progress this often (milliseconds); none when left out.
    #[serde(default)]
    pub progress_every_ms: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct BigArgs {
    /// How many bytes of text to return.
    pub bytes: usize,
}

#[derive(Deserialize, JsonSchema)]
pub struct EchoArgs {
    /// Returned as it came.
    pub text: String,
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

fn refusal(t: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(t)])
}

#[tool_router]
impl DemoServer {
    /// A handler sharing `notes` with the server's other connections.
    pub fn new(options: Options, notes: Arc<Notes>) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self {
            options,
            notes,
            connection: format!("connection-{}", NEXT.fetch_add(1, Ordering::Relaxed)).into(),
            revealed: Arc::default(),
        }
    }

    /// The tools this connection offers now.
    fn router(&self) -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        if !self.options.test_tools {
            for name in TEST_TOOLS {
                router.remove_route(name);
            }
        } else if !self.revealed.load(Ordering::Relaxed) {
            router.remove_route("late_tool");
        }
        router
    }

    fn scope(&self, ctx: &RequestContext<RoleServer>) -> String {
        match ctx.meta.get(SESSION_META_KEY).and_then(|v| v.as_str()) {
            Some(session) => format!("session:{session}"),
            None => self.connection.to_string(),
        }
    }

    #[tool(
        title = "Current time",
        description = "The current date and time in a time zone (IANA name, such as Europe/Paris).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn current_time(&self, Parameters(args): Parameters<TimeArgs>) -> CallToolResult {
        let zone = args.zone.unwrap_or_else(|| "UTC".to_owned());
        match jiff::Timestamp::now().in_tz(&zone) {
            Ok(now) => text(format!(
                "{} ({zone}, UTC{})",
                now.strftime("%A %-d %B %Y, %H:%M:%S"),
                now.strftime("%:z")
            )),
            Err(_) => refusal(format!(
                "unknown time zone {zone:?}; use an IANA name such as Europe/Paris"
            )),
        }
    }

    #[tool(
        title = "Convert units",
        description = "Converts an amount between units of length, mass, volume, speed, area or temperature.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn convert_units(&self, Parameters(args): Parameters<ConvertArgs>) -> CallToolResult {
        match units::convert(args.value, &args.from, &args.to) {
            Ok(v) => text(format!(
                "{} {} = {} {}",
                args.value,
                args.from,
                round(v),
                args.to
            )),
            Err(e) => refusal(e.to_string()),
        }
    }

    #[tool(
        title = "Add a note",
        description = "Remembers a short note for this conversation.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn add_note(
        &self,
        Parameters(args): Parameters<NoteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        if args.text.trim().is_empty() {
            return refusal("the note is empty");
        }
        let count = self.notes.add(&self.scope(&ctx), &args.text);
        text(format!(
            "Noted ({count} note{} in this conversation).",
            if count == 1 { "" } else { "s" }
        ))
    }

    #[tool(
        title = "List notes",
        description = "Lists the notes remembered for this conversation, oldest first.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_notes(
        &self,
        Parameters(_): Parameters<NoArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let notes = self.notes.list(&self.scope(&ctx));
        if notes.is_empty() {
            return text("No notes yet.");
        }
        text(
            notes
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{}. {n}", i + 1))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    #[tool(description = "Test tool: waits `ms` milliseconds, reporting progress if asked.")]
    async fn slow(
        &self,
        Parameters(args): Parameters<SlowArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let token = ctx.meta.get_progress_token();
        let total = Duration::from_millis(args.ms);
        let started = tokio::time::Instant::now();
        let step = args.progress_every_ms.map(Duration::from_millis);
        let mut done = 0u32;
        loop {
            let left = total.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            let wait = step.map_or(left, |s| s.min(left));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = ctx.ct.cancelled() => return refusal("cancelled"),
            }
            if let (Some(token), Some(_)) = (&token, step) {
                done += 1;
                let _ = ctx
                    .peer
                    .notify_progress(ProgressNotificationParam::new(
                        token.clone(),
                        f64::from(done),
                    ))
                    .await;
            }
        }
        text(format!("waited {} ms", args.ms))
    }

    #[tool(description = "Test tool: ends the server's process at once.")]
    async fn crash(&self, Parameters(_): Parameters<NoArgs>) -> CallToolResult {
        std::process::exit(3);
    }

    #[tool(description = "Test tool: returns `bytes` bytes of text.")]
    async fn big(&self, Parameters(args): Parameters<BigArgs>) -> CallToolResult {
        let line = "0123456789abcdef".repeat(4) + "\n";
        let mut out = line.repeat(args.bytes.min(4 << 20) / line.len() + 1);
        out.truncate(args.bytes.min(4 << 20));
        text(out)
    }

    #[tool(
        description = "Test tool: makes `late_tool` appear and tells the client the list changed."
    )]
    async fn reveal_tool(
        &self,
        Parameters(_): Parameters<NoArgs>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        self.revealed.store(true, Ordering::Relaxed);
        match peer.notify_tool_list_changed().await {
            Ok(()) => text("late_tool is there now"),
            Err(e) => refusal(format!("could not tell the client: {e}")),
        }
    }

    #[tool(description = "Test tool: one that appears only after reveal_tool.")]
    async fn late_tool(&self, Parameters(_): Parameters<NoArgs>) -> CallToolResult {
        text("late_tool ran")
    }

    #[tool(description = "Test tool: returns its text.")]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> CallToolResult {
        text(args.text)
    }
}

/// `v` without floating-point noise (at most 6 significant decimals).
fn round(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// How many tools one `tools/list` page holds in test mode (so clients must follow cursors).
const TEST_PAGE: usize = 3;

#[tool_handler(router = self.router())]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "glassbox-mcp-demo",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("Harmless demo tools: the time in a zone, unit conversion, notes.")
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.router().list_all();
        if !self.options.test_tools {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let start: usize = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let end = (start + TEST_PAGE).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start.min(end)..end].to_vec());
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }
}
