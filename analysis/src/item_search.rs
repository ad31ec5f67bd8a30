//! Semantic selection of agent items for a request: the text each item is indexed by, how it and
//! the user's message are cut into chunks, and the scoring that picks items from the chunks'
//! vectors. The server embeds the chunks and passes the vectors in; everything here is pure.
//!
//! [`search`] scores every item chunk against every query chunk (one per sentence of the message)
//! and keeps each item chunk's best (max pooling, remembering which sentence won); the `top_k`
//! best chunks are grouped by item, each item keeping its best score; every item at or above
//! `include_score` goes, and the best others fill up to `top_n`. Then each sentence of a query of
//! several is guaranteed `per_query_chunk_min` items ([`search`] says precisely how), and
//! expansion ([`expand`]) adds items similar to the ones chosen.
//!
//! Ties are broken the same way everywhere ([`rank`]): higher score, then lower priority, then
//! name, then kind, then position among the candidates, so a result never depends on hashing or
//! sort stability. Scores are cosines in -1..=1; a vector of a different length than the query's,
//! an all-zero one or one giving a non-finite score matches nothing.

use std::cmp::Ordering;

use glassbox_core::context::items::{Included, ItemRef, ItemSearchSettings, RequestItem};
use glassbox_core::context::score::Score;
use glassbox_core::vector::dot;

/// The longest chunk, in characters, items and queries are cut into.
pub const MAX_CHUNK_CHARS: usize = 500;
/// How many of the best items not chosen a search reports.
pub const NEAR_MISSES: usize = 3;

/// The text an item is indexed by: `name: description`, or `name` without a description, then a
/// blank line and the item's text (rules and references; a tool has none, `text` is `None`).
pub fn index_text(name: &str, description: &str, text: Option<&str>) -> String {
    let description = description.trim();
    let mut out = String::from(name);
    if !description.is_empty() {
        out.push_str(": ");
        out.push_str(description);
    }
    if let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) {
        out.push_str("\n\n");
        out.push_str(text);
    }
    out
}

/// Cuts an item's text into chunks of at most `max_chars` characters (at least 1), slices of
/// `text`: each paragraph (blank lines separate them) is a chunk; a longer paragraph is cut into
/// sentences, consecutive sentences combined while they fit; a sentence longer than that is cut at
/// its last whitespace past half the limit, else at the limit.
pub fn chunk(text: &str, max_chars: usize) -> Vec<&str> {
    let max = max_chars.max(1);
    let mut out = Vec::new();
    for para in paragraphs(text) {
        if char_len(para) <= max {
            out.push(para);
            continue;
        }
        // The sentences combined so far: byte range in `para` and characters.
        let mut open: Option<(usize, usize, usize)> = None;
        for (start, end) in sentences(para) {
            let chars = char_len(&para[start..end]);
            if let Some((from, to, n)) = open {
                // What joining adds: the whitespace between and the sentence.
                let added = char_len(&para[to..start]) + chars;
                if n + added <= max {
                    open = Some((from, end, n + added));
                    continue;
                }
                out.push(&para[from..to]);
                open = None;
            }
            if chars <= max {
                open = Some((start, end, chars));
            } else {
                split_long(&para[start..end], max, &mut out);
            }
        }
        if let Some((from, to, _)) = open {
            out.push(&para[from..to]);
        }
    }
    out
}

