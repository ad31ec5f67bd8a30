//! `POST /v1/embeddings` in the OpenAI shape, so other tools can use the server's embedding model.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::client_addr::ClientAddr;
use super::extract::JsonBody;
use crate::error::AppError;
use crate::rate_limits::Caller;
use crate::state::AppState;

/// One string or a list of strings.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Input {
    One(String),
    Many(Vec<String>),
}

/// The request body.
#[derive(Deserialize, utoipa::ToSchema)]
pub struct EmbeddingsRequest {
    input: Input,
    /// Accepted for compatibility; must name the served model when given.
    #[serde(default)]
    model: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EmbeddingsResponse {
    object: &'static str,
    data: Vec<EmbeddingItem>,
    model: String,
    usage: Usage,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EmbeddingItem {
    object: &'static str,
    index: usize,
    embedding: Vec<f32>,
    /// True when the input was longer than the model's limit and was cut (our extension).
    truncated: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = EmbeddingsUsage)]
pub struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

/// Embeds the input strings; each request counts against its address's per-minute allowance.
#[utoipa::path(
    post,
    path = "/v1/embeddings",
    tag = "embeddings",
    request_body = EmbeddingsRequest,
    responses((status = 200, description = "OpenAI-compatible embeddings of the inputs", body = EmbeddingsResponse))
)]
pub async fn create(
    State(state): State<AppState>,
    ClientAddr(address): ClientAddr,
    JsonBody(body): JsonBody<EmbeddingsRequest>,
) -> Result<Json<EmbeddingsResponse>, AppError> {
    state
        .limits
        .request(Caller::of(None, address).as_ref())
        .await?;
    let service = &state.embeddings;
    if let Some(model) = body.model.filter(|m| m != &service.model) {
        return Err(AppError::ModelNotAllowed(model));
    }
    let texts = match body.input {
        Input::One(t) => vec![t],
        Input::Many(ts) => ts,
    };
    let embeddings = service.embed(texts).await?;
    let tokens = embeddings.iter().map(|e| e.tokens).sum();
    Ok(Json(EmbeddingsResponse {
        object: "list",
        data: embeddings
            .into_iter()
            .enumerate()
            .map(|(index, e)| EmbeddingItem {
                object: "embedding",
                index,
                embedding: e.vector,
                truncated: e.truncated,
            })
            .collect(),
        model: service.model.clone(),
        usage: Usage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        },
    }))
}
