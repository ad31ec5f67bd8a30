//! `GET /healthz`: liveness plus what the server runs with.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;

/// Reports that the server is up, with its provider and model.
pub async fn healthz(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "provider": state.provider.name(),
        "model": state.config.model,
    }))
}
