//! Byte-pair merging of one piece, exactly as tiktoken does it: repeatedly merge the adjacent
//! pair whose concatenation has the lowest rank (leftmost on ties) until no pair is in the
//! vocabulary. Short pieces use a flat scan; long ones a heap over a linked list, so a
//! megabyte without spaces stays O(n log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

/// Pieces up to this many bytes use the flat scan (faster for the short words of normal text).
const FLAT_MAX: usize = 96;

/// Appends the ranks of `piece` to `out`.
pub fn encode_piece(vocab: &Vocab, piece: &[u8], out: &mut Vec<u32>) {
    if let Some(rank) = vocab.rank(piece) {
        out.push(rank);
        return;
    }
    let bounds = merge(vocab, piece);
    out.extend(bounds.windows(2).map(|w| {
        vocab
            .rank(&piece[w[0]..w[1]])
            .expect("every merged part is a token: single bytes are in the vocabulary")
    }));
}

/// Number of tokens `piece` encodes to.
pub fn count_piece(vocab: &Vocab, piece: &[u8]) -> usize {
    if vocab.rank(piece).is_some() {
        return 1;
    }
    merge(vocab, piece).len() - 1
}

/// Token boundaries of `piece` (first 0, last `piece.len()`).
fn merge(vocab: &Vocab, piece: &[u8]) -> Vec<usize> {
    if piece.len() <= FLAT_MAX {
        merge_flat(vocab, piece)
    } else {
        merge_heap(vocab, piece)
    }
}

/// tiktoken's `_byte_pair_merge`: `parts[i]` is a boundary and the rank of the pair it starts.
fn merge_flat(vocab: &Vocab, piece: &[u8]) -> Vec<usize> {
    let pair_rank = |parts: &[(usize, u32)], i: usize| -> u32 {
        if i + 2 < parts.len() {
            vocab
                .rank(&piece[parts[i].0..parts[i + 2].0])
                .unwrap_or(u32::MAX)
        } else {
            u32::MAX
        }
    };
    let mut parts: Vec<(usize, u32)> = (0..=piece.len()).map(|i| (i, u32::MAX)).collect();
    for i in 0..parts.len().saturating_sub(2) {
        parts[i].1 = pair_rank(&parts, i);
    }
    // The lowest-ranked pair, leftmost on ties (`min_by_key` keeps the first minimum).
    while let Some((i, _)) = parts[..parts.len() - 1]
        .iter()
        .enumerate()
        .min_by_key(|(_, p)| p.1)
        .filter(|(_, p)| p.1 != u32::MAX)
    {
        parts.remove(i + 1);
        parts[i].1 = pair_rank(&parts, i);
        if i > 0 {
            parts[i - 1].1 = pair_rank(&parts, i - 1);
        }
    }
    parts.into_iter().map(|p| p.0).collect()
}

/// The same merge order with a min-heap keyed by (rank, start) over a doubly linked list of parts;
/// stale heap entries are skipped by checking the pair still spans the same bytes.
fn merge_heap(vocab: &Vocab, piece: &[u8]) -> Vec<usize> {
    let n = piece.len();
    // Part i covers piece[start[i]..start[next[i]]]; parts are indexed by their start byte.
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    let mut heap = BinaryHeap::new();
    let end_of = |next: &[usize], i: usize| {
        if next[i] < n {
            next[next[i]]
        } else {
            usize::MAX
        }
    };
    for i in 0..n.saturating_sub(1) {
        if let Some(rank) = vocab.rank(&piece[i..i + 2]) {
            heap.push(Reverse((rank, i, i + 2)));
        }
    }
    while let Some(Reverse((_, left, end))) = heap.pop() {
        if !alive[left] || end_of(&next, left) != end {
            continue; // stale: one side was merged since this pair was queued
        }
        let right = next[left];
        alive[right] = false;
        next[left] = next[right];
        if next[left] < n {
            prev[next[left]] = left;
        }
        // New pairs: (prev, left) and (left, next).
        if prev[left] != usize::MAX {
            let p = prev[left];
            if let Some(rank) = vocab.rank(&piece[p..end]) {
                heap.push(Reverse((rank, p, end)));
            }
        }
        if next[left] < n {
            let e = end_of(&next, left);
            if let Some(rank) = vocab.rank(&piece[left..e]) {
                heap.push(Reverse((rank, left, e)));
            }
        }
    }
    let mut bounds = Vec::new();
    let mut i = 0;
    while i < n {
        bounds.push(i);
        i = next[i];
    }
    bounds.push(n);
    bounds
}

#[cfg(test)]
pub(super) mod test_support {
    use super::*;

    /// Encodes with both merge strategies, whatever the piece length.
    pub fn encode_both(vocab: &Vocab, piece: &[u8], flat: &mut Vec<u32>, heap: &mut Vec<u32>) {
        for (bounds, out) in [
            (merge_flat(vocab, piece), flat),
            (merge_heap(vocab, piece), heap),
        ] {
            out.extend(
                bounds
                    .windows(2)
                    .map(|w| vocab.rank(&piece[w[0]..w[1]]).unwrap()),
            );
        }
    }
}
