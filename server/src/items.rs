//! The agents' items in sessions and requests. A session starts with its agent's `always` items;
//! the user adds or removes any item by hand and overrides the agent's defaults (all stored in the
//! session's settings record, heard by every tab as `items`). Each turn's request context is the
//! session's items plus the `agent` items a semantic search of the message finds
//! ([`Items::request_context`]): items are indexed when first searched (chunks embedded, vectors
//! cached by content hash in the database, so a restart embeds nothing again), the message is
//! split into sentences, and `analysis::item_search` chooses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use glassbox_analysis::item_search::{
    self, Candidate, MAX_CHUNK_CHARS, NEAR_MISSES, SearchOutcome,
};
use glassbox_core::context::SessionSettings;
use glassbox_core::context::agent_settings::{AgentSettings, SettingError};
use glassbox_core::context::items::{
    AgentItem, ItemError, ItemRef, RequestItem, add_item, carried, new_session_items, remove_item,
    request_items, searchable,
};
use glassbox_core::wire::{ItemsView, ServerEvent};

use crate::agents::{Agent, AgentCatalog, Item};
use crate::embed::service::{EmbedServiceError, EmbedStatus, EmbeddingService, content_hash};
use crate::hub::Hub;
use crate::rate_limits::{RateLimited, RateLimits};
use crate::storage::{StorageError, Store};
use crate::tools::ToolRegistry;
use crate::wire_error::ToWire;

/// Most sentences of a message searched with (the first ones); a message is at most a few
/// thousand characters, and each sentence is one more embedding.
const MAX_QUERY_SENTENCES: usize = 16;

