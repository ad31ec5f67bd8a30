//! Size bounds on everything a client sends, and the validation that enforces them.

use serde_json::Value;
use thiserror::Error;

use crate::attachments::MAX_ATTACHMENT_FIELD;
use crate::error::ErrorCode;
use crate::vocab::{Attachment, PageContext};
use crate::wire::ChatRequest;

/// Largest WebSocket frame or REST body we parse.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;
/// Largest user message, in bytes of UTF-8.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;
/// Largest page context, serialized as JSON.
pub const MAX_CONTEXT_BYTES: usize = 8 * 1024;
/// Most top-level keys in a page context.
pub const MAX_CONTEXT_KEYS: usize = 32;
/// Deepest nesting of a page context (the top-level object is depth 1).
pub const MAX_CONTEXT_DEPTH: usize = 8;
/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 8;
/// Longest attachment URL.
pub const MAX_ATTACHMENT_URL: usize = 2048;
/// Longest `clientMessageId`.
pub const MAX_CLIENT_MESSAGE_ID: usize = 64;

/// Why a client's input was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InputError {
    #[error("message is empty")]
    EmptyMessage,
    #[error("message is {0} bytes; the limit is {MAX_MESSAGE_BYTES}")]
    MessageTooLong(usize),
    #[error("message contains a NUL character (U+0000)")]
    MessageHasNul,
    #[error("page context is {0} bytes serialized; the limit is {MAX_CONTEXT_BYTES}")]
    ContextTooLarge(usize),
    #[error("page context has {0} top-level keys; the limit is {MAX_CONTEXT_KEYS}")]
    ContextTooManyKeys(usize),
    #[error("page context is nested {0} levels deep; the limit is {MAX_CONTEXT_DEPTH}")]
    ContextTooDeep(usize),
    #[error("{0} attachments; the limit is {MAX_ATTACHMENTS}")]
    TooManyAttachments(usize),
    #[error("attachment {index}: {reason}")]
    BadAttachment { index: usize, reason: &'static str },
    #[error(
        "clientMessageId must be 1–{MAX_CLIENT_MESSAGE_ID} characters of A–Z, a–z, 0–9, '-', '_'"
    )]
    BadClientMessageId,
}

impl InputError {
    /// The wire code for this refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            InputError::EmptyMessage
            | InputError::MessageTooLong(_)
            | InputError::MessageHasNul => ErrorCode::InvalidMessage,
            InputError::ContextTooLarge(_) => ErrorCode::ContextTooLarge,
            InputError::ContextTooManyKeys(_) | InputError::ContextTooDeep(_) => {
                ErrorCode::ContextInvalid
            }
            InputError::TooManyAttachments(_) | InputError::BadAttachment { .. } => {
                ErrorCode::InvalidAttachment
            }
            InputError::BadClientMessageId => ErrorCode::InvalidClientMessageId,
        }
    }
}

/// Checks every bound on a chat request. Nothing may be stored before this passes.
pub fn validate_chat(req: &ChatRequest) -> Result<(), InputError> {
    // A message may be its files alone.
    if req.message.trim().is_empty() && req.attachments.is_empty() {
        return Err(InputError::EmptyMessage);
    }
    if req.message.len() > MAX_MESSAGE_BYTES {
        return Err(InputError::MessageTooLong(req.message.len()));
    }
    // Text no database keeps alike (PostgreSQL refuses it), and no one types.
    if req.message.contains('\0') {
        return Err(InputError::MessageHasNul);
    }
    if let Some(ctx) = &req.context {
        validate_context(ctx)?;
    }
    validate_attachments(&req.attachments)?;
    if let Some(id) = &req.client_message_id {
        validate_client_message_id(id)?;
    }
    Ok(())
}

/// Checks the page-context bounds: serialized size, top-level keys, nesting depth.
pub fn validate_context(ctx: &PageContext) -> Result<(), InputError> {
    let depth = 1 + ctx.values().map(depth_of).max().unwrap_or(0);
    if depth > MAX_CONTEXT_DEPTH {
        return Err(InputError::ContextTooDeep(depth));
    }
    if ctx.len() > MAX_CONTEXT_KEYS {
        return Err(InputError::ContextTooManyKeys(ctx.len()));
    }
    let size = serde_json::to_string(ctx)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size > MAX_CONTEXT_BYTES {
        return Err(InputError::ContextTooLarge(size));
    }
    Ok(())
}

