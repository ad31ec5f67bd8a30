//! Follows what other instances write: one connection of its own `LISTEN`s to the frame log's and
//! the commands' channels (a pooled connection would not keep them), sends each live session's new
//! frames to this instance's connections, and runs the commands meant for replies running here.
//! Notifications sent while that connection is down are lost, so after any reconnect every live
//! session catches up from the table (docs/instances.md).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};

use super::Hubs;
use crate::cluster::frames::FRAMES_CHANNEL;
use crate::cluster::{COMMANDS_CHANNEL, Cluster, Command};

/// The application name of the listening connection (in `pg_stat_activity`).
pub const LISTENER_NAME: &str = "glassbox-listener";

/// Runs until the process ends.
pub async fn listen(cluster: Cluster, hubs: Arc<Hubs>) {
    let options = (*cluster.pool.connect_options())
        .clone()
        .application_name(LISTENER_NAME);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options);
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen to the frame log yet");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = listener
            .listen_all([FRAMES_CHANNEL, COMMANDS_CHANNEL])
            .await
        {
            tracing::warn!(error = %e, "cannot listen to the frame log yet");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        catch_up_all(&hubs);
        loop {
            match listener.try_recv().await {
                Ok(Some(note)) => match note.channel() {
                    FRAMES_CHANNEL => on_frames(&hubs, note.payload()),
                    COMMANDS_CHANNEL => on_command(&hubs, note.payload()),
                    _ => {}
                },
                // The connection was lost and is back: what was notified meanwhile is read.
                Ok(None) => {
                    tracing::info!("frame log listener reconnected");
                    catch_up_all(&hubs);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "frame log listener failed; reconnecting");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
    }
}

/// Sends every live session's frames written since its connections were last sent any.
fn catch_up_all(hubs: &Hubs) {
    for hub in hubs.live() {
        tokio::spawn(async move { hub.follow().await });
    }
}

/// `{session_id}:{last_seq}`: the session's frames through `last_seq` are written.
fn on_frames(hubs: &Hubs, payload: &str) {
    let Some((session, seq)) = payload.rsplit_once(':') else {
        return;
    };
    let Ok(seq) = seq.parse::<u64>() else {
        return;
    };
    // Frames this instance wrote were sent here already.
    if let Some(hub) = hubs.behind(session, seq) {
        tokio::spawn(async move { hub.follow().await });
    }
}

fn on_command(hubs: &Hubs, payload: &str) {
    match Command::parse(payload) {
        Some(Command::Stop {
            session_id,
            reply_id,
        }) => {
            if let Some(hub) = hubs.get(&session_id)
                && hub.stops.stop(&reply_id)
            {
                tracing::info!(session = %session_id, reply = %reply_id, "reply stopped from another instance");
            }
        }
        Some(Command::Deleted { session_id }) => hubs.forget_here(&session_id),
        None => tracing::warn!(payload, "unknown command"),
    }
}
