//! Keeps a session's id and token in the browser's local storage, and the unsent draft in the
//! tab's session storage, per server and session slot.

use glassbox_core::vocab::Attachment;
use serde::{Deserialize, Serialize};

/// Credentials of a session: its token (empty for a verified user's session opened from their
/// list, whose token this browser never saw), and the user, who needs none (never stored here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSession {
    pub session_id: String,
    pub token: String,
    #[serde(skip)]
    pub user: Option<glassbox_core::wire::UserClaim>,
}

impl StoredSession {
    /// A verified user's session known by its id only.
    pub fn of_user(session_id: String) -> Self {
        Self {
            session_id,
            ..Self::default()
        }
    }
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

fn draft_key(server: &str, slot: &str) -> String {
    format!("glassbox:draft:{server}:{slot}")
}

fn tab_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok().flatten()
}

/// The draft this tab left unsent in this slot (a widget re-created by a page's route change, or
/// the tab reloaded).
pub fn load_draft(server: &str, slot: &str) -> Option<String> {
    tab_storage()?
        .get_item(&draft_key(server, slot))
        .ok()
        .flatten()
}

/// Remembers the draft for this tab; an empty one is forgotten.
pub fn save_draft(server: &str, slot: &str, draft: &str) {
    if let Some(s) = tab_storage() {
        let key = draft_key(server, slot);
        let _ = if draft.is_empty() {
            s.remove_item(&key)
        } else {
            s.set_item(&key, draft)
        };
    }
}

fn draft_files_key(server: &str, slot: &str) -> String {
    format!("glassbox:draft-files:{server}:{slot}")
}

/// How long uploaded draft files are kept here: less than the server keeps a file no message
/// carries (a day), so a file that comes back is still there.
const DRAFT_FILES_TTL_MS: f64 = 20.0 * 3_600_000.0;

/// The files this tab had uploaded for its unsent draft, with the session they belong to.
pub fn load_draft_files(server: &str, slot: &str) -> Option<(String, Vec<Attachment>)> {
    let raw = tab_storage()?
        .get_item(&draft_files_key(server, slot))
        .ok()
        .flatten()?;
    let (session_id, saved_at, files): (String, f64, Vec<Attachment>) =
        serde_json::from_str(&raw).ok()?;
    (js_sys::Date::now() - saved_at < DRAFT_FILES_TTL_MS).then_some((session_id, files))
}

/// Remembers the uploaded files of the draft for this tab (none: forgotten).
pub fn save_draft_files(server: &str, slot: &str, session_id: &str, files: &[Attachment]) {
    let Some(s) = tab_storage() else { return };
    let key = draft_files_key(server, slot);
    let _ = match serde_json::to_string(&(session_id, js_sys::Date::now(), files)) {
        Ok(raw) if !files.is_empty() => s.set_item(&key, &raw),
        _ => s.remove_item(&key),
    };
}
