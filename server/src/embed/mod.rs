//! In-process sentence embeddings: a sentence-transformers BERT encoder run by tract, tokenized by
//! `tokenizers`, mean-pooled over real tokens and L2-normalised (as sentence-transformers does for
//! all-MiniLM-L6-v2). One optimized plan with symbolic batch and sequence dims serves every shape.

pub mod service;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};
use tract_onnx::prelude::*;

pub use service::{EmbedStatus, EmbeddingService, Limits};

/// Lets every model run use `threads` threads for its matrix products (process-wide; 1 = single-threaded).
pub fn set_threads(threads: usize) {
    let executor = if threads > 1 {
        tract_linalg::multithread::Executor::multithread_with_name(threads, "glassbox-embed")
    } else {
        tract_linalg::multithread::Executor::SingleThread
    };
    tract_linalg::multithread::set_default_executor(executor);
}

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

/// A loaded embedding model. `Send + Sync`: worker threads share one plan.
pub struct Embedder {
    plan: Arc<TypedRunnableModel>,
    tokenizer: Tokenizer,
    dimension: usize,
}

impl Embedder {
    /// Loads `model.onnx` and `tokenizer.json` from `dir` and optimizes the plan once.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let onnx_path = dir.join("model.onnx");
        let tokenizer_path = dir.join("tokenizer.json");
        for path in [&onnx_path, &tokenizer_path] {
            if !path.is_file() {
                return Err(EmbedError::Missing { path: path.clone() });
            }
        }
        let corrupt = |path: &Path, e: &dyn std::fmt::Display| EmbedError::Corrupt {
            path: path.to_owned(),
            reason: first_line(&e.to_string()),
        };
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
        let plan = tract_onnx::onnx()
            .model_for_path(&onnx_path)
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .map_err(|e| corrupt(&onnx_path, &e))?;
        let mut embedder = Self {
            plan,
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
        let (ids, mask, _, seq) = self.encode(&["warm up"])?;
        let outputs = self.run(ids, mask, 1, seq)?;
        outputs[0]
            .shape()
            .last()
            .copied()
            .ok_or_else(|| EmbedError::Inference("output has no dimensions".into()))
    }

    /// Length of every vector.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Token counts of `texts` (after truncation), without running the model.
    pub fn count_tokens(&self, texts: &[&str]) -> Result<Vec<usize>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        Ok(encodings
            .iter()
            .map(|e| e.get_attention_mask().iter().filter(|&&m| m == 1).count())
            .collect())
    }

    /// Embeds `texts` as one batch (padded to the longest). Blocking: call it off the async runtime.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>, EmbedError> {
        if texts.is_empty() {
            return Ok(vec![]);
        }
        let (ids, mask, encodings, seq) = self.encode(texts)?;
        let batch = encodings.len();
        let outputs = self.run(ids, mask.clone(), batch, seq)?;
        let inference = |e: TractError| EmbedError::Inference(first_line(&e.to_string()));
        let hidden = outputs[0].to_plain_array_view::<f32>().map_err(inference)?;
        let dim = self.dimension;
        let mut result = Vec::with_capacity(batch);
        for (b, encoding) in encodings.iter().enumerate() {
            let mut pooled = vec![0f32; dim];
            let mut count = 0f32;
            for s in 0..seq {
                if mask[b * seq + s] == 0 {
                    continue;
                }
                count += 1.0;
                for (d, p) in pooled.iter_mut().enumerate() {
                    *p += hidden[[b, s, d]];
                }
            }
            let count = count.max(1.0);
            pooled.iter_mut().for_each(|p| *p /= count);
            glassbox_core::vector::normalize(&mut pooled);
            result.push(Embedding {
                vector: pooled,
                tokens: encoding
                    .get_attention_mask()
                    .iter()
                    .filter(|&&m| m == 1)
                    .count(),
                truncated: !encoding.get_overflowing().is_empty(),
            });
        }
        Ok(result)
    }
}

impl Embedder {
    /// Token ids and attention mask of `texts`, flattened row-major, padded to the longest.
    #[allow(clippy::type_complexity)]
    fn encode(
        &self,
        texts: &[&str],
    ) -> Result<(Vec<i64>, Vec<i64>, Vec<tokenizers::Encoding>, usize), EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        let seq = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0);
        let mut ids = Vec::with_capacity(encodings.len() * seq);
        let mut mask = Vec::with_capacity(encodings.len() * seq);
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&i| i64::from(i)));
            mask.extend(e.get_attention_mask().iter().map(|&m| i64::from(m)));
        }
        Ok((ids, mask, encodings, seq))
    }

    fn run(
        &self,
        ids: Vec<i64>,
        mask: Vec<i64>,
        batch: usize,
        seq: usize,
    ) -> Result<TVec<TValue>, EmbedError> {
        let tensor = |v: Vec<i64>| {
            tract_ndarray::Array2::from_shape_vec((batch, seq), v)
                .map(|a| a.into_tensor())
                .map_err(|e| EmbedError::Inference(e.to_string()))
        };
        let inputs = tvec!(tensor(ids)?.into(), tensor(mask)?.into());
        self.plan
            .run(inputs)
            .map_err(|e| EmbedError::Inference(first_line(&e.to_string())))
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s);
    line.chars().take(300).collect()
}
