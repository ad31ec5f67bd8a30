//! Glassbox core: wire types and pure logic shared by the widget (wasm32) and the server.
//! No IO, no async runtime, no framework.

pub mod attachments;
pub mod chunk_folder;
pub mod context;
pub mod decode;
pub mod error;
pub mod limits;
pub mod markdown;
pub mod number;
pub mod prompt;
mod server_frame;
pub mod sync;
pub mod tokens;
pub mod transcript;
pub mod vector;
pub mod vocab;
pub mod wire;

pub use error::ErrorCode;
