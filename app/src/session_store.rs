//! Keeps a session's id and token in the browser's local storage, per server and session slot.

use serde::{Deserialize, Serialize};

/// Credentials of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSession {
    pub session_id: String,
    pub token: String,
}

fn key(server: &str, slot: &str) -> String {
    format!("glassbox:session:{server}:{slot}")
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// The stored session for this server and slot, if any (and readable).
pub fn load(server: &str, slot: &str) -> Option<StoredSession> {
    let raw = storage()?.get_item(&key(server, slot)).ok().flatten()?;
    serde_json::from_str(&raw).ok()
}

/// Remembers a session.
pub fn save(server: &str, slot: &str, session: &StoredSession) {
    if let (Some(s), Ok(raw)) = (storage(), serde_json::to_string(session)) {
        let _ = s.set_item(&key(server, slot), &raw);
    }
}

/// Forgets the session (it was refused by the server).
pub fn clear(server: &str, slot: &str) {
    if let Some(s) = storage() {
        let _ = s.remove_item(&key(server, slot));
    }
}
