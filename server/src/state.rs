//! The composition root: builds every service from the foundations once, and hands the whole to
//! the routes. Nothing below the routes reads it.

use glassbox_core::context::encoding_for;
use std::sync::Arc;

use crate::agents::AgentCatalog;
use crate::approvals::Approvals;
use crate::budgets::Budgets;
use crate::calls::{Calls, Limits};
use crate::chat::Chat;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::context::ContextWindows;
use crate::drain::Drain;
use crate::embed::EmbeddingService;
use crate::files::Files;
use crate::hub::Hubs;
use crate::items::Items;
use crate::mcp::McpServers;
use crate::metrics::Metrics;
use crate::providers::Provider;
use crate::rate_limits::RateLimits;
use crate::sessions::Sessions;
use crate::storage::Store;
use crate::tokens::TokenCounter;
use crate::tools::ToolRegistry;
use crate::topics::Topics;
use crate::turn::{TurnEngine, TurnServices};

/// Everything handlers need; cheap to clone (one shared [`Services`]: a request's handlers and
/// layers each take a clone, so the clone is one reference count, not one per service).
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The services an [`AppState`] shares.
pub struct Services {
    pub config: Arc<Config>,
    pub store: Store,
    pub provider: Arc<dyn Provider>,
    pub hubs: Arc<Hubs>,
    pub embeddings: Arc<EmbeddingService>,
    /// Rate limits per client address and per session.
    pub limits: Arc<RateLimits>,
    /// Tools offered to the model; changes while the server runs.
    pub tools: ToolRegistry,
    /// The configured agents; read again when their files change.
    pub agents: AgentCatalog,
    /// The agents' MCP servers, connected in the background; their tools join `tools`.
    pub mcp: McpServers,
    /// The agents' items in sessions and requests.
    pub items: Items,
    pub budgets: Budgets,
    pub sessions: Sessions,
    pub windows: ContextWindows,
    pub topics: Topics,
    pub turns: TurnEngine,
    pub chat: Chat,
    /// The files users upload to their sessions.
    pub files: Files,
    /// Tool calls waiting for the user's yes, and the session's grants.
    pub approvals: Approvals,
    /// This instance among those sharing a PostgreSQL database (none on SQLite).
    pub cluster: Option<Cluster>,
    /// What `/metrics` reports.
    pub metrics: Metrics,
    /// Replies under way, and whether the process is shutting down.
    pub drain: Drain,
}

impl AppState {
    /// State over an opened store, a provider and the embedding service.
    pub fn new(
        config: Config,
        store: Store,
        provider: Arc<dyn Provider>,
        embeddings: Arc<EmbeddingService>,
        agents: AgentCatalog,
    ) -> Self {
        let models: Vec<&str> = std::iter::once(config.model.as_str())
            .chain(config.allowed_models.iter().map(String::as_str))
            .collect();
        let tokens = TokenCounter::load(&config.vocab_dir, &models);
        let metrics = Metrics::new();
        // On PostgreSQL this process is one of the instances that may share the database.
        let cluster = store.postgres().cloned().map(Cluster::new);
        let limits = RateLimits::new(config.rate_limits).counting(metrics.clone());
        let limits = Arc::new(match &cluster {
            Some(cluster) => limits.sharing(cluster.rates.clone()),
            None => limits,
        });
        let tools = if config.tools_enabled {
            ToolRegistry::builtin()
        } else {
            ToolRegistry::default()
        };
        // Connects in the background: chat is served while servers connect, or when they are down.
        // The instance listens right after this, and clients reconnect to an instance that has
        // just started: starting the servers' processes waits for a quiet spell from here.
        crate::background::instance_started();
        let mcp = McpServers::new(tools.clone());
        mcp.sync(&agents.current());
        let config = Arc::new(config);
        let store = match &cluster {
            Some(cluster) => store.producing_as(&cluster.id),
            None => store,
        };
        let hubs = Arc::new(match &cluster {
            Some(cluster) => Hubs::clustered(cluster.clone()),
            None => Hubs::default(),
        });
        let budgets = Budgets::new(store.clone(), config.budgets)
            .holding_for(config.provider_total_timeout + std::time::Duration::from_secs(60))
            .counting(metrics.clone());
        let items = Items::new(
            agents.clone(),
            store.clone(),
            embeddings.clone(),
            limits.clone(),
            // The server's own limits for sessions without an agent (and the longest reply any
            // session may ask for unless its agent sets one).
            glassbox_core::context::agent_settings::AgentSettings {
                max_chat_turns: config
                    .max_chat_turns
                    .clamp(1, glassbox_core::context::agent_settings::MAX_CHAT_TURNS),
                max_output_tokens: Some(config.max_output_tokens),
                ..Default::default()
            },
            tools.clone(),
            {
                let (tokens, encoding) = (tokens.clone(), encoding_for(&config.model).0);
                Arc::new(move |text: &str| tokens.count(encoding, text))
            },
        );
        let calls = Calls::new(
            provider.clone(),
            Limits {
                idle: config.provider_idle_timeout,
                total: config.provider_total_timeout,
            },
            budgets.clone(),
            tokens.clone(),
            metrics.clone(),
        );
        let windows = ContextWindows::new(
            config.clone(),
            store.clone(),
            tokens.clone(),
            tools.clone(),
            budgets.clone(),
            items.clone(),
        );
        let topics = Topics::new(
            config.clone(),
            store.clone(),
            embeddings.clone(),
            hubs.clone(),
            limits.clone(),
            calls.clone(),
        );
        let sessions = Sessions::new(
            config.clone(),
            store.clone(),
            hubs.clone(),
            limits.clone(),
            embeddings.clone(),
            tools.clone(),
            items.clone(),
        );
        let files = Files::new(store.clone(), config.files_max_bytes);
        let approvals = Approvals::new(store.clone());
        let turns = TurnEngine::new(TurnServices {
            files: files.clone(),
            config: config.clone(),
            store: store.clone(),
            calls,
            tokens,
            windows: windows.clone(),
            topics: topics.clone(),
            items: items.clone(),
            limits: limits.clone(),
            http: reqwest::Client::new(),
            approvals: approvals.clone(),
        });
        let drain = Drain::default();
        let chat = Chat::new(
            store.clone(),
            limits.clone(),
            budgets.clone(),
            turns.clone(),
            drain.clone(),
            cluster.clone(),
        );
        Self(Arc::new(Services {
            cluster,
            config,
            store,
            provider,
            hubs,
            embeddings,
            limits,
            tools,
            agents,
            mcp,
            items: items.clone(),
            budgets,
            sessions,
            windows,
            topics,
            turns,
            chat,
            files,
            approvals,
            metrics,
            drain,
        }))
    }
}