/// Cuts a message into query chunks: one per sentence (paragraphs apart), each cut to at most
/// `max_chars` characters (at least 1). Nothing for an empty or blank message.
pub fn query_chunks(query: &str, max_chars: usize) -> Vec<&str> {
    let max = max_chars.max(1);
    paragraphs(query)
        .into_iter()
        .flat_map(|p| sentences(p).into_iter().map(move |(s, e)| &p[s..e]))
        .map(|s| match s.char_indices().nth(max) {
            Some((cut, _)) => s[..cut].trim_end(),
            None => s,
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// The paragraphs of `text`, trimmed: runs of lines between blank lines.
fn paragraphs(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            if let Some(s) = start.take() {
                out.push(text[s..at].trim());
            }
        } else if start.is_none() {
            start = Some(at);
        }
        at += line.len();
    }
    if let Some(s) = start {
        out.push(text[s..].trim());
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The sentences of `text` as trimmed byte ranges. A sentence ends after a run of `.`, `!` or `?`
/// (closing quotes and brackets included) followed by whitespace or the end, or right after a
/// full-width `。`, `！` or `？` (Chinese and Japanese put no space after them).
fn sentences(text: &str) -> Vec<(usize, usize)> {
    fn closer(c: char) -> bool {
        matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '」' | '』' | '）')
    }
    let mut ends = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        let full_width = matches!(c, '。' | '！' | '？');
        if !(full_width || matches!(c, '.' | '!' | '?')) {
            continue;
        }
        while let Some(&(_, n)) = chars.peek() {
            if matches!(n, '.' | '!' | '?' | '。' | '！' | '？') || closer(n) {
                chars.next();
            } else {
                break;
            }
        }
        match chars.peek() {
            None => {}
            Some(&(i, n)) if full_width || n.is_whitespace() => ends.push(i),
            Some(_) => {}
        }
    }
    ends.push(text.len());
    let mut out = Vec::with_capacity(ends.len());
    let mut start = 0;
    for end in ends {
        let piece = &text[start..end];
        let lead = piece.len() - piece.trim_start().len();
        let trimmed = piece.trim();
        if !trimmed.is_empty() {
            out.push((start + lead, start + lead + trimmed.len()));
        }
        start = end;
    }
    out
}

/// Cuts one sentence longer than `max` characters into pieces of at most `max`.
fn split_long<'t>(mut s: &'t str, max: usize, out: &mut Vec<&'t str>) {
    while let Some((limit, _)) = s.char_indices().nth(max) {
        let head = &s[..limit];
        // Cut at the last whitespace when it leaves the piece at least half full.
        let mut cut = limit;
        let last_space = head
            .char_indices()
            .enumerate()
            .filter(|(_, (_, c))| c.is_whitespace())
            .last();
        if let Some((chars_before, (at, _))) = last_space
            && chars_before > 0
            && chars_before >= max / 2
        {
            cut = at;
        }
        let piece = s[..cut].trim_end();
        if !piece.is_empty() {
            out.push(piece);
        }
        s = s[cut..].trim_start();
    }
    if !s.is_empty() {
        out.push(s);
    }
}

/// One item search may choose: its identity, its priority (for ties) and its chunks' vectors,
/// borrowed from wherever the caller keeps them (`Vec<f32>`, `&[f32]`, arrays, or its own chunk
/// type implementing `AsRef<[f32]>`).
#[derive(Debug)]
pub struct Candidate<'a, V> {
    /// Its identity.
    pub item: &'a ItemRef,
    /// Its priority (lower first).
    pub priority: i32,
    /// Its chunks' vectors, in chunk order.
    pub chunks: &'a [V],
}

impl<V> Clone for Candidate<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Candidate<'_, V> {}

/// A scored item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItemMatch {
    /// Its position among the candidates.
    pub candidate: usize,
    /// Its best cosine.
    pub score: f32,
    /// Where the best came from: for search, the query chunk (position among the query vectors);
    /// for expansion, the candidate whose chunk it resembles.
    pub from: usize,
}

