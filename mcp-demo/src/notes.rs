//! Notes kept per scope (a Glassbox session, else one MCP connection), bounded in every way:
//! a note's length, the notes per scope and the scopes kept (the least recently used goes).

use std::collections::HashMap;
use std::sync::Mutex;

/// Longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 2000;
/// Most notes one scope keeps (the oldest goes).
pub const MAX_NOTES: usize = 100;
/// Most scopes kept (the least recently used goes).
pub const MAX_SCOPES: usize = 1000;

/// The notes of every scope.
#[derive(Default)]
pub struct Notes {
    scopes: Mutex<HashMap<String, (u64, Vec<String>)>>,
    clock: std::sync::atomic::AtomicU64,
}

impl Notes {
    fn with<T>(&self, scope: &str, f: impl FnOnce(&mut Vec<String>) -> T) -> T {
        let now = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut scopes = self.scopes.lock().unwrap_or_else(|p| p.into_inner());
        if !scopes.contains_key(scope)
            && scopes.len() >= MAX_SCOPES
            && let Some(oldest) = scopes
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone())
        {
            scopes.remove(&oldest);
        }
        let entry = scopes.entry(scope.to_owned()).or_default();
        entry.0 = now;
        f(&mut entry.1)
    }

    /// Keeps `text` (cut to [`MAX_NOTE_CHARS`]) in `scope`; returns how many notes it has.
    pub fn add(&self, scope: &str, text: &str) -> usize {
        let text: String = text.trim().chars().take(MAX_NOTE_CHARS).collect();
        self.with(scope, |notes| {
            if notes.len() >= MAX_NOTES {
                notes.remove(0);
            }
            notes.push(text);
            notes.len()
        })
    }

    /// The notes of `scope`, oldest first.
    pub fn list(&self, scope: &str) -> Vec<String> {
        self.with(scope, |notes| notes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_apart_and_bounded() {
        let notes = Notes::default();
        notes.add("a", "one");
        notes.add("b", "two");
        assert_eq!(notes.list("a"), ["one"]);
        assert_eq!(notes.list("b"), ["two"]);
        for i in 0..MAX_NOTES + 5 {
            notes.add("a", &i.to_string());
        }
        let a = notes.list("a");
        assert_eq!(a.len(), MAX_NOTES);
        assert_eq!(a.last().unwrap(), &(MAX_NOTES + 4).to_string());
        assert_eq!(notes.add("c", &"x".repeat(5000)), 1);
        assert_eq!(notes.list("c")[0].len(), MAX_NOTE_CHARS);
        for i in 0..MAX_SCOPES {
            notes.add(&format!("s{i}"), "x");
        }
        assert!(notes.scopes.lock().unwrap().len() <= MAX_SCOPES);
    }
}
