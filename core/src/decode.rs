//! Turns raw client text into typed frames, telling apart every way input can be wrong.

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use crate::error::ErrorCode;
use crate::limits::MAX_FRAME_BYTES;
use crate::wire::ClientFrame;

/// The frame types a client may send: the names of [`ClientFrame`]'s variants, as serde writes
/// them (strum and serde use the same snake_case names).
pub const CLIENT_FRAME_TYPES: &[&str] = <ClientFrame as strum::VariantNames>::VARIANTS;

/// Why a frame or body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("frame is {size} bytes; the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("not valid JSON: {0}")]
    MalformedJson(String),
    #[error("unknown frame type {:?}; expected one of {}", .0, CLIENT_FRAME_TYPES.join(", "))]
    UnknownType(String),
    #[error("invalid frame: {0}")]
    Invalid(String),
    /// JSON nested deeper than the parser follows (128 levels); only page context nests freely.
    #[error(
        "JSON nested too deeply (page context may be at most {} levels deep)",
        crate::limits::MAX_CONTEXT_DEPTH
    )]
    TooDeep,
    /// A `settings` frame whose fields are out of range or unknown (e.g. `threshold: 300`).
    #[error("invalid settings: {0}")]
    Settings(String),
}

impl DecodeError {
    /// The wire code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::TooLarge { .. } => ErrorCode::FrameTooLarge,
            DecodeError::MalformedJson(_) => ErrorCode::MalformedJson,
            DecodeError::UnknownType(_) => ErrorCode::UnknownFrameType,
            DecodeError::Invalid(_) => ErrorCode::InvalidFrame,
            DecodeError::TooDeep => ErrorCode::ContextInvalid,
            DecodeError::Settings(_) => ErrorCode::InvalidSettings,
        }
    }
}

/// Decodes one client frame (WebSocket text).
pub fn decode_client_frame(text: &str) -> Result<ClientFrame, DecodeError> {
    let value = decode_value(text.as_bytes())?;
    let settings = match value.get("type") {
        Some(Value::String(t)) if CLIENT_FRAME_TYPES.contains(&t.as_str()) => t == "settings",
        Some(Value::String(t)) => return Err(DecodeError::UnknownType(t.clone())),
        _ => return Err(DecodeError::Invalid("missing string field \"type\"".into())),
    };
    serde_json::from_value(value).map_err(|e| {
        if settings {
            DecodeError::Settings(e.to_string())
        } else {
            DecodeError::Invalid(e.to_string())
        }
    })
}

/// Decodes a JSON body (REST) into `T`, with the same size bound and error kinds.
pub fn decode_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let value = decode_value(bytes)?;
    serde_json::from_value(value).map_err(|e| DecodeError::Invalid(e.to_string()))
}

fn decode_value(bytes: &[u8]) -> Result<Value, DecodeError> {
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            limit: MAX_FRAME_BYTES,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| {
        // serde_json names this case only in its message.
        if e.to_string().contains("recursion limit exceeded") {
            DecodeError::TooDeep
        } else {
            DecodeError::MalformedJson(e.to_string())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_context_and_bad_settings_have_the_documented_codes() {
        let code = |t: &str| decode_client_frame(t).unwrap_err().code();
        let deep = format!(
            r#"{{"type":"chat","data":{{"message":"hi","context":{{"a":{}1{}}}}}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        assert_eq!(code(&deep), ErrorCode::ContextInvalid);
        assert_eq!(
            code(
                r#"{"type":"settings","data":{"enabled":true,"strategy":"hybrid","threshold":300,"preserveRecentMessages":4,"showIndicator":true}}"#
            ),
            ErrorCode::InvalidSettings
        );
        assert_eq!(
            code(
                r#"{"type":"settings","data":{"enabled":true,"strategy":"magic","threshold":80,"preserveRecentMessages":4,"showIndicator":true}}"#
            ),
            ErrorCode::InvalidSettings
        );
    }

    #[test]
    fn each_kind_of_bad_input_has_its_own_code() {
        let code = |t: &str| decode_client_frame(t).unwrap_err().code();
        assert_eq!(code("{not json"), ErrorCode::MalformedJson);
        assert_eq!(
            code(r#"{"type":"shout","data":{}}"#),
            ErrorCode::UnknownFrameType
        );
        assert_eq!(code(r#"{"data":{}}"#), ErrorCode::InvalidFrame);
        assert_eq!(
            code(r#"{"type":"chat","data":{"message":5}}"#),
            ErrorCode::InvalidFrame
        );
        let big = format!(
            r#"{{"type":"chat","data":{{"message":"{}"}}}}"#,
            "x".repeat(MAX_FRAME_BYTES)
        );
        assert_eq!(code(&big), ErrorCode::FrameTooLarge);
    }

    #[test]
    fn a_good_frame_decodes() {
        assert!(matches!(
            decode_client_frame(r#"{"type":"hello","data":{}}"#),
            Ok(ClientFrame::Hello(_))
        ));
    }

    #[test]
    fn the_topic_frames_decode_and_reject_stray_fields() {
        use crate::context::MessageMark;
        assert!(matches!(
            decode_client_frame(r#"{"type":"set_filter","data":{"labels":["Chess"]}}"#),
            Ok(ClientFrame::SetFilter(f)) if f.labels == ["Chess"]
        ));
        assert!(matches!(
            decode_client_frame(r#"{"type":"get_topics","data":{}}"#),
            Ok(ClientFrame::GetTopics(_))
        ));
        assert!(matches!(
            decode_client_frame(r#"{"type":"set_similarity_mode","data":{"enabled":false}}"#),
            Ok(ClientFrame::SetSimilarityMode(m)) if !m.enabled && m.threshold.is_none()
        ));
        assert!(matches!(
            decode_client_frame(r#"{"type":"set_similarity_mode","data":{"enabled":true,"threshold":0.55}}"#),
            Ok(ClientFrame::SetSimilarityMode(m)) if m.enabled && m.threshold == Some(Some(0.55))
        ));
        assert!(matches!(
            decode_client_frame(r#"{"type":"mark_message","data":{"messageId":"m1","mark":"pinned"}}"#),
            Ok(ClientFrame::MarkMessage(m)) if m.mark == Some(MessageMark::Pinned)
        ));
        assert!(matches!(
            decode_client_frame(r#"{"type":"mark_message","data":{"messageId":"m1","mark":null}}"#),
            Ok(ClientFrame::MarkMessage(m)) if m.mark.is_none()
        ));
        for bad in [
            r#"{"type":"mark_message","data":{"messageId":"m1","mark":"starred"}}"#,
            r#"{"type":"set_filter","data":{"labels":"Chess"}}"#,
            r#"{"type":"get_topics","data":{"x":1}}"#,
        ] {
            assert_eq!(
                decode_client_frame(bad).map_err(|e| e.code()).err(),
                Some(ErrorCode::InvalidFrame),
                "{bad}"
            );
        }
    }
}