/// Why an item command was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ItemsError {
    #[error("{0}")]
    Unknown(#[from] ItemError),
    #[error("invalid settings: {0}")]
    Settings(#[from] SettingError),
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error("storage failed")]
    Storage(#[from] StorageError),
}

impl ToWire for ItemsError {
    fn code(&self) -> glassbox_core::ErrorCode {
        use glassbox_core::ErrorCode;
        match self {
            ItemsError::Unknown(_) => ErrorCode::NotFound,
            ItemsError::Settings(_) => ErrorCode::InvalidSettings,
            ItemsError::RateLimited(e) => e.code(),
            ItemsError::Storage(e) => e.code(),
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ItemsError::RateLimited(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// How the search of a turn went.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchStatus {
    /// It ran (over the agent's `agent` items the session does not carry).
    Done,
    /// The session has no agent (a server without agents): no items at all.
    NoAgent,
    /// Nothing to search: no `agent` item outside the session, or an empty message.
    Nothing,
    /// Embeddings are loading, off or failed: no agent item this turn.
    Unavailable(String),
    /// The search failed: no agent item this turn.
    Failed(String),
}

/// The items of one request, with their texts, and what the search found and missed.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The session's items, then those chosen by search and by expansion.
    pub items: Vec<(RequestItem, Arc<Item>)>,
    /// The best candidates the search did not choose, best first, with their scores.
    pub near_misses: Vec<(RequestItem, Arc<Item>)>,
    pub status: SearchStatus,
}

/// The chunk vectors of one item's index text.
struct Indexed {
    chunks: Vec<Arc<[f32]>>,
    /// The embedding cache keys of its chunks.
    keys: Vec<String>,
}

/// The agents' items in sessions and requests.
#[derive(Clone)]
pub struct Items {
    agents: AgentCatalog,
    store: Store,
    embeddings: Arc<EmbeddingService>,
    limits: Arc<RateLimits>,
    /// The settings of sessions without an agent (the server's own).
    base: AgentSettings,
    /// Indexed items by the hash of their index text (a changed item is a new entry).
    index: Arc<Mutex<HashMap<String, Arc<Indexed>>>>,
    /// Where the agents' MCP tools are offered: they are items too.
    tools: ToolRegistry,
    /// Tokens of a text in the server's model's vocabulary (a tool's cost in the drawer).
    count: Arc<dyn Fn(&str) -> u32 + Send + Sync>,
}

/// The index text of an item as the search reads it: a rule's or reference's name, description
/// and text; a tool's `name: description` (so a changed description is indexed again).
fn index_text(item: &Item) -> String {
    match item.meta.item.kind {
        glassbox_core::context::items::ItemKind::Tool { .. } => {
            format!("{}: {}", item.name(), item.meta.description)
        }
        _ => item_search::index_text(item.name(), &item.meta.description, Some(&item.text)),
    }
}

/// The embedding cache key of an item's chunk: its content hash, shared by every item that has it.
pub fn chunk_key(chunk: &str) -> String {
    format!("item:{}", content_hash(chunk))
}

/// The memory key of a sentence searched with (kept in memory only: a draft previewed while it is
/// typed is searched with the same sentences again and again).
pub fn query_key(sentence: &str) -> String {
    format!("query:{}", content_hash(sentence))
}

impl Items {
    /// Items of the agents in `agents`, their vectors from `embeddings` (cached in `store`);
    /// `base`: the settings of sessions without an agent.
    pub fn new(
        agents: AgentCatalog,
        store: Store,
        embeddings: Arc<EmbeddingService>,
        limits: Arc<RateLimits>,
        base: AgentSettings,
        tools: ToolRegistry,
        count: Arc<dyn Fn(&str) -> u32 + Send + Sync>,
    ) -> Self {
        Self {
            agents,
            store,
            embeddings,
            limits,
            base,
            index: Arc::default(),
            tools,
            count,
        }
    }

    /// Every item of `agent`: its rules and references, then its MCP servers' tools as they are
    /// offered now.
    pub fn items_of(&self, agent: &Agent) -> Vec<Arc<Item>> {
        agent
            .items
            .iter()
            .cloned()
            .chain(self.tools.agent_items(&agent.name))
            .collect()
    }

    /// What the session lists and the search know of every item of `agent` (without copying the
    /// items' texts); each tool with its definition's tokens.
    fn metas(&self, agent: &Agent) -> Vec<AgentItem> {
        let tools = self.tools.agent_tools(&agent.name);
        let tool_metas = tools.iter().filter_map(|t| {
            let json = serde_json::to_string(&t.definition()).unwrap_or_default();
            Some(AgentItem {
                tokens: Some((self.count)(&json)),
                ..t.item()?.meta.clone()
            })
        });
        agent
            .items
            .iter()
            .map(|i| i.meta.clone())
            .chain(tool_metas)
            .collect()
    }

    fn indexed(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Indexed>>> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The agents as configured now.
    pub fn agents(&self) -> Arc<crate::agents::Agents> {
        self.agents.current()
    }

    /// The items a new session of `agent` starts with (its `always` items, by priority; the
    /// tools of servers that are connected now).
    pub fn for_new_session(
        &self,
        agent: &Agent,
    ) -> Vec<glassbox_core::context::items::SessionItem> {
        new_session_items(&self.metas(agent))
    }

    /// The agent a session was created for, as configured now (`None`: no agent, or one the
    /// configuration no longer has).
    pub fn agent(&self, settings: &SessionSettings) -> Option<Arc<Agent>> {
        let name = settings.agent.as_deref()?;
        self.agents.current().pick(Some(name)).cloned()
    }

    /// The drawer's view of a session with `settings`.
    pub fn view(&self, settings: &SessionSettings) -> ItemsView {
        let agent = self.agent(settings);
        let available = agent.as_ref().map(|a| self.metas(a)).unwrap_or_default();
        ItemsView {
            agent: agent.as_ref().map(|a| a.name.clone()),
            session: carried(&settings.items, &settings.removed, &available),
            available,
            defaults: self.defaults(settings),
            overrides: settings.overrides.clone(),
        }
    }

    /// The defaults of a session: its agent's, else the server's; the longest reply the server's
    /// when the agent sets none (so the drawer shows it, and a session cannot raise it).
    fn defaults(&self, settings: &SessionSettings) -> AgentSettings {
        let mut defaults = self
            .agent(settings)
            .map_or_else(|| self.base.clone(), |a| a.defaults.clone());
        defaults.max_output_tokens = defaults.max_output_tokens.or(self.base.max_output_tokens);
        defaults
    }

    /// The session's defaults with its overrides laid over them.
    pub fn effective(&self, settings: &SessionSettings) -> AgentSettings {
        self.defaults(settings).with(&settings.overrides)
    }

    /// The view, asked for (counts as a command).
    pub async fn get(&self, session_id: &str) -> Result<ItemsView, ItemsError> {
        self.limits.command(session_id).await?;
        Ok(self.view(&self.store.settings(session_id).await?))
    }

    /// Adds `item` to the session as `manual` (nothing when it is there already).
    pub async fn add(&self, hub: &Hub, item: &ItemRef) -> Result<ItemsView, ItemsError> {
        self.change(hub, |settings, available| {
            settings.removed.retain(|r| r != item);
            add_item(&mut settings.items, available, item)?;
            Ok(())
        })
        .await
    }

    /// Removes `item` from the session, whatever brought it in (nothing when it is not there).
    pub async fn remove(&self, hub: &Hub, item: &ItemRef) -> Result<ItemsView, ItemsError> {
        self.change(hub, |settings, available| {
            remove_item(&mut settings.items, available, item)?;
            if !settings.removed.contains(item) {
                settings.removed.push(item.clone());
            }
            Ok(())
        })
        .await
    }

    /// Replaces the session's overrides (checked against the agent's defaults laid under them).
    pub async fn set_overrides(
        &self,
        hub: &Hub,
        overrides: glassbox_core::context::agent_settings::SessionOverrides,
    ) -> Result<ItemsView, ItemsError> {
        let defaults = self.defaults(&self.store.settings(&hub.session_id).await?);
        // A session may lower what costs, not raise it past its operator's limits.
        defaults.check_overrides(&overrides)?;
        self.change(hub, move |settings, _| {
            settings.overrides = overrides;
            Ok(())
        })
        .await
    }

    /// Changes the session's settings (under one transaction) and tells every tab the new view.
    async fn change(
        &self,
        hub: &Hub,
        change: impl FnOnce(&mut SessionSettings, &[AgentItem]) -> Result<(), ItemsError>,
    ) -> Result<ItemsView, ItemsError> {
        self.limits.command(&hub.session_id).await?;
        self.store
            .update_settings(&hub.session_id, |settings| {
                let available: Vec<AgentItem> = self
                    .agent(settings)
                    .map(|a| self.metas(&a))
                    .unwrap_or_default();
                change(settings, &available)
            })
            .await?;
        // Read again and told under the session's view lock: when two changes race, the last
        // view told holds both.
        let _order = hub.view_lock.lock().await;
        let view = self.view(&self.store.settings(&hub.session_id).await?);
        hub.publish(ServerEvent::Items(view.clone()));
        Ok(view)
    }

    /// Forgets the vectors of items that changed or went (a configuration reload): the next
    /// search indexes them again. Chunks shared with items still configured are kept.
    pub async fn forget_stale(&self) -> Result<usize, StorageError> {
        let agents = self.agents.current();
        let live: std::collections::HashSet<String> = agents
            .all()
            .iter()
            .flat_map(|a| self.items_of(a))
            .map(|i| content_hash(&index_text(&i)))
            .collect();
        let stale: Vec<Arc<Indexed>> = {
            let mut index = self.indexed();
            let gone: Vec<String> = index
                .keys()
                .filter(|k| !live.contains(*k))
                .cloned()
                .collect();
            gone.iter().filter_map(|k| index.remove(k)).collect()
        };
        let kept: std::collections::HashSet<String> = self
            .indexed()
            .values()
            .flat_map(|i| i.keys.iter().cloned())
            .collect();
        let keys: Vec<String> = stale
            .iter()
            .flat_map(|i| i.keys.iter())
            .filter(|k| !kept.contains(*k))
            .cloned()
            .collect();
        if !keys.is_empty() {
            self.embeddings.forget(&keys);
            self.store
                .delete_embeddings(&self.embeddings.model, &keys)
                .await?;
        }
        Ok(stale.len())
    }

    /// The chunk vectors of `items`, in order: indexed ones from memory, the others chunked and
    /// embedded now (vectors from the database cache when it has them), all in one batch.
    async fn index_of(&self, items: &[&Item]) -> Result<Vec<Arc<Indexed>>, EmbedServiceError> {
        let hashes: Vec<&str> = items
            .iter()
            .map(|i| i.search_key.get_or_init(|| content_hash(&index_text(i))))
            .collect();
        let mut out: Vec<Option<Arc<Indexed>>> = {
            let index = self.indexed();
            hashes.iter().map(|h| index.get(*h).cloned()).collect()
        };
        let missing: Vec<usize> = (0..items.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let texts: Vec<String> = missing.iter().map(|&i| index_text(items[i])).collect();
            let chunked: Vec<Vec<&str>> = texts
                .iter()
                .map(|t| item_search::chunk(t, MAX_CHUNK_CHARS))
                .collect();
            let batch: Vec<(String, String)> = chunked
                .iter()
                .flatten()
                .map(|c| (chunk_key(c), (*c).to_owned()))
                .collect();
            let mut vectors = Vec::with_capacity(batch.len());
            for part in batch.chunks(crate::embed::service::MAX_INPUTS) {
                vectors.extend(
                    self.embeddings
                        .embed_cached(&self.store, part.to_vec())
                        .await?,
                );
            }
            let mut vectors = vectors.into_iter();
            let mut index = self.indexed();
            for (&i, chunks) in missing.iter().zip(&chunked) {
                let indexed = Arc::new(Indexed {
                    chunks: vectors.by_ref().take(chunks.len()).collect(),
                    keys: chunks.iter().map(|c| chunk_key(c)).collect(),
                });
                index.insert(hashes[i].to_owned(), indexed.clone());
                out[i] = Some(indexed);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The request context of a turn of a session with `settings` answering `message`: the
    /// session's items, and the `agent` items the search chooses. When embeddings are unavailable
    /// or the search fails, the turn gets the session's items only and the status says why.
    pub async fn request_context(
        &self,
        settings: &SessionSettings,
        message: &str,
    ) -> RequestContext {
        let agent = self.agent(settings);
        let all: Vec<Arc<Item>> = agent.as_ref().map(|a| self.items_of(a)).unwrap_or_default();
        let metas: Vec<AgentItem> = all.iter().map(|i| i.meta.clone()).collect();
        let session = carried(&settings.items, &settings.removed, &metas);
        let by_ref = |r: &ItemRef| all.iter().find(|i| &i.meta.item == r).cloned();
        let session_only = |status| RequestContext {
            items: request_items(&session, [])
                .into_iter()
                .filter_map(|r| by_ref(&r.item).map(|i| (r, i)))
                .collect(),
            near_misses: Vec::new(),
            status,
        };
        if agent.is_none() {
            return session_only(SearchStatus::NoAgent);
        }
        let pool: Vec<&Item> = searchable(&metas, &session)
            .filter_map(|m| all.iter().find(|i| i.meta.item == m.item))
            .map(|i| &**i)
            .collect();
        let queries: Vec<&str> = item_search::query_chunks(message, MAX_CHUNK_CHARS)
            .into_iter()
            .take(MAX_QUERY_SENTENCES)
            .collect();
        if pool.is_empty() || queries.is_empty() {
            return session_only(SearchStatus::Nothing);
        }
        if let EmbedStatus::Loading | EmbedStatus::Disabled | EmbedStatus::Failed(_) =
            self.embeddings.status()
        {
            let why = match self.embeddings.status() {
                EmbedStatus::Loading => "the embedding model is still loading".to_owned(),
                EmbedStatus::Failed(e) => format!("the embedding model failed to load: {e}"),
                _ => "embeddings are switched off on this server".to_owned(),
            };
            return session_only(SearchStatus::Unavailable(why));
        }
        let searched = async {
            let indexed = self.index_of(&pool).await?;
            let query_vectors = self
                .embeddings
                .embed_remembered(
                    queries
                        .iter()
                        .map(|q| (query_key(q), (*q).to_owned()))
                        .collect(),
                )
                .await?;
            Ok::<_, EmbedServiceError>((indexed, query_vectors))
        }
        .await;
        let (indexed, query_vectors) = match searched {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "item search failed; the turn goes on without agent items");
                return session_only(SearchStatus::Failed(match e {
                    EmbedServiceError::Overloaded => "the embedding model is busy".to_owned(),
                    _ => "the embedding model failed".to_owned(),
                }));
            }
        };
        let candidates: Vec<Candidate<Arc<[f32]>>> = pool
            .iter()
            .zip(&indexed)
            .map(|(item, ix)| Candidate {
                item: &item.meta.item,
                priority: item.meta.priority,
                chunks: &ix.chunks,
            })
            .collect();
        let queries: Vec<&[f32]> = query_vectors.iter().map(|v| &v[..]).collect();
        let outcome: SearchOutcome = item_search::search(
            &queries,
            &candidates,
            &self.effective(settings).search(),
            NEAR_MISSES,
        );
        let chosen = outcome.request_items(&candidates);
        let near_misses = outcome
            .near_misses
            .iter()
            .filter_map(|m| {
                m.request_item(&candidates, glassbox_core::context::items::Included::Agent)
            })
            .filter_map(|r| by_ref(&r.item).map(|i| (r, i)))
            .collect();
        RequestContext {
            items: request_items(&session, chosen)
                .into_iter()
                .filter_map(|r| by_ref(&r.item).map(|i| (r, i)))
                .collect(),
            near_misses,
            status: SearchStatus::Done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repository's demo agent's items, over an empty database with embeddings off.
    async fn demo_items() -> (Items, Arc<Agent>, tempfile::TempDir) {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../glassbox.toml");
        let catalog = AgentCatalog::open(Some(&file)).unwrap();
        let agent = catalog.current().pick(None).cloned().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let items = Items::new(
            catalog,
            Store::open(dir.path()).await.unwrap(),
            EmbeddingService::disabled("none".into()),
            Arc::new(RateLimits::new(Default::default())),
            AgentSettings::default(),
            ToolRegistry::default(),
            Arc::new(|text: &str| text.split_whitespace().count() as u32),
        );
        (items, agent, dir)
    }

    #[tokio::test]
    async fn an_items_search_key_worked_out_at_one_turn_is_there_at_the_next() {
        let (items, agent, _dir) = demo_items().await;
        assert!(agent.items.len() >= 12, "the demo agent has its references");
        for item in items.items_of(&agent) {
            item.search_key
                .get_or_init(|| content_hash(&index_text(&item)));
        }
        for item in items.items_of(&agent) {
            item.search_key
                .get_or_init(|| panic!("{}'s search key was worked out again", item.name()));
        }
    }
}
