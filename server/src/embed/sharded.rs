//! Tensor-parallel execution of a BERT encoder converted into shards (`xtask/model/bert_to_onnx.py`
//! writes them to `shards/` beside `model.onnx`). Each layer gives each thread its share of the heads
//! (a query/key/value projection, the attention core of [`Attention`], and its rows of the output
//! projection) and of the feed-forward units; every projection is a tract plan with symbolic dims. The
//! shards of a step run at once on the caller's thread and a helper ([`Crew`]), and this module sums
//! their partial outputs, adds the residual and applies the layer norm. Token rows are unpadded
//! (`[tokens, hidden]`): nothing computes padding, and each text attends over its own tokens.
//!
//! Why not tract's own multithreading: on two cores its threaded matmul gains little or loses (thread
//! wake-ups per product cost more than small products take), while each shard's half-size products run
//! at full single-thread speed, side by side.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use glassbox_core::vector;
use serde::Deserialize;
use tract_linalg::multithread::Executor;
use tract_onnx::prelude::*;

use super::attention::Attention;
use super::crew::Crew;
use super::{EmbedError, corrupt, floats, inference, load_plan};

/// `shards/shards.json`, written by the converter.
#[derive(Debug, Deserialize)]
struct Layout {
    shards: usize,
    layers: usize,
    hidden: usize,
    heads: usize,
    head_dim: usize,
    eps: f32,
    max_positions: usize,
}

/// Scale and shift of one layer norm.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// One thread's share of a layer's attention: its heads' projection and its rows of the output projection.
struct AttentionShard {
    qkv: Arc<TypedRunnableModel>,
    output: Arc<TypedRunnableModel>,
}

struct Layer {
    attention: Vec<AttentionShard>,
    attention_norm: Norm,
    ffn: Vec<Arc<TypedRunnableModel>>,
    output_norm: Norm,
}

/// The loaded shards.
struct Model {
    layout: Layout,
    embed: Arc<TypedRunnableModel>,
    embed_norm: Norm,
    layers: Vec<Layer>,
    /// The attention core of one shard (its share of the heads).
    core: Attention,
}

/// A sharded encoder, ready to run. `Send + Sync`.
pub struct ShardedEncoder {
    model: Arc<Model>,
    /// Threads one run uses, the caller's included.
    threads: usize,
    /// The helpers (`threads - 1`), started on first use; one caller at a time has them.
    crew: Mutex<Option<Crew>>,
}

