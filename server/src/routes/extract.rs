//! Request extractors whose failures are our typed errors, not axum's plain-text rejections.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use glassbox_core::decode::{DecodeError, decode_body};
use glassbox_core::limits::MAX_FRAME_BYTES;
use glassbox_core::wire::UserClaim;
use serde::de::DeserializeOwned;

use crate::error::AppError;
use crate::identity::IdentityError;
use crate::sessions::SessionError;

/// A JSON body of at most `MAX_FRAME_BYTES`, sent as `application/json`: any other content type
/// is 415, so a page on another site cannot send one without a CORS preflight (which it fails).
pub struct JsonBody<T>(pub T);

/// Whether `content_type` is JSON (`application/json` or `application/*+json`, any parameters).
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, AppError> {
        json_body(req, false)
            .await?
            .ok_or_else(|| AppError::UnsupportedMediaType("(none)".to_owned()))
            .map(JsonBody)
    }
}

/// As [`JsonBody`], but an empty body without a content type is `T::default()`.
pub struct OptionalJsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, AppError> {
        Ok(OptionalJsonBody(
            json_body(req, true).await?.unwrap_or_default(),
        ))
    }
}

/// The body decoded; `None` when `may_be_empty` and there is no content type and no body. The
/// content type is checked before the body is read.
async fn json_body<T: DeserializeOwned>(
    req: Request,
    may_be_empty: bool,
) -> Result<Option<T>, AppError> {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
    let refused = |t: Option<String>| {
        AppError::UnsupportedMediaType(
            t.unwrap_or_else(|| "(none)".to_owned())
                .chars()
                .take(100)
                .collect(),
        )
    };
    match &content_type {
        Some(t) if !is_json(t) => return Err(refused(content_type)),
        None if !may_be_empty => return Err(refused(None)),
        _ => {}
    }
    let bytes = axum::body::to_bytes(req.into_body(), MAX_FRAME_BYTES)
        .await
        .map_err(|_| DecodeError::TooLarge {
            size: MAX_FRAME_BYTES + 1,
            limit: MAX_FRAME_BYTES,
        })?;
    match content_type {
        None if bytes.is_empty() => Ok(None),
        None => Err(refused(None)),
        Some(_) => Ok(Some(decode_body(&bytes)?)),
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

/// The header naming the verified user of a REST request.
pub const USER_HEADER: &str = "x-glassbox-user";
/// The header with that user's hash (hex HMAC-SHA256 of the id under the identity secret).
pub const USER_HASH_HEADER: &str = "x-glassbox-user-hash";

/// The user a REST request claims (`X-Glassbox-User` and `X-Glassbox-User-Hash`; checked by
/// `Sessions`). No `X-Glassbox-User`: none. The id is percent-decoded (a header carries only
/// visible ASCII as it is: `encodeURIComponent(id)`), then read as UTF-8.
pub struct UserHeaders(pub Option<UserClaim>);

impl<S: Send + Sync> FromRequestParts<S> for UserHeaders {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, AppError> {
        let text = |name| {
            parts
                .headers
                .get(name)
                .map(|v| {
                    percent_encoding::percent_decode(v.as_bytes())
                        .decode_utf8()
                        .map(|t| t.into_owned())
                })
                .transpose()
                .map_err(|_| AppError::from(SessionError::from(IdentityError::BadId)))
        };
        let Some(id) = text(USER_HEADER)? else {
            return Ok(UserHeaders(None));
        };
        let hash = text(USER_HASH_HEADER)?.unwrap_or_default();
        Ok(UserHeaders(Some(UserClaim { id, hash })))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_json_content_types_pass() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
        ] {
            assert!(super::is_json(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
            "application/jsonp",
            "text/json",
        ] {
            assert!(!super::is_json(bad), "{bad}");
        }
    }
}
