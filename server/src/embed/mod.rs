//! In-process sentence embeddings: a sentence-transformers BERT encoder run by tract, tokenized by
//! `tokenizers`, mean-pooled over real tokens and L2-normalised (as sentence-transformers does for
//! all-MiniLM-L6-v2). Plans are optimized once with symbolic dims and serve every shape.
//!
//! Two engines: a model converted by `cargo xtask model` carries tensor-parallel shards and runs them
//! on `threads` threads ([`sharded`]); any other sentence-transformers ONNX file runs as one plan with
//! tract's multithreaded matrix products.

/// Compiles a hot loop for wider vector registers than the baseline too, picked at run time: the
/// server targets plain x86-64, where these loops run four lanes at a time (SSE2); AVX2 and AVX-512
/// give them eight or sixteen. (Rust does not fuse `a += b * c` into FMA, so that stays two operations.)
macro_rules! simd {
    ($item:item) => {
        #[multiversion::multiversion(targets(
            "x86_64+avx512f+avx512vl+avx2+fma+avx",
            "x86_64+avx2+fma+avx"
        ))]
        $item
    };
}

mod attention;
mod crew;
pub mod labels;
pub mod memory;
pub mod service;
mod sharded;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};
use tract_linalg::multithread::Executor;
use tract_onnx::prelude::*;

use sharded::ShardedEncoder;

pub use service::{EmbedStatus, EmbeddingService, Limits};

/// The command that (re)provisions the default model.
pub const FIX_COMMAND: &str = "cargo xtask model";

/// Longest input in tokens (sentence-transformers' max_seq_length for MiniLM); longer text is truncated.
pub const MAX_TOKENS: usize = 256;

/// Why embeddings could not be computed.
#[derive(Debug, Error)]
pub enum EmbedError {
    #[error("embedding model file {path} is missing; run `{FIX_COMMAND}` to fetch and convert it")]
    Missing { path: PathBuf },
    #[error(
        "embedding model file {path} cannot be loaded ({reason}); run `{FIX_COMMAND}` to rebuild it"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("tokenizing failed: {0}")]
    Tokenize(String),
    #[error("inference failed: {0}")]
    Inference(String),
}

/// One embedded text.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// Unit-length vector.
    pub vector: Vec<f32>,
    /// Tokens the model saw (after truncation), special tokens included.
    pub tokens: usize,
    /// True when the text was longer than `MAX_TOKENS` and was cut.
    pub truncated: bool,
}

/// Threads one model run may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunThreads {
    /// Those the model was loaded with: the caller's and its helpers.
    All,
    /// The caller's alone: background work on a low-priority thread, whose share of the cores
    /// helpers at normal priority would not respect. (A `model.onnx` run as one plan keeps the
    /// threads it was loaded with.)
    Caller,
}

/// How the encoder runs.
enum Engine {
    /// `model.onnx` as one plan.
    Whole(Arc<TypedRunnableModel>),
    /// The converter's tensor-parallel shards.
    Sharded(ShardedEncoder),
}

/// A loaded embedding model. `Send + Sync`: worker threads share it.
pub struct Embedder {
    engine: Engine,
    tokenizer: Tokenizer,
    dimension: usize,
}

impl Embedder {
    /// Loads the model in `dir` (`tokenizer.json` and `shards/` when present, else `model.onnx`) and
    /// optimizes its plans once; one model run uses up to `threads` threads.
    pub fn load(dir: &Path, threads: usize) -> Result<Self, EmbedError> {
        let onnx_path = dir.join("model.onnx");
        let tokenizer_path = dir.join("tokenizer.json");
        for path in [&onnx_path, &tokenizer_path] {
            if !path.is_file() {
                return Err(EmbedError::Missing { path: path.clone() });
            }
        }
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| corrupt(&tokenizer_path, &e))?;
        // The shipped tokenizer pads and truncates at 128; sentence-transformers uses batch-longest
        // padding and truncation at 256.
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| corrupt(&tokenizer_path, &e))?;
        let engine = if ShardedEncoder::present(dir) {
            Engine::Sharded(ShardedEncoder::load(dir, threads)?)
        } else {
            let executor = if threads > 1 {
                Executor::multithread_with_name(threads, "glassbox-embed")
            } else {
                Executor::SingleThread
            };
            Engine::Whole(load_plan(&onnx_path, executor)?)
        };
        let mut embedder = Self {
            engine,
            tokenizer,
            dimension: 0,
        };
        // One real run: learns the vector size and proves the graph executes.
        embedder.dimension = embedder
            .hidden_size()
            .map_err(|e| corrupt(&onnx_path, &e))?;
        Ok(embedder)
    }

    fn hidden_size(&self) -> Result<usize, EmbedError> {
        let encodings = self.encode(&["warm up"])?;
        let (states, starts) = self.token_states(&encodings, RunThreads::All)?;
        Ok(states.len() / starts[starts.len() - 1].max(1))
    }

    /// Length of every vector.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Token counts of `texts` (after truncation), without running the model.
    pub fn count_tokens(&self, texts: &[&str]) -> Result<Vec<usize>, EmbedError> {
        Ok(self.encode(texts)?.iter().map(real_tokens).collect())
    }

    /// Embeds `texts` as one batch. Blocking: call it off the async runtime.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>, EmbedError> {
        self.embed_on(texts, RunThreads::All)
    }

    /// [`Embedder::embed`] on the given threads.
    pub fn embed_on(
        &self,
        texts: &[&str],
        threads: RunThreads,
    ) -> Result<Vec<Embedding>, EmbedError> {
        if texts.is_empty() {
            return Ok(vec![]);
        }
        let encodings = self.encode(texts)?;
        let (states, starts) = self.token_states(&encodings, threads)?;
        let dim = self.dimension;
        Ok(encodings
            .iter()
            .zip(starts.windows(2))
            .map(|(encoding, rows)| {
                // Mean over the text's tokens, then unit length.
                let mut pooled = vec![0f32; dim];
                for row in states[rows[0] * dim..rows[1] * dim].chunks_exact(dim) {
                    pooled.iter_mut().zip(row).for_each(|(p, v)| *p += v);
                }
                let count = (rows[1] - rows[0]).max(1) as f32;
                pooled.iter_mut().for_each(|p| *p /= count);
                glassbox_core::vector::normalize(&mut pooled);
                Embedding {
                    vector: pooled,
                    tokens: rows[1] - rows[0],
                    truncated: !encoding.get_overflowing().is_empty(),
                }
            })
            .collect())
    }
}

