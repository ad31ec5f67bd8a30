//! Tensor-parallel execution of a BERT encoder converted into shards (`xtask/model/bert_to_onnx.py`
//! writes them to `shards/` beside `model.onnx`). Each layer is one attention shard per thread (its
//! share of the heads and of the output projection's rows) and one feed-forward shard per thread (its
//! share of the intermediate units); every shard is a tract plan with symbolic dims. The shards of a
//! step run at once on a small rayon pool, and this module sums their partial outputs, adds the residual
//! and applies the layer norm. Token rows are unpadded (`[tokens, hidden]`): the linear layers, which are
//! nearly all the work, never compute padding; only attention sees the padded `[batch, sequence]` view.
//!
//! Why not tract's own multithreading: on two cores its threaded matmul gains little or loses (thread
//! wake-ups per product cost more than small products take), while each shard's half-size products run
//! at full single-thread speed, side by side.

use std::path::Path;
use std::sync::Arc;

use glassbox_core::vector;
use serde::Deserialize;
use tract_onnx::prelude::*;

use super::EmbedError;

/// `shards/shards.json`, written by the converter.
#[derive(Debug, Deserialize)]
struct Layout {
    shards: usize,
    layers: usize,
    hidden: usize,
    eps: f32,
    max_positions: usize,
}

/// Scale and shift of one layer norm.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    attention: Vec<Arc<TypedRunnableModel>>,
    attention_norm: Norm,
    ffn: Vec<Arc<TypedRunnableModel>>,
    output_norm: Norm,
}

/// A sharded encoder, ready to run. `Send + Sync`.
pub struct ShardedEncoder {
    layout: Layout,
    embed: Arc<TypedRunnableModel>,
    embed_norm: Norm,
    layers: Vec<Layer>,
    pool: rayon::ThreadPool,
}

impl ShardedEncoder {
    /// True when `dir` holds a shard set.
    pub fn present(dir: &Path) -> bool {
        dir.join("shards/shards.json").is_file()
    }

    /// Loads and optimizes every shard of `dir/shards`; runs them on `threads` threads.
    pub fn load(dir: &Path, threads: usize) -> Result<Self, EmbedError> {
        let dir = dir.join("shards");
        let layout_path = dir.join("shards.json");
        let layout: Layout = std::fs::read_to_string(&layout_path)
            .map_err(|e| corrupt(&layout_path, &e))
            .and_then(|s| serde_json::from_str(&s).map_err(|e| corrupt(&layout_path, &e)))?;
        let plan = |name: String| -> Result<Arc<TypedRunnableModel>, EmbedError> {
            let path = dir.join(name);
            if !path.is_file() {
                return Err(EmbedError::Missing { path });
            }
            tract_onnx::onnx()
                .model_for_path(&path)
                .and_then(|m| m.into_optimized())
                .and_then(|m| m.into_runnable())
                .map_err(|e| corrupt(&path, &e))
        };
        let norms_path = dir.join("norms.onnx");
        let norms = plan("norms.onnx".into())?
            .run(tvec!())
            .and_then(|outputs| {
                outputs
                    .iter()
                    .map(|v| floats(v).map(<[f32]>::to_vec))
                    .collect::<TractResult<Vec<_>>>()
            })
            .map_err(|e| corrupt(&norms_path, &e))?;
        if norms.len() != 2 * (1 + 2 * layout.layers) || norms.iter().any(|v| v.len() != layout.hidden) {
            return Err(corrupt(&norms_path, &"unexpected layer norm weights"));
        }
        let mut norms = norms.into_iter();
        let mut next_norm = || Norm {
            gamma: norms.next().unwrap_or_default(),
            beta: norms.next().unwrap_or_default(),
        };
        let embed = plan("embed.onnx".into())?;
        let embed_norm = next_norm();
        let mut layers = Vec::with_capacity(layout.layers);
        for i in 0..layout.layers {
            let attention = (0..layout.shards)
                .map(|t| plan(format!("layer{i}.attention{t}.onnx")))
                .collect::<Result<_, _>>()?;
            let ffn = (0..layout.shards)
                .map(|t| plan(format!("layer{i}.ffn{t}.onnx")))
                .collect::<Result<_, _>>()?;
            layers.push(Layer {
                attention,
                attention_norm: next_norm(),
                ffn,
                output_norm: next_norm(),
            });
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.clamp(1, layout.shards))
            .thread_name(|i| format!("glassbox-embed-{i}"))
            .build()
            .map_err(|e| EmbedError::Inference(format!("cannot start embedding threads: {e}")))?;
        Ok(Self {
            layout,
            embed,
            embed_norm,
            layers,
            pool,
        })
    }

