//! REST: `POST /api/chat` (SSE or JSON), `POST /api/sessions`, `GET /api/sessions/{id}`, the
//! session's settings, context sets, topics, filter and message marks.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use glassbox_core::context::ContextSets;
use glassbox_core::context::FilterView;
use glassbox_core::context::sets::SetContextArgs;
use glassbox_core::wire::{
    ChatMessage, ChatRequest, ItemChange, ItemsView, NewSession, RestChatRequest, RestChatResponse,
    ServerEvent, ServerFrame, SessionInfo, SetFilter, SetSimilarityMode,
};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::client_addr::ClientAddr;
use super::extract::{BearerToken, JsonBody, OptionalJsonBody, UserHeaders};
use super::session::{AuthedSession, MessagePath};
use crate::chat::Submitted;
use crate::context_sets;
use crate::error::AppError;
use crate::hub::ClientLease;
use crate::rate_limits::Caller;
use crate::sessions::Ask;
use crate::state::AppState;
use glassbox_core::context::agent_settings::SessionOverrides;
use glassbox_core::context::{CompressionSettings, ContextInfo, Receipt};

/// `POST /api/sessions` (body optional: `{"agent": …}`): a new session and its token (shown once).
#[utoipa::path(
    post,
    path = "/api/sessions",
    tag = "sessions",
    request_body(content = Option<NewSession>, description = "Optional: the agent of the new session"),
    security((), ("verified_user" = [])),
    responses((status = 200, description = "The new session; its token is shown only here", body = SessionInfo))
)]
pub async fn create_session(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    UserHeaders(user): UserHeaders,
    OptionalJsonBody(body): OptionalJsonBody<NewSession>,
) -> Result<Json<SessionInfo>, AppError> {
    let ask = Ask {
        agent: body.agent.as_deref(),
        address,
        user: user.as_ref(),
        ..Ask::default()
    };
    let info = state.sessions.open(ask).await?.info;
    Ok(Json(state.windows.with_context(info).await?))
}

/// Messages of a session and its meta.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessages {
    session_id: String,
    messages: Vec<ChatMessage>,
    meta: SessionMeta,
}

/// What a session keeps besides its messages.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// Context sets: set name → items.
    #[schema(value_type = Object)]
    context: ContextSets,
}

/// `GET /api/sessions/{id}` with `Authorization: Bearer <token>`: every message, oldest first, and
/// the session's meta.
#[utoipa::path(
    get,
    path = "/api/sessions/{id}",
    tag = "sessions",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "Every message, oldest first, and the session's meta", body = SessionMessages))
)]
pub async fn session_messages(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
) -> Result<Json<SessionMessages>, AppError> {
    let messages = state.store.messages(&session.info.session_id).await?;
    let settings = state.store.settings(&session.info.session_id).await?;
    Ok(Json(SessionMessages {
        session_id: session.info.session_id,
        messages,
        meta: SessionMeta {
            context: settings.context,
        },
    }))
}

/// `DELETE /api/sessions/{id}` with `Authorization: Bearer <token>`: deletes the session and
/// everything in it now (204); its open tabs are told (`unauthorized`, "this session was deleted").
#[utoipa::path(
    delete,
    path = "/api/sessions/{id}",
    tag = "sessions",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 204, description = "Deleted, with everything in it"))
)]
pub async fn delete_session(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
) -> Result<axum::http::StatusCode, AppError> {
    state.sessions.delete(&session.info.session_id).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Body of `PATCH /api/sessions/{id}`: exactly one of the two.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPatch {
    /// Replaces every context set.
    #[schema(value_type = Option<Object>)]
    context: Option<ContextSets>,
    /// Changes one set (`replace` by default).
    #[schema(value_type = Option<Object>)]
    set_context: Option<SetContextArgs>,
}

/// What `PATCH /api/sessions/{id}` answers.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchedSession {
    session_id: String,
    meta: SessionMeta,
}

/// `PATCH /api/sessions/{id}` with `Authorization: Bearer <token>`: changes the session's context
/// sets (all of them with `context`, one with `setContext`); every open tab gets a `context` event.
#[utoipa::path(
    patch,
    path = "/api/sessions/{id}",
    tag = "context sets",
    request_body = SessionPatch,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The session's context sets now", body = PatchedSession))
)]
pub async fn patch_session(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(patch): JsonBody<SessionPatch>,
) -> Result<Json<PatchedSession>, AppError> {
    state.limits.command(&session.info.session_id).await?;
    let context = match (patch.context, patch.set_context) {
        (Some(all), None) => context_sets::replace(&state.store, &session.hub, all).await?,
        (None, Some(one)) => context_sets::change(&state.store, &session.hub, &one).await?,
        _ => {
            return Err(AppError::InvalidBody(
                "send exactly one of `context` and `setContext`",
            ));
        }
    };
    Ok(Json(PatchedSession {
        session_id: session.info.session_id,
        meta: SessionMeta { context },
    }))
}

