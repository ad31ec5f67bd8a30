//! The rows the store reads: each struct is a query's columns (`FromRow`), converted into
//! what the store's callers get.

use glassbox_core::context::MessageMark;
use glassbox_core::vocab::{Attachment, MessageStatus, PageContext, Role, ToolRound, Usage};
use glassbox_core::wire::{ChatMessage, WireError};

use super::StorageError;
use super::column::decoded_via;
use super::named::Named;

/// The columns [`MessageRow`] reads.
pub(super) const MESSAGE_COLUMNS: &str = "id, role, content, status, created_at, \
     client_message_id, reply_to, context_json, attachments_json, usage_json, \
     context_report_json, tool_rounds_json, error_json, mark, approvals_json";
/// The columns [`MessageTextRow`] reads.
pub(super) const MESSAGE_TEXT_COLUMNS: &str = "id, role, content, status, created_at, mark";

/// A message's id, role, text, status, time and mark.
#[derive(sqlx_macros::FromRow)]
pub(super) struct MessageTextRow {
    id: String,
    role: Named<Role>,
    content: String,
    status: Named<MessageStatus>,
    created_at: i64,
    mark: Option<Named<MessageMark>>,
}

/// The message with the rest at its defaults.
impl From<MessageTextRow> for ChatMessage {
    fn from(r: MessageTextRow) -> Self {
        ChatMessage {
            id: r.id,
            role: r.role.0,
            content: r.content,
            status: r.status.0,
            created_at: r.created_at,
            mark: r.mark.map(|m| m.0),
            ..Default::default()
        }
    }
}

/// A [`MessageTextRow`] with its position in the session.
#[derive(sqlx_macros::FromRow)]
pub(super) struct PlacedTextRow {
    pub seq: i64,
    #[sqlx(flatten)]
    pub text: MessageTextRow,
}

/// A [`MessageRow`] with its position in the session.
#[derive(sqlx_macros::FromRow)]
pub(super) struct PlacedRow {
    pub seq: i64,
    #[sqlx(flatten)]
    pub message: MessageRow,
}

/// A JSON column, stored as text on every backend, read into `T` (`None`: NULL).
pub(super) struct JsonText<T>(pub Option<T>);

decoded_via!(Option<String> => JsonText<T>, T: serde::de::DeserializeOwned);

impl<T: serde::de::DeserializeOwned> TryFrom<Option<String>> for JsonText<T> {
    type Error = StorageError;

    fn try_from(raw: Option<String>) -> Result<Self, StorageError> {
        raw.map(|s| serde_json::from_str(&s))
            .transpose()
            .map(JsonText)
            .map_err(|e| StorageError::Corrupt(format!("a message's JSON column: {e}")))
    }
}

/// A whole message; its JSON columns are decoded as they are read.
#[derive(sqlx_macros::FromRow)]
pub(super) struct MessageRow {
    #[sqlx(flatten)]
    text: MessageTextRow,
    client_message_id: Option<String>,
    reply_to: Option<String>,
    #[sqlx(rename = "context_json")]
    context: JsonText<PageContext>,
    #[sqlx(rename = "attachments_json")]
    attachments: JsonText<Vec<Attachment>>,
    #[sqlx(rename = "usage_json")]
    usage: JsonText<Usage>,
    #[sqlx(rename = "context_report_json")]
    receipt: JsonText<glassbox_core::wire::ReceiptJson>,
    #[sqlx(rename = "tool_rounds_json")]
    tool_rounds: JsonText<Vec<ToolRound>>,
    #[sqlx(rename = "error_json")]
    error: JsonText<WireError>,
    #[sqlx(rename = "approvals_json")]
    approvals: JsonText<Vec<glassbox_core::vocab::ToolCallApproval>>,
}

impl From<MessageRow> for ChatMessage {
    fn from(r: MessageRow) -> Self {
        ChatMessage {
            client_message_id: r.client_message_id,
            reply_to: r.reply_to,
            context: r.context.0,
            attachments: r.attachments.0.unwrap_or_default(),
            usage: r.usage.0,
            receipt: r.receipt.0,
            tool_rounds: r.tool_rounds.0.unwrap_or_default(),
            error: r.error.0,
            approvals: r.approvals.0.unwrap_or_default(),
            ..r.text.into()
        }
    }
}

/// A cached embedding.
#[derive(sqlx_macros::FromRow)]
pub(super) struct EmbeddingRow {
    pub cache_key: String,
    pub vector: Vector,
}

/// A vector stored as its `f32`s' little-endian bytes.
pub(super) struct Vector(pub Vec<f32>);

impl Vector {
    /// The bytes it is stored as.
    pub fn to_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
}

decoded_via!(Vec<u8> => Vector);

impl TryFrom<Vec<u8>> for Vector {
    type Error = StorageError;

    fn try_from(bytes: Vec<u8>) -> Result<Self, StorageError> {
        if !bytes.len().is_multiple_of(4) {
            return Err(StorageError::Corrupt(format!(
                "embedding of {} bytes",
                bytes.len()
            )));
        }
        Ok(Vector(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ))
    }
}
