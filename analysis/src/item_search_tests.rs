use proptest::prelude::*;

use super::*;
use glassbox_core::context::items::{
    AgentItem, IncludeMode, add_item, new_session_items, request_items, searchable,
};

// ---------------------------------------------------------------------------------------------
// Vectors made by hand: the cosine of each pair is known exactly.

/// A unit vector of `dim` dimensions with the given coordinates, the rest of its length put on
/// coordinate `filler` (so that two vectors with different fillers share nothing else).
fn v(dim: usize, coords: &[(usize, f32)], filler: usize) -> Vec<f32> {
    let mut out = vec![0.0; dim];
    for &(i, x) in coords {
        out[i] = x;
    }
    let rest = 1.0 - coords.iter().map(|(_, x)| x * x).sum::<f32>();
    out[filler] = rest.max(0.0).sqrt();
    out
}

/// The `i`th axis of `dim` dimensions.
fn e(dim: usize, i: usize) -> Vec<f32> {
    let mut out = vec![0.0; dim];
    out[i] = 1.0;
    out
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-5
}

/// Rules named as given, priority 0.
fn rules(names: &[&str]) -> Vec<ItemRef> {
    names.iter().map(|n| ItemRef::rule(*n)).collect()
}

fn candidates<'a>(
    refs: &'a [ItemRef],
    chunks: &'a [Vec<Vec<f32>>],
) -> Vec<Candidate<'a, Vec<f32>>> {
    refs.iter()
        .zip(chunks)
        .map(|(item, chunks)| Candidate {
            item,
            priority: 0,
            chunks,
        })
        .collect()
}

/// (name, score) of each match.
fn named(ms: &[ItemMatch], cands: &[Candidate<'_, Vec<f32>>]) -> Vec<(String, f32)> {
    ms.iter()
        .map(|m| (cands[m.candidate].item.name.clone(), m.score))
        .collect()
}

fn names(ms: &[ItemMatch], cands: &[Candidate<'_, Vec<f32>>]) -> Vec<String> {
    named(ms, cands).into_iter().map(|(n, _)| n).collect()
}

/// Items with one chunk each, scoring `scores` against the query `e(dim, 0)`.
const DIM: usize = 24;
fn one_chunk_each(scores: &[f32]) -> Vec<Vec<Vec<f32>>> {
    scores
        .iter()
        .enumerate()
        .map(|(i, &s)| vec![v(DIM, &[(0, s)], 4 + i)])
        .collect()
}

fn settings(top_n: u32, include_score: f32) -> ItemSearchSettings {
    ItemSearchSettings {
        top_n,
        include_score,
        ..Default::default()
    }
}

fn query() -> Vec<Vec<f32>> {
    vec![e(DIM, 0)]
}

// ---------------------------------------------------------------------------------------------
// The example of docs/item-selection.md (Include modes).

fn agent_item(item: ItemRef, priority: i32, include: IncludeMode) -> AgentItem {
    AgentItem {
        item,
        description: String::new(),
        priority,
        include,
        tokens: None,
    }
}

#[test]
fn flow_example_the_session_carries_its_items_and_each_request_adds_its_match() {
    let agent = vec![
        agent_item(ItemRef::rule("Rule A"), 1, IncludeMode::Always),
        agent_item(ItemRef::rule("Rule B"), 2, IncludeMode::Manual),
        agent_item(ItemRef::rule("Rule C"), 3, IncludeMode::Agent),
        agent_item(ItemRef::reference("Reference X"), 2, IncludeMode::Always),
        agent_item(ItemRef::reference("Reference Y"), 4, IncludeMode::Agent),
    ];
    let mut session = new_session_items(&agent);
    assert_eq!(
        add_item(&mut session, &agent, &ItemRef::rule("Rule B")),
        Ok(true)
    );
    let listed: Vec<&str> = session.iter().map(|s| s.item.name.as_str()).collect();
    assert_eq!(listed, ["Rule A", "Reference X", "Rule B"]);

    // C is about authentication (axis 0), Y about error handling (axis 1).
    let pool: Vec<&AgentItem> = searchable(&agent, &session).collect();
    let vectors: Vec<Vec<Vec<f32>>> = vec![vec![e(3, 0)], vec![e(3, 1)]];
    let cands: Vec<Candidate<'_, Vec<f32>>> = pool
        .iter()
        .zip(&vectors)
        .map(|(a, chunks)| Candidate {
            item: &a.item,
            priority: a.priority,
            chunks,
        })
        .collect();
    assert_eq!(names_of(&cands), ["Rule C", "Reference Y"]);
    // With no floor the fill has no minimum score: with top_n 5 both agent items would go on
    // every request. The example sends one, as top_n 1 does.
    let s = settings(1, 0.7);
    let session_part = |score: Score, last: ItemRef| {
        vec![
            RequestItem {
                item: ItemRef::rule("Rule A"),
                included: Included::Always,
                score: None,
            },
            RequestItem {
                item: ItemRef::reference("Reference X"),
                included: Included::Always,
                score: None,
            },
            RequestItem {
                item: ItemRef::rule("Rule B"),
                included: Included::Manual,
                score: None,
            },
            RequestItem {
                item: last,
                included: Included::Agent,
                score: Some(score),
            },
        ]
    };

    // "How do I authenticate?"
    let q1 = [v(3, &[(0, 0.92)], 2)];
    let found = search(&q1, &cands, &s, NEAR_MISSES);
    assert!(close(found.agent[0].score, 0.92));
    assert_eq!(
        request_items(&session, found.request_items(&cands)),
        session_part(Score::of(0.92), ItemRef::rule("Rule C"))
    );
    assert_eq!(names(&found.near_misses, &cands), ["Reference Y"]);

    // "What's the error handling?": Y, and not C.
    let q2 = [v(3, &[(1, 0.87)], 2)];
    let found = search(&q2, &cands, &s, NEAR_MISSES);
    assert!(close(found.agent[0].score, 0.87));
    assert_eq!(
        request_items(&session, found.request_items(&cands)),
        session_part(Score::of(0.87), ItemRef::reference("Reference Y"))
    );
}

fn names_of<'a>(cands: &[Candidate<'a, Vec<f32>>]) -> Vec<&'a str> {
    cands.iter().map(|c| c.item.name.as_str()).collect()
}

