//! How much reply text one `delta` frame carries (docs/protocol.md): a leaf both coalescers read,
//! the frame log's ([`super::shared`], PostgreSQL) and each connection's (`routes::ws`).

/// Reply text one `delta` frame carries before the next piece starts another.
pub const DELTA_FRAME_BYTES: usize = 4 * 1024;
