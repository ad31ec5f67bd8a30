//! Topics that hold still while they are regenerated after every reply: a selected topic is
//! carried to the new topic that holds most of its messages ([`successors`], [`carry_filter`]), a
//! group found again keeps its label ([`keep_labels`]), and a topic model's topics get members from
//! the embeddings ([`members_by_label`]), so a bubble's count is the messages a filter on it sends
//! (with the messages no topic holds yet that are about it).
//!
//! Identity is the topic's members (message ids), not its label: labels may change from one
//! extraction to the next, the messages a user meant by "the bread conversation" do not.

use std::collections::{HashMap, HashSet};

use glassbox_core::context::topics::{Renamed, SessionTopics, Topic};
use glassbox_core::vector::{dot, normalize};

/// Share of an old topic's messages (those still grouped under some topic) a new topic must hold
/// to succeed it.
pub const MIN_OVERLAP: f32 = 1.0 / 3.0;
/// Cosine between centroids for the nearest new topic to succeed an old one that no new topic
/// overlaps enough.
pub const MIN_CENTROID_COSINE: f32 = 0.5;
/// How much higher a new label must score ([`label_score`]) to replace the label a group kept.
pub const CLEARLY_BETTER: f32 = 0.1;
/// How much a label's closeness to other topics counts against it in [`label_score`].
pub const LABEL_DISTINCTNESS: f32 = 0.5;
/// Cosine an exchange needs with a topic model's label to be counted under it.
pub const MIN_MEMBER_COSINE: f32 = 0.2;

/// The normalized mean of the vectors of `ids` that have one (`None`: none has).
pub fn centroid<'v>(
    ids: &[String],
    vector_of: &impl Fn(&str) -> Option<&'v [f32]>,
) -> Option<Vec<f32>> {
    let mut sum: Option<Vec<f32>> = None;
    for v in ids.iter().filter_map(|id| vector_of(id)) {
        let acc = sum.get_or_insert_with(|| vec![0.0; v.len()]);
        if acc.len() == v.len() {
            let norm = dot(v, v).sqrt().max(f32::MIN_POSITIVE);
            for (a, x) in acc.iter_mut().zip(v) {
                *a += x / norm;
            }
        }
    }
    if let Some(v) = &mut sum {
        normalize(v);
    }
    sum
}

/// How well a label vector names topic `k`: close to its centroid, far from the others'.
pub fn label_score(label: &[f32], k: usize, centroids: &[Option<Vec<f32>>]) -> Option<f32> {
    let own = centroids.get(k)?.as_deref()?;
    let others = centroids
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != k)
        .filter_map(|(_, c)| c.as_deref())
        .map(|c| dot(label, c))
        .fold(0.0f32, f32::max);
    Some(dot(label, own) - LABEL_DISTINCTNESS * others)
}

fn overlap(a: &[String], b: &HashSet<&str>) -> usize {
    a.iter().filter(|id| b.contains(id.as_str())).count()
}

fn member_sets(topics: &[Topic]) -> Vec<HashSet<&str>> {
    topics
        .iter()
        .map(|t| t.message_ids.iter().map(String::as_str).collect())
        .collect()
}

/// What each old topic became: its label → the label of the new topic that holds most of its
/// messages (at least [`MIN_OVERLAP`] of those the new extraction read, `history`), else the new
/// topic nearest by centroid (cosine at least [`MIN_CENTROID_COSINE`]), else one of the same label;
/// `None`: no successor (the topic vanished).
pub fn successors<'v>(
    old: &SessionTopics,
    new: &SessionTopics,
    history: &HashSet<&str>,
    vector_of: impl Fn(&str) -> Option<&'v [f32]>,
) -> HashMap<String, Option<String>> {
    let sets = member_sets(&new.topics);
    let mut new_centroids: Option<Vec<Option<Vec<f32>>>> = None;
    let mut out = HashMap::new();
    for o in &old.topics {
        // Its messages the new extraction read: one stray message among many that no new topic
        // holds does not make a successor.
        let present = overlap(&o.message_ids, history);
        let by_overlap = (present > 0)
            .then(|| {
                sets.iter()
                    .enumerate()
                    .map(|(k, s)| (overlap(&o.message_ids, s), k))
                    .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            })
            .flatten()
            .filter(|&(held, _)| held as f32 >= MIN_OVERLAP * present as f32)
            .map(|(_, k)| k);
        let by_centroid = || {
            let own = centroid(&o.message_ids, &vector_of)?;
            let centroids = new_centroids.get_or_insert_with(|| {
                new.topics
                    .iter()
                    .map(|t| centroid(&t.message_ids, &vector_of))
                    .collect()
            });
            centroids
                .iter()
                .enumerate()
                .filter_map(|(k, c)| Some((dot(&own, c.as_deref()?), k)))
                .filter(|(cos, _)| *cos >= MIN_CENTROID_COSINE)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| k)
        };
        let by_label = || new.topics.iter().position(|t| t.label == o.label);
        let k = by_overlap.or_else(by_centroid).or_else(by_label);
        out.insert(o.label.clone(), k.map(|k| new.topics[k].label.clone()));
    }
    out
}

