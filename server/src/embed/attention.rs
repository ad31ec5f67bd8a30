//! The attention core of a shard (scores, softmax, weighted values), on unpadded token rows: each text
//! attends over its own tokens only, so there is no padding to mask and no padded view to gather.
//!
//! Why not in the shard's tract plan: its products are tiny (one `[n, d]·[d, n]` and one `[n, n]·[n, d]`
//! per text and head), and tract runs each as a separate matrix product that packs both operands;
//! measured on 9 texts of 22 tokens, that was about 40% of an attention shard's time, against a few
//! percent of its arithmetic. Here they are loops over contiguous rows, compiled for the CPU's vector
//! width (`multiversion`), with tract-linalg's own `exp` kernel for the softmax.

use tract_linalg::Func;
use tract_linalg::element_wise::ElementWise;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::ensure;

/// Scaled dot-product attention over `heads` heads of `dim` values each. `Send + Sync`.
pub struct Attention {
    heads: usize,
    dim: usize,
    /// `exp` in place.
    exp: Box<dyn ElementWise<f32>>,
}

/// Width of the blocks the loops below work in: a block's accumulators stay in registers.
const LANES: usize = 16;

/// One text's rows of one head, copied out of the projection, rows padded with zeros to whole
/// blocks: queries and values `[n, dim↑]`, keys transposed (`[dim, n↑]`) so a query's scores against
/// a block of keys accumulate along contiguous rows (`↑`: rounded up to a multiple of [`LANES`]).
#[derive(Default)]
struct Head {
    queries: Vec<f32>,
    keys: Vec<f32>,
    values: Vec<f32>,
    /// `[n, n]`: scores, then their exponentials.
    scores: Vec<f32>,
    /// `[n, dim↑]`: the head's context.
    context: Vec<f32>,
}

impl Attention {
    /// The core for `heads` heads of `dim` values.
    pub fn new(heads: usize, dim: usize) -> TractResult<Self> {
        Ok(Self {
            heads,
            dim,
            exp: Func::Exp.ew_f32()?,
        })
    }

    /// Values per token of the context this core writes: `heads · dim`.
    pub fn width(&self) -> usize {
        self.heads * self.dim
    }

    /// `qkv` holds one row per token: the queries (already scaled by `1/√dim`), the keys and the
    /// values, each `heads · dim` wide and head after head. Text `t` is rows `starts[t]..starts[t + 1]`.
    /// Returns the context, `heads · dim` values per token, head after head.
    pub fn run(&self, qkv: &[f32], starts: &[usize]) -> TractResult<Vec<f32>> {
        let (width, dim) = (self.width(), self.dim);
        let row = 3 * width;
        let tokens = starts.last().copied().unwrap_or(0);
        ensure!(
            qkv.len() == tokens * row && starts.windows(2).all(|w| w[0] <= w[1]),
            "attention input of {} values does not hold {tokens} rows of {row}",
            qkv.len()
        );
        let mut context = vec![0f32; tokens * width];
        let mut head = Head::default();
        for text in starts.windows(2) {
            let (first, n) = (text[0], text[1] - text[0]);
            if n == 0 {
                continue;
            }
            let rows = &qkv[first * row..(first + n) * row];
            for h in 0..self.heads {
                head.load(
                    rows,
                    row,
                    [h * dim, width + h * dim, 2 * width + h * dim],
                    dim,
                );
                scores(&head.queries, &head.keys, n, dim, &mut head.scores);
                self.exp.run(&mut head.scores)?;
                weigh(&head.scores, &head.values, n, dim, &mut head.context);
                let wide = dim.next_multiple_of(LANES);
                for (i, out) in head.context.chunks_exact(wide).enumerate() {
                    context[(first + i) * width + h * dim..][..dim].copy_from_slice(&out[..dim]);
                }
            }
        }
        Ok(context)
    }
}

impl Head {
    /// Copies one head out of `rows` (`row` values each): its queries, keys and values start at
    /// `at[0]`, `at[1]` and `at[2]` of a row.
    fn load(&mut self, rows: &[f32], row: usize, at: [usize; 3], dim: usize) {
        let n = rows.len() / row;
        let (wide, long) = (dim.next_multiple_of(LANES), n.next_multiple_of(LANES));
        let [queries, keys, values] = at;
        for buffer in [&mut self.queries, &mut self.values, &mut self.keys] {
            buffer.clear();
        }
        self.queries.resize(n * wide, 0.0);
        self.values.resize(n * wide, 0.0);
        self.keys.resize(dim * long, 0.0);
        for (j, token) in rows.chunks_exact(row).enumerate() {
            self.queries[j * wide..][..dim].copy_from_slice(&token[queries..queries + dim]);
            self.values[j * wide..][..dim].copy_from_slice(&token[values..values + dim]);
            for (d, &k) in token[keys..keys + dim].iter().enumerate() {
                self.keys[d * long + j] = k;
            }
        }
        self.scores.resize(n * n, 0.0);
        self.context.resize(n * wide, 0.0);
    }
}

