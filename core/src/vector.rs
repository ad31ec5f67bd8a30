//! Vector math for embeddings: dot product, cosine, normalisation and top-k, over `f32` slices.
//! Loops are written over fixed-width chunks so the compiler auto-vectorizes them.

/// Dot product of two equal-length vectors (extra elements of the longer one are ignored).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let chunks = n / LANES;
    for (ca, cb) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += ca[i] * cb[i];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for i in chunks * LANES..n {
        sum += a[i] * b[i];
    }
    sum
}

/// Sum of the elements.
#[inline]
pub fn sum(v: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Cosine similarity; 0 when either vector is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let norms = (dot(a, a) * dot(b, b)).sqrt();
    if norms == 0.0 { 0.0 } else { dot(a, b) / norms }
}

/// Scales `v` to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The `k` best `(index, score)` pairs by dot product with `query` (cosine for unit vectors), best first.
pub fn top_k<'a>(
    query: &[f32],
    vectors: impl IntoIterator<Item = &'a [f32]>,
    k: usize,
) -> Vec<(usize, f32)> {
    if k == 0 {
        return vec![];
    }
    // A small sorted buffer beats a heap for the k ≤ a few dozen used in context selection.
    let mut best: Vec<(usize, f32)> = Vec::with_capacity(k + 1);
    for (i, v) in vectors.into_iter().enumerate() {
        let score = dot(query, v);
        if best.len() == k && best.last().is_some_and(|&(_, worst)| score <= worst) {
            continue;
        }
        let at = best.partition_point(|&(_, s)| s >= score);
        best.insert(at, (i, score));
        best.truncate(k);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_handles_lengths_that_are_not_multiples_of_the_lanes() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let expected: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), expected);
    }

    #[test]
    fn cosine_of_parallel_and_orthogonal_vectors() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }

    #[test]
    fn normalize_gives_unit_length() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
    }

    #[test]
    fn top_k_returns_the_best_in_order() {
        let vectors: Vec<Vec<f32>> = vec![
            vec![0.1, 0.0],
            vec![0.9, 0.0],
            vec![0.5, 0.0],
            vec![0.7, 0.0],
        ];
        let got = top_k(&[1.0, 0.0], vectors.iter().map(|v| v.as_slice()), 2);
        assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(
            top_k(&[1.0, 0.0], vectors.iter().map(|v| v.as_slice()), 10).len(),
            4
        );
    }
}
