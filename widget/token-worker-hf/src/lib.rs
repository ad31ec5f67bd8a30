//! The same `Counter` as `glassbox-token-worker`, built with Hugging Face tokenizers in it.

pub use glassbox_token_worker::Counter;
