//! The context window on the server: counts tokens with the same `core` tokenizer the widget runs,
//! and derives each connection's `ContextInfo` from the session's settings and its model.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use glassbox_core::context::{
    CompressionSettings, ContextInfo, ServerFacts, SessionSettings, encoding_for,
};
use glassbox_core::tokens::{self, Tokenizer};
use glassbox_core::wire::SessionInfo;

use crate::error::AppError;
use crate::state::AppState;

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

impl AppState {
    /// The context parameters of a session replying with `model`.
    pub async fn context_info(
        &self,
        session_id: &str,
        model: &str,
    ) -> Result<ContextInfo, AppError> {
        let settings = self.store.settings(session_id).await?;
        Ok(self.context_info_with(model, &settings))
    }

    /// The context parameters for `model` under a session's `settings`: derived, never stored, so
    /// each connection of a session gets the meter for the model it talks to.
    pub fn context_info_with(&self, model: &str, settings: &SessionSettings) -> ContextInfo {
        let encoding = encoding_for(model).0;
        let count = |text: &str| self.tokens.count(encoding, text);
        let facts = ServerFacts {
            model_limits: &self.config.model_limits,
            max_output_tokens: self.config.max_output_tokens,
            system_prompt_tokens: self.config.system_prompt.as_deref().map_or(0, count),
            // The tools offered with every reply and the instructions about them, as the plan counts
            // them (counts are cached by text, the definitions serialized once).
            tool_tokens: if self.tools.is_empty() {
                0
            } else {
                count(self.tools.definitions_json())
                    + self.config.context_prompt.as_deref().map_or(0, count)
            },
            vocabulary_loaded: self.tokens.has(encoding),
        };
        ContextInfo::derive(model, settings, facts)
    }

    /// `info` with its `context` filled in, for the answers that carry it (`hello`, new sessions);
    /// other routes skip the settings read.
    pub async fn with_context(&self, mut info: SessionInfo) -> Result<SessionInfo, AppError> {
        info.context = Some(self.context_info(&info.session_id, &info.model).await?);
        info.budget = self.session_budget(&info.session_id).await?;
        Ok(info)
    }

    /// Validates, stores and returns new compression settings for a session.
    pub async fn update_compression(
        &self,
        session_id: &str,
        model: &str,
        settings: CompressionSettings,
    ) -> Result<ContextInfo, AppError> {
        settings.validate().map_err(AppError::InvalidSettings)?;
        let ((), stored) = self
            .store
            .update_settings(session_id, |s| -> Result<(), AppError> {
                s.compression = settings;
                Ok(())
            })
            .await?;
        Ok(self.context_info_with(model, &stored))
    }
}
