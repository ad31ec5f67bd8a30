//! Recently used vectors in memory, in front of the SQLite embedding cache: a live session's turns and
//! topic commands read the same few thousand message vectors again and again, and a lookup here costs
//! a hash probe instead of a database read. Bounded by entries (least recently used go first), so
//! memory stays bounded however many sessions are live; what falls out is still in SQLite.

use std::sync::{Arc, Mutex};

use hashlink::LruCache;

/// Vectors kept by default: at 384 dimensions about 1.5 kB each, so about 50 MB.
pub const DEFAULT_ENTRIES: usize = 32_768;

/// A bounded least-recently-used map from cache key to vector (`hashlink`'s `LruCache`, already
/// in the build through sqlx).
pub struct VectorMemory {
    entries: Option<Mutex<LruCache<String, Arc<[f32]>>>>,
}

impl VectorMemory {
    /// Keeps at most `capacity` vectors (0: keeps none).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: (capacity > 0).then(|| Mutex::new(LruCache::new(capacity))),
        }
    }

    /// The vector of each key, where memory has it (those become the most recently used).
    pub fn get_many(&self, keys: &[String]) -> Vec<Option<Arc<[f32]>>> {
        let Some(entries) = &self.entries else {
            return vec![None; keys.len()];
        };
        let mut entries = entries.lock().unwrap_or_else(|p| p.into_inner());
        keys.iter().map(|k| entries.get(k).cloned()).collect()
    }

    /// Remembers vectors under their keys (the oldest go when full).
    pub fn put_many(&self, items: impl IntoIterator<Item = (String, Arc<[f32]>)>) {
        let Some(entries) = &self.entries else { return };
        let mut entries = entries.lock().unwrap_or_else(|p| p.into_inner());
        for (k, v) in items {
            entries.insert(k, v);
        }
    }

    /// Forgets the vectors of these keys.
    pub fn forget(&self, keys: &[String]) {
        let Some(entries) = &self.entries else { return };
        let mut entries = entries.lock().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            entries.remove(k);
        }
    }

    /// Vectors held now.
    pub fn len(&self) -> usize {
        self.entries
            .as_ref()
            .map_or(0, |e| e.lock().unwrap_or_else(|p| p.into_inner()).len())
    }

    /// Whether memory holds no vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32) -> Arc<[f32]> {
        Arc::from(vec![x; 3])
    }

    #[test]
    fn keeps_the_most_recently_used_within_capacity() {
        let m = VectorMemory::new(2);
        m.put_many([("a".into(), v(1.0)), ("b".into(), v(2.0))]);
        // Reading `a` makes `b` the least recently used, so `c` pushes `b` out.
        assert!(m.get_many(&["a".into()])[0].is_some());
        m.put_many([("c".into(), v(3.0))]);
        let got = m.get_many(&["a".into(), "b".into(), "c".into()]);
        assert_eq!(got[0].as_deref(), Some(&[1.0; 3][..]));
        assert!(got[1].is_none());
        assert_eq!(got[2].as_deref(), Some(&[3.0; 3][..]));
        assert_eq!(m.len(), 2);
        m.forget(&["a".into(), "nope".into()]);
        assert!(m.get_many(&["a".into()])[0].is_none());
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let m = VectorMemory::new(0);
        m.put_many([("a".into(), v(1.0))]);
        assert!(m.get_many(&["a".into()])[0].is_none());
        assert!(m.is_empty());
    }
}