/// Token ids of the texts of one run, owned so helper threads can read them.
type Texts = Arc<Vec<Vec<u32>>>;
/// Last hidden state of every token, row after row, and the first row of each text (plus the end).
type States = (Vec<f32>, Vec<usize>);

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
        if layout.shards == 0 || !layout.heads.is_multiple_of(layout.shards) {
            return Err(corrupt(&layout_path, &"the shards do not divide the heads"));
        }
        // Each shard runs on one thread: the parallelism is across shards.
        let plan = |name: String| load_plan(&dir.join(name), Executor::SingleThread);
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
        if norms.len() != 2 * (1 + 2 * layout.layers)
            || norms.iter().any(|v| v.len() != layout.hidden)
        {
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
                .map(|t| {
                    Ok(AttentionShard {
                        qkv: plan(format!("layer{i}.qkv{t}.onnx"))?,
                        output: plan(format!("layer{i}.attention_output{t}.onnx"))?,
                    })
                })
                .collect::<Result<_, EmbedError>>()?;
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
        let core =
            Attention::new(layout.heads / layout.shards, layout.head_dim).map_err(inference)?;
        Ok(Self {
            model: Arc::new(Model {
                layout,
                embed,
                embed_norm,
                layers,
                core,
            }),
            threads: threads.max(1),
            crew: Mutex::new(None),
        })
    }

    /// Last hidden state of every token of `texts` (token ids, special tokens included), row after
    /// row, and the first row of each text (plus the end).
    ///
    /// `threads` threads do the work: one text, or a few short ones, run tensor-parallel (the shards
    /// of each step side by side); a larger batch is cut into groups of about equal token counts that
    /// run whole, each on one thread, with no step-by-step hand-offs. While another caller has the
    /// helpers, this one runs on its own thread: tensor-parallel hand-offs need both threads running,
    /// which more busy threads than cores would break. Without `helpers`, it always does.
    pub fn run(&self, texts: &[&[u32]], helpers: bool) -> Result<States, EmbedError> {
        let total = texts.iter().map(|t| t.len()).sum();
        let groups = groups_by_tokens(texts, group_count(total, texts.len(), self.threads));
        let alone = || {
            merge(
                groups
                    .iter()
                    .map(|group| Model::forward(&self.model, group, None)),
            )
        };
        // Without helpers the crew's lock is not even tried: a caller running alone must not keep
        // it from one that may use them.
        if !helpers || self.threads <= 1 {
            return alone();
        }
        let mut crew = match self.crew.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return alone(),
        };
        if crew.is_none() {
            *crew = Some(Crew::new(self.threads - 1, "glassbox-embed").map_err(|e| {
                EmbedError::Inference(format!("cannot start embedding threads: {e}"))
            })?);
        }
        let Some(crew) = crew.as_mut() else {
            return Err(stopped());
        };
        if groups.len() <= 1 {
            Model::forward(&self.model, texts, Some(crew))
        } else {
            self.run_groups(crew, texts, &groups)
        }
    }

    /// Runs `groups` (consecutive runs of `texts`) whole, each thread taking the next group until
    /// none is left, and joins their states in order.
    fn run_groups(
        &self,
        crew: &mut Crew,
        texts: &[&[u32]],
        groups: &[&[&[u32]]],
    ) -> Result<States, EmbedError> {
        let texts: Texts = Arc::new(texts.iter().map(|t| t.to_vec()).collect());
        let mut bounds = vec![0];
        for group in groups {
            bounds.push(bounds[bounds.len() - 1] + group.len());
        }
        let bounds = Arc::new(bounds);
        let next = Arc::new(AtomicUsize::new(0));
        let worker = || GroupWorker {
            model: self.model.clone(),
            texts: texts.clone(),
            bounds: bounds.clone(),
            next: next.clone(),
        };
        let theirs = (1..crew.threads())
            .map(|_| {
                let worker = worker();
                Box::new(move || worker.work()) as Box<dyn FnOnce() -> Vec<GroupResult> + Send>
            })
            .collect();
        let mine = worker();
        let mut parts: Vec<Option<Result<States, EmbedError>>> =
            groups.iter().map(|_| None).collect();
        for finished in crew.run(move || mine.work(), theirs) {
            for (g, part) in finished.ok_or_else(stopped)? {
                parts[g] = Some(part);
            }
        }
        merge(
            parts
                .into_iter()
                .map(|p| p.unwrap_or_else(|| Err(stopped()))),
        )
    }
}

/// A group's index and its states.
type GroupResult = (usize, Result<States, EmbedError>);

/// What one thread needs to take groups of a batch: group `g` is `texts[bounds[g]..bounds[g + 1]]`.
struct GroupWorker {
    model: Arc<Model>,
    texts: Texts,
    bounds: Arc<Vec<usize>>,
    next: Arc<AtomicUsize>,
}

impl GroupWorker {
    /// Runs the next group not yet taken, until none is left.
    fn work(self) -> Vec<GroupResult> {
        let mut done = Vec::new();
        loop {
            let g = self.next.fetch_add(1, Ordering::Relaxed);
            if g + 1 >= self.bounds.len() {
                return done;
            }
            let group: Vec<&[u32]> = self.texts[self.bounds[g]..self.bounds[g + 1]]
                .iter()
                .map(Vec::as_slice)
                .collect();
            done.push((g, Model::forward(&self.model, &group, None)));
        }
    }
}

