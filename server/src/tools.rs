//! Tools the model may call while it answers, behind a small trait so other sources (MCP servers)
//! can join: the registry changes while the server runs, and each tool is offered to everyone, to
//! one agent or to one session ([`ToolScope`]); a turn takes the [`ToolSet`] of its agent and
//! session when it starts and keeps it through its rounds. Whatever goes wrong — an unknown tool, arguments that are not JSON
//! or do not fit the schema, a failing tool — becomes an error result the model reads, never a
//! failed reply.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use glassbox_core::context::sets::{
    self, ContextSetError, GetContextArgs, MergeMode, SetContextArgs,
};
use glassbox_core::vocab::ToolExchange;
use glassbox_core::vocab::{ToolCall, ToolDefinition};
use serde_json::Value;
use sha2::Digest;
use thiserror::Error;

use crate::approvals::{Approvals, Subject, not_run_text};
use crate::context_sets::{self, ContextSetsError};
use crate::hub::Hub;
use crate::storage::Store;

/// Longest tool result sent back to the model, in bytes.
pub const MAX_RESULT_BYTES: usize = 16 * 1024;

/// Where a tool runs: the session of the reply that called it.
#[derive(Clone, Copy)]
pub struct ToolCtx<'a> {
    pub store: &'a Store,
    pub hub: &'a Hub,
    /// The reply that calls it.
    pub reply_id: &'a str,
    /// Where calls wait for the user's yes (the session's permission is `ask`).
    pub approvals: &'a Approvals,
    /// How long a call waits for that yes.
    pub approval_timeout: std::time::Duration,
    /// Tokens of a text in the reply's vocabulary (a tool definition's cost in the dialog).
    pub count: &'a (dyn Fn(&str) -> u32 + Sync),
    /// The reply's model (what an image a tool returns costs it).
    pub model: &'a str,
    /// Cancelled when the user stops the reply: a call not run yet never runs, one waiting for
    /// approval or running is given up (its result says so).
    pub stop: &'a tokio_util::sync::CancellationToken,
    /// Where calls are counted, by server.
    pub metrics: &'a crate::metrics::Metrics,
}

/// What the model is told of a call the user's stop prevented or cut short (it may have started).
const STOPPED: &str = "stopped: the user stopped the reply before this call finished (it may not have run, or only in part)";

/// A successful tool run.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// The collapsed line in the reply (after the tool's name).
    pub line: String,
    /// Images for the model beside `text` (which names them).
    pub images: Vec<glassbox_core::vocab::ToolImage>,
}

/// Why a tool run failed; the model reads the message.
#[derive(Debug, Error)]
pub enum ToolError {
    #[error("arguments are not valid JSON: {0}")]
    NotJson(String),
    #[error("arguments do not match the tool's schema: {0}")]
    Schema(String),
    #[error(transparent)]
    ContextSet(#[from] ContextSetError),
    #[error("the tool failed inside the server; try again later")]
    Internal,
    /// The tool ran and reported a failure (its words).
    #[error("the tool reported a failure: {0}")]
    Failed(String),
    /// The tool's server refused the call (its words).
    #[error("the tool's server refused the call: {0}")]
    Server(String),
    /// No answer in time; the server was told to cancel the call.
    #[error("the call timed out after {} s and was cancelled", .0.as_secs_f32())]
    TimedOut(std::time::Duration),
    /// The tool's server cannot be reached now.
    #[error("the tool's server is unavailable: {0}")]
    Unavailable(String),
}

impl From<ContextSetsError> for ToolError {
    fn from(e: ContextSetsError) -> Self {
        match e {
            ContextSetsError::Invalid(e) => ToolError::ContextSet(e),
            ContextSetsError::Storage(e) => {
                tracing::error!(error = %e, "tool failed");
                ToolError::Internal
            }
        }
    }
}

/// A tool the model can call.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (the definition's `name`).
    fn name(&self) -> &str;
    /// Name, description and JSON-schema parameters, as offered to the model.
    fn definition(&self) -> ToolDefinition;
    /// The MCP server it comes from (empty for the server's own tools).
    fn server(&self) -> &str {
        ""
    }
    /// What the reply's collapsed line calls it (`server.tool` for an MCP tool).
    fn label(&self) -> String {
        self.name().to_owned()
    }
    /// What the approval dialog shows of it: by default its name and description, with no server,
    /// and a grant keyed on its whole definition.
    fn subject(&self) -> Subject {
        let definition = self.definition();
        let json = serde_json::to_string(&definition).unwrap_or_default();
        let digest = sha2::Sha256::digest(json.as_bytes());
        Subject {
            server: String::new(),
            tool: definition.name.clone(),
            title: None,
            description: definition.description,
            annotations: None,
            definition_key: format!("{}:{}", definition.name, hex::encode(&digest[..12])),
            tokens: 0,
        }
    }
    /// The agent item it is (MCP tools, chosen per request like rules and references); `None`
    /// for a tool offered whenever tools are (the built-in ones).
    fn item(&self) -> Option<&Arc<crate::agents::Item>> {
        None
    }
    /// Whether calls of it may run at the same time as the round's other calls. Tools that read or
    /// change the session's state (its context sets) run one after another, in call order, so a
    /// round that sets and then gets sees its own change.
    fn concurrent(&self) -> bool {
        false
    }
    /// Whether a session whose tool permission is `ask` must ask the user before a call runs.
    /// Tools that act beyond the session (MCP servers) ask; the built-in ones only read or change
    /// the session's own context sets, which the user sees and changes in the footer, and do not.
    fn asks(&self) -> bool {
        true
    }
    /// Runs the tool with the parsed arguments.
    fn call<'a>(
        &'a self,
        ctx: ToolCtx<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// Who a tool is offered to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolScope {
    /// Every agent and session.
    Everyone,
    /// The sessions of one agent.
    Agent(String),
    /// One session.
    Session(String),
}

