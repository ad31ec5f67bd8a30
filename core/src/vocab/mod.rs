//! The shared vocabulary: the plain data every layer of core speaks (who wrote a message, its
//! status, usage, attachments, page context, tool calls) and the escaping of outside text. These
//! modules import nothing else of the crate, so the protocol (`wire`) and the planning code
//! (`context`) can both use them without needing each other (docs/architecture.md).

mod approval;
mod attachment;
mod escape;
mod message;
mod tool;

pub use approval::{ApprovalDecision, ToolCallApproval};
pub use attachment::{Attachment, PageContext};
pub use escape::escape_tags;
pub use message::{MessageStatus, Role, Usage};
pub use tool::{ToolCall, ToolDefinition, ToolExchange, ToolImage, ToolResult, ToolRound};
