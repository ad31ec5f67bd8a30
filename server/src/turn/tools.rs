//! Tools the model may call while it answers, behind a small trait so other sources (MCP servers)
//! can join the registry later. Whatever goes wrong — an unknown tool, arguments that are not JSON
//! or do not fit the schema, a failing tool — becomes an error result the model reads, never a
//! failed reply.

use std::sync::Arc;

use futures::future::BoxFuture;
use glassbox_core::context::sets::{
    self, ContextSetError, GetContextArgs, MergeMode, SetContextArgs,
};
use glassbox_core::prompt::{ToolCall, ToolDefinition};
use glassbox_core::wire::{ContextEvent, ContextReason, ServerEvent, ToolExchange};
use serde_json::Value;
use thiserror::Error;

use crate::error::AppError;
use crate::hub::Hub;
use crate::state::AppState;

/// Longest tool result sent back to the model, in bytes.
pub const MAX_RESULT_BYTES: usize = 16 * 1024;

/// Where a tool runs: the session of the reply that called it.
#[derive(Clone, Copy)]
pub struct ToolCtx<'a> {
    pub state: &'a AppState,
    pub hub: &'a Hub,
}

/// A successful tool run.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// The collapsed line in the reply (after the tool's name).
    pub line: String,
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
}

impl From<AppError> for ToolError {
    fn from(e: AppError) -> Self {
        match e {
            AppError::ContextSet(e) => ToolError::ContextSet(e),
            other => {
                tracing::error!(error = %other, "tool failed");
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
    /// Runs the tool with the parsed arguments.
    fn call<'a>(
        &'a self,
        ctx: ToolCtx<'a>,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// The tools offered with every reply.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// The definitions as JSON, serialized once (the meter counts their tokens).
    definitions_json: Arc<str>,
}

impl ToolRegistry {
    /// A registry of `tools`.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        let definitions: Vec<ToolDefinition> = tools.iter().map(|t| t.definition()).collect();
        for (tool, definition) in tools.iter().zip(&definitions) {
            debug_assert_eq!(
                tool.name(),
                definition.name,
                "a tool's name is its definition's"
            );
        }
        let definitions_json = serde_json::to_string(&definitions)
            .unwrap_or_default()
            .into();
        Self {
            tools,
            definitions_json,
        }
    }

    /// Whether any tool is offered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The definitions as the JSON whose tokens the plan counts.
    pub fn definitions_json(&self) -> &str {
        &self.definitions_json
    }

    /// The built-in tools: the session's context sets.
    pub fn builtin() -> Self {
        Self::new(vec![
            Arc::new(SetRelevantContext),
            Arc::new(GetRelevantContext),
        ])
    }

    /// What the model is offered.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition()).collect()
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
                    Ok(args) => tool.call(ctx, args).await.map_err(|e| e.to_string()),
                }
            }
        };
        let name: String = call.name.chars().take(64).collect();
        let (mut result, is_error, line) = match outcome {
            Ok(out) => (out.text, false, format!("{name} · {}", out.line)),
            Err(message) => {
                tracing::info!(tool = %name, error = %message, "tool call answered with an error");
                (format!("Error: {message}"), true, format!("{name} · error"))
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
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::Schema(e.to_string()))
}

/// `set_relevant_context(setName, items, mode)`.
struct SetRelevantContext;

impl Tool for SetRelevantContext {
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
            let context = change_context_set(ctx.state, ctx.hub, &args).await?;
            let verb = match (args.mode, args.items.is_empty()) {
                (MergeMode::Replace, true) => "cleared".to_owned(),
                (MergeMode::Replace, false) => format!("set {}", args.items.len()),
                (MergeMode::Merge, _) => format!("merged {}", args.items.len()),
            };
            Ok(ToolOutput {
                text: sets::set_result_text(&context, &args),
                line: format!("{} · {verb}", args.set_name),
            })
        })
    }
}

/// `get_relevant_context(setName?)`.
struct GetRelevantContext;

impl Tool for GetRelevantContext {
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
                .state
                .store
                .settings(&ctx.hub.session_id)
                .await
                .map_err(AppError::from)?;
            let text = sets::get_result_text(&settings.context, args.set_name.as_deref());
            let line = args.set_name.unwrap_or_else(|| "all".to_owned());
            Ok(ToolOutput { text, line })
        })
    }
}

/// Changes one context set of the hub's session (the model's tool, the host, REST), stores it and
/// tells every tab. Unknown set names are allowed and logged (likely a typo).
pub async fn change_context_set(
    state: &AppState,
    hub: &Hub,
    args: &SetContextArgs,
) -> Result<sets::ContextSets, AppError> {
    if !sets::is_known_set(&args.set_name) {
        tracing::warn!(session = %hub.session_id, set = %args.set_name, "unknown context set name (typo?)");
    }
    let (context, _) = state
        .store
        .update_settings(&hub.session_id, |s| -> Result<_, AppError> {
            s.context = sets::apply_set(&s.context, &args.set_name, &args.items, args.mode)?;
            Ok(s.context.clone())
        })
        .await?;
    hub.publish(ServerEvent::Context(ContextEvent {
        reason: ContextReason::Changed,
        context: context.clone(),
        set_name: Some(args.set_name.clone()),
    }));
    Ok(context)
}

/// Replaces all context sets of the hub's session (REST `context`), stores them, tells every tab.
pub async fn replace_context(
    state: &AppState,
    hub: &Hub,
    context: sets::ContextSets,
) -> Result<sets::ContextSets, AppError> {
    sets::validate_sets(&context)?;
    for name in context.keys().filter(|n| !sets::is_known_set(n)) {
        tracing::warn!(session = %hub.session_id, set = %name, "unknown context set name (typo?)");
    }
    let (context, _) = state
        .store
        .update_settings(&hub.session_id, |s| -> Result<_, AppError> {
            s.context = context;
            Ok(s.context.clone())
        })
        .await?;
    hub.publish(ServerEvent::Context(ContextEvent {
        reason: ContextReason::Changed,
        context: context.clone(),
        set_name: None,
    }));
    Ok(context)
}