/// A filter carried over a regeneration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CarriedFilter {
    /// The selected labels now (successors' labels; a label with no successor stays, selecting
    /// nothing, until the user clears it).
    pub labels: Vec<String>,
    /// Selected topics whose successor has another label.
    pub renamed: Vec<Renamed>,
}

/// Carries each selected label to its successor ([`successors`]); labels that were no old
/// topic's (kept from an earlier regeneration) stay as they are. Duplicates (two selected topics
/// merged into one) are kept once, order kept.
pub fn carry_filter(
    filter: &[String],
    successors: &HashMap<String, Option<String>>,
) -> CarriedFilter {
    let mut out = CarriedFilter::default();
    for label in filter {
        let now = match successors.get(label) {
            Some(Some(to)) => {
                if to != label && !out.renamed.iter().any(|r| r.from == *label) {
                    out.renamed.push(Renamed {
                        from: label.clone(),
                        to: to.clone(),
                    });
                }
                to
            }
            Some(None) | None => label,
        };
        if !out.labels.contains(now) {
            out.labels.push(now.clone());
        }
    }
    out
}

/// Gives each new topic that is an old topic found again the old topic's label, unless its new
/// label scores [`CLEARLY_BETTER`] (by `score(k, label)`, [`label_score`] of the label's vector;
/// the old label stays when either has no score). Found again: the two are each other's largest
/// overlap, and the shared messages are at least half of the old topic's messages still grouped
/// and half of the new topic's messages that were grouped before (a group that grew keeps its
/// label). A label another new topic keeps is not taken from it.
pub fn keep_labels(
    old: &SessionTopics,
    new: &mut [Topic],
    score: impl Fn(usize, &str) -> Option<f32>,
) {
    let old_sets = member_sets(&old.topics);
    let new_sets = member_sets(new);
    let old_grouped: HashSet<&str> = old_sets.iter().flatten().copied().collect();
    let new_grouped: HashSet<&str> = new_sets.iter().flatten().copied().collect();
    let shared = |o: usize, k: usize| overlap(&old.topics[o].message_ids, &new_sets[k]);
    let best_new = |o: usize| {
        (0..new.len())
            .map(|k| (shared(o, k), k))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
    };
    let mut proposals: Vec<(usize, String)> = Vec::new();
    for (k, topic) in new.iter().enumerate() {
        let Some((held, o)) = (0..old.topics.len())
            .map(|o| (shared(o, k), o))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        else {
            continue;
        };
        if held == 0 || best_new(o).map(|(_, b)| b) != Some(k) {
            continue;
        }
        let old_present = overlap(&old.topics[o].message_ids, &new_grouped);
        let new_known = overlap(&topic.message_ids, &old_grouped);
        if 2 * held < old_present || 2 * held < new_known {
            continue;
        }
        let (was, is) = (&old.topics[o].label, &topic.label);
        if was == is {
            continue;
        }
        let clearly_better = match (score(k, is), score(k, was)) {
            (Some(a), Some(b)) => a - b > CLEARLY_BETTER,
            _ => false,
        };
        if !clearly_better {
            proposals.push((k, was.clone()));
        }
    }
    // A proposal refused (its label is one a topic keeps) keeps its own label, which may refuse
    // another in turn: until nothing changes.
    let proposing: HashSet<usize> = proposals.iter().map(|(k, _)| *k).collect();
    let mut kept: HashSet<String> = new
        .iter()
        .enumerate()
        .filter(|(k, _)| !proposing.contains(k))
        .map(|(_, t)| t.label.clone())
        .collect();
    loop {
        let before = proposals.len();
        proposals.retain(|(k, label)| {
            let refused = kept.contains(label);
            if refused {
                kept.insert(new[*k].label.clone());
            }
            !refused
        });
        if proposals.len() == before {
            break;
        }
    }
    for (k, label) in proposals {
        new[k].label = label;
    }
}