/// The tools the server knows, each with its scope. Clones share one registry; it changes while
/// the server runs (tools added and removed), and turns already under way keep their [`ToolSet`].
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<RwLock<Vec<Scoped>>>,
}

/// A tool and who it is offered to.
type Scoped = (ToolScope, Arc<dyn Tool>);

impl ToolRegistry {
    /// The built-in tools for everyone: the session's context sets.
    pub fn builtin() -> Self {
        let registry = Self::default();
        registry.add(ToolScope::Everyone, Arc::new(SetRelevantContext));
        registry.add(ToolScope::Everyone, Arc::new(GetRelevantContext));
        registry
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Scoped>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Scoped>> {
        self.tools.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Offers `tool` to `scope`, replacing a tool of the same name there.
    pub fn add(&self, scope: ToolScope, tool: Arc<dyn Tool>) {
        let mut tools = self.write();
        tools.retain(|(s, t)| !(s == &scope && t.name() == tool.name()));
        tools.push((scope, tool));
    }

    /// Withdraws the tool `name` from `scope`; false when it was not offered there.
    pub fn remove(&self, scope: &ToolScope, name: &str) -> bool {
        let mut tools = self.write();
        let before = tools.len();
        tools.retain(|(s, t)| !(s == scope && t.name() == name));
        tools.len() != before
    }

    /// Withdraws every tool of `scope` (a session deleted, an agent's tool server gone).
    pub fn clear(&self, scope: &ToolScope) {
        self.write().retain(|(s, _)| s != scope);
    }

    /// Replaces every tool of `scope` with `tools`, at once (an agent's MCP tools changed).
    pub fn replace(&self, scope: ToolScope, tools: Vec<Arc<dyn Tool>>) {
        let mut all = self.write();
        all.retain(|(s, _)| s != &scope);
        all.extend(tools.into_iter().map(|t| (scope.clone(), t)));
    }

    /// The items of the tools offered to `agent`'s sessions (its MCP servers' tools).
    pub fn agent_items(&self, agent: &str) -> Vec<Arc<crate::agents::Item>> {
        self.read()
            .iter()
            .filter(|(s, _)| matches!(s, ToolScope::Agent(a) if a == agent))
            .filter_map(|(_, t)| t.item().cloned())
            .collect()
    }

    /// The tools offered to `agent`'s sessions that are items (its MCP servers' tools).
    pub fn agent_tools(&self, agent: &str) -> Vec<Arc<dyn Tool>> {
        self.read()
            .iter()
            .filter(|(s, t)| matches!(s, ToolScope::Agent(a) if a == agent) && t.item().is_some())
            .map(|(_, t)| Arc::clone(t))
            .collect()
    }

    /// The tools a turn of `session_id` (of `agent`) is offered, in the order they were added;
    /// where names collide, the narrowest scope's tool wins (session, then agent, then everyone).
    pub fn for_turn(&self, agent: Option<&str>, session_id: &str) -> ToolSet {
        let rank = |scope: &ToolScope| match scope {
            ToolScope::Session(s) if s == session_id => Some(2),
            ToolScope::Agent(a) if Some(a.as_str()) == agent => Some(1),
            ToolScope::Everyone => Some(0),
            _ => None,
        };
        let tools = self.read();
        let offered: Vec<(u8, &Arc<dyn Tool>)> = tools
            .iter()
            .filter_map(|(scope, tool)| rank(scope).map(|r| (r, tool)))
            .collect();
        let chosen = offered
            .iter()
            .filter(|(r, tool)| {
                !offered
                    .iter()
                    .any(|(other, t)| other > r && t.name() == tool.name())
            })
            .map(|(_, tool)| Arc::clone(tool))
            .collect();
        ToolSet::new(chosen)
    }
}

/// The tools one turn is offered; fixed for the turn, so its rounds and its receipt agree.
#[derive(Clone)]
pub struct ToolSet {
    tools: Vec<Arc<dyn Tool>>,
    /// Whether calls of tools that ask wait for the user's yes (the permission is `ask`).
    ask: bool,
}

impl ToolSet {
    /// A set of `tools`.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        if cfg!(debug_assertions) {
            for tool in &tools {
                debug_assert_eq!(
                    tool.name(),
                    tool.definition().name,
                    "a tool's name is its definition's"
                );
            }
        }
        Self { tools, ask: false }
    }

