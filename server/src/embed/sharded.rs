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
use std::sync::{Arc, Mutex};

use glassbox_core::vector;
use rayon::prelude::*;
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
    /// Threads one run uses, the caller's included.
    threads: usize,
    /// Idle thread pools (`threads` threads each), one per concurrent caller.
    pools: Mutex<Vec<rayon::ThreadPool>>,
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
        Ok(Self {
            layout,
            embed,
            embed_norm,
            layers,
            threads: threads.max(1),
            pools: Mutex::new(Vec::new()),
        })
    }

    /// Last hidden state of every token of `texts` (token ids, special tokens included), row after
    /// row, and the first row of each text (plus the end).
    ///
    /// `threads` threads do the work: one text, or a few short ones, run tensor-parallel (the shards
    /// of each step side by side); a larger batch is cut into groups of about equal token counts that
    /// run whole, one per thread, with no step-by-step hand-offs.
    pub fn run(&self, texts: &[&[u32]]) -> Result<(Vec<f32>, Vec<usize>), EmbedError> {
        if self.threads == 1 {
            return self.forward(texts, false);
        }
        let pool = self.take_pool()?;
        let groups = groups_by_tokens(texts, self.threads, MIN_GROUP_TOKENS);
        let result = pool.install(|| {
            if groups.len() == 1 {
                return self.forward(texts, true);
            }
            let parts = groups
                .par_iter()
                .map(|group| self.forward(group, false))
                .collect::<Result<Vec<_>, _>>()?;
            let (mut states, mut starts) = (Vec::new(), vec![0]);
            for (part_states, part_starts) in parts {
                let offset = starts.pop().unwrap_or(0);
                starts.extend(part_starts.iter().map(|s| s + offset));
                states.extend(part_states);
            }
            Ok((states, starts))
        });
        self.pools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pool);
        result
    }

    /// A thread pool no other caller is using: each concurrent caller gets its own, so a short query
    /// is never queued behind another caller's shards (the OS shares the cores between them).
    fn take_pool(&self) -> Result<rayon::ThreadPool, EmbedError> {
        if let Some(pool) = self.pools.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(pool);
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .thread_name(|i| format!("glassbox-embed-{i}"))
            .build()
            .map_err(|e| EmbedError::Inference(format!("cannot start embedding threads: {e}")))
    }

    /// Runs `texts` through the encoder; `parallel`: the shards of each step run side by side on
    /// the current pool.
    fn forward(&self, texts: &[&[u32]], parallel: bool) -> Result<(Vec<f32>, Vec<usize>), EmbedError> {
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
        for layer in &self.layers {
            let input = Tensor::from_shape(&[tokens, hidden], &x)
                .map_err(inference)?
                .into_tvalue();
            let partials = run_shards(parallel, &layer.attention, || {
                tvec!(input.clone(), pad.clone(), unpad.clone())
            })
            .map_err(inference)?;
            residual_norm(&mut x, &partials, &layer.attention_norm, self.layout.eps)
                .map_err(inference)?;
            let input = Tensor::from_shape(&[tokens, hidden], &x)
                .map_err(inference)?
                .into_tvalue();
            let partials =
                run_shards(parallel, &layer.ffn, || tvec!(input.clone())).map_err(inference)?;
            residual_norm(&mut x, &partials, &layer.output_norm, self.layout.eps)
                .map_err(inference)?;
        }
        Ok((x, starts))
    }
}

/// Tokens a group must reach before a batch is split across threads instead of across shards.
const MIN_GROUP_TOKENS: usize = 96;

/// Cuts `texts` into at most `parts` runs of consecutive texts with about equal token counts, each
/// of at least `min_tokens` tokens (fewer runs when the batch is small; one run means no split).
fn groups_by_tokens<'a>(texts: &'a [&'a [u32]], parts: usize, min_tokens: usize) -> Vec<&'a [&'a [u32]]> {
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let parts = parts.min(total / min_tokens.max(1)).min(texts.len()).max(1);
    let mut groups = Vec::with_capacity(parts);
    let (mut begin, mut seen) = (0, 0);
    for (i, text) in texts.iter().enumerate() {
        seen += text.len();
        // Close the group once it holds its share of the tokens (the last group takes the rest).
        if groups.len() + 1 < parts && seen * parts >= total * (groups.len() + 1) {
            groups.push(&texts[begin..=i]);
            begin = i + 1;
        }
    }
    groups.push(&texts[begin..]);
    groups.retain(|g| !g.is_empty());
    groups
}

/// Runs every shard's plan, side by side on the current pool when `parallel`, and returns their
/// outputs in order.
fn run_shards(
    parallel: bool,
    plans: &[Arc<TypedRunnableModel>],
    inputs: impl Fn() -> TVec<TValue> + Sync,
) -> TractResult<Vec<TValue>> {
    let run = |plan: &Arc<TypedRunnableModel>| Ok(plan.run(inputs())?.remove(0));
    if parallel {
        plans.par_iter().map(run).collect()
    } else {
        plans.iter().map(run).collect()
    }
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


#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(groups: &[&[&[u32]]]) -> Vec<usize> {
        groups.iter().map(|g| g.iter().map(|t| t.len()).sum()).collect()
    }

    #[test]
    fn batches_split_into_groups_of_about_equal_tokens() {
        let texts: Vec<Vec<u32>> = [30, 10, 20, 40, 25, 15, 35, 25]
            .iter()
            .map(|&n| vec![1; n])
            .collect();
        let refs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
        let groups = groups_by_tokens(&refs, 2, 96);
        assert_eq!(lengths(&groups), vec![100, 100]);
        // Order is kept: the groups are consecutive runs of the batch.
        assert_eq!(groups.concat(), refs);
    }

    #[test]
    fn small_batches_stay_whole() {
        let texts: Vec<Vec<u32>> = [20, 30, 25].iter().map(|&n| vec![1; n]).collect();
        let refs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
        assert_eq!(groups_by_tokens(&refs, 2, 96).len(), 1);
        assert_eq!(groups_by_tokens(&refs[..1], 4, 1).len(), 1);
        assert_eq!(groups_by_tokens(&[], 2, 96).len(), 0);
    }

    #[test]
    fn layer_norm_adds_the_partials_then_normalizes_each_row() {
        let norm = Norm {
            gamma: vec![2.0; 4],
            beta: vec![1.0; 4],
        };
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0];
        let partial = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 3.0, 3.0];
        layer_norm(&mut x, &[&partial], 4, &norm, 0.0);
        // Row 1: mean 2.5, variance 1.25; row 2: (1, 1, 3, 3), mean 2, variance 1.
        let scale = 1.0 / 1.25f32.sqrt();
        let expected = [-1.5, -0.5, 0.5, 1.5].map(|d: f32| d * scale * 2.0 + 1.0);
        for (got, want) in x[..4].iter().zip(expected) {
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        }
        assert_eq!(&x[4..], &[-1.0, -1.0, 3.0, 3.0]);
    }
}
