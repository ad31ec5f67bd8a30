//! Approvals: what a user decided about one tool call a session's permission (`ask`) held back.

use serde::{Deserialize, Serialize};

/// A decision about one tool call: the user's (`allow`, `deny`, `allow_session`) or the server's
/// for them (`timed_out`: no answer in time; `cancelled`: the reply ended first). Only `allow`
/// and `allow_session` run the call.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ApprovalDecision {
    /// Run this call.
    Allow,
    /// Do not run it (the model is told, with the reason when one is given).
    Deny,
    /// Run it, and calls of the same tool (as it is defined now) for the rest of the session.
    AllowSession,
    /// Nobody answered in time: not run.
    TimedOut,
    /// The reply ended before an answer: not run.
    Cancelled,
}

impl ApprovalDecision {
    /// Whether the call runs.
    pub fn allows(self) -> bool {
        matches!(
            self,
            ApprovalDecision::Allow | ApprovalDecision::AllowSession
        )
    }

    /// The decision as the history says it ("Allowed", "Denied", …).
    pub fn in_words(self) -> &'static str {
        match self {
            ApprovalDecision::Allow => "Allowed",
            ApprovalDecision::AllowSession => "Allowed for this session",
            ApprovalDecision::Deny => "Denied",
            ApprovalDecision::TimedOut => "Not answered in time",
            ApprovalDecision::Cancelled => "Cancelled",
        }
    }

    /// Whether a client may send it (the others are the server's).
    pub fn is_users(self) -> bool {
        matches!(
            self,
            ApprovalDecision::Allow | ApprovalDecision::Deny | ApprovalDecision::AllowSession
        )
    }
}

/// One decided tool call, as an `approval` message keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallApproval {
    /// The server's id of the approval.
    pub approval_id: String,
    /// The reply that made the call.
    pub message_id: String,
    /// The provider's id of the call.
    pub call_id: String,
    /// The MCP server and its own name for the tool.
    pub server: String,
    pub tool: String,
    /// The call's arguments, as the model wrote them (JSON text).
    pub arguments: String,
    pub decision: ApprovalDecision,
    /// The user's reason for a denial (the model is told it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