    /// The set whose calls of tools that ask ([`Tool::asks`]) wait for the user's yes.
    pub fn asking(mut self) -> Self {
        self.ask = true;
        self
    }

    /// The set without the item tools `items` (a request's chosen items) does not hold; tools
    /// that are not items (the built-in ones) stay.
    pub fn chosen(self, items: &[glassbox_core::context::items::ItemRef]) -> Self {
        let tools: Vec<_> = self
            .tools
            .into_iter()
            .filter(|t| t.item().is_none_or(|i| items.contains(&i.meta.item)))
            .collect();
        Self {
            ask: self.ask,
            ..Self::new(tools)
        }
    }

    /// The name the tool item `item` is offered by, when the set holds it.
    pub fn offered_name(&self, item: &glassbox_core::context::items::ItemRef) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t.item().is_some_and(|i| &i.meta.item == item))
            .map(|t| t.name())
    }

    /// The set with only the tools a request offers (`definitions`), and `extra` besides (a
    /// turn's own tools).
    pub fn only(&self, definitions: &[ToolDefinition], extra: Vec<Arc<dyn Tool>>) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|t| definitions.iter().any(|d| d.name == t.name()))
            .cloned()
            .chain(
                extra
                    .into_iter()
                    .filter(|t| definitions.iter().any(|d| d.name == t.name())),
            )
            .collect();
        Self {
            ask: self.ask,
            ..Self::new(tools)
        }
    }

    /// The definitions of the tools that are not items (offered whenever tools are).
    pub fn builtin_definitions(&self) -> impl Iterator<Item = ToolDefinition> + '_ {
        self.tools
            .iter()
            .filter(|t| t.item().is_none())
            .map(|t| t.definition())
    }

    /// Whether any tool is offered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// What the model is offered.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition()).collect()
    }

    /// Runs a round's calls and returns their exchanges in call order: together when every tool
    /// called may run concurrently, else one after another.
    pub async fn run_round(&self, ctx: ToolCtx<'_>, calls: Vec<ToolCall>) -> Vec<ToolExchange> {
        let together = calls.iter().all(|c| {
            self.tools
                .iter()
                .find(|t| t.name() == c.name)
                .is_none_or(|t| t.concurrent())
        });
        if together {
            return futures::future::join_all(calls.into_iter().map(|c| self.run(ctx, c))).await;
        }
        let mut exchanges = Vec::with_capacity(calls.len());
        for call in calls {
            exchanges.push(self.run(ctx, call).await);
        }
        exchanges
    }

    /// Under `ask`, waits for the user's answer about a call of a tool that asks: `None` when it
    /// may run, else what the model is told instead.
    async fn approve(&self, ctx: ToolCtx<'_>, tool: &dyn Tool, call: &ToolCall) -> Option<String> {
        if !self.ask || !tool.asks() {
            return None;
        }
        let mut subject = tool.subject();
        subject.tokens =
            (ctx.count)(&serde_json::to_string(&tool.definition()).unwrap_or_default());
        let (decision, reason) = ctx
            .approvals
            .ask(ctx.hub, ctx.reply_id, call, &subject, ctx.approval_timeout)
            .await;
        (!decision.allows())
            .then(|| not_run_text(decision, reason.as_deref(), ctx.approval_timeout))
    }

    /// Runs one call and returns the exchange; failures are error results.
    pub async fn run(&self, ctx: ToolCtx<'_>, call: ToolCall) -> ToolExchange {
        let tool = self.tools.iter().find(|t| t.name() == call.name);
        let outcome = match tool {
            None => Err(format!(
                "unknown tool {:?}; available: {}",
                call.name,
                self.tools
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(tool) => {
                let raw = if call.arguments.trim().is_empty() {
                    "{}"
                } else {
                    call.arguments.as_str()
                };
                match serde_json::from_str::<Value>(raw) {
                    Err(e) => Err(ToolError::NotJson(e.to_string()).to_string()),
                    // Dropping the approval's wait withdraws it (`cancelled`).
                    Ok(args) => tokio::select! {
                        biased;
                        () = ctx.stop.cancelled() => Err(STOPPED.to_owned()),
                        r = async {
                            match self.approve(ctx, tool.as_ref(), &call).await {
                                Some(refused) => Err(refused),
                                None => {
                                    let started = std::time::Instant::now();
                                    let out = tool.call(ctx, args).await;
                                    ctx.metrics.tool_call(tool.server(), started.elapsed(), out.is_err());
                                    out.map_err(|e| e.to_string())
                                }
                            }
                        } => r,
                    },
                }
            }
        };
        let name: String = tool
            .map_or_else(|| call.name.clone(), |t| t.label())
            .chars()
            .take(64)
            .collect();
        let (mut result, is_error, line, images) = match outcome {
            Ok(out) => (
                out.text,
                false,
                format!("{name} · {}", out.line),
                out.images,
            ),
            Err(message) => {
                tracing::info!(tool = %name, error = %message, "tool call answered with an error");
                let line = format!("{name} · error");
                (format!("Error: {message}"), true, line, Vec::new())
            }
        };
        if result.len() > MAX_RESULT_BYTES {
            result.truncate(result.floor_char_boundary(MAX_RESULT_BYTES));
            result.push_str("\n[truncated]");
        }
        ToolExchange {
            call,
            result,
            is_error,
            line,
            images,
        }
    }
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::Schema(e.to_string()))
}