#[test]
fn without_a_floor_a_small_agent_sends_every_agent_item() {
    let refs = rules(&["near", "far"]);
    let chunks = one_chunk_each(&[0.92, -0.3]);
    let cands = candidates(&refs, &chunks);
    let found = search(
        &query(),
        &cands,
        &ItemSearchSettings::default(),
        NEAR_MISSES,
    );
    assert_eq!(names(&found.agent, &cands), ["near", "far"]);
    assert!(close(found.agent[1].score, -0.3));
}

// ---------------------------------------------------------------------------------------------
// The search, step by step (docs/item-selection.md, Search).

#[test]
fn an_items_chunks_count_once_with_its_best_score() {
    let refs = rules(&["long", "short"]);
    let chunks = vec![
        vec![
            v(DIM, &[(0, 0.6)], 4),
            v(DIM, &[(0, 0.9)], 5),
            v(DIM, &[(0, 0.8)], 6),
        ],
        vec![v(DIM, &[(0, 0.7)], 7)],
    ];
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(5, 0.95), NEAR_MISSES);
    let got = named(&found.agent, &cands);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0.as_str(), got[1].0.as_str()), ("long", "short"));
    assert!(close(got[0].1, 0.9) && close(got[1].1, 0.7));
}

#[test]
fn every_item_at_or_above_include_score_goes_even_beyond_top_n() {
    let refs = rules(&["a", "b", "c", "d", "e"]);
    let chunks = one_chunk_each(&[0.95, 0.9, 0.8, 0.72, 0.5]);
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(2, 0.7), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["a", "b", "c", "d"]);
    assert_eq!(names(&found.near_misses, &cands), ["e"]);
    // top_n 0: only what clears the score.
    let found = search(&query(), &cands, &settings(0, 0.85), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["a", "b"]);
}

