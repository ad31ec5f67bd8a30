//! Which messages the topic filter lets through, for the message views to highlight theirs.

use std::collections::HashSet;
use std::sync::Arc;

use glassbox_core::transcript::Transcript;
use leptos::prelude::*;

/// The messages the topic filter lets through, while it leaves some out (`None`: all go); the
/// message views read it to highlight theirs.
#[derive(Clone, Copy)]
pub struct InContext(pub Memo<Option<Arc<HashSet<String>>>>);

impl InContext {
    /// Follows the transcript's filter.
    pub fn new(transcript: RwSignal<Transcript>) -> Self {
        Self(Memo::new(move |_| {
            transcript.with(|t| {
                let f = t.filter.as_ref()?;
                (f.applies() && (f.message_ids.len() as u32) < f.total)
                    .then(|| Arc::new(f.message_ids.iter().cloned().collect()))
            })
        }))
    }

    /// Whether message `id` is highlighted as in context.
    pub fn has(self, id: &str) -> bool {
        self.0.with(|s| s.as_ref().is_some_and(|s| s.contains(id)))
    }
}
