//! The topic labels' vectors of a live session, kept beside its hub.

use std::collections::HashMap;
use std::sync::Arc;

use glassbox_core::context::SessionTopics;

/// The topic labels' vectors of a live session, kept with its hub so that turns under a filter
/// do not embed them again. Not in the embedding cache, which outlives sessions: they go with the
/// hub (a deleted session's are not kept). The first vector kept for a label stays, so the view
/// and every turn score with the same one.
#[derive(Debug, Default)]
pub struct LabelVectors(std::sync::Mutex<HashMap<String, Arc<[f32]>>>);

impl LabelVectors {
    /// Labels kept at most (extraction keeps only the current topics' labels); beyond it, kept
    /// ones are let go.
    const KEPT: usize = 64;

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<[f32]>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, label: &str) -> Option<Arc<[f32]>> {
        self.kept().get(label).cloned()
    }

    /// Keeps `vector` for `label` unless one is kept already; returns the kept one.
    pub fn put(&self, label: &str, vector: Arc<[f32]>) -> Arc<[f32]> {
        let mut kept = self.kept();
        if !kept.contains_key(label) && kept.len() >= Self::KEPT {
            kept.clear();
        }
        kept.entry(label.to_owned()).or_insert(vector).clone()
    }

    /// Lets go of the labels that are not among `topics` (a filter scores only current labels).
    pub fn keep_only(&self, topics: &SessionTopics) {
        self.kept().retain(|label, _| topics.has(label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::context::Topic;

    fn v(x: f32) -> Arc<[f32]> {
        Arc::from(vec![x; 4])
    }

    #[test]
    fn the_first_vector_kept_for_a_label_stays_and_old_labels_go() {
        let kept = LabelVectors::default();
        assert_eq!(kept.put("Sourdough", v(1.0)), v(1.0));
        // A second copy (another caller, or extraction's own) does not replace it.
        assert_eq!(kept.put("Sourdough", v(2.0)), v(1.0));
        assert_eq!(kept.get("Sourdough"), Some(v(1.0)));
        kept.put("Chess", v(3.0));
        let topics = SessionTopics {
            topics: vec![Topic {
                label: "Chess".into(),
                count: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        kept.keep_only(&topics);
        assert_eq!(kept.get("Sourdough"), None);
        assert_eq!(kept.get("Chess"), Some(v(3.0)));
        // Bounded: past the limit, what was kept goes.
        for i in 0..LabelVectors::KEPT {
            kept.put(&format!("label {i}"), v(i as f32));
        }
        assert!(kept.kept().len() <= LabelVectors::KEPT);
        assert_eq!(kept.get("Chess"), None);
    }
}
