//! Shared application state handed to every handler.

use std::sync::Arc;

use crate::config::Config;
use crate::context::TokenCounter;
use crate::embed::EmbeddingService;
use crate::hub::Hubs;
use crate::providers::Provider;
use crate::storage::Store;

/// Everything handlers need; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub store: Store,
    pub provider: Arc<dyn Provider>,
    pub hubs: Arc<Hubs>,
    pub embeddings: Arc<EmbeddingService>,
    /// Token counting for budgets and compression (same code and vocabularies as the widget).
    pub tokens: Arc<TokenCounter>,
}

impl AppState {
    /// State over an opened store, a provider and the embedding service.
    pub fn new(
        config: Config,
        store: Store,
        provider: Arc<dyn Provider>,
        embeddings: Arc<EmbeddingService>,
    ) -> Self {
        let models: Vec<&str> = std::iter::once(config.model.as_str())
            .chain(config.allowed_models.iter().map(String::as_str))
            .collect();
        let tokens = TokenCounter::load(&config.vocab_dir, &models);
        Self {
            tokens,
            config: Arc::new(config),
            store,
            provider,
            hubs: Arc::new(Hubs::default()),
            embeddings,
        }
    }
}