    /// Last hidden state of every token of `texts` (token ids, special tokens included), row after
    /// row, and the first row of each text (plus the end).
    pub fn run(&self, texts: &[&[u32]]) -> Result<(Vec<f32>, Vec<usize>), EmbedError> {
        let inference = |e: TractError| EmbedError::Inference(first_line(&e.to_string()));
        let batch = texts.len();
        let sequence = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        if sequence > self.layout.max_positions {
            return Err(EmbedError::Inference(format!(
                "{sequence} tokens exceed the model's {} positions",
                self.layout.max_positions
            )));
        }
        let mut starts = Vec::with_capacity(batch + 1);
        let (mut ids, mut positions, mut unpad) = (vec![], vec![], vec![]);
        let tokens: usize = texts.iter().map(|t| t.len()).sum();
        // Padded slots point one past the last token: the shards' masked padding row.
        let mut pad = vec![tokens as i64; batch * sequence];
        for (b, text) in texts.iter().enumerate() {
            starts.push(ids.len());
            for (s, &id) in text.iter().enumerate() {
                pad[b * sequence + s] = ids.len() as i64;
                unpad.push((b * sequence + s) as i64);
                ids.push(i64::from(id));
                positions.push(s as i64);
            }
        }
        starts.push(tokens);
        if tokens == 0 {
            return Ok((vec![], starts));
        }
        let tensor = |shape: &[usize], data: Vec<i64>| {
            Tensor::from_shape(shape, &data).map(|t| t.into_tvalue())
        };
        let pad = tensor(&[batch, sequence], pad).map_err(inference)?;
        let unpad = tensor(&[tokens], unpad).map_err(inference)?;
        let embedded = self
            .embed
            .run(tvec!(
                tensor(&[tokens], ids).map_err(inference)?,
                tensor(&[tokens], positions).map_err(inference)?
            ))
            .map_err(inference)?;
        let mut x = floats(&embedded[0]).map_err(inference)?.to_vec();
        let hidden = self.layout.hidden;
        layer_norm(&mut x, &[], hidden, &self.embed_norm, self.layout.eps);
        self.pool.install(|| -> Result<(), EmbedError> {
            for layer in &self.layers {
                let input = Tensor::from_shape(&[tokens, hidden], &x)
                    .map_err(inference)?
                    .into_tvalue();
                let partials = run_shards(&layer.attention, |_| {
                    tvec!(input.clone(), pad.clone(), unpad.clone())
                })
                .map_err(inference)?;
                residual_norm(&mut x, &partials, &layer.attention_norm, self.layout.eps)
                    .map_err(inference)?;
                let input = Tensor::from_shape(&[tokens, hidden], &x)
                    .map_err(inference)?
                    .into_tvalue();
                let partials =
                    run_shards(&layer.ffn, |_| tvec!(input.clone())).map_err(inference)?;
                residual_norm(&mut x, &partials, &layer.output_norm, self.layout.eps)
                    .map_err(inference)?;
            }
            Ok(())
        })?;
        Ok((x, starts))
    }
}

/// Runs every shard's plan at once (on the current rayon pool) and returns their outputs in order.
fn run_shards(
    plans: &[Arc<TypedRunnableModel>],
    inputs: impl Fn(usize) -> TVec<TValue> + Sync,
) -> TractResult<Vec<TValue>> {
    use rayon::prelude::*;
    plans
        .par_iter()
        .enumerate()
        .map(|(t, plan)| Ok(plan.run(inputs(t))?.remove(0)))
        .collect()
}

/// `x += Σ partials`, then the layer norm of every row, in place.
fn residual_norm(x: &mut [f32], partials: &[TValue], norm: &Norm, eps: f32) -> TractResult<()> {
    let slices = partials
        .iter()
        .map(|p| floats(p))
        .collect::<TractResult<Vec<_>>>()?;
    layer_norm(x, &slices, norm.gamma.len(), norm, eps);
    Ok(())
}

/// Adds `partials` to `x` and normalizes each row of `width` values (mean 0, variance 1, then scale
/// and shift), as ONNX LayerNormalization over the last axis does.
fn layer_norm(x: &mut [f32], partials: &[&[f32]], width: usize, norm: &Norm, eps: f32) {
    for (r, row) in x.chunks_exact_mut(width).enumerate() {
        for partial in partials {
            let part = &partial[r * width..(r + 1) * width];
            row.iter_mut().zip(part).for_each(|(v, p)| *v += p);
        }
        let mean = vector::sum(row) / width as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let scale = 1.0 / (vector::dot(row, row) / width as f32 + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = *v * scale * g + b;
        }
    }
}

/// The values of an f32 tensor.
pub(super) fn floats(tensor: &Tensor) -> TractResult<&[f32]> {
    tensor.try_as_plain_ram()?.as_slice::<f32>()
}

fn corrupt(path: &Path, e: &dyn std::fmt::Display) -> EmbedError {
    EmbedError::Corrupt {
        path: path.to_owned(),
        reason: first_line(&e.to_string()),
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s);
    line.chars().take(300).collect()
}