#[test]
fn top_n_fills_with_the_best_below_include_score_best_first() {
    let refs = rules(&["a", "b", "c", "d"]);
    let chunks = one_chunk_each(&[0.6, 0.4, 0.65, 0.3]);
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(3, 0.7), NEAR_MISSES);
    let got = named(&found.agent, &cands);
    assert_eq!(
        got.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["c", "a", "b"]
    );
    assert!(close(got[0].1, 0.65) && close(got[2].1, 0.4));
    assert_eq!(names(&found.near_misses, &cands), ["d"]);
}

#[test]
fn nothing_below_the_floor_fills_up_to_top_n() {
    let refs = rules(&["a", "b", "c", "d"]);
    let chunks = one_chunk_each(&[0.6, 0.4, 0.65, 0.3]);
    let cands = candidates(&refs, &chunks);
    let mut s = settings(3, 0.7);
    s.min_score = 0.5;
    let found = search(&query(), &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["c", "a"]);
    // What fell below the floor is still listed, best first.
    assert_eq!(names(&found.near_misses, &cands), ["b", "d"]);
    // Nothing at all when every item is below it.
    s.min_score = 0.9;
    let found = search(&query(), &cands, &s, NEAR_MISSES);
    assert!(found.agent.is_empty());
    assert_eq!(names(&found.near_misses, &cands), ["c", "a", "b"]);
}

#[test]
fn top_k_cuts_chunks_before_they_are_grouped() {
    let refs = rules(&["big", "small"]);
    let chunks = vec![
        vec![
            v(DIM, &[(0, 0.9)], 4),
            v(DIM, &[(0, 0.89)], 5),
            v(DIM, &[(0, 0.88)], 6),
        ],
        vec![v(DIM, &[(0, 0.85)], 7)],
    ];
    let cands = candidates(&refs, &chunks);
    let mut s = settings(5, 0.95);
    s.top_k = 3;
    let found = search(&query(), &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["big"]);
    // Cut, it is still the best of the rest.
    assert_eq!(names(&found.near_misses, &cands), ["small"]);
    assert!(close(found.near_misses[0].score, 0.85));
    s.top_k = 4;
    let found = search(&query(), &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["big", "small"]);
}

#[test]
fn max_pooling_lets_each_sentence_of_a_query_match_its_own_item() {
    // "How do I log in? And how are errors reported?": sentence 0 is axis 0, sentence 1 axis 1.
    let q = [e(DIM, 0), e(DIM, 1)];
    let refs = rules(&["login", "errors", "other"]);
    let chunks = vec![
        vec![v(DIM, &[(0, 0.9), (1, 0.1)], 4)],
        vec![v(DIM, &[(0, 0.1), (1, 0.8)], 5)],
        vec![v(DIM, &[(0, 0.3), (1, 0.3)], 6)],
    ];
    let cands = candidates(&refs, &chunks);
    let mut s = settings(2, 0.95);
    s.per_query_chunk_min = 0;
    let found = search(&q, &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["login", "errors"]);
    assert_eq!((found.agent[0].from, found.agent[1].from), (0, 1));
    assert!(close(found.agent[1].score, 0.8));
    // The first sentence alone does not find the second item.
    let found = search(&q[..1], &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["login", "other"]);
}

/// Sentence 0 scores 0.9, 0.85, 0.8 on three items; sentence 1 scores 0.75 on a fourth.
fn known_issue() -> (Vec<ItemRef>, Vec<Vec<Vec<f32>>>) {
    let refs = rules(&["i1", "i2", "i3", "i4"]);
    let chunks = vec![
        vec![v(DIM, &[(0, 0.9), (1, 0.1)], 4)],
        vec![v(DIM, &[(0, 0.85), (1, 0.1)], 5)],
        vec![v(DIM, &[(0, 0.8), (1, 0.1)], 6)],
        vec![v(DIM, &[(0, 0.2), (1, 0.75)], 7)],
    ];
    (refs, chunks)
}

