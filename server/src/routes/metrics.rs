//! `GET /metrics`: the process's metrics in Prometheus' text format (OpenMetrics 1.0).

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// What Prometheus reads this format as.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric, with the embedding queue as it is now.
pub async fn render(State(state): State<AppState>) -> Response {
    let text = state.metrics.render(state.embeddings.queued());
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        text,
    )
        .into_response()
}