/// `set_relevant_context(setName, items, mode)`.
struct SetRelevantContext;

impl Tool for SetRelevantContext {
    fn asks(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        sets::SET_TOOL
    }

    fn definition(&self) -> ToolDefinition {
        sets::set_tool()
    }

    fn call<'a>(
        &'a self,
        ctx: ToolCtx<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args: SetContextArgs = parse(args)?;
            let context = context_sets::change(ctx.store, ctx.hub, &args).await?;
            let verb = match (args.mode, args.items.is_empty()) {
                (MergeMode::Replace, true) => "cleared".to_owned(),
                (MergeMode::Replace, false) => format!("set {}", args.items.len()),
                (MergeMode::Merge, _) => format!("merged {}", args.items.len()),
            };
            Ok(ToolOutput {
                text: sets::set_result_text(&context, &args),
                line: format!("{} · {verb}", args.set_name),
                images: Vec::new(),
            })
        })
    }
}

/// `get_relevant_context(setName?)`.
struct GetRelevantContext;

impl Tool for GetRelevantContext {
    fn asks(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        sets::GET_TOOL
    }

    fn definition(&self) -> ToolDefinition {
        sets::get_tool()
    }

    fn call<'a>(
        &'a self,
        ctx: ToolCtx<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args: GetContextArgs = parse(args)?;
            let settings = ctx
                .store
                .settings(&ctx.hub.session_id)
                .await
                .map_err(ContextSetsError::from)?;
            let text = sets::get_result_text(&settings.context, args.set_name.as_deref());
            let line = args.set_name.unwrap_or_else(|| "all".to_owned());
            Ok(ToolOutput {
                text,
                line,
                images: Vec::new(),
            })
        })
    }
}
