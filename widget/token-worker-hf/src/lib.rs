//! The same `Counter` as `glassbox-token-worker` (its source, compiled here), with Hugging Face
//! tokenizers in `glassbox_core::tokens`. The source is shared rather than the crate depended on:
//! a `cdylib` dependency would be built as a `cdylib` too, under the same file name as the plain
//! worker's, so the two could not share a target directory (and its compiled dependencies).

#[path = "../../token-worker/src/lib.rs"]
mod counter;

pub use counter::Counter;
