//! Files: `POST /api/sessions/{id}/files?name=…` (the file's bytes as the body, its type as
//! `Content-Type`) answers the attachment a message then carries; `GET` and `DELETE
//! /api/sessions/{id}/files/{file_id}`. All with `Authorization: Bearer <token>`.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use glassbox_core::attachments::{FileError, check_size, classify};
use glassbox_core::vocab::Attachment;
use serde::Deserialize;

use super::client_addr::ClientAddr;
use super::session::{AuthedSession, FilePath};
use crate::error::AppError;
use crate::files::FilesError;
use crate::rate_limits::Caller;
use crate::state::AppState;

/// Longest an upload's body may take to arrive.
const UPLOAD_READ_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The query of an upload.
#[derive(Deserialize)]
pub struct Upload {
    /// The file's name, as the user's system gave it.
    name: String,
}

/// `POST /api/sessions/{id}/files?name=…`: checks and stores the body (201 with the attachment).
/// A body longer than its kind allows is refused before it is read past that length.
#[utoipa::path(
    post,
    path = "/api/sessions/{id}/files",
    tag = "files",
    params(("name" = String, Query, description = "The file's name, as the user's system gave it")),
    request_body(content = Vec<u8>, content_type = "*/*", description = "The file's bytes, `Content-Type` its declared type (the kind is checked by the name and the bytes; docs/protocol.md, files)"),
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 201, description = "Stored", body = Attachment))
)]
pub async fn upload(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    ClientAddr(address): ClientAddr,
    query: Result<Query<Upload>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Attachment>), AppError> {
    // One client cannot hold every place among the uploads being read (checked first: a refused
    // upload costs none of the session's commands).
    let caller = Caller::of(session.user.as_ref(), address);
    let _held = state.limits.upload(caller.as_ref())?;
    // Uploads count as the session's commands: bounded per minute.
    state.limits.command(&session.info.session_id).await?;
    let Query(Upload { name }) =
        query.map_err(|_| AppError::InvalidBody("name the file: ?name=<its name>"))?;
    let declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (kind, _) = classify(&name, declared).map_err(FilesError::from)?;
    let limit = kind.max_bytes();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(length) = length {
        check_size(&name, kind, length).map_err(FilesError::from)?;
    }
    let _slot = state.files.upload_slot().await?;
    let too_large = || {
        FilesError::from(FileError::TooLarge {
            name: name.clone(),
            size: length.unwrap_or(limit + 1),
            kind,
            limit,
        })
    };
    // A client that sends too slowly does not keep its place among the uploads.
    let read = axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX));
    let bytes = tokio::time::timeout(UPLOAD_READ_LIMIT, read)
        .await
        .map_err(|_| AppError::InvalidBody("the upload was too slow; send it again"))?
        .map_err(|_| too_large())?;
    let attachment = state
        .files
        .upload(&session.info.session_id, &name, declared, &bytes)
        .await?;
    Ok((StatusCode::CREATED, Json(attachment)))
}

/// `GET /api/sessions/{id}/files/{file_id}`: the file as a download. Images keep their type; every
/// other file is sent as plain text, so nothing uploaded runs as a page of this server.
#[utoipa::path(
    get,
    path = "/api/sessions/{id}/files/{file_id}",
    tag = "files",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 200, description = "The file as a download, with the type it was stored with (an image's, or text)", content((Vec<u8> = "image/*"), (String = "text/plain"))))
)]
pub async fn download(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    Path(FilePath { file_id }): Path<FilePath>,
) -> Result<Response, AppError> {
    let (attachment, bytes) = state
        .files
        .get(&session.info.session_id, &file_id)
        .await?
        .ok_or(AppError::NotFound("file"))?;
    let mime = attachment.mime_type.unwrap_or_default();
    let image = glassbox_core::attachments::IMAGE_TYPES.contains(&mime.as_str());
    let content_type = if image {
        mime
    } else {
        "text/plain; charset=utf-8".to_owned()
    };
    let disposition = format!(
        "attachment; filename*=UTF-8''{}",
        percent_encoding::utf8_percent_encode(&attachment.name, percent_encoding::NON_ALPHANUMERIC)
    );
    let mut response = bytes.into_response();
    let h = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_DISPOSITION, disposition),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; sandbox".to_owned(),
        ),
        (header::CACHE_CONTROL, "private, no-store".to_owned()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    Ok(response)
}

/// `DELETE /api/sessions/{id}/files/{file_id}`: 204, or 404 when the session has no such file.
#[utoipa::path(
    delete,
    path = "/api/sessions/{id}/files/{file_id}",
    tag = "files",
    security(("session_token" = []), ("verified_user" = [])),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete(
    State(state): State<AppState>,
    AuthedSession(session): AuthedSession,
    Path(FilePath { file_id }): Path<FilePath>,
) -> Result<StatusCode, AppError> {
    match state
        .files
        .delete(&session.info.session_id, &file_id)
        .await?
    {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(AppError::NotFound("file")),
    }
}