/// `PUT /api/sessions/{id}/settings` with `Authorization: Bearer <token>`: new compression
/// settings (validated, stored); every open tab of the session receives a `context` frame.
#[utoipa::path(
    put,
    path = "/api/sessions/{id}/settings",
    tag = "sessions",
    request_body(content = Object, description = "Compression settings (docs/protocol.md, `set_compression`)"),
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The context window and settings now (docs/protocol.md, `context_info`)", body = Object))
)]
pub async fn update_settings(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(settings): JsonBody<serde_json::Value>,
) -> Result<Json<ContextInfo>, AppError> {
    // Out-of-range or unknown values are bad settings, not a bad body (as on the WebSocket).
    let settings: CompressionSettings =
        serde_json::from_value(settings).map_err(|e| AppError::InvalidSettings(e.to_string()))?;
    state.limits.command(&session.info.session_id).await?;
    let info = state
        .windows
        .update_compression(&session.info.session_id, &session.info.model, settings)
        .await?;
    session.hub.publish(ServerEvent::ContextInfo(info.clone()));
    Ok(Json(info))
}

/// The answer of `GET /api/sessions/{id}/topics`, serialized as the `topics` and `filter` frames
/// are (a `Value` would widen the threshold's `f32` to 0.4000000059604645).
#[derive(Serialize, utoipa::ToSchema)]
pub struct TopicsAnswer {
    #[schema(value_type = Object)]
    topics: glassbox_core::context::SessionTopics,
    #[schema(value_type = Object)]
    filter: FilterView,
}

/// `GET /api/sessions/{id}/topics` (token): the session's topics and the filter's view.
#[utoipa::path(
    get,
    path = "/api/sessions/{id}/topics",
    tag = "topics",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The session's topics and the filter's view", body = TopicsAnswer))
)]
pub async fn topics(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
) -> Result<Json<TopicsAnswer>, AppError> {
    let (topics, filter) = state.topics.get_topics(&session.info.session_id).await?;
    Ok(Json(TopicsAnswer { topics, filter }))
}

/// `PUT /api/sessions/{id}/filter` (token), body `{labels}`: selects topics (empty clears); every
/// tab receives `filter`. Answers the filter's view.
#[utoipa::path(
    put,
    path = "/api/sessions/{id}/filter",
    tag = "topics",
    request_body = SetFilter,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The filter's view (docs/protocol.md, `filter`)", body = Object))
)]
pub async fn set_filter(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<SetFilter>,
) -> Result<Json<FilterView>, AppError> {
    let view = state.topics.set_filter(&session.hub, &body.labels).await?;
    Ok(Json(view))
}

/// `POST /api/sessions/{id}/preview` (token), body as `POST /api/chat` (`{message, context?,
/// attachments?}`): the receipt a turn answering the draft would have now; nothing is stored and
/// the provider is not called.
#[utoipa::path(
    post,
    path = "/api/sessions/{id}/preview",
    tag = "chat",
    request_body = ChatRequest,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The receipt the reply to this draft would have now (docs/protocol.md, receipts); the provider is not called", body = Object))
)]
pub async fn preview(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<ChatRequest>,
) -> Result<Json<Receipt>, AppError> {
    let receipt = state
        .turns
        .preview(&session.hub, &session.info.model, &body)
        .await?;
    Ok(Json(receipt))
}

/// `GET /api/sessions/{id}/items` (token): the agent's items, the session's, the agent's defaults
/// and the session's overrides.
#[utoipa::path(
    get,
    path = "/api/sessions/{id}/items",
    tag = "items",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The agent's items and the session's choices (docs/protocol.md, `items`)", body = Object))
)]
pub async fn items(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
) -> Result<Json<ItemsView>, AppError> {
    Ok(Json(state.items.get(&session.info.session_id).await?))
}

/// `POST /api/sessions/{id}/items` (token), body `{item: {kind, name}}`: adds the item to the
/// session (as `manual`).
#[utoipa::path(
    post,
    path = "/api/sessions/{id}/items",
    tag = "items",
    request_body = ItemChange,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The items now", body = Object))
)]
pub async fn add_item(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<ItemChange>,
) -> Result<Json<ItemsView>, AppError> {
    Ok(Json(state.items.add(&session.hub, &body.item).await?))
}