impl Model {
    /// Runs `texts` through the encoder; with a crew, the shards of each step run side by side.
    fn forward(
        model: &Arc<Model>,
        texts: &[&[u32]],
        mut crew: Option<&mut Crew>,
    ) -> Result<States, EmbedError> {
        let layout = &model.layout;
        let longest = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        if longest > layout.max_positions {
            return Err(EmbedError::Inference(format!(
                "{longest} tokens exceed the model's {} positions",
                layout.max_positions
            )));
        }
        let mut starts = Vec::with_capacity(texts.len() + 1);
        let (mut ids, mut positions) = (vec![], vec![]);
        for text in texts {
            starts.push(ids.len());
            ids.extend(text.iter().map(|&id| i64::from(id)));
            positions.extend((0..text.len()).map(|s| s as i64));
        }
        let tokens = ids.len();
        starts.push(tokens);
        if tokens == 0 {
            return Ok((vec![], starts));
        }
        let starts = Arc::new(starts);
        let tensor = |data: Vec<i64>| Tensor::from_shape(&[tokens], &data).map(|t| t.into_tvalue());
        let embedded = model
            .embed
            .run(tvec!(
                tensor(ids).map_err(inference)?,
                tensor(positions).map_err(inference)?
            ))
            .map_err(inference)?;
        let mut x = floats(&embedded[0]).map_err(inference)?.to_vec();
        let hidden = layout.hidden;
        layer_norm(&mut x, &[], hidden, &model.embed_norm, layout.eps);
        let input = |x: &[f32]| {
            Tensor::from_shape(&[tokens, hidden], x)
                .map(Tensor::into_tvalue)
                .map_err(inference)
        };
        for (l, layer) in model.layers.iter().enumerate() {
            let (shared, starts, hidden) = (model.clone(), starts.clone(), input(&x)?);
            let partials = run_shards(crew.as_deref_mut(), layout.shards, move |t| {
                shared.attend(l, t, hidden.clone(), &starts)
            })?;
            residual_norm(&mut x, &partials, &layer.attention_norm, layout.eps)
                .map_err(inference)?;
            let (shared, hidden) = (model.clone(), input(&x)?);
            let partials = run_shards(crew.as_deref_mut(), layout.shards, move |t| {
                run_plan(&shared.layers[l].ffn[t], tvec!(hidden.clone()))
            })?;
            residual_norm(&mut x, &partials, &layer.output_norm, layout.eps).map_err(inference)?;
        }
        Ok((x, Arc::unwrap_or_clone(starts)))
    }

    /// Shard `t`'s partial output of layer `l`'s attention: its heads' projection of `hidden`, the
    /// attention core over each text (`starts`), and its rows of the output projection.
    fn attend(
        &self,
        l: usize,
        t: usize,
        hidden: TValue,
        starts: &[usize],
    ) -> Result<TValue, EmbedError> {
        let shard = &self.layers[l].attention[t];
        let qkv = run_plan(&shard.qkv, tvec!(hidden))?;
        let context = self
            .core
            .run(floats(&qkv).map_err(inference)?, starts)
            .map_err(inference)?;
        let tokens = starts.last().copied().unwrap_or(0);
        let context = tract_ndarray::Array2::from_shape_vec((tokens, self.core.width()), context)
            .map_err(|e| inference(e.into()))?;
        run_plan(&shard.output, tvec!(context.into_tvalue()))
    }
}

fn stopped() -> EmbedError {
    EmbedError::Inference("an embedding thread stopped".into())
}

/// A batch with fewer tokens than this runs as one group (tensor-parallel when there are threads).
const MIN_SPLIT_TOKENS: usize = 192;
/// At most about how many tokens one group gets when a batch is split. Smaller groups keep each
/// product's operands cache-resident: measured on batches of 32 sentences (600–900 tokens, 2
/// threads), 4 groups of 150–230 tokens ran about 5% faster than 4–6 groups of at most 192 and
/// 8% faster than 2 groups of 300–450.
const GROUP_TOKENS: usize = 256;

/// How many groups a batch of `texts` texts holding `total` tokens is cut into: one when it is
/// small, else about `total / GROUP_TOKENS`, rounded up to a multiple of `threads` so they finish
/// together, and never more than there are texts.
fn group_count(total: usize, texts: usize, threads: usize) -> usize {
    if total < MIN_SPLIT_TOKENS {
        return 1;
    }
    (total.div_ceil(GROUP_TOKENS).div_ceil(threads) * threads)
        .min(texts)
        .max(1)
}

