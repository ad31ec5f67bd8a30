//! Tools: what the model is offered, the calls it makes, and what it is given back.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool the model may call (JSON-schema parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// A complete tool call streamed back by the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model produced them (a JSON text).
    pub arguments: String,
}

/// The result of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// Images the tool returned (each provider takes them its own way).
    #[serde(skip)]
    pub images: Vec<ToolImage>,
}

/// One round of tool calls inside a reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolRound {
    /// Byte offset in the reply's `content` where the model made the calls (the text before it
    /// streamed in this and earlier rounds).
    pub at: u32,
    pub exchanges: Vec<ToolExchange>,
}

/// A tool call the model made and the result it was given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolExchange {
    pub call: ToolCall,
    /// The text the model was given back.
    pub result: String,
    /// The call failed (unknown tool, bad arguments, a tool error); the model saw why.
    #[serde(default)]
    pub is_error: bool,
    /// One line for the reply, e.g. `set_relevant_context · files · merged 2`.
    pub line: String,
    /// Images the tool returned, given to the model beside `result` (which names them) in the
    /// reply that made the call; not stored or sent to clients.
    #[serde(skip)]
    pub images: Vec<ToolImage>,
}

/// An image a tool returned, as the model is given it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolImage {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub base64: std::sync::Arc<str>,
    /// What it costs the reply's model (its provider's rule for its size).
    pub tokens: u32,
}

impl ToolExchange {
    /// The result as it goes back to the model.
    pub fn result(&self) -> ToolResult {
        ToolResult {
            call_id: self.call.id.clone(),
            name: self.call.name.clone(),
            content: self.result.clone(),
            is_error: self.is_error,
            images: self.images.clone(),
        }
    }
}
