//! The embedding service the rest of the server uses: loads the model in the background (chat works
//! meanwhile) and runs requests through a bounded queue served by worker threads, TEI-style: a worker
//! takes every waiting request that fits its token budget, sorts their texts by length (a model run as one
//! plan pads each batch to its longest text), runs them together and hands each request its vectors. A
//! full queue answers 429.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use sha2::{Digest, Sha256};
use thiserror::Error;
use tokio::sync::oneshot;

use super::memory::{DEFAULT_ENTRIES, VectorMemory};
use super::{EmbedError, Embedder, Embedding, RunThreads};
use crate::storage::{StorageError, Store};

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
/// Texts per model run; inputs are sorted by length first, so a padded batch carries little padding.
const RUN_BATCH: usize = 32;
/// Estimated tokens a worker gathers from waiting requests before it starts a run.
const MAX_BATCH_TOKENS: usize = 8192;

/// How much work the service takes at once.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Worker threads, each running the model on its own batches.
    pub workers: usize,
    /// Requests waiting for a worker before new ones get 429.
    pub queue: usize,
    /// Threads one model run may use; the workers share them.
    pub threads: usize,
}

/// Who waits for the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// A request (a turn's filter, a command): the worker threads and their helpers.
    Now,
    /// Nobody, and nobody else waits for the work either (extraction's candidate labels and the
    /// messages' vectors it computes ahead, outside any lock a request takes): the low-priority
    /// thread of [`crate::background`], which runs the sharded model on itself alone.
    /// A `model.onnx` run as one plan keeps the threads it was loaded with, and the tokenizer may
    /// use its own pool, both at normal priority.
    Background,
}

/// What the caches hold for some `(cache key, text)` items ([`EmbeddingService::look_up`]).
#[derive(Debug)]
pub struct Lookup {
    keys: Vec<String>,
    /// Found in memory, by position.
    vectors: Vec<Option<Arc<[f32]>>>,
    /// Found in the store, by key.
    stored: HashMap<String, Arc<[f32]>>,
    /// Neither holds these: to compute.
    missing: Vec<(String, String)>,
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
    #[error("the embedding cache could not be read or written")]
    Storage(#[from] StorageError),
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
    queue: Arc<JobQueue>,
    /// Texts run through the model so far (cache hits are not counted).
    computed: AtomicU64,
    /// Recently used vectors, in front of the store's cache.
    memory: VectorMemory,
}

/// One request's texts and where its vectors go.
struct Job {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Embedding>, EmbedError>>,
}

/// Requests waiting for a worker.
struct JobQueue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    capacity: usize,
    closed: std::sync::atomic::AtomicBool,
}

impl JobQueue {
    fn push(&self, job: Job) -> Result<(), EmbedServiceError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if jobs.len() >= self.capacity {
            return Err(EmbedServiceError::Overloaded);
        }
        jobs.push_back(job);
        self.ready.notify_one();
        Ok(())
    }

    /// Requests waiting for a worker.
    fn len(&self) -> usize {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Blocks until there is work; takes the oldest request and every next one within the token budget.
    fn take_batch(&self) -> Option<Vec<Job>> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.closed.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(first) = jobs.pop_front() {
                let mut budget = MAX_BATCH_TOKENS.saturating_sub(estimated_tokens(&first.texts));
                let mut batch = vec![first];
                while let Some(next) = jobs.front() {
                    let cost = estimated_tokens(&next.texts);
                    if cost > budget {
                        break;
                    }
                    budget -= cost;
                    batch.extend(jobs.pop_front());
                }
                return Some(batch);
            }
            jobs = self.ready.wait(jobs).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.ready.notify_all();
    }
}

/// A cheap upper estimate of tokens (WordPiece averages well over 3 bytes per token for prose).
fn estimated_tokens(texts: &[String]) -> usize {
    texts.iter().map(|t| t.len() / 3 + 2).sum()
}

/// A worker thread: runs batches until the service goes away.
fn work(queue: Arc<JobQueue>, embedder: Arc<Embedder>) {
    while let Some(jobs) = queue.take_batch() {
        let texts: Vec<&str> = jobs
            .iter()
            .flat_map(|j| j.texts.iter().map(String::as_str))
            .collect();
        match embed_sorted(&embedder, &texts, RunThreads::All) {
            Ok(vectors) => {
                let mut vectors = vectors.into_iter();
                for job in jobs {
                    let mine: Vec<Embedding> = vectors.by_ref().take(job.texts.len()).collect();
                    let _ = job.reply.send(Ok(mine));
                }
            }
            Err(e) => {
                let message = e.to_string();
                for job in jobs {
                    let _ = job.reply.send(Err(EmbedError::Inference(message.clone())));
                }
            }
        }
    }
}