#[test]
fn known_issue_each_query_chunk_keeps_its_best_match() {
    let q = [e(DIM, 0), e(DIM, 1)];
    let (refs, chunks) = known_issue();
    let cands = candidates(&refs, &chunks);
    // include_score above every score, so only top_n decides.
    let mut s = settings(3, 0.95);
    s.per_query_chunk_min = 0;
    let found = search(&q, &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["i1", "i2", "i3"]);
    assert_eq!(names(&found.near_misses, &cands), ["i4"]);

    s.per_query_chunk_min = 1;
    let found = search(&q, &cands, &s, NEAR_MISSES);
    // The fourth takes the place of the weakest filler of the other sentence.
    assert_eq!(names(&found.agent, &cands), ["i1", "i2", "i4"]);
    assert_eq!(found.agent[2].from, 1);
    assert!(close(found.agent[2].score, 0.75));
    assert_eq!(names(&found.near_misses, &cands), ["i3"]);

    // Also when sentence 0's chunks fill the whole top-K.
    s.top_k = 3;
    let found = search(&q, &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["i1", "i2", "i4"]);
}

#[test]
fn the_guarantee_adds_beyond_top_n_rather_than_displace_sure_items() {
    let q = [e(DIM, 0), e(DIM, 1)];
    let (refs, chunks) = known_issue();
    let cands = candidates(&refs, &chunks);
    // All three of sentence 0's items clear include_score: none is displaced.
    let found = search(&q, &cands, &settings(3, 0.78), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["i1", "i2", "i3", "i4"]);
    // Nor is a sentence's only item: with top_n 1 sentence 0 keeps i1, sentence 1 gets i4.
    let found = search(&q, &cands, &settings(1, 0.95), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["i1", "i4"]);
}

#[test]
fn a_minimum_above_one_promotes_several_and_only_items_best_matched_by_that_sentence() {
    let q = [e(DIM, 0), e(DIM, 1)];
    let refs = rules(&["a", "b", "c", "x", "y", "z"]);
    let chunks = vec![
        vec![v(DIM, &[(0, 0.9)], 4)],
        vec![v(DIM, &[(0, 0.88)], 5)],
        vec![v(DIM, &[(0, 0.86)], 6)],
        // x: 0.6 for sentence 1 but 0.7 for sentence 0, so it is credited to sentence 0.
        vec![v(DIM, &[(0, 0.7), (1, 0.6)], 7)],
        vec![v(DIM, &[(1, 0.5)], 8)],
        vec![v(DIM, &[(1, 0.4)], 9)],
    ];
    let cands = candidates(&refs, &chunks);
    let mut s = settings(4, 0.95);
    s.per_query_chunk_min = 2;
    let found = search(&q, &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["a", "b", "y", "z"]);
    assert_eq!(names(&found.near_misses, &cands), ["c", "x"]);
}

#[test]
fn a_one_sentence_query_is_not_balanced() {
    let refs = rules(&["a"]);
    let chunks = one_chunk_each(&[0.5]);
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(0, 0.95), NEAR_MISSES);
    assert!(found.agent.is_empty());
    assert_eq!(names(&found.near_misses, &cands), ["a"]);
}

#[test]
fn a_sentence_that_is_no_items_best_match_gets_nothing() {
    // "Thanks." matches everything worse than the real question does.
    let q = [e(DIM, 0), v(DIM, &[(0, 0.5)], 1)];
    let refs = rules(&["a", "b", "c"]);
    let chunks = one_chunk_each(&[0.9, 0.8, 0.7]);
    let cands = candidates(&refs, &chunks);
    let found = search(&q, &cands, &settings(2, 0.95), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["a", "b"]);
    assert!(found.agent.iter().all(|m| m.from == 0));
}

