//! Clock and identifiers every layer uses.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A fresh unguessable id (122 random bits).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
