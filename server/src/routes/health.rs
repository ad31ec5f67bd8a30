//! `GET /healthz`: liveness plus what the server runs with.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::embed::EmbedStatus;
use crate::state::AppState;

/// Reports that the server is up, with its provider and model, whether embeddings are ready, and
/// where each agent's MCP servers stand.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    responses((status = 200, description = "The provider, the embedding model and each MCP server's state", body = Object))
)]
pub async fn healthz(State(state): State<AppState>) -> Json<Value> {
    let embeddings = match state.embeddings.status() {
        EmbedStatus::Disabled => json!({"status": "disabled"}),
        EmbedStatus::Loading => json!({"status": "loading", "model": state.embeddings.model}),
        EmbedStatus::Ready { dimension } => {
            json!({"status": "ready", "model": state.embeddings.model, "dimension": dimension})
        }
        EmbedStatus::Failed(error) => {
            json!({"status": "failed", "model": state.embeddings.model, "error": error})
        }
    };
    Json(json!({
        "status": "ok",
        "provider": state.provider.name(),
        "model": state.config.model,
        "database": state.store.backend(),
        "embeddings": embeddings,
        "mcp": state.mcp.health(),
    }))
}