/// Members for a topic model's topics, which come with labels and counts only: each exchange (a
/// user message and the replies after it; standing instructions, `sticky_ids`, and their replies
/// left out) goes to the label its vector is closest to, when at least [`MIN_MEMBER_COSINE`]. `messages` are (id, is the user's, vector),
/// oldest first; `labels` the topics' label vectors. Returns the member ids per topic.
pub fn members_by_label(
    messages: &[(&str, bool, Option<&[f32]>)],
    sticky_ids: &[String],
    labels: &[Option<&[f32]>],
) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); labels.len()];
    let mut exchange: Vec<(&str, Option<&[f32]>)> = Vec::new();
    let mut close = |exchange: &mut Vec<(&str, Option<&[f32]>)>| {
        let ids: Vec<String> = exchange.iter().map(|(id, _)| (*id).to_owned()).collect();
        if let Some(v) = centroid(&ids, &|id: &str| {
            exchange
                .iter()
                .find(|(x, _)| *x == id)
                .and_then(|(_, v)| *v)
        }) {
            let best = labels
                .iter()
                .enumerate()
                .filter_map(|(k, l)| {
                    let l = (*l)?;
                    let norm = dot(l, l).sqrt();
                    (norm > 0.0).then(|| (dot(&v, l) / norm, k))
                })
                .max_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((cos, k)) = best
                && cos >= MIN_MEMBER_COSINE
            {
                out[k].extend(ids);
            }
        }
        exchange.clear();
    };
    let mut in_instruction = false;
    for &(id, from_user, vector) in messages {
        if from_user {
            close(&mut exchange);
            in_instruction = sticky_ids.iter().any(|s| s == id);
        }
        if !in_instruction {
            exchange.push((id, vector));
        }
    }
    close(&mut exchange);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(label: &str, ids: &[&str]) -> Topic {
        Topic {
            label: label.into(),
            count: ids.len() as u32,
            message_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn topics(list: Vec<Topic>) -> SessionTopics {
        SessionTopics {
            topics: list,
            ..Default::default()
        }
    }

    fn no_vectors(_: &str) -> Option<&'static [f32]> {
        None
    }

    /// Every message of both extractions, as the new one read them.
    fn all<'a>(old: &'a SessionTopics, new: &'a SessionTopics) -> HashSet<&'a str> {
        old.topics
            .iter()
            .chain(&new.topics)
            .flat_map(|t| t.message_ids.iter().map(String::as_str))
            .collect()
    }

    #[test]
    fn a_renamed_topic_keeps_its_selection() {
        let old = topics(vec![
            topic("Black hole", &["1", "2", "3", "4"]),
            topic("Bread comes", &["5", "6", "7", "8"]),
        ]);
        let new = topics(vec![
            topic("Sourdough bread", &["5", "6", "7", "8", "9", "10"]),
            topic("Black hole", &["1", "2", "3", "4"]),
        ]);
        let s = successors(&old, &new, &all(&old, &new), no_vectors);
        let carried = carry_filter(&["Bread comes".into()], &s);
        assert_eq!(carried.labels, ["Sourdough bread"]);
        assert_eq!(
            carried.renamed,
            [Renamed {
                from: "Bread comes".into(),
                to: "Sourdough bread".into()
            }]
        );
        // A label unchanged is carried silently.
        let carried = carry_filter(&["Black hole".into()], &s);
        assert_eq!(
            (carried.labels, carried.renamed),
            (vec!["Black hole".to_owned()], vec![])
        );
    }

    #[test]
    fn a_split_topic_goes_to_the_part_with_most_of_its_messages() {
        let old = topics(vec![
            topic("Bread", &["1", "2", "3", "4", "5"]),
            topic("Space", &["6", "7"]),
        ]);
        let new = topics(vec![
            topic("Starter care", &["1", "2", "3"]),
            topic("Oven temperature", &["4", "5", "9"]),
            topic("Space", &["6", "7"]),
        ]);
        let s = successors(&old, &new, &all(&old, &new), no_vectors);
        assert_eq!(s["Bread"].as_deref(), Some("Starter care"));
        assert_eq!(
            carry_filter(&["Bread".into(), "Space".into()], &s).labels,
            ["Starter care", "Space"]
        );
    }

    #[test]
    fn merged_topics_are_selected_once() {
        let old = topics(vec![
            topic("Starter", &["1", "2"]),
            topic("Loaf", &["3", "4"]),
            topic("Space", &["5"]),
        ]);
        let new = topics(vec![
            topic("Sourdough", &["1", "2", "3", "4"]),
            topic("Space", &["5"]),
        ]);
        let s = successors(&old, &new, &all(&old, &new), no_vectors);
        let carried = carry_filter(&["Starter".into(), "Loaf".into()], &s);
        assert_eq!(carried.labels, ["Sourdough"]);
        assert_eq!(carried.renamed.len(), 2);
    }

    #[test]
    fn a_vanished_topic_has_no_successor_and_stays_selected_as_it_was() {
        let old = topics(vec![
            topic("Chess", &["1", "2"]),
            topic("Space", &["3", "4"]),
        ]);
        // The chess messages fell out of every topic; nothing is near by centroid either.
        let new = topics(vec![topic("Space", &["3", "4"]), topic("Tax", &["5", "6"])]);
        let vectors: HashMap<&str, Vec<f32>> = HashMap::from([
            ("1", vec![1.0, 0.0, 0.0]),
            ("2", vec![1.0, 0.0, 0.0]),
            ("3", vec![0.0, 1.0, 0.0]),
            ("4", vec![0.0, 1.0, 0.0]),
            ("5", vec![0.0, 0.0, 1.0]),
            ("6", vec![0.0, 0.0, 1.0]),
        ]);
        let s = successors(&old, &new, &all(&old, &new), |id| {
            vectors.get(id).map(Vec::as_slice)
        });
        assert_eq!(s["Chess"], None);
        let carried = carry_filter(&["Chess".into(), "Space".into()], &s);
        assert_eq!(
            carried.labels,
            ["Chess", "Space"],
            "kept for the user to clear"
        );
        assert!(carried.renamed.is_empty());
        // A label no old topic had (kept from before) stays too.
        assert_eq!(carry_filter(&["Gone".into()], &s).labels, ["Gone"]);
    }

    #[test]
    fn without_overlap_the_nearest_centroid_succeeds() {
        // The old topic's messages are no longer grouped (they fit none of the topics now).
        let old = topics(vec![topic("Bread comes", &["1", "2"])]);
        let new = topics(vec![
            topic("Space", &["5", "6"]),
            topic("Sourdough bread", &["3", "4"]),
        ]);
        let vectors: HashMap<&str, Vec<f32>> = HashMap::from([
            ("1", vec![1.0, 0.1]),
            ("2", vec![0.9, 0.2]),
            ("3", vec![1.0, 0.0]),
            ("4", vec![0.8, 0.3]),
            ("5", vec![0.0, 1.0]),
            ("6", vec![0.1, 1.0]),
        ]);
        let s = successors(&old, &new, &all(&old, &new), |id| {
            vectors.get(id).map(Vec::as_slice)
        });
        assert_eq!(s["Bread comes"].as_deref(), Some("Sourdough bread"));
    }

    #[test]
    fn one_stray_message_does_not_make_a_successor() {
        // Ten chess messages the new topics leave ungrouped, one of them under the kitchen timers.
        let chess: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
        let chess_refs: Vec<&str> = chess.iter().map(String::as_str).collect();
        let old = topics(vec![topic("Chess", &chess_refs)]);
        let new = topics(vec![topic("Kitchen timers", &["c3", "k1", "k2"])]);
        let s = successors(&old, &new, &all(&old, &new), no_vectors);
        assert_eq!(s["Chess"], None);
        // Messages the new extraction no longer read (older than it reads) do not count.
        let read: HashSet<&str> = ["c3", "k1", "k2"].into();
        assert_eq!(
            successors(&old, &new, &read, no_vectors)["Chess"].as_deref(),
            Some("Kitchen timers")
        );
    }

    #[test]
    fn a_group_found_again_keeps_its_label_unless_another_is_clearly_better() {
        let old = topics(vec![
            topic("Black hole", &["1", "2", "3"]),
            topic("Bread comes", &["4", "5"]),
        ]);
        // The same groups, relabelled; the bread group grew.
        let mut new = vec![
            topic("Event horizon", &["1", "2", "3"]),
            topic("Sourdough bread", &["4", "5", "6", "7"]),
        ];
        keep_labels(&old, &mut new, |_, _| None);
        let labels: Vec<&str> = new.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["Black hole", "Bread comes"]);

        let mut new = vec![
            topic("Event horizon", &["1", "2", "3"]),
            topic("Sourdough bread", &["4", "5", "6", "7"]),
        ];
        keep_labels(&old, &mut new, |_, label| {
            Some(if label == "Sourdough bread" { 0.7 } else { 0.5 })
        });
        let labels: Vec<&str> = new.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(
            labels,
            ["Black hole", "Sourdough bread"],
            "clearly better by 0.2"
        );

        // A new group (mostly new messages) takes its own label; a label another new topic has is
        // not taken from it.
        let mut new = vec![
            topic("Bread comes", &["8", "9", "10"]),
            topic("Oven", &["4", "5", "6", "7", "11", "12"]),
            topic("Space", &["1", "2", "3"]),
        ];
        keep_labels(&old, &mut new, |_, _| None);
        let labels: Vec<&str> = new.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["Bread comes", "Oven", "Black hole"]);

        // A refused proposal keeps its own label, which another proposal then may not take.
        let old = topics(vec![
            topic("Sourdough bread", &["1", "2", "3", "4"]),
            topic("Sourdough starter", &["5", "6"]),
        ]);
        let mut new = vec![
            topic("Sourdough starter", &["1", "2", "3", "4", "9"]),
            topic("Sourdough bread", &["10", "11", "12"]),
            topic("Starter feeding", &["5", "6"]),
        ];
        keep_labels(&old, &mut new, |_, _| None);
        let labels: Vec<&str> = new.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(
            labels,
            ["Sourdough starter", "Sourdough bread", "Starter feeding"]
        );
    }

    #[test]
    fn a_topic_models_topics_get_members_by_exchange() {
        let (bread, space) = ([1.0f32, 0.0], [0.0f32, 1.0]);
        let msgs: Vec<(&str, bool, Option<&[f32]>)> = vec![
            ("1", true, Some(&bread)),
            ("2", false, Some(&bread)),
            ("3", true, Some(&[0.0, 0.0][..])),
            // The instruction's reply goes with it.
            ("3r", false, Some(&space)),
            ("4", true, Some(&space)),
            // A short follow-up leaning the other way stays with its exchange.
            ("5", false, Some(&[0.6, 0.8][..])),
            ("6", true, None),
        ];
        let members = members_by_label(&msgs, &["3".into()], &[Some(&bread), Some(&space)]);
        assert_eq!(
            members,
            [
                vec!["1".to_owned(), "2".into()],
                vec!["4".into(), "5".into()]
            ]
        );
    }

    #[test]
    fn centroids_and_label_scores() {
        let vectors: HashMap<&str, Vec<f32>> =
            HashMap::from([("a", vec![2.0, 0.0]), ("b", vec![0.0, 1.0])]);
        let c = centroid(&["a".into(), "b".into(), "zz".into()], &|id: &str| {
            vectors.get(id).map(Vec::as_slice)
        })
        .unwrap();
        assert!(
            (c[0] - c[1]).abs() < 1e-6,
            "each vector counts once, whatever its length: {c:?}"
        );
        assert_eq!(centroid(&["zz".into()], &no_vectors), None);
        let centroids = vec![Some(vec![1.0, 0.0]), Some(vec![0.0, 1.0]), None];
        let s = label_score(&[0.8, 0.6], 0, &centroids).unwrap();
        assert!((s - (0.8 - 0.5 * 0.6)).abs() < 1e-6);
        assert_eq!(label_score(&[1.0, 0.0], 2, &centroids), None);
    }
}
