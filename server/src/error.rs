//! The server's one error enum: every failure maps to a wire error code, an HTTP status and a JSON body.
//! Internal details are logged, never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use glassbox_core::ErrorCode;
use glassbox_core::decode::DecodeError;
use glassbox_core::limits::InputError;
use glassbox_core::wire::{ErrorBody, WireError};
use thiserror::Error;

use crate::embed::service::EmbedServiceError;
use crate::providers::ProviderError;
use crate::storage::StorageError;

/// Anything that can go wrong while serving a request or a frame.
#[derive(Debug, Error)]
pub enum AppError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("the first frame must be a hello frame")]
    HelloRequired,
    #[error("missing or wrong session token")]
    Unauthorized,
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(&'static str),
    #[error("model {0:?} is not allowed on this server")]
    ModelNotAllowed(String),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("storage failed")]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Embed(#[from] EmbedServiceError),
    #[error("invalid settings: {0}")]
    InvalidSettings(String),
    #[error("{}", .0.describe())]
    ContextOverflow(glassbox_core::context::Overflow),
    #[error("{0}")]
    InvalidBody(&'static str),
    #[error(transparent)]
    ContextSet(#[from] glassbox_core::context::sets::ContextSetError),
    #[error("origin {0:?} is not allowed to use this server (GLASSBOX_ALLOWED_ORIGINS)")]
    OriginNotAllowed(String),
    #[error("send the body as application/json (got {0:?})")]
    UnsupportedMediaType(String),
    #[error(transparent)]
    RateLimited(#[from] crate::rate_limits::RateLimited),
    #[error(transparent)]
    BudgetExhausted(#[from] crate::budgets::BudgetExhausted),
    #[error("{0}")]
    Filter(#[from] glassbox_core::context::topics::FilterError),
    /// A bug or a failed background task; details go to the log only.
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    /// The wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            AppError::Decode(e) => e.code(),
            AppError::Input(e) => e.code(),
            AppError::HelloRequired => ErrorCode::HelloRequired,
            AppError::Unauthorized => ErrorCode::Unauthorized,
            AppError::NotFound(_) => ErrorCode::NotFound,
            AppError::Conflict(_) => ErrorCode::Conflict,
            AppError::ModelNotAllowed(_) => ErrorCode::ModelNotAllowed,
            AppError::Provider(e) => e.code(),
            AppError::Storage(_) => ErrorCode::Internal,
            AppError::InvalidSettings(_) => ErrorCode::InvalidSettings,
            AppError::ContextOverflow(_) => ErrorCode::ContextOverflow,
            AppError::ContextSet(_) => ErrorCode::InvalidContextSet,
            AppError::InvalidBody(_) => ErrorCode::InvalidFrame,
            AppError::OriginNotAllowed(_) => ErrorCode::OriginNotAllowed,
            AppError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            AppError::RateLimited(_) => ErrorCode::RateLimited,
            AppError::BudgetExhausted(_) => ErrorCode::BudgetExhausted,
            AppError::Filter(_) => ErrorCode::InvalidFilter,
            AppError::Internal(_) => ErrorCode::Internal,
            AppError::Embed(e) => match e {
                EmbedServiceError::Unavailable(_) => ErrorCode::EmbeddingsUnavailable,
                EmbedServiceError::Overloaded => ErrorCode::Overloaded,
                EmbedServiceError::BadInput(_) => ErrorCode::InvalidMessage,
                EmbedServiceError::Engine(_) => ErrorCode::Internal,
            },
        }
    }

    /// The error as sent to clients; internal errors are logged here and sent without detail.
    pub fn to_wire(&self) -> WireError {
        let message = match self {
            AppError::Storage(e) => {
                tracing::error!(error = %e, "storage error");
                "internal error; see the server log".to_owned()
            }
            AppError::Internal(e) => {
                tracing::error!(error = %e, "internal error");
                "internal error; see the server log".to_owned()
            }
            AppError::Embed(EmbedServiceError::Engine(e)) => {
                tracing::error!(error = %e, "embedding error");
                "internal error; see the server log".to_owned()
            }
            AppError::Provider(e) => {
                tracing::warn!(error = %e, "provider error");
                e.to_string()
            }
            other => other.to_string(),
        };
        let wire = WireError::new(self.code(), message);
        WireError {
            retry_after_ms: self.retry_after().map(|d| d.as_millis() as u64),
            // Whatever says when to try again may succeed then (the daily budget at midnight).
            retryable: wire.retryable || self.retry_after().is_some(),
            ..wire
        }
    }

    /// For a rate limit or the daily budget: how long until the same action may succeed.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            AppError::RateLimited(r) => Some(r.retry_after),
            AppError::BudgetExhausted(b) => b.retry_after(),
            _ => None,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (
            status,
            Json(ErrorBody {
                error: self.to_wire(),
            }),
        )
            .into_response();
        // Whole seconds, rounded up, as HTTP wants them.
        if let Some(wait) = self.retry_after() {
            let secs = wait.as_millis().div_ceil(1000).max(1);
            if let Ok(v) = axum::http::HeaderValue::from_str(&secs.to_string()) {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, v);
            }
        }
        response
    }
}
