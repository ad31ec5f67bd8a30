//! Shared application state handed to every handler.

use std::sync::Arc;

use crate::rate_limits::RateLimits;

use crate::config::Config;
use crate::context::TokenCounter;
use crate::embed::EmbeddingService;
use crate::hub::Hubs;
use crate::providers::Provider;
use crate::storage::Store;
use crate::turn::call::Limits;
use crate::turn::tools::ToolRegistry;

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
    /// Tools offered to the model with every reply.
    pub tools: ToolRegistry,
    /// Outgoing HTTP besides providers (the host's file existence check).
    pub http: reqwest::Client,
    /// Rate limits per client address and per session.
    pub limits: Arc<RateLimits>,
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
        let config_limits = config.rate_limits;
        let tools = if config.tools_enabled {
            ToolRegistry::builtin()
        } else {
            ToolRegistry::new(Vec::new())
        };
        Self {
            tokens,
            config: Arc::new(config),
            store,
            provider,
            hubs: Arc::new(Hubs::default()),
            embeddings,
            tools,
            http: reqwest::Client::new(),
            limits: Arc::new(RateLimits::new(config_limits)),
        }
    }

    /// The idle and total timeouts of every provider call.
    pub fn call_limits(&self) -> Limits {
        Limits {
            idle: self.config.provider_idle_timeout,
            total: self.config.provider_total_timeout,
        }
    }
}