#[test]
fn near_misses_are_the_best_items_not_chosen_best_first() {
    let refs = rules(&["a", "b", "c", "d", "e", "f"]);
    let chunks = one_chunk_each(&[0.2, 0.9, 0.4, 0.8, 0.6, 0.1]);
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(2, 0.95), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["b", "d"]);
    assert_eq!(names(&found.near_misses, &cands), ["e", "c", "a"]);
    assert!(close(found.near_misses[0].score, 0.6));
    let found = search(&query(), &cands, &settings(2, 0.95), 0);
    assert!(found.near_misses.is_empty());
    let found = search(&query(), &cands, &settings(5, 0.95), 10);
    assert_eq!(names(&found.near_misses, &cands), ["f"]);
}

#[test]
fn ties_go_to_the_lower_priority_then_the_name() {
    let refs = rules(&["b", "a", "c"]);
    let chunks = one_chunk_each(&[0.5, 0.5, 0.5]);
    let mut cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(3, 0.95), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["a", "b", "c"]);
    cands[2].priority = -1;
    let found = search(&query(), &cands, &settings(1, 0.95), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["c"]);
    assert_eq!(names(&found.near_misses, &cands), ["a", "b"]);
    // The top-K cut breaks ties the same way.
    let mut s = settings(5, 0.95);
    s.top_k = 1;
    let found = search(&query(), &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["c"]);
    // A rule and a reference of the same name: the rule first.
    let refs = vec![ItemRef::reference("same"), ItemRef::rule("same")];
    let chunks = one_chunk_each(&[0.5, 0.5]);
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &settings(1, 0.95), NEAR_MISSES);
    assert_eq!(found.agent[0].candidate, 1);
}

#[test]
fn broken_vectors_match_nothing_and_never_panic() {
    let refs = rules(&["nan", "zero", "short", "fine", "empty"]);
    let chunks = vec![
        vec![vec![f32::NAN; DIM]],
        vec![vec![0.0; DIM]],
        vec![vec![1.0; 3]],
        vec![vec![f32::INFINITY; DIM], v(DIM, &[(0, 0.4)], 5)],
        vec![],
    ];
    let cands = candidates(&refs, &chunks);
    // A broken query chunk first: the good one keeps its position.
    let q = [vec![f32::NAN; DIM], e(DIM, 0)];
    let mut s = settings(5, 0.95);
    s.expansion_depth = 2;
    s.expansion_threshold = 0.0;
    let found = search(&q, &cands, &s, NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["fine"]);
    assert_eq!(found.agent[0].from, 1);
    assert!(found.expansion.is_empty() && found.near_misses.is_empty());
    // Nothing to search with or among.
    let none: [Vec<f32>; 0] = [];
    assert_eq!(search(&none, &cands, &s, 3), SearchOutcome::default());
    assert_eq!(search(&q, &cands[..0], &s, 3), SearchOutcome::default());
}

#[test]
fn scores_stay_within_minus_one_and_one() {
    let refs = rules(&["same", "opposite"]);
    let chunks = vec![vec![vec![3.0; DIM]], vec![vec![-2.0; DIM]]];
    let cands = candidates(&refs, &chunks);
    let found = search(&[vec![0.5; DIM]], &cands, &settings(5, 0.95), NEAR_MISSES);
    assert!(found.agent.iter().all(|m| (-1.0..=1.0).contains(&m.score)));
    assert!(close(found.agent[0].score, 1.0) && close(found.agent[1].score, -1.0));
}

// ---------------------------------------------------------------------------------------------
// Expansion.

/// "auth" matches the query (axis 0) and has a second chunk on axis 1; "fetch" (0.85), "http"
/// (0.9), "cache" (0.8) and "log" (0.7) resemble that chunk; "retry" resembles only a second
/// chunk of "fetch" (axis 2, 0.8); nothing else resembles anything.
fn expansion_fixture() -> (Vec<ItemRef>, Vec<Vec<Vec<f32>>>) {
    let refs = rules(&["auth", "fetch", "http", "cache", "log", "retry"]);
    let chunks = vec![
        vec![e(DIM, 0), e(DIM, 1)],
        vec![v(DIM, &[(1, 0.85)], 10), e(DIM, 2)],
        vec![v(DIM, &[(1, 0.9)], 11)],
        vec![v(DIM, &[(1, 0.8)], 12)],
        vec![v(DIM, &[(1, 0.7)], 13)],
        vec![v(DIM, &[(2, 0.8)], 14)],
    ];
    (refs, chunks)
}

