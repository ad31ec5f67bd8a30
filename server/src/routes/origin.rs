//! Only allowed web pages reach the API (`crate::origins`): a request whose `Origin` is not allowed
//! is answered 403 `origin_not_allowed` before any handler runs. Requests without an `Origin` (no
//! browser: curl, another server) pass here and are guarded by session tokens and the limits;
//! the WebSocket upgrade, which browsers always send with an `Origin`, also refuses a missing one.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::AppError;
use crate::state::AppState;

/// Whether the request's origin is allowed; `missing_ok` decides for a request without one.
pub fn check(state: &AppState, headers: &HeaderMap, missing_ok: bool) -> Result<(), AppError> {
    let Some(origin) = headers.get(ORIGIN) else {
        return if missing_ok {
            Ok(())
        } else {
            Err(AppError::OriginNotAllowed("(none)".to_owned()))
        };
    };
    let origin = origin.to_str().unwrap_or("(not text)");
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    if state.config.allowed_origins.allows(origin, host) {
        Ok(())
    } else {
        tracing::warn!(origin, "request from an origin that is not allowed");
        Err(AppError::OriginNotAllowed(
            origin.chars().take(200).collect(),
        ))
    }
}

/// Middleware for the API routes: a browser request from a page that is not allowed stops here.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state, request.headers(), true) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}
