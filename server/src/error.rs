//! The edge's error: what a route or a WebSocket frame handler can fail with — the services' own
//! errors, and what only the edge checks (frames, bodies, origins). Each maps to a wire code, an
//! HTTP status and a JSON body through [`ToWire`]; internal details are logged, never sent.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use glassbox_core::ErrorCode;
use glassbox_core::decode::DecodeError;
use glassbox_core::limits::InputError;
use glassbox_core::wire::ErrorBody;
use thiserror::Error;

use crate::chat::ChatError;
use crate::context::SettingsError;
use crate::context_sets::ContextSetsError;
use crate::embed::service::EmbedServiceError;
use crate::items::ItemsError;
use crate::rate_limits::RateLimited;
use crate::sessions::SessionError;
use crate::storage::StorageError;
use crate::topics::TopicError;
use crate::turn::TurnError;
use crate::wire_error::ToWire;

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
    #[error("no such {0} in this session")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(&'static str),
    #[error("model {0:?} is not allowed on this server")]
    ModelNotAllowed(String),
    #[error("invalid settings: {0}")]
    InvalidSettings(String),
    #[error("{0}")]
    InvalidBody(&'static str),
    #[error("the address's path is not valid: {0}")]
    InvalidPath(#[from] PathRejection),
    #[error("origin {0:?} is not allowed to use this server (GLASSBOX_ALLOWED_ORIGINS)")]
    OriginNotAllowed(String),
    #[error("send the body as application/json (got {0:?})")]
    UnsupportedMediaType(String),
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error("storage failed")]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Embed(#[from] EmbedServiceError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Chat(#[from] ChatError),
    #[error(transparent)]
    Topic(#[from] TopicError),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    ContextSets(#[from] ContextSetsError),
    #[error(transparent)]
    Items(#[from] ItemsError),
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error(transparent)]
    Files(#[from] crate::files::FilesError),
    #[error(transparent)]
    Approval(#[from] crate::approvals::ApprovalError),
}

impl ToWire for AppError {
    fn code(&self) -> ErrorCode {
        match self {
            AppError::Decode(e) => e.code(),
            AppError::Input(e) => e.code(),
            AppError::HelloRequired => ErrorCode::HelloRequired,
            AppError::Unauthorized => ErrorCode::Unauthorized,
            AppError::NotFound(_) => ErrorCode::NotFound,
            AppError::Conflict(_) => ErrorCode::Conflict,
            AppError::ModelNotAllowed(_) => ErrorCode::ModelNotAllowed,
            AppError::InvalidSettings(_) => ErrorCode::InvalidSettings,
            AppError::InvalidBody(_) => ErrorCode::InvalidFrame,
            // A route that names a parameter its path does not have is our bug.
            AppError::InvalidPath(PathRejection::MissingPathParams(_)) => ErrorCode::Internal,
            AppError::InvalidPath(_) => ErrorCode::InvalidFrame,
            AppError::OriginNotAllowed(_) => ErrorCode::OriginNotAllowed,
            AppError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            AppError::RateLimited(e) => e.code(),
            AppError::Storage(e) => e.code(),
            AppError::Embed(e) => e.code(),
            AppError::Session(e) => e.code(),
            AppError::Chat(e) => e.code(),
            AppError::Topic(e) => e.code(),
            AppError::Settings(e) => e.code(),
            AppError::ContextSets(e) => e.code(),
            AppError::Items(e) => e.code(),
            AppError::Turn(e) => e.code(),
            AppError::Files(e) => e.code(),
            AppError::Approval(e) => e.code(),
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            AppError::RateLimited(e) => e.retry_after(),
            AppError::Session(e) => e.retry_after(),
            AppError::Chat(e) => e.retry_after(),
            AppError::Topic(e) => e.retry_after(),
            AppError::Items(e) => e.retry_after(),
            AppError::Turn(e) => e.retry_after(),
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