fn expanding(depth: u32, top_n: u32) -> ItemSearchSettings {
    ItemSearchSettings {
        expansion_depth: depth,
        expansion_top_n: top_n,
        ..settings(1, 0.95)
    }
}

#[test]
fn expansion_is_off_at_depth_zero() {
    let (refs, chunks) = expansion_fixture();
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &expanding(0, 3), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["auth"]);
    assert!(found.expansion.is_empty());
    assert!(expand(&cands, &found.agent, &expanding(0, 3)).is_empty());
}

#[test]
fn expansion_adds_items_resembling_a_chosen_items_chunks() {
    let (refs, chunks) = expansion_fixture();
    let cands = candidates(&refs, &chunks);
    let found = search(&query(), &cands, &expanding(1, 2), NEAR_MISSES);
    assert_eq!(names(&found.agent, &cands), ["auth"]);
    // At or above 0.75, at most 2: cache (0.8) is beyond the pass's top-N, log (0.7) below.
    let got = named(&found.expansion, &cands);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].0.as_str(), got[1].0.as_str()), ("http", "fetch"));
    assert!(close(got[0].1, 0.9) && close(got[1].1, 0.85));
    assert!(found.expansion.iter().all(|m| m.from == 0));
    // Expanded items are not near misses.
    assert_eq!(names(&found.near_misses, &cands), ["cache", "log", "retry"]);
    let items = found.request_items(&cands);
    assert_eq!(
        items.iter().map(|r| r.included).collect::<Vec<_>>(),
        [Included::Agent, Included::Expansion, Included::Expansion]
    );
    assert_eq!(items[1].score, Some(Score::of(0.9)));

    // The threshold alone: cache joins, log does not.
    let all = expand(&cands, &found.agent, &expanding(1, 10));
    assert_eq!(names(&all, &cands), ["http", "fetch", "cache"]);
}

#[test]
fn expansion_chains_over_passes_and_adds_no_item_twice() {
    let (refs, chunks) = expansion_fixture();
    let cands = candidates(&refs, &chunks);
    let chosen = search(&query(), &cands, &expanding(0, 3), NEAR_MISSES).agent;
    let one = expand(&cands, &chosen, &expanding(1, 3));
    assert_eq!(names(&one, &cands), ["http", "fetch", "cache"]);
    // Pass 2 starts from pass 1's items: retry resembles fetch's second chunk.
    let two = expand(&cands, &chosen, &expanding(2, 3));
    assert_eq!(names(&two, &cands), ["http", "fetch", "cache", "retry"]);
    assert_eq!(two[3].from, 1);
    assert!(close(two[3].score, 0.8));
    // A third pass finds nothing new and stops; nothing comes twice or repeats the choice.
    let three = expand(&cands, &chosen, &expanding(3, 3));
    assert_eq!(three, two);
    let mut seen: Vec<usize> = chosen.iter().chain(&three).map(|m| m.candidate).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), chosen.len() + three.len());
    // Chosen items listed twice or out of range are harmless.
    let odd = [
        chosen[0],
        chosen[0],
        ItemMatch {
            candidate: 99,
            score: 1.0,
            from: 0,
        },
    ];
    assert_eq!(expand(&cands, &odd, &expanding(2, 3)), two);
}

// ---------------------------------------------------------------------------------------------
// Index text, chunks and query chunks.

