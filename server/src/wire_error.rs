//! How a failure reaches clients. Each service has its own error enum, which says here what a
//! client is told: its wire code and, for limits, when to try again. [`ToWire::to_wire`] makes the
//! `WireError` (a WebSocket `error` frame, a REST body) of every service error; failures whose code
//! is `internal` are logged and sent without detail. (Three events that are no service's error
//! write theirs where they happen: docs/architecture.md, Errors.)

use std::time::Duration;

use glassbox_core::ErrorCode;
use glassbox_core::wire::WireError;

use crate::embed::service::EmbedServiceError;
use crate::identity::IdentityError;
use crate::providers::ProviderError;
use crate::rate_limits::RateLimited;
use crate::storage::StorageError;

/// An error a client may be told about.
pub trait ToWire: std::error::Error {
    /// The wire code (and with it the HTTP status).
    fn code(&self) -> ErrorCode;

    /// For a limit: how long until the same action may succeed.
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// The error as sent to clients.
    fn to_wire(&self) -> WireError {
        let code = self.code();
        let message = if code == ErrorCode::Internal {
            tracing::error!(error = %self, source = ?std::error::Error::source(self), "internal error");
            "internal error; see the server log".to_owned()
        } else {
            self.to_string()
        };
        let wire = WireError::new(code, message);
        let retry_after = self.retry_after();
        WireError {
            retry_after_ms: retry_after.map(|d| d.as_millis() as u64),
            // Whatever says when to try again may succeed then (the daily budget at midnight).
            retryable: wire.retryable || retry_after.is_some(),
            ..wire
        }
    }
}

impl ToWire for StorageError {
    fn code(&self) -> ErrorCode {
        ErrorCode::Internal
    }
}

impl ToWire for ProviderError {
    fn code(&self) -> ErrorCode {
        ProviderError::code(self)
    }
}

/// Every way a claimed user is not verified is `unauthorized`.
impl ToWire for IdentityError {
    fn code(&self) -> ErrorCode {
        ErrorCode::Unauthorized
    }
}

impl ToWire for RateLimited {
    fn code(&self) -> ErrorCode {
        ErrorCode::RateLimited
    }

    fn retry_after(&self) -> Option<Duration> {
        Some(self.retry_after)
    }
}

impl ToWire for EmbedServiceError {
    fn code(&self) -> ErrorCode {
        match self {
            EmbedServiceError::Unavailable(_) => ErrorCode::EmbeddingsUnavailable,
            EmbedServiceError::Overloaded => ErrorCode::Overloaded,
            EmbedServiceError::BadInput(_) => ErrorCode::InvalidMessage,
            EmbedServiceError::Engine(_) | EmbedServiceError::Storage(_) => ErrorCode::Internal,
        }
    }
}