/// Nesting depth of a JSON value: scalars are 0, a container is 1 + its deepest child.
fn depth_of(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth_of).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth_of).max().unwrap_or(0),
        _ => 0,
    }
}

fn validate_attachments(list: &[Attachment]) -> Result<(), InputError> {
    if list.len() > MAX_ATTACHMENTS {
        return Err(InputError::TooManyAttachments(list.len()));
    }
    for (index, a) in list.iter().enumerate() {
        let bad = |reason| Err(InputError::BadAttachment { index, reason });
        // An uploaded file (`id`) is named by the server's record.
        if (a.id.is_none() && a.name.trim().is_empty()) || a.name.len() > MAX_ATTACHMENT_FIELD {
            return bad("name must be 1–256 bytes");
        }
        if a.mime_type
            .as_ref()
            .is_some_and(|m| m.len() > MAX_ATTACHMENT_FIELD)
        {
            return bad("mimeType is longer than 256 bytes");
        }
        if a.id.as_ref().is_some_and(|id| {
            id.is_empty()
                || id.len() > 64
                || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        }) {
            return bad("id must be 1–64 characters of A–Z, a–z, 0–9, '-'");
        }
        if let Some(url) = &a.url {
            if url.len() > MAX_ATTACHMENT_URL {
                return bad("url is longer than 2048 bytes");
            }
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return bad("url must be http or https");
            }
        }
    }
    Ok(())
}

fn validate_client_message_id(id: &str) -> Result<(), InputError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_CLIENT_MESSAGE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(InputError::BadClientMessageId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(message: &str, context: Value) -> ChatRequest {
        ChatRequest {
            message: message.into(),
            context: context.as_object().cloned(),
            ..Default::default()
        }
    }

    #[test]
    fn accepts_a_normal_request() {
        assert_eq!(
            validate_chat(&chat("hello", json!({"page": "home"}))),
            Ok(())
        );
    }

    #[test]
    fn rejects_blank_and_oversize_messages() {
        assert_eq!(
            validate_chat(&chat("  \n", Value::Null)),
            Err(InputError::EmptyMessage)
        );
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1);
        assert_eq!(
            validate_chat(&chat(&long, Value::Null)).unwrap_err().code(),
            ErrorCode::InvalidMessage
        );
        assert_eq!(
            validate_chat(&chat("a\0b", Value::Null)),
            Err(InputError::MessageHasNul)
        );
    }

    #[test]
    fn context_over_8_kib_is_too_large() {
        let big = json!({"blob": "y".repeat(MAX_CONTEXT_BYTES)});
        let err = validate_chat(&chat("hi", big)).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ContextTooLarge);
        assert_eq!(err.code().http_status(), 413);
    }

    #[test]
    fn context_with_33_keys_is_invalid_but_32_pass() {
        let mut m = serde_json::Map::new();
        for i in 0..MAX_CONTEXT_KEYS {
            m.insert(format!("k{i}"), json!(i));
        }
        assert!(validate_context(&m).is_ok());
        m.insert("one-more".into(), json!(1));
        assert_eq!(
            validate_context(&m),
            Err(InputError::ContextTooManyKeys(33))
        );
        assert_eq!(InputError::ContextTooManyKeys(33).code().http_status(), 422);
    }

    #[test]
    fn context_depth_is_counted_from_the_top_object() {
        // depth 8: the top object and 7 nested ones.
        let mut v = json!(1);
        for _ in 0..8 {
            v = json!({ "n": v });
        }
        assert!(validate_context(v.as_object().unwrap()).is_ok());
        let v9 = json!({ "n": v });
        assert_eq!(
            validate_context(v9.as_object().unwrap()),
            Err(InputError::ContextTooDeep(9))
        );
    }

    #[test]
    fn attachment_urls_must_be_http() {
        let mut req = chat("hi", Value::Null);
        req.attachments = vec![Attachment {
            name: "x".into(),
            mime_type: None,
            size: None,
            url: Some("javascript:alert(1)".into()),
            ..Default::default()
        }];
        assert_eq!(
            validate_chat(&req).unwrap_err().code(),
            ErrorCode::InvalidAttachment
        );
    }

    #[test]
    fn client_message_id_charset_is_enforced() {
        let mut req = chat("hi", Value::Null);
        req.client_message_id = Some("ok_id-1".into());
        assert!(validate_chat(&req).is_ok());
        req.client_message_id = Some("no spaces".into());
        assert_eq!(validate_chat(&req), Err(InputError::BadClientMessageId));
    }
}