impl Drop for EmbeddingService {
    fn drop(&mut self) {
        self.queue.close();
    }
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
                threads: 1,
            },
        ))
    }

    /// Starts loading the model from `dir` on a blocking thread; `workers` runs may go at once.
    pub fn start(model: String, dir: PathBuf, limits: Limits) -> Arc<Self> {
        let service = Arc::new(Self::new(model, State::Loading, limits));
        let loading = Arc::downgrade(&service);
        let queue = service.queue.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let next = match Embedder::load(&dir, limits.threads) {
                Ok(embedder) => {
                    tracing::info!(dimension = embedder.dimension(), took = ?started.elapsed(), "embedding model ready");
                    let embedder = Arc::new(embedder);
                    for i in 0..limits.workers.max(1) {
                        let (queue, embedder) = (queue.clone(), embedder.clone());
                        let spawned = std::thread::Builder::new()
                            .name(format!("embed-worker-{i}"))
                            .spawn(move || work(queue, embedder));
                        if let Err(e) = spawned {
                            tracing::error!(error = %e, "cannot start an embedding worker");
                        }
                    }
                    State::Ready(embedder)
                }
                Err(e) => {
                    tracing::error!(error = %e, "embedding model unavailable");
                    State::Failed(e.to_string())
                }
            };
            if let Some(service) = loading.upgrade() {
                *service.state.write().unwrap_or_else(|p| p.into_inner()) = next;
            }
        });
        service
    }

    fn new(model: String, state: State, limits: Limits) -> Self {
        let queue = JobQueue {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            capacity: limits.queue.max(1),
            closed: std::sync::atomic::AtomicBool::new(false),
        };
        Self {
            model,
            state: RwLock::new(state),
            queue: Arc::new(queue),
            computed: AtomicU64::new(0),
            memory: VectorMemory::new(DEFAULT_ENTRIES),
        }
    }

    /// Requests waiting for a worker now (the metrics' queue depth).
    pub fn queued(&self) -> usize {
        self.queue.len()
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

    /// The loaded model, or why there is none.
    fn ready_embedder(&self) -> Result<Arc<Embedder>, EmbedServiceError> {
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

    /// Forgets the vectors of these cache keys from memory (their session was deleted).
    pub fn forget(&self, keys: &[String]) {
        self.memory.forget(keys);
    }

    /// Keeps `vectors` in memory under their keys (what [`EmbeddingService::embed_remembered`]
    /// finds without computing: a warm start, or a test's own vectors).
    pub fn remember(&self, vectors: impl IntoIterator<Item = (String, Arc<[f32]>)>) {
        self.memory.put_many(vectors);
    }

    /// Vectors for `(cache key, text)` items, in order, kept in memory only (texts that come and
    /// go, such as a message's sentences searched with): remembered ones from memory, the others
    /// computed now and remembered.
    pub async fn embed_remembered(
        &self,
        items: Vec<(String, String)>,
    ) -> Result<Vec<Arc<[f32]>>, EmbedServiceError> {
        let keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
        let mut vectors = self.memory.get_many(&keys);
        let missing: Vec<usize> = (0..items.len()).filter(|&i| vectors[i].is_none()).collect();
        if !missing.is_empty() {
            let texts = missing.iter().map(|&i| items[i].1.clone()).collect();
            let computed = self.embed(texts).await?;
            let mut fresh = Vec::with_capacity(missing.len());
            for (&i, e) in missing.iter().zip(computed) {
                let v: Arc<[f32]> = Arc::from(e.vector);
                fresh.push((keys[i].clone(), v.clone()));
                vectors[i] = Some(v);
            }
            self.memory.put_many(fresh);
        }
        vectors
            .into_iter()
            .zip(&keys)
            .map(|(v, k)| {
                v.ok_or_else(|| EmbedError::Inference(format!("no vector for {k}")).into())
            })
            .collect()
    }

    /// Whether memory holds the vector of this cache key.
    pub fn remembers(&self, key: &str) -> bool {
        self.memory.get_many(&[key.to_owned()])[0].is_some()
    }

    /// How many texts the model has embedded (cache hits excluded).
    pub fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
    }

    /// Vectors for `(cache key, text)` items, in order: recently used ones come from memory, other
    /// cached ones are read from `store`, only the missing ones are computed (now), and those are
    /// stored for next time.
    pub async fn embed_cached(
        &self,
        store: &Store,
        items: Vec<(String, String)>,
    ) -> Result<Vec<Arc<[f32]>>, EmbedServiceError> {
        let lookup = self.look_up(store, items).await?;
        let fresh = self.compute(&lookup, Urgency::Now).await?;
        self.complete(store, lookup, fresh).await
    }

    /// The first part of [`EmbeddingService::embed_cached`]: what memory and `store` hold for
    /// `(cache key, text)` items, and which are missing. Memory is not written until
    /// [`EmbeddingService::complete`], so a caller may look up and compute outside a lock that
    /// guards what is remembered (a session's gate), and take it only to complete.
    pub async fn look_up(
        &self,
        store: &Store,
        items: Vec<(String, String)>,
    ) -> Result<Lookup, EmbedServiceError> {
        let keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
        let vectors = self.memory.get_many(&keys);
        let unknown: Vec<String> = keys
            .iter()
            .zip(&vectors)
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        let stored: HashMap<String, Arc<[f32]>> = if unknown.is_empty() {
            HashMap::new()
        } else {
            store
                .cached_embeddings(&self.model, &unknown)
                .await?
                .into_iter()
                .map(|(k, v)| (k, Arc::from(v)))
                .collect()
        };
        let missing = items
            .into_iter()
            .zip(&vectors)
            .filter(|((k, _), v)| v.is_none() && !stored.contains_key(k))
            .map(|(item, _)| item)
            .collect();
        Ok(Lookup {
            keys,
            vectors,
            stored,
            missing,
        })
    }

    /// Computes the vectors a lookup misses (none when it misses none), [`MAX_INPUTS`] at a time;
    /// those memory has come to hold since (another caller computed them) are left to
    /// [`EmbeddingService::complete`], which takes them from memory.
    pub async fn compute(
        &self,
        lookup: &Lookup,
        urgency: Urgency,
    ) -> Result<Vec<(String, Vec<f32>)>, EmbedServiceError> {
        let mut fresh = Vec::with_capacity(lookup.missing.len());
        for chunk in lookup.missing.chunks(MAX_INPUTS) {
            let keys: Vec<String> = chunk.iter().map(|(k, _)| k.clone()).collect();
            let known = self.memory.get_many(&keys);
            let chunk: Vec<&(String, String)> = chunk
                .iter()
                .zip(&known)
                .filter(|(_, v)| v.is_none())
                .map(|(item, _)| item)
                .collect();
            if chunk.is_empty() {
                continue;
            }
            let texts = chunk.iter().map(|(_, t)| t.clone()).collect();
            let computed = self.embed_with(texts, urgency).await?;
            fresh.extend(
                chunk
                    .iter()
                    .zip(computed)
                    .map(|((k, _), e)| (k.clone(), e.vector)),
            );
        }
        Ok(fresh)
    }

    /// Stores the `fresh` vectors of a lookup, remembers in memory what it read and computed, and
    /// returns every item's vector in order.
    pub async fn complete(
        &self,
        store: &Store,
        lookup: Lookup,
        fresh: Vec<(String, Vec<f32>)>,
    ) -> Result<Vec<Arc<[f32]>>, EmbedServiceError> {
        let Lookup {
            keys,
            mut vectors,
            stored: mut found,
            ..
        } = lookup;
        // What another caller computed meanwhile (and `compute` skipped) is in memory; memory's
        // copy wins over one computed twice, as the database's first copy does.
        let missing: Vec<String> = lookup_missing_keys(&keys, &vectors, &found);
        for (key, v) in missing.iter().zip(self.memory.get_many(&missing)) {
            if let Some(v) = v {
                found.insert(key.clone(), v);
            }
        }
        if !fresh.is_empty() {
            store.put_embeddings(&self.model, &fresh).await?;
            for (k, v) in fresh {
                found.entry(k).or_insert_with(|| Arc::from(v));
            }
        }
        self.memory
            .put_many(found.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (slot, key) in vectors.iter_mut().zip(&keys) {
            if slot.is_none() {
                *slot = found.get(key).cloned();
            }
        }
        vectors
            .into_iter()
            .zip(&keys)
            .map(|(v, k)| {
                v.ok_or_else(|| EmbedError::Inference(format!("no vector for {k}")).into())
            })
            .collect()
    }

    /// Embeds `texts` (in order) through the queue; inference runs on worker threads, never on the
    /// async runtime.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, EmbedServiceError> {
        self.embed_with(texts, Urgency::Now).await
    }

    /// [`EmbeddingService::embed`], or with [`Urgency::Background`] on the background thread.
    pub async fn embed_with(
        &self,
        texts: Vec<String>,
        urgency: Urgency,
    ) -> Result<Vec<Embedding>, EmbedServiceError> {
        check_inputs(&texts)?;
        let count = texts.len() as u64;
        let result = match urgency {
            Urgency::Now => {
                self.ready_embedder()?;
                let (reply, answer) = oneshot::channel();
                self.queue.push(Job { texts, reply })?;
                answer
                    .await
                    .map_err(|_| EmbedError::Inference("the embedding worker stopped".into()))??
            }
            Urgency::Background => {
                let embedder = self.ready_embedder()?;
                crate::background::run(move || {
                    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                    embed_sorted(&embedder, &texts, RunThreads::Caller)
                })
                .await
                .map_err(|e| EmbedError::Inference(e.to_string()))??
            }
        };
        self.computed.fetch_add(count, Ordering::Relaxed);
        Ok(result)
    }
}