/// `POST /api/sessions/{id}/approvals/{approvalId}` (token), body `{decision, reason?}`: answers a
/// waiting approval (404 `not_found` for an unknown id, 409 `conflict` once answered).
#[utoipa::path(
    post,
    path = "/api/sessions/{id}/approvals/{approvalId}",
    tag = "approvals",
    request_body = ApprovalAnswer,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The answer as recorded", body = Object))
)]
pub async fn approve(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    axum::extract::Path(ApprovalPath { approval_id }): axum::extract::Path<ApprovalPath>,
    JsonBody(body): JsonBody<ApprovalAnswer>,
) -> Result<Json<serde_json::Value>, AppError> {
    state.approvals.answer(
        &session.info.session_id,
        &approval_id,
        body.decision,
        body.reason,
    )?;
    Ok(Json(
        serde_json::json!({"approvalId": approval_id, "decision": body.decision}),
    ))
}

/// The approval a route names.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalPath {
    approval_id: String,
}

/// The body of an answer to an approval.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswer {
    decision: glassbox_core::vocab::ApprovalDecision,
    #[serde(default)]
    reason: Option<String>,
}

/// `DELETE /api/sessions/{id}/items` (token), body `{item: {kind, name}}`: removes the item from
/// the session.
#[utoipa::path(
    delete,
    path = "/api/sessions/{id}/items",
    tag = "items",
    request_body = ItemChange,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The items now", body = Object))
)]
pub async fn remove_item(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<ItemChange>,
) -> Result<Json<ItemsView>, AppError> {
    Ok(Json(state.items.remove(&session.hub, &body.item).await?))
}

/// `PUT /api/sessions/{id}/overrides` (token), body: the session's overrides of its agent's
/// defaults (a field left out keeps the default).
#[utoipa::path(
    put,
    path = "/api/sessions/{id}/overrides",
    tag = "items",
    request_body(content = Object, description = "The session's overrides of its agent's defaults (docs/agents.md)"),
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The items now", body = Object))
)]
pub async fn set_overrides(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<SessionOverrides>,
) -> Result<Json<ItemsView>, AppError> {
    let view = state.items.set_overrides(&session.hub, body).await?;
    super::publish_context_info(&state, &session.hub, &session.info.model).await?;
    Ok(Json(view))
}

/// `PUT /api/sessions/{id}/similarity` (token), body `{enabled, threshold?}`: similarity mode (and
/// threshold) for the session.
#[utoipa::path(
    put,
    path = "/api/sessions/{id}/similarity",
    tag = "topics",
    request_body = SetSimilarityMode,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The filter's view", body = Object))
)]
pub async fn set_similarity_mode(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    JsonBody(body): JsonBody<SetSimilarityMode>,
) -> Result<Json<FilterView>, AppError> {
    let view = state
        .topics
        .set_similarity_mode(&session.hub, &body)
        .await?;
    Ok(Json(view))
}

/// `PUT /api/sessions/{id}/messages/{message_id}/mark` (token), body `{mark}` (`pinned`,
/// `excluded` or `null`): every tab receives `mark` and `filter`. Answers the filter's view.
#[utoipa::path(
    put,
    path = "/api/sessions/{id}/messages/{message_id}/mark",
    tag = "topics",
    request_body = MarkBody,
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The filter's view", body = Object))
)]
pub async fn mark_message(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    Path(MessagePath { message_id }): Path<MessagePath>,
    JsonBody(body): JsonBody<MarkBody>,
) -> Result<Json<FilterView>, AppError> {
    let view = state
        .topics
        .mark_message(&session.hub, &message_id, body.mark)
        .await?;
    Ok(Json(view))
}

/// `POST /api/sessions/{id}/messages/{message_id}/stop` (token), no body: stops the reply while
/// it streams (every tab receives `done` with status `stopped`). Answers `{messageId, stopped}`:
/// `stopped` is false when the reply had already ended (nothing changes); 404 `not_found` when the
/// session has no such reply.
#[utoipa::path(
    post,
    path = "/api/sessions/{id}/messages/{message_id}/stop",
    tag = "chat",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "`{messageId, stopped}`: `stopped` is false when the reply had already ended", body = Object))
)]
pub async fn stop_reply(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    Path(MessagePath { message_id }): Path<MessagePath>,
) -> Result<Json<serde_json::Value>, AppError> {
    let stopped = state.chat.stop(&session.hub, &message_id).await?;
    Ok(Json(
        serde_json::json!({"messageId": message_id, "stopped": stopped}),
    ))
}

/// The body of `PUT …/mark`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkBody {
    pub mark: Option<glassbox_core::context::MessageMark>,
}

