//! A verified user's sessions over REST: `GET /api/sessions` lists them, `PUT
//! /api/sessions/{id}/title` renames one (the WebSocket's `list_sessions` and `rename_session`).

use axum::Json;
use axum::extract::State;
use glassbox_core::wire::{RenameSession, SessionList};
use serde::Deserialize;

use super::extract::{JsonBody, UserHeaders};
use super::session::AuthedSession;
use crate::error::AppError;
use crate::identity::IdentityError;
use crate::rate_limits::Caller;
use crate::sessions::SessionError;
use crate::state::AppState;

/// `GET /api/sessions` with `X-Glassbox-User` and `X-Glassbox-User-Hash`: the user's sessions,
/// newest first (within the user's `GLASSBOX_LIMIT_ADDRESS_MESSAGES_PER_MINUTE`). Without a
/// verified user: `unauthorized`.
#[utoipa::path(
    get,
    path = "/api/sessions",
    tag = "sessions",
    security(("verified_user" = [])),
    responses((status = 200, description = "The verified user's sessions, newest first", body = SessionList))
)]
pub async fn list(
    State(state): State<AppState>,
    UserHeaders(claim): UserHeaders,
) -> Result<Json<SessionList>, AppError> {
    let claim = claim.ok_or(SessionError::Identity(IdentityError::NoUser))?;
    let user = state.sessions.verify(&claim).map_err(SessionError::from)?;
    // Each list reads the user's sessions: it counts as one of their requests per minute.
    state
        .limits
        .request(Caller::of(Some(&user), None).as_ref())
        .await?;
    Ok(Json(SessionList {
        sessions: state.sessions.list(&user).await?,
    }))
}

/// Body of `PUT /api/sessions/{id}/title`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TitleBody {
    /// `null` or blank: the first message again.
    title: Option<String>,
}

/// `PUT /api/sessions/{id}/title` (the session's token, or its verified user): renames it;
/// answers with the title as stored (`null` when back to the first message).
#[utoipa::path(
    put,
    path = "/api/sessions/{id}/title",
    tag = "sessions",
    request_body = TitleBody,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The title as stored", body = RenameSession))
)]
pub async fn rename(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<TitleBody>,
) -> Result<Json<RenameSession>, AppError> {
    state.limits.command(&session.info.session_id).await?;
    let stored = state
        .sessions
        .rename(&session.info.session_id, body.title.as_deref())
        .await?;
    Ok(Json(RenameSession {
        session_id: Some(session.info.session_id),
        title: stored,
    }))
}
