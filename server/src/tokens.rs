//! Token counting on the server, with the same `core` tokenizer and vocabularies the widget runs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use glassbox_core::context::encoding_for;
use glassbox_core::tokens::{self, Tokenizer};

/// Most cached per-text counts before the cache starts over.
const COUNT_CACHE_MAX: usize = 200_000;

/// Token counting with the vocabularies the widget fetches (`dist/vocab/*.gbv`).
pub struct TokenCounter {
    tokenizers: RwLock<HashMap<String, Arc<Tokenizer>>>,
    cache: Mutex<HashMap<u64, u32>>,
}

impl TokenCounter {
    /// Loads the encodings `models` need (`<dir>/<encoding>.gbv`), plus o200k and cl100k. A missing
    /// or unreadable file is logged and counting for that encoding falls back to the estimate
    /// (reported as not exact). Hugging Face tokenizers load on a background thread: a large
    /// `tokenizer.json` takes a second or more, and chat must not wait for it.
    pub fn load(dir: &Path, models: &[&str]) -> Arc<Self> {
        let counter = Arc::new(TokenCounter {
            tokenizers: RwLock::new(HashMap::new()),
            cache: Mutex::new(HashMap::new()),
        });
        let mut wanted: Vec<&'static str> = vec!["o200k_base", "cl100k_base"];
        for model in models {
            let encoding = encoding_for(model).0;
            if !wanted.contains(&encoding) {
                wanted.push(encoding);
            }
        }
        let (ranks, hf): (Vec<&str>, Vec<&str>) =
            wanted.into_iter().partition(|e| e.ends_with("_base"));
        for name in ranks {
            counter.load_one(dir, name);
        }
        if !hf.is_empty() {
            let (dir, background) = (dir.to_owned(), counter.clone());
            std::thread::spawn(move || {
                for name in hf {
                    background.load_one(&dir, name);
                }
            });
        }
        counter
    }

    fn load_one(&self, dir: &Path, name: &str) {
        let path = dir.join(format!("{name}.gbv"));
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|d| Tokenizer::load(&d).map_err(|e| e.to_string()))
        {
            Ok(t) => {
                if let Ok(mut map) = self.tokenizers.write() {
                    map.insert(name.to_owned(), Arc::new(t));
                }
                tracing::info!(encoding = name, "token vocabulary loaded");
            }
            Err(e) => tracing::warn!(
                file = %path.display(),
                error = %e,
                "vocabulary unavailable (run `cargo xtask build`); token counts are estimates"
            ),
        }
    }

    fn get(&self, encoding: &str) -> Option<Arc<Tokenizer>> {
        self.tokenizers.read().ok()?.get(encoding).cloned()
    }

    /// True when `encoding` counts exactly (its vocabulary is loaded).
    pub fn has(&self, encoding: &str) -> bool {
        self.get(encoding).is_some()
    }

    /// Tokens of `text` in `encoding` (cached by content), or the estimate without its vocabulary.
    pub fn count(&self, encoding: &str, text: &str) -> u32 {
        let Some(tokenizer) = self.get(encoding) else {
            return tokens::estimate(text) as u32;
        };
        let key = tokens::content_key(text) ^ tokens::content_key(encoding).rotate_left(17);
        if let Some(&n) = self.cache.lock().ok().as_ref().and_then(|c| c.get(&key)) {
            return n;
        }
        let n = tokenizer.count(text) as u32;
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= COUNT_CACHE_MAX {
                cache.clear();
            }
            cache.insert(key, n);
        }
        n
    }
}
