//! What a user attaches to a message and what the host page passes with it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Opaque page context supplied by the host page: forwarded to the model as data, never interpreted.
pub type PageContext = Map<String, Value>;

/// A file the user attached: one uploaded to the session (`id`; its bytes reach the model) or
/// metadata only, the file itself wherever `url` points.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attachment {
    /// The uploaded file's id (`POST /api/sessions/{id}/files`); the server fills in the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Required without `id`; with one, the server's record names the file.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An image's size in pixels (uploaded images; it prices the image in tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}