/// `POST /api/chat`: stores the message and answers with the reply, streamed as SSE when the client
/// sends `Accept: text/event-stream`, else as one JSON document once the reply is finished.
#[utoipa::path(
    post,
    path = "/api/chat",
    tag = "chat",
    request_body = RestChatRequest,
    security((), ("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The stored message and the finished reply; with `Accept: text/event-stream`, the same frames as the WebSocket sends, as server-sent events (docs/protocol.md)", content((RestChatResponse = "application/json"), (String = "text/event-stream"))))
)]
pub async fn chat(
    State(state): State<AppState>,
    headers: HeaderMap,
    ClientAddr(address): ClientAddr,
    BearerToken(token): BearerToken,
    UserHeaders(user): UserHeaders,
    JsonBody(body): JsonBody<RestChatRequest>,
) -> Result<Response, AppError> {
    let ask = Ask {
        id: body.session_id.as_deref(),
        token: token.as_deref(),
        agent: body.agent.as_deref(),
        address,
        user: user.as_ref(),
        ..Ask::default()
    };
    let session = state.sessions.open_for_message(ask).await?;
    let lease = session.hub.attach();
    let frames = session.hub.subscribe();
    let caller = Caller::of(session.user.as_ref(), address);
    let submitted = state
        .chat
        .submit(
            &session.hub,
            &session.info.model,
            body.chat,
            caller.as_ref(),
            session.unsaved.as_ref(),
        )
        .await?;
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if wants_sse {
        return Ok(sse_reply(session.info, submitted, frames, lease).into_response());
    }
    let reply = match &submitted.reply_id {
        Some(reply_id) => {
            wait_for_end(frames, reply_id).await;
            state
                .store
                .message(&session.info.session_id, reply_id)
                .await?
        }
        None => None,
    };
    drop(lease);
    Ok(Json(RestChatResponse {
        session: session.info,
        message: submitted.message,
        reply,
        duplicate: submitted.duplicate,
    })
    .into_response())
}

/// True for the frame that ends reply `reply_id`.
fn ends_reply(frame: &ServerFrame, reply_id: &str) -> bool {
    match &frame.event {
        ServerEvent::Done(d) => d.message.id == reply_id,
        ServerEvent::Error(e) => e.message_id.as_deref() == Some(reply_id),
        _ => false,
    }
}

/// True for frames about reply `reply_id`.
fn concerns_reply(frame: &ServerFrame, reply_id: &str) -> bool {
    match &frame.event {
        ServerEvent::ReplyStart(r) => r.message_id == reply_id,
        ServerEvent::Delta(d) => d.message_id == reply_id,
        ServerEvent::Tool(t) => t.message_id == reply_id,
        // Context sets change while the reply runs (its tools); the footer follows. The budget
        // after each of its provider calls.
        ServerEvent::Context(_) | ServerEvent::Budget(_) => true,
        _ => ends_reply(frame, reply_id),
    }
}

async fn wait_for_end(mut frames: broadcast::Receiver<Arc<ServerFrame>>, reply_id: &str) {
    loop {
        match frames.recv().await {
            Ok(f) if ends_reply(&f, reply_id) => return,
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

fn sse_event(frame: &ServerFrame) -> Event {
    // The frame's `type` (strum's snake_case name, as serde writes it).
    let name: &'static str = (&frame.event).into();
    Event::default()
        .event(name)
        .id(frame.sync_id.to_string())
        .json_data(frame)
        .unwrap_or_else(|_| Event::default().event("error"))
}

fn sse_reply(
    info: SessionInfo,
    submitted: Submitted,
    mut frames: broadcast::Receiver<Arc<ServerFrame>>,
    lease: ClientLease,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = async_stream::stream! {
        // Held while the client listens: if it goes away, the reply is cancelled after the grace period.
        let _lease = lease;
        let mut accepted_seen = false;
        let reply_id = submitted.reply_id.clone().unwrap_or_default();
        yield Ok(sse_event(&ServerFrame { sync_id: 0, event: ServerEvent::Session(info) }));
        loop {
            let frame = match frames.recv().await {
                Ok(f) => f,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "SSE client lagged");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            };
            let mine = match &frame.event {
                ServerEvent::Accepted(a) => !accepted_seen && a.message.id == submitted.message.id,
                _ => submitted.reply_id.is_some() && concerns_reply(&frame, &reply_id),
            };
            if !mine {
                continue;
            }
            if matches!(frame.event, ServerEvent::Accepted(_)) {
                accepted_seen = true;
            }
            yield Ok(sse_event(&frame));
            if submitted.duplicate || ends_reply(&frame, &reply_id) {
                break;
            }
        }
    };
    Sse::new(stream).keep_alive(KeepAlive::default())
}
