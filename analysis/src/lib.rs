//! What the server reads out of a conversation, apart from `core` because only the server needs
//! it (docs/architecture.md): the session's topics without a topic model (`topic_extract`, named by
//! `topic_labels`) and how they hold still across regenerations (`topic_follow`), standing
//! instructions (`sticky`, cue rules and a learned model), and the semantic search that chooses an
//! agent's rules and references per message (`item_search`). Pure: no IO, no async runtime; the
//! embeddings come in as vectors.

pub mod item_search;
pub mod sticky;
pub mod topic_extract;
pub mod topic_follow;
pub mod topic_labels;
