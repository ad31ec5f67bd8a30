//! Glassbox server: WebSocket + REST chat that forwards to LLM providers, with persistence.
//!
//! The modules are in three layers, each using only the ones below it:
//! - foundations: `allocator`, `config` (with `origins`, `rate_limits`, `client_addr`), `agents`,
//!   `ids`, `storage`, `providers`, `embed`, `tokens`, `stops`, `hub`, `background`, `wire_error`,
//!   `metrics`, `drain`;
//! - services, each with its own error: `approvals`, `budgets`, `calls`, `context_sets`, `files`, `tools`, `mcp`, `items`,
//!   `context`, `topics`, `sessions`, `turn`, `chat`;
//! - the edge: `routes` and `error` (the wire error built from the services' errors), with
//!   `state` as the composition root.

pub use allocator::Allocator;

pub mod agents;
pub mod allocator;
pub mod approvals;
pub mod background;
pub mod budgets;
pub mod calls;
pub mod chat;
pub mod client_addr;
pub mod cluster;
pub mod config;
pub mod context;
pub mod context_sets;
pub mod drain;
pub mod embed;
pub mod error;
pub mod files;
pub mod hub;
pub mod identity;
pub mod ids;
pub mod items;
pub mod mcp;
pub mod metrics;
pub mod origins;
pub mod providers;
pub mod rate_limits;
pub mod routes;
pub mod sessions;
pub mod state;
pub mod stops;
pub mod storage;
pub mod tokens;
pub mod tools;
pub mod topics;
pub mod turn;
pub mod wire_error;

pub use routes::{app, metrics_app};
pub use state::AppState;

use axum::serve::ListenerExt;
use glassbox_core::ErrorCode;
use glassbox_core::wire::WireError;

/// Opens the store, fails replies a previous process left streaming, and builds the state.
pub async fn build_state(config: config::Config) -> anyhow::Result<AppState> {
    let database = storage::DatabaseUrl::resolve(config.database_url.as_deref(), &config.data_dir)?;
    let store = storage::Store::connect(&database).await?;
    tracing::info!(database = %database.display(), "database open");
    // On PostgreSQL other instances may be streaming: their replies are left to them
    // (`cluster_tasks` fails those of instances that stopped answering).
    if store.postgres().is_none() {
        let n = store.fail_interrupted(&interrupted()).await?;
        if n > 0 {
            tracing::warn!(
                replies = n,
                "marked replies interrupted by a restart as failed"
            );
        }
    }
    let agents = agents::AgentCatalog::open(config.agents_file.as_deref())?;
    for agent in agents.current().all() {
        tracing::info!(agent = %agent.name, items = agent.items.len(), "agent configured");
    }
    let provider = providers::from_config(&config)?;
    // Loads in the background: chat is served while the model loads.
    let embeddings = match &config.embed_model_dir {
        Some(dir) => embed::EmbeddingService::start(
            config.embed_model.clone(),
            dir.clone(),
            embed::Limits {
                workers: config.embed_workers,
                queue: config.embed_queue,
                threads: config.embed_threads,
            },
        ),
        None => embed::EmbeddingService::disabled(config.embed_model.clone()),
    };
    Ok(AppState::new(config, store, provider, embeddings, agents))
}

/// The error of a reply whose process ended while it streamed.
fn interrupted() -> WireError {
    WireError::new(
        ErrorCode::Internal,
        "the server restarted while this reply was streaming",
    )
}

/// What an instance sharing PostgreSQL runs beside serving: it follows the frame log, says it is
/// alive, fails the replies of instances that stopped answering, and prunes old frames and rate
/// limit rows.
fn cluster_tasks(cluster: cluster::Cluster, hubs: std::sync::Arc<hub::Hubs>) {
    tokio::spawn(hub::listen::listen(cluster.clone(), hubs));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(cluster::instances::HEARTBEAT);
        let mut beats = 0u64;
        loop {
            tick.tick().await;
            if let Err(e) = cluster.instances.beat().await {
                tracing::warn!(error = %e, "instance heartbeat not recorded");
                continue;
            }
            match cluster.instances.fail_orphans(&interrupted()).await {
                Ok(orphans) => {
                    for orphan in orphans {
                        tracing::warn!(session = %orphan.session_id, reply = %orphan.message_id, "reply of an instance that stopped answering marked failed");
                        let event = glassbox_core::wire::ServerEvent::Error(
                            interrupted().for_message(&orphan.message_id),
                        );
                        if let Err(e) = cluster.frames.append(&orphan.session_id, vec![event]).await
                        {
                            tracing::warn!(session = %orphan.session_id, error = %e, "its tabs were not told");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "replies of stopped instances not checked"),
            }
            beats += 1;
            if beats.is_multiple_of(12) {
                match cluster.frames.prune().await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(frames = n, "pruned old frames"),
                    Err(e) => tracing::warn!(error = %e, "old frames not pruned"),
                }
                if let Err(e) = cluster.rates.prune().await {
                    tracing::warn!(error = %e, "rate limits back at their allowance not pruned");
                }
            }
        }
    });
}

