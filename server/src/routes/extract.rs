//! Request extractors whose failures are our typed errors, not axum's plain-text rejections.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use glassbox_core::decode::{DecodeError, decode_body};
use glassbox_core::limits::MAX_FRAME_BYTES;
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// A JSON body of at most `MAX_FRAME_BYTES`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, AppError> {
        let bytes = axum::body::to_bytes(req.into_body(), MAX_FRAME_BYTES)
            .await
            .map_err(|_| DecodeError::TooLarge {
                size: MAX_FRAME_BYTES + 1,
                limit: MAX_FRAME_BYTES,
            })?;
        Ok(JsonBody(decode_body(&bytes)?))
    }
}

/// The token of `Authorization: Bearer <token>`, if given.
pub struct BearerToken(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for BearerToken {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, AppError> {
        let Some(value) = parts.headers.get(AUTHORIZATION) else {
            return Ok(BearerToken(None));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AppError::Unauthorized)?;
        Ok(BearerToken(Some(token.to_owned())))
    }
}