#[test]
fn index_text_is_name_description_then_text() {
    assert_eq!(
        index_text("Auth", "How we log in", Some("Use tokens.\n")),
        "Auth: How we log in\n\nUse tokens."
    );
    assert_eq!(
        index_text("Auth", "  ", Some("Use tokens.")),
        "Auth\n\nUse tokens."
    );
    assert_eq!(
        index_text("read_file", "Reads a file", None),
        "read_file: Reads a file"
    );
    assert_eq!(index_text("read_file", "", None), "read_file");
    assert_eq!(index_text("Empty", "", Some(" \n")), "Empty");
}

#[test]
fn chunking_blank_text_gives_nothing() {
    assert!(chunk("", MAX_CHUNK_CHARS).is_empty());
    assert!(chunk(" \n\n \t\n", MAX_CHUNK_CHARS).is_empty());
    assert!(query_chunks("", MAX_CHUNK_CHARS).is_empty());
    assert!(query_chunks("  \n ", MAX_CHUNK_CHARS).is_empty());
}

#[test]
fn each_paragraph_is_a_chunk_of_its_own() {
    let text = "Auth: How we log in\n\nUse tokens.\nRenew them hourly.\n\n\n  - never log them\n";
    assert_eq!(
        chunk(text, MAX_CHUNK_CHARS),
        [
            "Auth: How we log in",
            "Use tokens.\nRenew them hourly.",
            "- never log them"
        ]
    );
    // Windows line ends and whitespace-only separator lines.
    assert_eq!(chunk("a\r\n \r\nb", MAX_CHUNK_CHARS), ["a", "b"]);
}

#[test]
fn a_long_paragraph_is_cut_into_sentences_combined_up_to_the_limit() {
    let sentence = |c: char| format!("{}.", c.to_string().repeat(199)); // 200 characters
    let para = [sentence('a'), sentence('b'), sentence('c'), sentence('d')].join(" ");
    let got = chunk(&para, MAX_CHUNK_CHARS);
    // 200 + 1 + 200 = 401 fits; a third would make 602.
    assert_eq!(
        got,
        [
            format!("{} {}", sentence('a'), sentence('b')),
            format!("{} {}", sentence('c'), sentence('d'))
        ]
    );
    // Sentences end at ! and ? too, and only before whitespace: "3.14" is one word.
    let text = "Is pi 3.14? Yes! It is.";
    assert_eq!(chunk(text, 12), ["Is pi 3.14?", "Yes! It is."]);
}

#[test]
fn one_sentence_over_the_limit_is_cut_at_whitespace_or_at_the_limit() {
    let words = "word ".repeat(30); // 150 characters, one sentence
    let got = chunk(words.trim(), 48);
    assert!(
        got.iter()
            .all(|c| c.chars().count() <= 48 && !c.ends_with(' '))
    );
    assert_eq!(got[0], "word ".repeat(9).trim());
    assert_eq!(got.join(" "), words.trim());
    // No whitespace: cut at the limit.
    let long = "x".repeat(1200);
    let got = chunk(&long, MAX_CHUNK_CHARS);
    assert_eq!(
        got.iter().map(|c| c.len()).collect::<Vec<_>>(),
        [500, 500, 200]
    );
    // A cut sentence between two short ones stays apart from them.
    let text = format!("Short. {}. Tail.", "y".repeat(30));
    let rest = format!("{}.", "y".repeat(10));
    assert_eq!(
        chunk(&text, 20),
        ["Short.", "y".repeat(20).as_str(), rest.as_str(), "Tail."]
    );
}

#[test]
fn chunks_count_characters_not_bytes() {
    let cjk = "漢".repeat(600); // 1,800 bytes
    let got = chunk(&cjk, MAX_CHUNK_CHARS);
    assert_eq!(
        got.iter().map(|c| c.chars().count()).collect::<Vec<_>>(),
        [500, 100]
    );
    let emoji = "👍🏽".repeat(300); // 600 characters (two each), 2,400 bytes
    let got = chunk(&emoji, MAX_CHUNK_CHARS);
    assert_eq!(
        got.iter().map(|c| c.chars().count()).collect::<Vec<_>>(),
        [500, 100]
    );
    // Full-width sentence ends need no space after them.
    let text = format!("{}。{}？", "一".repeat(300), "二".repeat(300));
    let got = chunk(&text, MAX_CHUNK_CHARS);
    assert_eq!(got.len(), 2);
    assert!(got[0].ends_with('。') && got[1].starts_with('二'));
}

