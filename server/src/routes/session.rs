//! The session a route under `/api/sessions/{id}` names, opened with the request's bearer token
//! before the handler runs.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::Deserialize;

use super::extract::{BearerToken, UserHeaders};
use crate::error::AppError;
use crate::sessions::OpenSession;
use crate::state::AppState;

/// The session of the route's `{id}`, opened with `Authorization: Bearer <token>` or by the
/// verified user who owns it (`X-Glassbox-User` and `X-Glassbox-User-Hash`). A missing or
/// malformed token, a wrong one, a wrong hash, another user's session and an unknown id are all
/// `unauthorized` (401); a path that does not decode is `invalid_frame` (400).
pub struct AuthedSession(pub OpenSession);

/// The route's `{id}` (other path parameters are the handler's).
#[derive(Deserialize)]
struct SessionPath {
    id: String,
}

impl FromRequestParts<AppState> for AuthedSession {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        let Path(SessionPath { id }) = Path::from_request_parts(parts, state).await?;
        let BearerToken(token) = BearerToken::from_request_parts(parts, state).await?;
        let UserHeaders(user) = UserHeaders::from_request_parts(parts, state).await?;
        Ok(Self(
            state
                .sessions
                .existing(&id, token.as_deref(), user.as_ref())
                .await?,
        ))
    }
}

/// The message of `…/messages/{message_id}/…`.
#[derive(Deserialize)]
pub struct MessagePath {
    pub message_id: String,
}

/// The file of `…/files/{file_id}`.
#[derive(Deserialize)]
pub struct FilePath {
    pub file_id: String,
}