impl ItemMatch {
    /// The request item for this match (`None` if `candidate` is not among `candidates`).
    pub fn request_item<V>(
        &self,
        candidates: &[Candidate<'_, V>],
        included: Included,
    ) -> Option<RequestItem> {
        Some(RequestItem {
            item: candidates.get(self.candidate)?.item.clone(),
            included,
            score: Some(Score::of(self.score)),
        })
    }
}

/// What search chose for a request, and what it nearly chose.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchOutcome {
    /// Items matching the message, best first.
    pub agent: Vec<ItemMatch>,
    /// Items matching the chosen ones, in the order the passes added them (each pass best first).
    pub expansion: Vec<ItemMatch>,
    /// The best of the items chosen by neither, best first (for the receipt's left-out list).
    pub near_misses: Vec<ItemMatch>,
}

impl SearchOutcome {
    /// The chosen items as request items: the `agent` ones, then the `expansion` ones.
    pub fn request_items<V>(&self, candidates: &[Candidate<'_, V>]) -> Vec<RequestItem> {
        let agent = self.agent.iter().map(|m| (m, Included::Agent));
        let expansion = self.expansion.iter().map(|m| (m, Included::Expansion));
        agent
            .chain(expansion)
            .filter_map(|(m, how)| m.request_item(candidates, how))
            .collect()
    }
}

/// The order of scored candidates, best first: higher score, then lower priority, then name, then
/// kind, then position. `a` and `b` are (score, candidate position), positions within `candidates`.
pub fn rank<V>(candidates: &[Candidate<'_, V>], a: (f32, usize), b: (f32, usize)) -> Ordering {
    let by_item = || match (candidates.get(a.1), candidates.get(b.1)) {
        (Some(x), Some(y)) => x
            .priority
            .cmp(&y.priority)
            .then_with(|| x.item.name.cmp(&y.item.name))
            .then_with(|| x.item.kind.cmp(&y.item.kind)),
        _ => Ordering::Equal,
    };
    b.0.total_cmp(&a.0).then_with(by_item).then(a.1.cmp(&b.1))
}

/// [`rank`] for matches.
fn by_rank<V>(candidates: &[Candidate<'_, V>], a: &ItemMatch, b: &ItemMatch) -> Ordering {
    rank(candidates, (a.score, a.candidate), (b.score, b.candidate))
}

/// A vector with its length, ready for cosines.
#[derive(Clone, Copy)]
struct Unit<'v> {
    v: &'v [f32],
    norm: f32,
}

impl<'v> Unit<'v> {
    /// `None` for an all-zero vector or one with a non-finite length.
    fn of(v: &'v [f32]) -> Option<Self> {
        let norm = dot(v, v).sqrt();
        (norm.is_finite() && norm > 0.0).then_some(Self { v, norm })
    }

    /// The cosine with `other`: `None` when the lengths differ or it is not finite.
    fn cosine(&self, other: &Unit<'_>) -> Option<f32> {
        if self.v.len() != other.v.len() {
            return None;
        }
        let s = dot(self.v, other.v) / (self.norm * other.norm);
        s.is_finite().then(|| s.clamp(-1.0, 1.0))
    }
}

/// Keeps `(score, from)` as `best` when it beats it (ties keep the earlier).
fn keep_best(best: &mut Option<(f32, usize)>, score: f32, from: usize) {
    if best.is_none_or(|(b, _)| score > b) {
        *best = Some((score, from));
    }
}

/// One item chunk's pooled score.
#[derive(Clone, Copy)]
struct Hit {
    score: f32,
    candidate: usize,
    chunk: usize,
}

/// Chooses agent items for a message from its query chunks' vectors (`queries`, in the message's
/// order), then expands the choice (`settings.expansion_depth` passes, see [`expand`]), and
/// reports the best `near_misses` items chosen by neither.
///
/// The guarantee per query chunk (`per_query_chunk_min`, for queries of two chunks or more): each
/// chosen item is credited to the query chunk that gave it its best score. For each query chunk
/// in order, while it is credited fewer items than the minimum, the best item not chosen whose
/// best score came from it is promoted. It is taken among all candidates, not only those of the
/// top-K chunks: the issue it fixes is one sentence's matches crowding out another's, and the
/// top-K cut is where that happens first. A promoted item takes the place of the weakest item
/// that got in only to fill up to `top_n` and whose own query chunk keeps its minimum without it;
/// when there is none it is added, beyond `top_n`. Items at or above `include_score` are never
/// displaced. A query chunk that is no item's best match gets nothing.
pub fn search<Q: AsRef<[f32]>, V: AsRef<[f32]>>(
    queries: &[Q],
    candidates: &[Candidate<'_, V>],
    settings: &ItemSearchSettings,
    near_misses: usize,
) -> SearchOutcome {
    let queries: Vec<Option<Unit>> = queries.iter().map(|q| Unit::of(q.as_ref())).collect();
    // Each item's best pooled score over all its chunks, and the query chunk it came from.
    let mut best: Vec<Option<(f32, usize)>> = vec![None; candidates.len()];
    let mut hits: Vec<Hit> = Vec::new();
    for (c, cand) in candidates.iter().enumerate() {
        for (j, v) in cand.chunks.iter().enumerate() {
            let Some(u) = Unit::of(v.as_ref()) else {
                continue;
            };
            let mut pooled = None;
            for (q, qu) in queries.iter().enumerate() {
                if let Some(s) = qu.as_ref().and_then(|qu| qu.cosine(&u)) {
                    keep_best(&mut pooled, s, q);
                }
            }
            if let Some((score, q)) = pooled {
                hits.push(Hit {
                    score,
                    candidate: c,
                    chunk: j,
                });
                keep_best(&mut best[c], score, q);
            }
        }
    }
    let by_hit = |a: &Hit, b: &Hit| {
        rank(candidates, (a.score, a.candidate), (b.score, b.candidate)).then(a.chunk.cmp(&b.chunk))
    };
    let k = settings.top_k as usize;
    if hits.len() > k {
        if k == 0 {
            hits.clear();
        } else {
            hits.select_nth_unstable_by(k - 1, by_hit);
            hits.truncate(k);
        }
    }
    hits.sort_unstable_by(by_hit);

    // Group by item: an item's first hit is its best, so this is the items' order too.
    let matched = |c: usize| {
        best[c].map(|(score, from)| ItemMatch {
            candidate: c,
            score,
            from,
        })
    };
    let mut seen = vec![false; candidates.len()];
    let mut ranked: Vec<ItemMatch> = Vec::new();
    for h in &hits {
        if !seen[h.candidate] {
            seen[h.candidate] = true;
            ranked.extend(matched(h.candidate));
        }
    }
    let sure = ranked
        .iter()
        .take_while(|m| m.score >= settings.include_score)
        .count();
    // Below the floor nothing fills up to top_n.
    let fill = ranked[sure..]
        .iter()
        .take_while(|m| m.score >= settings.min_score)
        .count();
    let take = sure.max((sure + fill).min(settings.top_n as usize));
    // (match, may be displaced): the items filling up to top_n may be.
    let mut chosen: Vec<(ItemMatch, bool)> = ranked
        .iter()
        .enumerate()
        .take(take)
        .map(|(i, m)| (*m, i >= sure))
        .collect();
    let mut chosen_flag = vec![false; candidates.len()];
    chosen
        .iter()
        .for_each(|(m, _)| chosen_flag[m.candidate] = true);

    let min = settings.per_query_chunk_min as usize;
    if min > 0 && queries.len() >= 2 {
        let mut pool: Vec<ItemMatch> = (0..candidates.len())
            .filter(|&c| !chosen_flag[c])
            .filter_map(matched)
            .filter(|m| m.score >= settings.min_score)
            .collect();
        pool.sort_unstable_by(|a, b| by_rank(candidates, a, b));
        let credited = |chosen: &[(ItemMatch, bool)], q: usize| {
            chosen.iter().filter(|(m, _)| m.from == q).count()
        };
        for q in 0..queries.len() {
            while credited(&chosen, q) < min {
                let Some(at) = pool.iter().position(|m| m.from == q) else {
                    break;
                };
                let promoted = pool.remove(at);
                let weakest = chosen
                    .iter()
                    .rposition(|(m, fill)| *fill && credited(&chosen, m.from) > min);
                if let Some(i) = weakest {
                    chosen_flag[chosen[i].0.candidate] = false;
                    chosen.remove(i);
                }
                chosen_flag[promoted.candidate] = true;
                chosen.push((promoted, false));
            }
        }
    }
    let mut agent: Vec<ItemMatch> = chosen.into_iter().map(|(m, _)| m).collect();
    agent.sort_unstable_by(|a, b| by_rank(candidates, a, b));

    let expansion = expand(candidates, &agent, settings);
    expansion
        .iter()
        .for_each(|m| chosen_flag[m.candidate] = true);
    let mut missed: Vec<ItemMatch> = (0..candidates.len())
        .filter(|&c| !chosen_flag[c])
        .filter_map(matched)
        .collect();
    missed.sort_unstable_by(|a, b| by_rank(candidates, a, b));
    missed.truncate(near_misses);
    SearchOutcome {
        agent,
        expansion,
        near_misses: missed,
    }
}

/// Expansion: items similar to those already chosen. Each pass takes the chunks of the items
/// the previous pass added (the first pass: of `chosen`) as queries against the chunks of the
/// items not chosen yet, keeps each item's best cosine (max pooling over both sides' chunks,
/// remembering which chosen item gave it), and adds the best `expansion_top_n` items at or above
/// `expansion_threshold`. It runs `expansion_depth` passes, stopping early when one adds nothing.
/// The result is in the order the passes added items, each pass best first; no item comes twice.
pub fn expand<V: AsRef<[f32]>>(
    candidates: &[Candidate<'_, V>],
    chosen: &[ItemMatch],
    settings: &ItemSearchSettings,
) -> Vec<ItemMatch> {
    let mut out = Vec::new();
    if settings.expansion_depth == 0 || settings.expansion_top_n == 0 {
        return out;
    }
    // Every chunk's unit, once: candidate c's are units[offsets[c]..offsets[c + 1]].
    let mut units: Vec<Option<Unit>> = Vec::new();
    let mut offsets = Vec::with_capacity(candidates.len() + 1);
    for cand in candidates {
        offsets.push(units.len());
        units.extend(cand.chunks.iter().map(|v| Unit::of(v.as_ref())));
    }
    offsets.push(units.len());
    let chunks_of = |c: usize| units[offsets[c]..offsets[c + 1]].iter().flatten();

    let mut taken = vec![false; candidates.len()];
    let mut frontier: Vec<usize> = Vec::new();
    for m in chosen {
        if let Some(t) = taken.get_mut(m.candidate).filter(|t| !**t) {
            *t = true;
            frontier.push(m.candidate);
        }
    }
    for _ in 0..settings.expansion_depth {
        let mut found: Vec<ItemMatch> = Vec::new();
        for c in (0..candidates.len()).filter(|&c| !taken[c]) {
            let mut best = None;
            for u in chunks_of(c) {
                for &s in &frontier {
                    for su in chunks_of(s) {
                        if let Some(score) = su.cosine(u) {
                            keep_best(&mut best, score, s);
                        }
                    }
                }
            }
            if let Some((score, from)) = best
                && score >= settings.expansion_threshold
            {
                found.push(ItemMatch {
                    candidate: c,
                    score,
                    from,
                });
            }
        }
        found.sort_unstable_by(|a, b| by_rank(candidates, a, b));
        found.truncate(settings.expansion_top_n as usize);
        if found.is_empty() {
            break;
        }
        frontier.clear();
        for m in &found {
            taken[m.candidate] = true;
            frontier.push(m.candidate);
        }
        out.extend(found);
    }
    out
}

#[cfg(test)]
#[path = "item_search_tests.rs"]
mod tests;
