//! The embedding service the rest of the server uses: loads the model in the background (chat works
//! meanwhile), runs inference on blocking threads, and refuses work it cannot take soon (429).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use thiserror::Error;
use tokio::sync::Semaphore;

use super::{EmbedError, Embedder, Embedding};
use crate::error::AppError;
use crate::storage::Store;

/// Cache key of a message's embedding: `{message_id}:{content_hash}` (an edit changes the hash).
pub fn message_cache_key(message_id: &str, content: &str) -> String {
    format!("{message_id}:{}", content_hash(content))
}

/// Hex SHA-256 of a text: the cache key of an agent-item chunk.
pub fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Most texts in one request.
pub const MAX_INPUTS: usize = 128;
/// Texts per model run; inputs are sorted by length first so batches carry little padding.
const RUN_BATCH: usize = 32;

/// How much work the service takes at once.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Model runs at once, each on its own blocking thread.
    pub workers: usize,
    /// Requests in the service (running or waiting) before new ones get 429.
    pub queue: usize,
}

/// Where the model stands, for `/healthz`.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedStatus {
    Disabled,
    Loading,
    Ready { dimension: usize },
    Failed(String),
}

/// Why an embedding request was refused.
#[derive(Debug, Error)]
pub enum EmbedServiceError {
    #[error("embeddings are not available: {0}")]
    Unavailable(String),
    #[error("too many embedding requests are waiting; try again shortly")]
    Overloaded,
    #[error("{0}")]
    BadInput(String),
    #[error(transparent)]
    Engine(#[from] EmbedError),
}

enum State {
    Disabled,
    Loading,
    Ready(Arc<Embedder>),
    Failed(String),
}

/// Shared handle to the embedding model.
pub struct EmbeddingService {
    /// Model name reported in responses.
    pub model: String,
    state: RwLock<State>,
    waiting: Semaphore,
    workers: Semaphore,
    /// Texts run through the model so far (cache hits are not counted).
    computed: AtomicU64,
}

impl EmbeddingService {
    /// A service that never has a model (embeddings switched off).
    pub fn disabled(model: String) -> Arc<Self> {
        Arc::new(Self::new(
            model,
            State::Disabled,
            Limits {
                workers: 1,
                queue: 1,
            },
        ))
    }

    /// Starts loading the model from `dir` on a blocking thread; `workers` runs may go at once.
    pub fn start(model: String, dir: PathBuf, limits: Limits) -> Arc<Self> {
        let service = Arc::new(Self::new(model, State::Loading, limits));
        let loading = service.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let next = match Embedder::load(&dir) {
                Ok(embedder) => {
                    tracing::info!(dimension = embedder.dimension(), took = ?started.elapsed(), "embedding model ready");
                    State::Ready(Arc::new(embedder))
                }
                Err(e) => {
                    tracing::error!(error = %e, "embedding model unavailable");
                    State::Failed(e.to_string())
                }
            };
            *loading.state.write().unwrap_or_else(|p| p.into_inner()) = next;
        });
        service
    }

    fn new(model: String, state: State, limits: Limits) -> Self {
        Self {
            model,
            state: RwLock::new(state),
            waiting: Semaphore::new(limits.queue.max(1)),
            workers: Semaphore::new(limits.workers.max(1)),
            computed: AtomicU64::new(0),
        }
    }

    /// Where the model stands.
    pub fn status(&self) -> EmbedStatus {
        match &*self.state.read().unwrap_or_else(|p| p.into_inner()) {
            State::Disabled => EmbedStatus::Disabled,
            State::Loading => EmbedStatus::Loading,
            State::Ready(e) => EmbedStatus::Ready {
                dimension: e.dimension(),
            },
            State::Failed(reason) => EmbedStatus::Failed(reason.clone()),
        }
    }

    fn embedder(&self) -> Result<Arc<Embedder>, EmbedServiceError> {
        match &*self.state.read().unwrap_or_else(|p| p.into_inner()) {
            State::Ready(e) => Ok(e.clone()),
            State::Loading => Err(EmbedServiceError::Unavailable(
                "the model is still loading".into(),
            )),
            State::Disabled => Err(EmbedServiceError::Unavailable(
                "embeddings are switched off".into(),
            )),
            State::Failed(reason) => Err(EmbedServiceError::Unavailable(reason.clone())),
        }
    }

    /// How many texts the model has embedded (cache hits excluded).
    pub fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
    }

    /// Vectors for `(cache key, text)` items, in order: cached ones are read from `store`, only the
    /// missing ones are computed, and those are stored for next time.
    pub async fn embed_cached(
        &self,
        store: &Store,
        items: Vec<(String, String)>,
    ) -> Result<Vec<Vec<f32>>, AppError> {
        let keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
        let mut found = store.cached_embeddings(&self.model, &keys).await?;
        let missing: Vec<(String, String)> = items
            .iter()
            .filter(|(k, _)| !found.contains_key(k))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let mut fresh = Vec::with_capacity(missing.len());
            for chunk in missing.chunks(MAX_INPUTS) {
                let vectors = self
                    .embed(chunk.iter().map(|(_, t)| t.clone()).collect())
                    .await?;
                fresh.extend(
                    chunk
                        .iter()
                        .zip(vectors)
                        .map(|((k, _), e)| (k.clone(), e.vector)),
                );
            }
            store.put_embeddings(&self.model, &fresh).await?;
            found.extend(fresh);
        }
        keys.iter()
            .map(|k| {
                found.remove(k).ok_or_else(|| {
                    AppError::Embed(EmbedError::Inference(format!("no vector for {k}")).into())
                })
            })
            .collect()
    }

    /// Embeds `texts` (in order). Inference runs on blocking threads, never on the async runtime.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, EmbedServiceError> {
        if texts.is_empty() || texts.len() > MAX_INPUTS {
            return Err(EmbedServiceError::BadInput(format!(
                "give 1 to {MAX_INPUTS} inputs, not {}",
                texts.len()
            )));
        }
        if let Some(i) = texts
            .iter()
            .position(|t| t.len() > glassbox_core::limits::MAX_MESSAGE_BYTES)
        {
            return Err(EmbedServiceError::BadInput(format!(
                "input {i} is longer than {} bytes",
                glassbox_core::limits::MAX_MESSAGE_BYTES
            )));
        }
        let embedder = self.embedder()?;
        let _waiting = self
            .waiting
            .try_acquire()
            .map_err(|_| EmbedServiceError::Overloaded)?;
        let _worker = self
            .workers
            .acquire()
            .await
            .map_err(|_| EmbedServiceError::Overloaded)?;
        let count = texts.len() as u64;
        let result = tokio::task::spawn_blocking(move || embed_sorted(&embedder, &texts))
            .await
            .map_err(|e| EmbedError::Inference(e.to_string()))??;
        self.computed.fetch_add(count, Ordering::Relaxed);
        Ok(result)
    }
}

/// Runs the texts in batches of similar length and returns the vectors in the original order.
fn embed_sorted(embedder: &Embedder, texts: &[String]) -> Result<Vec<Embedding>, EmbedError> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut out: Vec<Option<Embedding>> = vec![None; texts.len()];
    for chunk in order.chunks(RUN_BATCH) {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
        for (&i, e) in chunk.iter().zip(embedder.embed(&batch)?) {
            out[i] = Some(e);
        }
    }
    out.into_iter()
        .map(|e| e.ok_or_else(|| EmbedError::Inference("a text got no vector".into())))
        .collect()
}
