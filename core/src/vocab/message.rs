//! Who wrote a message, where it is in its life, and what it cost.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    #[default]
    User,
    Assistant,
    /// The user's decisions about tool calls of a reply (`ChatMessage::approvals`); never sent to
    /// the model (the calls' results say what happened).
    Approval,
}

impl Role {
    /// Stable lowercase name, as stored and sent (the serde and strum names are the same);
    /// `str::parse` reads it back.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Lifecycle of a message.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MessageStatus {
    #[default]
    Complete,
    Streaming,
    /// The reply stopped early; `content` holds what arrived and `error` says why. Retryable.
    Failed,
    /// The user stopped the reply (`stop`): `content` holds what had streamed, the receipt and
    /// the usage spent are kept, no error. Retryable; its text reaches the model as a reply's.
    Stopped,
}

impl MessageStatus {
    /// Stable lowercase name, as stored and sent (the serde and strum names are the same);
    /// `str::parse` reads it back.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Token usage as reported by the provider (or, when `counted`, by our count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The provider reported nothing (a reply stopped mid-stream): these are the server's counts
    /// of what went and what came back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_read_back_and_match_the_wire() {
        for role in [Role::User, Role::Assistant] {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        for status in [
            MessageStatus::Complete,
            MessageStatus::Streaming,
            MessageStatus::Failed,
            MessageStatus::Stopped,
        ] {
            assert_eq!(status.as_str().parse::<MessageStatus>(), Ok(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert!("User".parse::<Role>().is_err());
    }
}
