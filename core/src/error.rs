//! The closed set of error codes shared by the wire, the HTTP API and the widget.

use serde::{Deserialize, Serialize};

/// A stable, machine-readable error code. Each maps to one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ErrorCode {
    /// The frame or body is not valid JSON.
    MalformedJson,
    /// The frame's `type` is not one we know.
    UnknownFrameType,
    /// The JSON is well formed but a field is missing or of the wrong type.
    InvalidFrame,
    /// The frame or request body is larger than allowed.
    FrameTooLarge,
    /// The message text is empty or too long.
    InvalidMessage,
    /// Page context is larger than allowed (serialized bytes).
    ContextTooLarge,
    /// Page context has too many keys or is nested too deeply.
    ContextInvalid,
    /// What must be sent (preserved messages, the message itself) does not fit the model's window;
    /// the provider was not called.
    ContextOverflow,
    /// Compression settings out of range.
    InvalidSettings,
    /// A topic filter names a label that is not one of the session's topics, or too many labels.
    InvalidFilter,
    /// An answer to an approval that cannot be used: a decision only the server makes, or a
    /// reason over 1,000 characters.
    InvalidApproval,
    /// A context-set change breaks a rule (set name, item length or characters, 10 per set, 50 in
    /// all); nothing was saved.
    InvalidContextSet,
    /// Too many attachments, or an attachment field is too long or not allowed.
    InvalidAttachment,
    /// A file is larger than its kind allows, or the session's files would pass their limit.
    FileTooLarge,
    /// A file is not an accepted image or text file, or its bytes are not what its type says.
    FileTypeNotAllowed,
    /// `clientMessageId` is malformed.
    InvalidClientMessageId,
    /// A `hello` frame must open the connection.
    HelloRequired,
    /// Missing or wrong session token.
    Unauthorized,
    /// The session or message does not exist (or is not yours).
    NotFound,
    /// The action does not fit the current state (e.g. retrying a reply that did not fail).
    Conflict,
    /// The requested model is not allowed by this server.
    ModelNotAllowed,
    /// The requested agent is not configured on this server.
    UnknownAgent,
    /// The request came from a web page whose origin this server does not allow.
    OriginNotAllowed,
    /// A JSON route was sent a body that is not `application/json`.
    UnsupportedMediaType,
    /// The session's or the server's daily token budget is spent; the provider was not called.
    BudgetExhausted,
    /// The server keeps as many bytes of attached files as it may; no file is stored until
    /// sessions or files are deleted.
    StorageFull,
    /// The provider answered with an error.
    ProviderError,
    /// The provider did not answer in time.
    ProviderTimeout,
    /// The provider could not be reached.
    ProviderUnavailable,
    /// The provider or this server is rate limiting.
    RateLimited,
    /// The reply was cancelled because every client went away.
    Cancelled,
    /// The embedding model is loading, switched off or failed to load.
    EmbeddingsUnavailable,
    /// This server has too much queued work; try again shortly.
    Overloaded,
    /// Something failed inside the server; details are in its log.
    Internal,
}

impl ErrorCode {
    /// The code as it is written on the wire (`provider_error`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The HTTP status this code maps to.
    pub fn http_status(self) -> u16 {
        use ErrorCode::*;
        match self {
            MalformedJson | UnknownFrameType | InvalidFrame | InvalidMessage | HelloRequired => 400,
            InvalidAttachment | InvalidClientMessageId => 422,
            FrameTooLarge | ContextTooLarge | ContextOverflow | FileTooLarge => 413,
            ContextInvalid | InvalidSettings | InvalidContextSet | InvalidFilter
            | InvalidApproval => 422,
            Unauthorized => 401,
            NotFound | UnknownAgent => 404,
            Conflict => 409,
            ModelNotAllowed | OriginNotAllowed => 403,
            UnsupportedMediaType | FileTypeNotAllowed => 415,
            BudgetExhausted => 402,
            StorageFull => 507,
            ProviderError => 502,
            ProviderUnavailable => 503,
            ProviderTimeout => 504,
            RateLimited | Overloaded => 429,
            EmbeddingsUnavailable => 503,
            Cancelled => 499,
            Internal => 500,
        }
    }

    /// Whether the same action may succeed when repeated.
    pub fn retryable(self) -> bool {
        use ErrorCode::*;
        matches!(
            self,
            ProviderError
                | ContextOverflow
                | ProviderTimeout
                | ProviderUnavailable
                | RateLimited
                | Overloaded
                | Cancelled
                | Internal
        )
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;
    use strum::IntoEnumIterator;

    #[test]
    fn each_code_is_named_as_on_the_wire() {
        for code in ErrorCode::iter() {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
    }

    /// The retryable codes (docs/protocol.md lists the same).
    #[test]
    fn retryable_codes() {
        let retryable: Vec<String> = ErrorCode::iter()
            .filter(|c| c.retryable())
            .map(|c| {
                serde_json::to_value(c)
                    .unwrap()
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            retryable,
            [
                "context_overflow",
                "provider_error",
                "provider_timeout",
                "provider_unavailable",
                "rate_limited",
                "cancelled",
                "overloaded",
                "internal",
            ]
        );
    }
}