/// Keys found neither in memory (by position) nor in `found`.
fn lookup_missing_keys(
    keys: &[String],
    vectors: &[Option<Arc<[f32]>>],
    found: &HashMap<String, Arc<[f32]>>,
) -> Vec<String> {
    keys.iter()
        .zip(vectors)
        .filter(|(k, v)| v.is_none() && !found.contains_key(*k))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Refuses an empty request, one of more than [`MAX_INPUTS`] texts, and texts over the message size.
fn check_inputs(texts: &[String]) -> Result<(), EmbedServiceError> {
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
    Ok(())
}

/// Runs the texts in batches of similar length and returns the vectors in the original order.
fn embed_sorted(
    embedder: &Embedder,
    texts: &[&str],
    threads: RunThreads,
) -> Result<Vec<Embedding>, EmbedError> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut out: Vec<Option<Embedding>> = vec![None; texts.len()];
    for chunk in order.chunks(RUN_BATCH) {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
        for (&i, e) in chunk.iter().zip(embedder.embed_on(&batch, threads)?) {
            out[i] = Some(e);
        }
    }
    out.into_iter()
        .map(|e| e.ok_or_else(|| EmbedError::Inference("a text got no vector".into())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(capacity: usize) -> JobQueue {
        JobQueue {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            capacity,
            closed: Default::default(),
        }
    }

    fn job(texts: &[&str]) -> (Job, oneshot::Receiver<Result<Vec<Embedding>, EmbedError>>) {
        let (reply, rx) = oneshot::channel();
        (
            Job {
                texts: texts.iter().map(|t| t.to_string()).collect(),
                reply,
            },
            rx,
        )
    }

    #[test]
    fn waiting_requests_are_taken_together_within_the_token_budget() {
        let q = queue(10);
        for _ in 0..3 {
            q.push(job(&["a short query"]).0).unwrap();
        }
        let big = "word ".repeat(MAX_BATCH_TOKENS * 3 / 5);
        q.push(job(&[big.as_str()]).0).unwrap();
        q.push(job(&["after the big one"]).0).unwrap();
        assert_eq!(
            q.take_batch().map(|b| b.len()),
            Some(3),
            "the three short ones run as one batch"
        );
        assert_eq!(
            q.take_batch().map(|b| b.len()),
            Some(1),
            "a request over the budget runs alone"
        );
        assert_eq!(q.take_batch().map(|b| b.len()), Some(1));
    }

    #[test]
    fn a_full_queue_refuses_and_a_closed_one_stops_workers() {
        let q = queue(1);
        q.push(job(&["one"]).0).unwrap();
        assert!(matches!(
            q.push(job(&["two"]).0),
            Err(EmbedServiceError::Overloaded)
        ));
        q.close();
        assert!(q.take_batch().is_none());
    }
}