impl Embedder {
    fn encode(&self, texts: &[&str]) -> Result<Vec<tokenizers::Encoding>, EmbedError> {
        self.tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))
    }

    /// The encoder's last hidden state for the real tokens of every encoding, row after row, and
    /// the first row of each encoding (plus the end).
    fn token_states(
        &self,
        encodings: &[tokenizers::Encoding],
        threads: RunThreads,
    ) -> Result<(Vec<f32>, Vec<usize>), EmbedError> {
        // Padding is on the right: a text's real tokens come first.
        let texts: Vec<&[u32]> = encodings
            .iter()
            .map(|e| &e.get_ids()[..real_tokens(e)])
            .collect();
        match &self.engine {
            Engine::Sharded(encoder) => encoder.run(&texts, threads == RunThreads::All),
            Engine::Whole(plan) => {
                let (batch, seq) = (texts.len(), encodings.first().map_or(0, |e| e.len()));
                let (mut ids, mut mask) = (
                    Vec::with_capacity(batch * seq),
                    Vec::with_capacity(batch * seq),
                );
                for e in encodings {
                    ids.extend(e.get_ids().iter().map(|&i| i64::from(i)));
                    mask.extend(e.get_attention_mask().iter().map(|&m| i64::from(m)));
                }
                let tensor =
                    |v: Vec<i64>| Tensor::from_shape(&[batch, seq], &v).map(|t| t.into_tvalue());
                let outputs = plan
                    .run(tvec!(
                        tensor(ids).map_err(inference)?,
                        tensor(mask).map_err(inference)?
                    ))
                    .map_err(inference)?;
                let hidden = floats(&outputs[0]).map_err(inference)?;
                let dim = hidden.len() / (batch * seq).max(1);
                let mut states = Vec::new();
                let mut starts = vec![0];
                for (b, text) in texts.iter().enumerate() {
                    let row = b * seq * dim;
                    states.extend_from_slice(&hidden[row..row + text.len() * dim]);
                    starts.push(starts[b] + text.len());
                }
                Ok((states, starts))
            }
        }
    }
}

/// Tokens of an encoding that are not padding.
fn real_tokens(encoding: &tokenizers::Encoding) -> usize {
    encoding
        .get_attention_mask()
        .iter()
        .filter(|&&m| m == 1)
        .count()
}

/// Loads `path` (an ONNX file) and optimizes it into a plan whose matrix products run on `executor`.
fn load_plan(path: &Path, executor: Executor) -> Result<Arc<TypedRunnableModel>, EmbedError> {
    if !path.is_file() {
        return Err(EmbedError::Missing {
            path: path.to_owned(),
        });
    }
    let options = RunOptions {
        executor: Some(executor),
        ..Default::default()
    };
    tract_onnx::onnx()
        .model_for_path(path)
        .and_then(|m| m.into_optimized())
        .and_then(|m| m.into_runnable_with_options(&options))
        .map_err(|e| corrupt(path, &e))
}

/// `path` exists but cannot be used.
fn corrupt(path: &Path, e: &dyn std::fmt::Display) -> EmbedError {
    EmbedError::Corrupt {
        path: path.to_owned(),
        reason: first_line(&e.to_string()),
    }
}

/// A tract failure while running the model.
fn inference(e: TractError) -> EmbedError {
    EmbedError::Inference(first_line(&e.to_string()))
}

/// The values of an f32 tensor.
fn floats(tensor: &Tensor) -> TractResult<&[f32]> {
    tensor.try_as_plain_ram()?.as_slice::<f32>()
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s);
    line.chars().take(300).collect()
}