/// Serves `app(state)` on `listener`, sweeping idle sessions in the background, until SIGTERM or
/// Ctrl-C; then shuts down without losing a reply (`drain`) and returns.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    let (hubs, limits) = (state.hubs.clone(), state.limits.clone());
    let settling = state.hubs.clone();
    if let Some(cluster) = state.cluster.clone() {
        cluster_tasks(cluster, hubs.clone());
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            tick.tick().await;
            hubs.sweep();
            limits.sweep();
        }
    });
    // Idle sessions, and files no message carries a day after their upload, are purged at
    // start and then hourly.
    let purging = state.sessions.clone();
    let files = state.files.clone();
    let store = state.store.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(3_600));
        loop {
            tick.tick().await;
            if let Err(e) = purging.purge_idle().await {
                tracing::error!(error = %e, "purging idle sessions failed");
            }
            match files.purge_unsent().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(files = n, "purged files no message carries"),
                Err(e) => tracing::error!(error = %e, "purging unsent files failed"),
            }
            // Budget reservations whose calls' processes ended (every call settles its own).
            if let Err(e) = store.prune_reservations(ids::now_ms()).await {
                tracing::error!(error = %e, "pruning expired budget reservations failed");
            }
        }
    });
    tokio::spawn(watch_agents(
        state.agents.clone(),
        state.items.clone(),
        state.mcp.clone(),
        state.config.agents_poll,
    ));
    // Replies stream as many small writes: without TCP_NODELAY, Nagle's algorithm and delayed ACKs
    // hold each one back for up to 40 ms.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let mcp = state.mcp.clone();
    let (drain, grace) = (state.drain.clone(), state.config.shutdown_grace);
    // The peer address feeds the rate limits (`client_addr`). On SIGTERM or Ctrl-C the listener
    // stops accepting and open requests finish (a streaming reply's SSE ends with its reply).
    let server = axum::serve(
        listener,
        app(state).into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown({
        let drain = drain.clone();
        async move { drain.begun().await }
    });
    tokio::spawn({
        let drain = drain.clone();
        async move {
            drain::signalled().await;
            drain.begin();
        }
    });
    // Replies under way get the grace period (`drain`); requests still open after it are cut.
    let replies = async {
        drain.begun().await;
        tracing::info!(
            replies = drain.running(),
            grace_ms = grace.as_millis() as u64,
            "shutting down: no new messages; replies under way may finish"
        );
        // A second signal does not wait.
        tokio::spawn(async {
            drain::signalled().await;
            tracing::warn!("second signal: exiting without waiting for replies");
            std::process::exit(130);
        });
        match drain.finish(grace).await {
            0 => tracing::info!("every reply finished"),
            n => tracing::warn!(
                replies = n,
                "replies still running at the deadline; they restart failed and retryable"
            ),
        }
    };
    let bounded = async {
        let served = tokio::select! {
            served = server => served,
            () = async {
                drain.begun().await;
                tokio::time::sleep(grace + std::time::Duration::from_secs(1)).await;
            } => Ok(()),
        };
        // The listener failed: the replies get their grace all the same.
        drain.begin();
        served
    };
    let (served, ()) = tokio::join!(bounded, replies);
    // The replies' last frames reach the other instances' tabs.
    settling.settle(std::time::Duration::from_secs(5)).await;
    // MCP child processes end with their connections.
    mcp.stop_all();
    served
}

/// Reads the agents' files again on SIGHUP, and when a poll every `poll` (0: never) finds one
/// changed; MCP servers added, changed or removed are connected or ended. A file that no longer
/// reads is logged with its line, and the agents read before stay.
async fn watch_agents(
    agents: agents::AgentCatalog,
    items: items::Items,
    mcp: mcp::McpServers,
    poll: std::time::Duration,
) {
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = (!poll.is_zero()).then(|| tokio::time::interval(poll));
    loop {
        let asked = async {
            #[cfg(unix)]
            if let Some(h) = hangup.as_mut() {
                h.recv().await;
                return;
            }
            std::future::pending::<()>().await
        };
        let polled = async {
            match tick.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let signalled = tokio::select! {
            _ = asked => true,
            _ = polled => false,
        };
        if !signalled && !agents.stale() {
            continue;
        }
        match agents.reload() {
            Ok(reloaded) => {
                tracing::info!(changed = ?reloaded.changed, "agents read again");
                // Changed MCP servers connect again; their tools go until they are ready.
                mcp.sync(&agents.current());
                // Changed items are indexed again on their next search.
                match items.forget_stale().await {
                    Ok(n) => tracing::debug!(items = n, "vectors of changed items forgotten"),
                    Err(e) => tracing::warn!(error = %e, "vectors of changed items not deleted"),
                }
            }
            Err(e) => tracing::error!(error = %e, "agents not read again; the previous ones stay"),
        }
    }
}
