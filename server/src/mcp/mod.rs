//! The agents' MCP servers (docs/agents.md, "MCP servers"): each configured server is kept
//! connected in the background ([`connection`]); whenever an agent's servers change what they
//! offer, that agent's scope of the tool registry is replaced by their tools ([`tool::McpTool`],
//! under unique offered names, [`names`]). A turn takes the registry as it is when the turn starts,
//! so a changed list takes effect at the next message, never inside a tool loop.

pub mod connection;
pub mod names;
pub mod start_priority;
pub mod tool;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use serde::Serialize;

use crate::agents::{Agents, McpServerConfig};
use crate::tools::{Tool, ToolRegistry, ToolScope};
use connection::{Connection, Status};

/// One server's state as `/healthz` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerHealth {
    pub agent: String,
    pub server: String,
    /// `connecting`, `ready` or `failed`.
    pub status: &'static str,
    /// Its tools (when ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
    /// Why it is not ready (when failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

type Key = (String, String);

struct Inner {
    /// Connections by (agent, server), with the agent's servers in the configuration's order.
    connections: Mutex<BTreeMap<Key, Connection>>,
    /// Each agent's servers, in the configuration's order.
    order: Mutex<BTreeMap<String, Vec<String>>>,
    /// One server connects at a time ([`Connection::start`]).
    turns: Arc<tokio::sync::Semaphore>,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            connections: Mutex::default(),
            order: Mutex::default(),
            turns: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

/// The connections of every agent's MCP servers. Clones share them.
#[derive(Clone)]
pub struct McpServers {
    inner: Arc<Inner>,
    registry: ToolRegistry,
}

impl McpServers {
    /// No servers yet; their tools will go into `registry`.
    pub fn new(registry: ToolRegistry) -> Self {
        Self {
            inner: Arc::default(),
            registry,
        }
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Connection>> {
        self.inner
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Connects the servers `agents` configure (in the background), keeps those whose settings
    /// did not change, and ends those no longer configured or changed (their tools withdrawn).
    pub fn sync(&self, agents: &Agents) {
        let wanted: BTreeMap<Key, &McpServerConfig> = agents
            .all()
            .iter()
            .flat_map(|a| {
                a.mcp_servers
                    .iter()
                    .map(|s| ((a.name.clone(), s.name.clone()), s))
            })
            .collect();
        let order: BTreeMap<String, Vec<String>> = agents
            .all()
            .iter()
            .map(|a| {
                (
                    a.name.clone(),
                    a.mcp_servers.iter().map(|s| s.name.clone()).collect(),
                )
            })
            .collect();
        let mut touched: Vec<String> = Vec::new();
        {
            let mut connections = self.connections();
            let stale: Vec<Key> = connections
                .iter()
                .filter(|(k, c)| wanted.get(*k).is_none_or(|w| **w != c.config))
                .map(|(k, _)| k.clone())
                .collect();
            for key in stale {
                if let Some(c) = connections.remove(&key) {
                    c.stop();
                }
                touched.push(key.0);
            }
            for (key, config) in wanted {
                if connections.contains_key(&key) {
                    continue;
                }
                let weak: Weak<Inner> = Arc::downgrade(&self.inner);
                let registry = self.registry.clone();
                let agent = key.0.clone();
                let changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                    if let Some(inner) = weak.upgrade() {
                        refresh(&inner, &registry, &agent);
                    }
                });
                touched.push(key.0.clone());
                let turns = self.inner.turns.clone();
                connections.insert(key, Connection::start(config.clone(), changed, turns));
            }
        }
        let gone: Vec<String> = {
            let mut current = self.inner.order.lock().unwrap_or_else(|p| p.into_inner());
            let gone = current
                .keys()
                .filter(|a| !order.contains_key(*a))
                .cloned()
                .collect();
            *current = order;
            gone
        };
        touched.extend(gone);
        touched.sort();
        touched.dedup();
        for agent in touched {
            refresh(&self.inner, &self.registry, &agent);
        }
    }

    /// Every server's state, by agent then server name.
    pub fn health(&self) -> Vec<ServerHealth> {
        self.connections()
            .iter()
            .map(|((agent, server), c)| {
                let live = c.live();
                let (status, tools, error) = match live.status {
                    Status::Connecting => ("connecting", None, None),
                    Status::Ready { tools } => ("ready", Some(tools), None),
                    Status::Failed { error } => ("failed", None, Some(error)),
                };
                ServerHealth {
                    agent: agent.clone(),
                    server: server.clone(),
                    status,
                    tools,
                    error,
                }
            })
            .collect()
    }

    /// Ends every connection (the server is stopping).
    pub fn stop_all(&self) {
        for (_, c) in std::mem::take(&mut *self.connections()) {
            c.stop();
        }
    }
}

/// Replaces `agent`'s registry scope with the tools its ready servers offer now: servers in the
/// configuration's order, each server's tools as listed, denied tools left out.
fn refresh(inner: &Inner, registry: &ToolRegistry, agent: &str) {
    let order: Vec<String> = inner
        .order
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(agent)
        .cloned()
        .unwrap_or_default();
    let connections = inner.connections.lock().unwrap_or_else(|p| p.into_inner());
    let mut offered = Vec::new();
    for server in &order {
        let Some(connection) = connections.get(&(agent.to_owned(), server.clone())) else {
            continue;
        };
        let live = connection.live();
        let Some(peer) = live.peer else { continue };
        let config = Arc::new(connection.config.clone());
        for def in live.tools {
            if !config.denies(&def.name) {
                offered.push((config.clone(), def, peer.clone()));
            }
        }
    }
    let names = names::offered_names(
        offered
            .iter()
            .map(|(c, d, _)| (c.name.as_str(), d.name.as_ref())),
    );
    let tools: Vec<Arc<dyn Tool>> = offered
        .into_iter()
        .zip(names)
        .map(|((config, def, peer), name)| {
            Arc::new(tool::McpTool::new(name, config, def, peer)) as Arc<dyn Tool>
        })
        .collect();
    registry.replace(ToolScope::Agent(agent.to_owned()), tools);
}