/// Cuts `texts` into `parts` runs of consecutive texts with about equal token counts (the order is
/// kept; empty runs are dropped).
fn groups_by_tokens<'a>(texts: &'a [&'a [u32]], parts: usize) -> Vec<&'a [&'a [u32]]> {
    let total: usize = texts.iter().map(|t| t.len()).sum();
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

/// Joins the results of consecutive groups: states back to back, row offsets shifted.
fn merge(
    parts: impl IntoIterator<Item = Result<States, EmbedError>>,
) -> Result<States, EmbedError> {
    let (mut states, mut starts) = (Vec::new(), vec![0]);
    for part in parts {
        let (part_states, part_starts) = part?;
        let offset = starts.pop().unwrap_or(0);
        starts.extend(part_starts.iter().map(|s| s + offset));
        states.extend(part_states);
    }
    Ok((states, starts))
}

/// Runs `shard(t)` for every shard `t` of a step and returns their outputs in order: with a crew,
/// thread `w` runs shards `w`, `w + threads`, … (the caller's thread is `w = 0`); without, one after
/// the other.
fn run_shards<F>(
    crew: Option<&mut Crew>,
    shards: usize,
    shard: F,
) -> Result<Vec<TValue>, EmbedError>
where
    F: Fn(usize) -> Result<TValue, EmbedError> + Clone + Send + 'static,
{
    let Some(crew) = crew else {
        return (0..shards).map(shard).collect();
    };
    let threads = crew.threads().min(shards).max(1);
    let job = |w: usize| {
        let shard = shard.clone();
        move || -> Result<Vec<TValue>, EmbedError> {
            (w..shards).step_by(threads).map(&shard).collect()
        }
    };
    let theirs = (1..threads)
        .map(|w| Box::new(job(w)) as Box<dyn FnOnce() -> Result<Vec<TValue>, EmbedError> + Send>)
        .collect();
    let done = crew.run(job(0), theirs);
    // Thread w's k-th output is shard w + k·threads.
    let mut outputs: Vec<Option<TValue>> = (0..shards).map(|_| None).collect();
    for (w, finished) in done.into_iter().enumerate() {
        for (k, output) in finished.ok_or_else(stopped)??.into_iter().enumerate() {
            outputs[w + k * threads] = Some(output);
        }
    }
    outputs.into_iter().map(|o| o.ok_or_else(stopped)).collect()
}

/// The first output of `plan` on `inputs`.
fn run_plan(plan: &Arc<TypedRunnableModel>, inputs: TVec<TValue>) -> Result<TValue, EmbedError> {
    let mut outputs = plan.run(inputs).map_err(inference)?;
    Ok(outputs.remove(0))
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

simd! {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(groups: &[&[&[u32]]]) -> Vec<usize> {
        groups
            .iter()
            .map(|g| g.iter().map(|t| t.len()).sum())
            .collect()
    }

    #[test]
    fn batches_split_into_groups_of_about_equal_tokens() {
        let texts: Vec<Vec<u32>> = [30, 10, 20, 40, 25, 15, 35, 25]
            .iter()
            .map(|&n| vec![1; n])
            .collect();
        let refs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
        let groups = groups_by_tokens(&refs, 2);
        assert_eq!(lengths(&groups), vec![100, 100]);
        // Each group closes once the running total reaches its share (50, 100, 150 of 200).
        assert_eq!(lengths(&groups_by_tokens(&refs, 4)), vec![60, 40, 75, 25]);
        // Order is kept: the groups are consecutive runs of the batch.
        assert_eq!(groups.concat(), refs);
    }

    #[test]
    fn small_batches_stay_whole_and_big_ones_split_evenly() {
        assert_eq!(group_count(75, 3, 2), 1);
        assert_eq!(group_count(700, 32, 2), 4);
        assert_eq!(group_count(400, 2, 2), 2);
        assert_eq!(group_count(1000, 1, 2), 1);
        assert_eq!(group_count(700, 32, 1), 3);
        let one = vec![1u32; 5];
        assert_eq!(groups_by_tokens(&[one.as_slice()], 4).len(), 1);
        assert_eq!(groups_by_tokens(&[], 2).len(), 0);
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