simd! {
/// `scores[i, j] = queries[i] · keys[j] - max_j`, row by row (`queries` is `[n, dim↑]`, `keys`
/// `[dim, n↑]`): shifted so each row's largest score is 0, ready for `exp`.
fn scores(queries: &[f32], keys: &[f32], n: usize, dim: usize, scores: &mut [f32]) {
    let (wide, long) = (dim.next_multiple_of(LANES), n.next_multiple_of(LANES));
    for (query, row) in queries.chunks_exact(wide).zip(scores.chunks_exact_mut(n)) {
        for block in (0..n).step_by(LANES) {
            let mut sums = [0f32; LANES];
            for (&q, key) in query[..dim].iter().zip(keys.chunks_exact(long)) {
                for (s, &k) in sums.iter_mut().zip(&key.as_chunks::<LANES>().0[block / LANES]) {
                    *s += q * k;
                }
            }
            let end = (block + LANES).min(n);
            row[block..end].copy_from_slice(&sums[..end - block]);
        }
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        row.iter_mut().for_each(|s| *s -= max);
    }
}
}

simd! {
/// `context[i] = Σ_j weights[i, j] · values[j] / Σ_j weights[i, j]` (`values` and `context` are
/// `[n, dim↑]`).
fn weigh(weights: &[f32], values: &[f32], n: usize, dim: usize, context: &mut [f32]) {
    let wide = dim.next_multiple_of(LANES);
    for (row, out) in weights.chunks_exact(n).zip(context.chunks_exact_mut(wide)) {
        let scale = 1.0 / glassbox_core::vector::sum(row);
        for (block, out) in out.chunks_exact_mut(LANES).enumerate() {
            let mut sums = [0f32; LANES];
            for (&w, value) in row.iter().zip(values.chunks_exact(wide)) {
                for (s, &v) in sums.iter_mut().zip(&value.as_chunks::<LANES>().0[block]) {
                    *s += w * v;
                }
            }
            for (o, s) in out.iter_mut().zip(sums) {
                *o = s * scale;
            }
        }
    }
}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Textbook attention of one text and one head, in f64.
    fn reference(q: &[Vec<f64>], k: &[Vec<f64>], v: &[Vec<f64>]) -> Vec<Vec<f64>> {
        q.iter()
            .map(|qi| {
                let scores: Vec<f64> = k
                    .iter()
                    .map(|kj| qi.iter().zip(kj).map(|(a, b)| a * b).sum())
                    .collect();
                let max = scores.iter().copied().fold(f64::MIN, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                (0..v[0].len())
                    .map(|d| weights.iter().zip(v).map(|(w, vj)| w * vj[d]).sum::<f64>() / total)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn each_text_attends_over_its_own_tokens() {
        // Heads narrower than a block; texts of 4, 1, 0 and 7 tokens.
        check(3, 5, &[0, 4, 5, 5, 12]);
        // The model's heads (32 values: two blocks); texts of 1, 17 and 40 tokens (several key blocks).
        check(2, 32, &[0, 1, 18, 58]);
    }

    /// Compares the core with [`reference`] on deterministic values in about [-2, 2].
    fn check(heads: usize, dim: usize, starts: &[usize]) {
        let core = Attention::new(heads, dim).unwrap();
        let tokens = starts[starts.len() - 1];
        let row = 3 * heads * dim;
        let qkv: Vec<f32> = (0..tokens * row)
            .map(|i| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * 4.0)
            .collect();
        let context = core.run(&qkv, starts).unwrap();
        assert_eq!(context.len(), tokens * heads * dim);
        for text in starts.windows(2) {
            for h in 0..heads {
                let part = |offset: usize| -> Vec<Vec<f64>> {
                    (text[0]..text[1])
                        .map(|t| {
                            let at = t * row + offset + h * dim;
                            qkv[at..at + dim].iter().map(|&x| f64::from(x)).collect()
                        })
                        .collect()
                };
                let want = reference(&part(0), &part(heads * dim), &part(2 * heads * dim));
                for (i, t) in (text[0]..text[1]).enumerate() {
                    let got = &context[t * heads * dim + h * dim..][..dim];
                    for (g, w) in got.iter().zip(&want[i]) {
                        assert!((f64::from(*g) - w).abs() < 1e-5, "{g} vs {w}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_mismatched_input_is_an_error() {
        let core = Attention::new(2, 4).unwrap();
        assert!(core.run(&[0.0; 23], &[0, 1]).is_err());
        assert!(core.run(&[0.0; 24], &[0, 1]).unwrap().len() == 8);
    }
}