#[test]
fn a_paragraph_of_exactly_the_limit_is_one_chunk() {
    let exact = "z".repeat(MAX_CHUNK_CHARS);
    assert_eq!(chunk(&exact, MAX_CHUNK_CHARS), [exact.as_str()]);
    let multibyte = "é".repeat(MAX_CHUNK_CHARS);
    assert_eq!(chunk(&multibyte, MAX_CHUNK_CHARS), [multibyte.as_str()]);
    let over = "z".repeat(MAX_CHUNK_CHARS + 1);
    assert_eq!(chunk(&over, MAX_CHUNK_CHARS).len(), 2);
    // A limit of 0 is taken as 1.
    assert_eq!(chunk("ab", 0), ["a", "b"]);
}

#[test]
fn a_query_is_one_chunk_per_sentence_each_cut_to_the_limit() {
    assert_eq!(
        query_chunks(
            "How do I log in? And errors... where do they go!",
            MAX_CHUNK_CHARS
        ),
        ["How do I log in?", "And errors...", "where do they go!"]
    );
    // Sentences are never combined, paragraphs never joined.
    assert_eq!(
        query_chunks("Hi. Fix \"this.\" Please\n\nno stop here", MAX_CHUNK_CHARS),
        ["Hi.", "Fix \"this.\"", "Please", "no stop here"]
    );
    let long = format!("{} end.", "ü".repeat(600));
    let got = query_chunks(&long, MAX_CHUNK_CHARS);
    assert_eq!(got, ["ü".repeat(500).as_str()]);
    assert_eq!(query_chunks("a b c", 2), ["a"]);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300),
        ..ProptestConfig::default()
    })]

    #[test]
    fn chunks_fit_the_limit_and_keep_every_visible_character_in_order(
        text in "([a-zé漢👍 .!?。\n]{0,12}){0,60}",
        max in 1..60usize,
    ) {
        let got = chunk(&text, max);
        for c in &got {
            prop_assert!(!c.is_empty() && c.chars().count() <= max, "{:?}", c);
            prop_assert!(c.trim() == *c);
        }
        let visible = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        prop_assert_eq!(visible(&got.concat()), visible(&text));
        for q in query_chunks(&text, max) {
            prop_assert!(!q.is_empty() && q.chars().count() <= max);
        }
    }
}

/// Not a benchmark: a rough figure for the server's scale (100 items, 1,000 chunks of 384
/// dimensions, a three-sentence query, expansion on). `cargo test --release -p glassbox-core
/// sanity_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn sanity_timing_of_a_search_at_the_servers_scale() {
    const D: usize = 384;
    // Deterministic pseudo-random vectors.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let refs: Vec<ItemRef> = (0..100)
        .map(|i| ItemRef::rule(format!("item {i}")))
        .collect();
    let chunks: Vec<Vec<Vec<f32>>> = (0..100)
        .map(|_| (0..10).map(|_| (0..D).map(|_| next()).collect()).collect())
        .collect();
    let cands = candidates(&refs, &chunks);
    let q: Vec<Vec<f32>> = (0..3).map(|_| (0..D).map(|_| next()).collect()).collect();
    let s = ItemSearchSettings {
        expansion_depth: 2,
        expansion_threshold: 0.0,
        ..Default::default()
    };
    let runs = 20;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(search(
            &q,
            &cands,
            &ItemSearchSettings::default(),
            NEAR_MISSES,
        ));
    }
    let search_only = start.elapsed() / runs;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(search(&q, &cands, &s, NEAR_MISSES));
    }
    let with_expansion = start.elapsed() / runs;
    println!("search: {search_only:?}; with 2 expansion passes (3 items each): {with_expansion:?}");
}
