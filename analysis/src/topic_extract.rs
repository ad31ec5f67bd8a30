//! Topics without a model: standing instructions found by [`crate::sticky`], the rest grouped by
//! their embeddings and labelled with each group's key phrases. Used when no topic model is
//! configured (the demo) or its call fails.
//!
//! Messages are grouped into exchanges (a user message and the replies after it), since a short
//! follow-up ("what about rook pawns?") says little alone. Exchanges are clustered bottom-up
//! (average linkage over cosine similarity, neighbours in time counting a little closer) until no
//! two groups are similar enough. Each group's candidate labels are the phrases most particular to
//! it (class-based TF-IDF over unigrams and bigrams, stopwords of six languages left out, only
//! noun phrases kept: [`crate::topic_labels`]), those the group's opening message names early
//! ranked up; with the candidates' embeddings, [`label_by_meaning`] picks the one closest to the
//! group's meaning and far from the other groups' (KeyBERT's idea), that the group's other
//! candidates are about and that the opening message names early, else the first candidate is the
//! label.

use std::collections::HashMap;

use crate::sticky::is_standing_instruction;
use crate::topic_labels::{is_noun_phrase, language_of, verbs_in};
use glassbox_core::context::topics::{MAX_LABEL_CHARS, TOPIC_RANGE, Topic};
use glassbox_core::vector::{dot, normalize};
use glassbox_core::vocab::Role;

/// Groups stop merging when their average similarity falls below this.
pub const MERGE_THRESHOLD: f32 = 0.3;
/// The mean similarity of two exchanges the embedding model sees in a conversation that wanders
/// (English, all-MiniLM-L6-v2). A model that sees every pair as close (a language it does not
/// know well) is shifted down to it, so the words carry the grouping there.
const EMBED_BASELINE: f32 = 0.2;
/// Weight of the shared-words similarity (TF-IDF cosine of the exchanges' content words).
const LEXICAL_WEIGHT: f32 = 0.5;
/// Added to the similarity of exchanges next to each other in the conversation.
pub const NEIGHBOUR_BONUS: f32 = 0.12;
/// Most exchanges clustered (the newest); older ones are left to the summary.
pub const MAX_EXCHANGES: usize = 300;
/// Candidate labels kept per topic for [`label_by_meaning`].
pub const LABEL_CANDIDATES: usize = 8;
/// How much a candidate's closeness to other topics counts against it.
const LABEL_DISTINCTNESS: f32 = 0.5;
/// How much each step down the TF-IDF ranking counts against a candidate.
const LABEL_RANK_PENALTY: f32 = 0.015;
/// How much a candidate's mean closeness to its topic's other candidates counts for it.
const LABEL_CENTRALITY: f32 = 0.5;
/// How much being named first in its topic's opening message counts for a candidate.
const LABEL_OPENING: f32 = 0.6;
/// How much of [`LABEL_OPENING`] a candidate named last in the opening message loses.
const OPENING_DECAY: f32 = 2.0 / 3.0;
/// A phrase of the opening message weighs up to this much more in the TF-IDF ranking (as much
/// more as it comes early), so the phrase that names the subject is among the candidates.
const OPENING_BOOST: f32 = 1.0;
/// Most words of a preface before a colon that the opening message's phrases leave out
/// ("Different question: ...", "Autre sujet : ...").
const MAX_PREFACE_WORDS: usize = 4;

/// A message as extraction reads it.
#[derive(Debug, Clone, Copy)]
pub struct ExtractMessage<'a> {
    pub id: &'a str,
    pub role: Role,
    pub text: &'a str,
    /// Its embedding (any length, same for all); `None` when it has none.
    pub vector: Option<&'a [f32]>,
}

/// What offline extraction found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    /// Topics, largest first.
    pub topics: Vec<Topic>,
    /// Ids of the standing instructions.
    pub sticky_ids: Vec<String>,
    /// For each message, the index in `topics` of its topic (`None`: sticky, or not clustered).
    pub assignment: Vec<Option<usize>>,
    /// Per topic, its candidate labels, best by TF-IDF first (the label until
    /// [`label_by_meaning`] picks another).
    pub candidates: Vec<Vec<String>>,
    /// Per topic and candidate, how early the topic's opening message names the candidate: 1 for
    /// its first phrase down to `1 - OPENING_DECAY` for its last, 0 when it does not name it.
    pub opening: Vec<Vec<f32>>,
    /// Per topic, the normalized mean of its exchanges' vectors (`None`: none had one).
    pub centroids: Vec<Option<Vec<f32>>>,
}

/// Extracts topics and standing instructions from a conversation (oldest first).
pub fn extract_offline(messages: &[ExtractMessage<'_>]) -> Extracted {
    let sticky: Vec<bool> = messages
        .iter()
        .map(|m| m.role == Role::User && is_standing_instruction(m.text))
        .collect();
    let exchanges = exchanges(messages, &sticky);
    let first = exchanges.len().saturating_sub(MAX_EXCHANGES);
    let exchanges = &exchanges[first..];
    let mut groups = cluster(exchanges);
    absorb_strays(&mut groups, exchanges);

    // Topics from groups, largest first.
    let texts: Vec<Vec<Vec<(&str, bool)>>> = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|&e| {
                    exchanges[e]
                        .messages
                        .iter()
                        .map(|&i| (messages[i].text, messages[i].role == Role::User))
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut topics: Vec<Group> = groups
        .iter()
        .zip(candidate_labels(&texts))
        .enumerate()
        .map(|(g, (members, (candidates, opening)))| {
            let messages: Vec<usize> = members
                .iter()
                .flat_map(|&e| exchanges[e].messages.iter().copied())
                .collect();
            Group {
                topic: Topic {
                    label: candidates
                        .first()
                        .cloned()
                        .unwrap_or_else(|| format!("Topic {}", g + 1)),
                    count: messages.len() as u32,
                    message_ids: Vec::new(),
                },
                messages,
                candidates,
                opening,
                centroid: centroid(
                    members
                        .iter()
                        .filter_map(|&e| exchanges[e].vector.as_deref()),
                ),
            }
        })
        .collect();
    topics.sort_by_key(|t| std::cmp::Reverse(t.topic.count));
    topics.truncate(TOPIC_RANGE.1);

    let mut assignment = vec![None; messages.len()];
    for (k, g) in topics.iter().enumerate() {
        for &i in &g.messages {
            assignment[i] = Some(k);
        }
    }
    let mut found = Extracted {
        sticky_ids: messages
            .iter()
            .zip(&sticky)
            .filter(|(_, s)| **s)
            .map(|(m, _)| m.id.to_owned())
            .collect(),
        assignment,
        candidates: topics.iter().map(|g| g.candidates.clone()).collect(),
        opening: topics.iter().map(|g| g.opening.clone()).collect(),
        centroids: topics.iter().map(|g| g.centroid.clone()).collect(),
        topics: topics
            .into_iter()
            .map(|g| Topic {
                message_ids: g
                    .messages
                    .iter()
                    .map(|&i| messages[i].id.to_owned())
                    .collect(),
                ..g.topic
            })
            .collect(),
    };
    distinct_labels(&mut found.topics, &found.candidates);
    found
}

/// A group of exchanges on its way to a topic.
struct Group {
    topic: Topic,
    messages: Vec<usize>,
    candidates: Vec<String>,
    opening: Vec<f32>,
    centroid: Option<Vec<f32>>,
}

/// The normalized mean of some vectors of one length (`None` when there is none).
fn centroid<'a>(vectors: impl Iterator<Item = &'a [f32]>) -> Option<Vec<f32>> {
    let mut sum: Option<Vec<f32>> = None;
    for v in vectors {
        let acc = sum.get_or_insert_with(|| vec![0.0; v.len()]);
        if acc.len() == v.len() {
            for (a, x) in acc.iter_mut().zip(v) {
                *a += x;
            }
        }
    }
    if let Some(v) = &mut sum {
        normalize(v);
    }
    sum
}

/// Relabels each topic with the candidate that best names its subject, not already the label of a
/// larger topic. By their embeddings (from `vector_of`, normalized): close to the topic's centroid,
/// far from the other topics' centroids, close to the topic's other candidates (the subject's name
/// is what its details have in common). By the words: named early in the topic's opening message
/// (people say what they are asking about before the detail that puzzles them: "my tomato plants
/// have yellow leaves"), and a little in favour of the TF-IDF ranking. Topics without a centroid
/// or candidate vectors keep their label.
pub fn label_by_meaning<'v>(found: &mut Extracted, vector_of: impl Fn(&str) -> Option<&'v [f32]>) {
    // From the raw first candidates: a "(2)" of the first pass could outlive the label it told
    // apart.
    for (t, c) in found.topics.iter_mut().zip(&found.candidates) {
        if let Some(first) = c.first() {
            t.label = first.clone();
        }
    }
    for k in 0..found.topics.len() {
        let Some(Some(own)) = found.centroids.get(k) else {
            continue;
        };
        let taken: Vec<String> = found.topics[..k].iter().map(|t| t.label.clone()).collect();
        let best = found.candidates[k]
            .iter()
            .enumerate()
            .filter(|(_, c)| !taken.contains(c))
            .filter_map(|(rank, c)| {
                let v = vector_of(c)?;
                let others = found
                    .centroids
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .filter_map(|(_, o)| o.as_deref())
                    .map(|o| dot(v, o))
                    .fold(f32::NEG_INFINITY, f32::max)
                    .max(0.0);
                let opening = found
                    .opening
                    .get(k)
                    .and_then(|o| o.get(rank))
                    .copied()
                    .unwrap_or(0.0);
                // What the group's other phrases are about: the subject's name sits among its
                // details, a detail off to one side.
                let peers: Vec<f32> = found.candidates[k]
                    .iter()
                    .filter(|o| *o != c)
                    .filter_map(|o| vector_of(o))
                    .map(|o| dot(v, o))
                    .collect();
                let central = peers.iter().sum::<f32>() / peers.len().max(1) as f32;
                let score = dot(v, own) - LABEL_DISTINCTNESS * others
                    + LABEL_CENTRALITY * central
                    + LABEL_OPENING * opening
                    - LABEL_RANK_PENALTY * rank as f32;
                Some((score, c))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((_, label)) = best {
            found.topics[k].label = label.clone();
        }
    }
    distinct_labels(&mut found.topics, &found.candidates);
}

/// A user message with the replies after it (or replies before any user message); standing
/// instructions are in none.
struct Exchange {
    messages: Vec<usize>,
    /// The normalized mean of its messages' vectors; `None` when none has one.
    vector: Option<Vec<f32>>,
    /// Its content words with how often they occur.
    words: HashMap<String, f32>,
}

fn exchanges(messages: &[ExtractMessage<'_>], sticky: &[bool]) -> Vec<Exchange> {
    let mut out: Vec<Exchange> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        // A reply to a standing instruction stays with the exchange before it: people explain
        // themselves ("we're in Texas, so feet and dollars") and the reply goes on with the subject.
        if sticky[i] {
            continue;
        }
        let starts = m.role == Role::User || out.is_empty();
        if starts {
            out.push(Exchange {
                messages: Vec::new(),
                vector: None,
                words: HashMap::new(),
            });
        }
        if let Some(e) = out.last_mut() {
            e.messages.push(i);
            for (key, _) in phrases_of(m.text) {
                if !key.contains(' ') {
                    *e.words.entry(key).or_default() += 1.0;
                }
            }
        }
    }
    for e in &mut out {
        let mut sum: Option<Vec<f32>> = None;
        for &i in &e.messages {
            let Some(v) = messages[i].vector else {
                continue;
            };
            // Longer messages say more about the subject; an "ok thanks" counts little.
            let words = messages[i].text.split_whitespace().count().min(60) as f32;
            let weight = words.sqrt().max(1.0);
            let acc = sum.get_or_insert_with(|| vec![0.0; v.len()]);
            if acc.len() == v.len() {
                for (a, x) in acc.iter_mut().zip(v) {
                    *a += weight * x;
                }
            }
        }
        if let Some(v) = &mut sum {
            normalize(v);
        }
        e.vector = sum;
    }
    out
}

/// Average-linkage clustering of exchanges; returns groups of exchange indices, in time order.
/// Exchanges without a vector join the group of the exchange before them.
fn cluster(exchanges: &[Exchange]) -> Vec<Vec<usize>> {
    let with: Vec<usize> = (0..exchanges.len())
        .filter(|&i| exchanges[i].vector.is_some())
        .collect();
    let n = with.len();
    if n == 0 {
        return if exchanges.is_empty() {
            Vec::new()
        } else {
            vec![(0..exchanges.len()).collect()]
        };
    }
    // Pairwise similarity sums between groups (average linkage = sum / (size_a * size_b)):
    // embeddings (shifted when the model sees everything alike), shared words, time.
    let lexical = tf_idf(exchanges, &with);
    let mut sums = vec![0.0f32; n * n];
    let mut mean = 0.0f32;
    for a in 0..n {
        for b in a + 1..n {
            let (Some(va), Some(vb)) = (&exchanges[with[a]].vector, &exchanges[with[b]].vector)
            else {
                continue;
            };
            let s = dot(va, vb);
            mean += s;
            sums[a * n + b] = s;
        }
    }
    let pairs = (n * n.saturating_sub(1) / 2).max(1) as f32;
    let shift = (mean / pairs - EMBED_BASELINE).max(0.0);
    for a in 0..n {
        for b in a + 1..n {
            let bonus = if b == a + 1 { NEIGHBOUR_BONUS } else { 0.0 };
            let s = sums[a * n + b] - shift
                + LEXICAL_WEIGHT * sparse_cosine(&lexical[a], &lexical[b])
                + bonus;
            sums[a * n + b] = s;
            sums[b * n + a] = s;
        }
    }
    let mut size = vec![1usize; n];
    let mut alive = vec![true; n];
    let mut members: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut groups = n;
    loop {
        let mut best: Option<(f32, usize, usize)> = None;
        for a in 0..n {
            if !alive[a] {
                continue;
            }
            for b in a + 1..n {
                if !alive[b] {
                    continue;
                }
                let avg = sums[a * n + b] / (size[a] * size[b]) as f32;
                if best.is_none_or(|(s, _, _)| avg > s) {
                    best = Some((avg, a, b));
                }
            }
        }
        let Some((avg, a, b)) = best else { break };
        if avg < MERGE_THRESHOLD && groups <= TOPIC_RANGE.1 {
            break;
        }
        // Merge b into a.
        for c in 0..n {
            if c != a && c != b && alive[c] {
                let s = sums[a * n + c] + sums[b * n + c];
                sums[a * n + c] = s;
                sums[c * n + a] = s;
            }
        }
        size[a] += size[b];
        alive[b] = false;
        let moved = std::mem::take(&mut members[b]);
        members[a].extend(moved);
        groups -= 1;
    }
    // Back to exchange indices; vector-less exchanges follow the one before them.
    let mut group_of = vec![usize::MAX; exchanges.len()];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (a, m) in members.iter().enumerate() {
        if !alive[a] {
            continue;
        }
        for &k in m {
            group_of[with[k]] = out.len();
        }
        out.push(Vec::new());
    }
    let mut last = group_of[with[0]];
    for (e, g) in group_of.iter_mut().enumerate() {
        if *g == usize::MAX {
            *g = last;
        }
        last = *g;
        out[*g].push(e);
    }
    out.sort_by_key(|g| g.first().copied());
    out
}

/// Each exchange's content words weighted by TF-IDF over the exchanges, unit length.
fn tf_idf(exchanges: &[Exchange], with: &[usize]) -> Vec<HashMap<String, f32>> {
    let mut df: HashMap<&str, f32> = HashMap::new();
    for &i in with {
        for w in exchanges[i].words.keys() {
            *df.entry(w).or_default() += 1.0;
        }
    }
    let n = with.len() as f32;
    with.iter()
        .map(|&i| {
            let mut v: HashMap<String, f32> = exchanges[i]
                .words
                .iter()
                .map(|(w, tf)| {
                    let idf = (n / df.get(w.as_str()).copied().unwrap_or(1.0)).ln();
                    (w.clone(), (1.0 + tf.ln()) * idf)
                })
                .filter(|(_, x)| *x > 0.0)
                .collect();
            let norm = v.values().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                v.values_mut().for_each(|x| *x /= norm);
            }
            v
        })
        .collect()
}

/// Cosine of two unit-length sparse vectors.
fn sparse_cosine(a: &HashMap<String, f32>, b: &HashMap<String, f32>) -> f32 {
    let (small, big) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small
        .iter()
        .filter_map(|(w, x)| big.get(w).map(|y| x * y))
        .sum()
}

/// A phrase's weighted count of messages in a group, and how often each surface form was written.
type PhraseCounts = HashMap<String, (f32, HashMap<String, u32>)>;

/// How much a user's message counts toward a label against a reply (users name their subject).
const USER_WEIGHT: f32 = 2.0;

/// A group of a single message (a closing "cheers", a question never answered) joins the group of
/// the exchange before it (after it, for the first), so it does not show as a topic of its own.
fn absorb_strays(groups: &mut Vec<Vec<usize>>, exchanges: &[Exchange]) {
    loop {
        let size = |g: &Vec<usize>| {
            g.iter()
                .map(|&e| exchanges[e].messages.len())
                .sum::<usize>()
        };
        let Some(stray) = groups.iter().position(|g| size(g) < 2) else {
            return;
        };
        if groups.len() < 2 {
            return;
        }
        let first = groups[stray].first().copied().unwrap_or(0);
        // The group holding the exchange just before (or after) the stray one.
        let neighbour = (0..groups.len())
            .filter(|&g| g != stray)
            .min_by_key(|&g| {
                groups[g]
                    .iter()
                    .map(|&e| {
                        if e < first {
                            2 * (first - e)
                        } else {
                            2 * (e - first) + 1
                        }
                    })
                    .min()
                    .unwrap_or(usize::MAX)
            })
            .unwrap_or(0);
        let moved = groups.remove(stray);
        let target = if neighbour > stray {
            neighbour - 1
        } else {
            neighbour
        };
        groups[target].extend(moved);
        groups[target].sort_unstable();
    }
}

/// Per group of exchanges of texts (each with whether the user wrote it), its most particular
/// phrases, best first, at most [`LABEL_CANDIDATES`], each in its most frequent surface form,
/// capitalized; with each, how early the group's opening message names it (see
/// [`Extracted::opening`]).
fn candidate_labels(groups: &[Vec<Vec<(&str, bool)>>]) -> Vec<(Vec<String>, Vec<f32>)> {
    // Per group, the messages each phrase occurs in; overall, the messages it occurs in.
    let mut per_group: Vec<(PhraseCounts, HashMap<String, f32>)> = Vec::new();
    let mut overall: HashMap<String, u32> = HashMap::new();
    let mut total = 0u32;
    for group in groups {
        let mut phrases = PhraseCounts::new();
        for &(text, by_user) in group.iter().flatten() {
            total += 1;
            let mut seen: Vec<String> = Vec::new();
            for (key, surface) in noun_phrases_of(text) {
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key.clone());
                let entry = phrases.entry(key.clone()).or_default();
                entry.0 += if by_user { USER_WEIGHT } else { 1.0 };
                *entry.1.entry(surface).or_default() += 1;
                *overall.entry(key).or_default() += 1;
            }
        }
        let opening = group
            .iter()
            .flatten()
            .find(|(_, by_user)| *by_user)
            .map(|(text, _)| opening_phrases(text))
            .unwrap_or_default();
        per_group.push((phrases, opening));
    }
    per_group
        .iter()
        .map(|(phrases, opening)| {
            let mut ranked: Vec<(f32, &String, &HashMap<String, u32>)> = phrases
                .iter()
                .map(|(key, (tf, surfaces))| {
                    let df = overall.get(key).copied().unwrap_or(1) as f32;
                    let idf = (1.0 + total as f32 / df).ln();
                    let bigram = key.contains(' ');
                    let weight = if bigram && *tf >= 2.0 { 1.6 } else { 1.0 };
                    let opens = 1.0 + OPENING_BOOST * opening.get(key).copied().unwrap_or(0.0);
                    (tf * idf * weight * opens, key, surfaces)
                })
                .collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            let mut out: Vec<String> = Vec::new();
            let mut early: Vec<f32> = Vec::new();
            for (_, key, surfaces) in ranked {
                let surface = surfaces
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                    .map(|(s, _)| s.as_str())
                    .unwrap_or_default();
                let label = capitalize(surface);
                if !out.contains(&label) {
                    out.push(label);
                    early.push(opening.get(key).copied().unwrap_or(0.0));
                }
                if out.len() == LABEL_CANDIDATES {
                    break;
                }
            }
            (out, early)
        })
        .collect()
}

/// The phrases of a group's opening message, each with how early it comes: 1 for the first, down
/// to `1 - OPENING_DECAY` for the last. A short preface before a colon (and a space: not a time,
/// not a link) is left out: it says the subject changes, not what to.
fn opening_phrases(text: &str) -> HashMap<String, f32> {
    let body = match text.split_once(": ") {
        Some((preface, rest)) if preface.split_whitespace().count() <= MAX_PREFACE_WORDS => rest,
        _ => text,
    };
    let phrases = noun_phrases_of(body);
    let n = phrases.len() as f32;
    let mut out: HashMap<String, f32> = HashMap::new();
    for (i, (key, _)) in phrases.into_iter().enumerate() {
        out.entry(key).or_insert(1.0 - OPENING_DECAY * i as f32 / n);
    }
    out
}

/// The content unigrams and bigrams of a text: (lowercase key, surface form).
fn phrases_of(text: &str) -> Vec<(String, String)> {
    phrases(text, false)
}

/// The unigrams and bigrams of a text that can name a topic: content words in noun phrases, not
/// verbs where they stand ([`crate::topic_labels`]).
fn noun_phrases_of(text: &str) -> Vec<(String, String)> {
    phrases(text, true)
}

fn phrases(text: &str, noun_phrases: bool) -> Vec<(String, String)> {
    let lang = if noun_phrases {
        language_of(text)
    } else {
        None
    };
    let mut out = Vec::new();
    for sentence in text.split(['.', '!', '?', ';', ':', '\n', '(', ')', ',', '"', '«', '»']) {
        let words: Vec<&str> = sentence
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '+' && c != '#'))
            .collect();
        let is_content = |w: &str| {
            let lower = w.to_lowercase();
            w.chars().count() >= 3
                && w.chars().any(char::is_alphabetic)
                && !w.chars().all(|c| c.is_ascii_digit())
                && !STOPWORDS.contains(&lower.as_str())
        };
        let verbs = if noun_phrases {
            verbs_in(&words, lang)
        } else {
            vec![false; words.len()]
        };
        // A content word, and (for labels) not standing as a verb there.
        let content = |i: usize| {
            words.get(i).is_some_and(|w| is_content(w)) && !verbs.get(i).copied().unwrap_or(true)
        };
        for (i, w) in words.iter().enumerate() {
            if !content(i) {
                continue;
            }
            if !noun_phrases || is_noun_phrase(&[w], lang) {
                out.push((w.to_lowercase(), (*w).to_owned()));
            }
            if let Some(next) = Some(i + 1)
                .filter(|&n| content(n))
                .and_then(|n| words.get(n))
                .filter(|n| !noun_phrases || is_noun_phrase(&[w, n], lang))
            {
                out.push((
                    format!("{} {}", w.to_lowercase(), next.to_lowercase()),
                    format!("{w} {next}"),
                ));
            }
        }
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    let label: String = match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    };
    label.chars().take(MAX_LABEL_CHARS).collect()
}

/// Two topics with the same label: the later one takes its next candidate that no other topic
/// is labelled with; only when it has none does it get its rank in brackets ("Chess (2)").
fn distinct_labels(topics: &mut [Topic], candidates: &[Vec<String>]) {
    for i in 1..topics.len() {
        let clashes = |label: &str, topics: &[Topic]| topics[..i].iter().any(|t| t.label == label);
        if !clashes(&topics[i].label, topics) {
            continue;
        }
        let free = candidates.get(i).into_iter().flatten().find(|c| {
            !topics
                .iter()
                .enumerate()
                .any(|(j, t)| j != i && t.label == **c)
        });
        if let Some(label) = free {
            topics[i].label = label.clone();
            continue;
        }
        let n = topics[..i]
            .iter()
            .filter(|t| t.label == topics[i].label)
            .count();
        let base: String = topics[i].label.chars().take(MAX_LABEL_CHARS - 5).collect();
        topics[i].label = format!("{base} ({})", n + 1);
    }
}

/// Words that never name a topic: function words of six languages and chat filler.
const STOPWORDS: &[&str] = &[
    // English
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "your",
    "yours",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "has",
    "have",
    "him",
    "his",
    "how",
    "its",
    "may",
    "new",
    "now",
    "old",
    "see",
    "two",
    "way",
    "who",
    "did",
    "does",
    "doing",
    "get",
    "gets",
    "got",
    "let",
    "put",
    "say",
    "she",
    "too",
    "use",
    "used",
    "using",
    "that",
    "this",
    "these",
    "those",
    "with",
    "from",
    "they",
    "them",
    "their",
    "there",
    "then",
    "than",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "would",
    "should",
    "could",
    "about",
    "into",
    "over",
    "under",
    "also",
    "just",
    "like",
    "make",
    "makes",
    "made",
    "more",
    "most",
    "much",
    "many",
    "some",
    "such",
    "only",
    "other",
    "very",
    "been",
    "being",
    "were",
    "here",
    "each",
    "both",
    "few",
    "why",
    "yes",
    "yeah",
    "okay",
    "thanks",
    "thank",
    "please",
    "sure",
    "great",
    "good",
    "nice",
    "cool",
    "perfect",
    "right",
    "well",
    "really",
    "want",
    "need",
    "needs",
    "know",
    "think",
    "try",
    "tried",
    "going",
    "thing",
    "things",
    "something",
    "anything",
    "lot",
    "lots",
    "better",
    "best",
    "usually",
    "often",
    "always",
    "never",
    "every",
    "because",
    "without",
    "after",
    "before",
    "still",
    "even",
    "same",
    "different",
    "first",
    "last",
    "next",
    "time",
    "times",
    "day",
    "days",
    "keep",
    "take",
    "give",
    "work",
    "works",
    "start",
    "help",
    "tip",
    "tips",
    "question",
    "answer",
    "example",
    "mean",
    "means",
    "can't",
    "don't",
    "doesn't",
    "it's",
    "i'm",
    "i've",
    "you're",
    "that's",
    "what's",
    "there's",
    "isn't",
    "won't",
    "let's",
    "them",
    "then",
    "theirs",
    "myself",
    "yourself",
    "once",
    "again",
    "around",
    "through",
    "between",
    "during",
    "above",
    "below",
    "own",
    "off",
    "down",
    "until",
    "against",
    "via",
    "per",
    "etc",
    "may",
    "might",
    "must",
    "shall",
    "whether",
    "either",
    "neither",
    "though",
    "although",
    "if",
    "else",
    "unless",
    "since",
    "yet",
    "away",
    "back",
    "maybe",
    "instead",
    "enough",
    "less",
    "least",
    "little",
    "long",
    "short",
    "big",
    "small",
    "high",
    "low",
    "worth",
    "part",
    "kind",
    "sort",
    "bit",
    "quite",
    "rather",
    "almost",
    "already",
    "along",
    "usually",
    "probably",
    "actually",
    "exactly",
    "simply",
    "typically",
    "generally",
    "easy",
    "change",
    "changes",
    "afterwards",
    "brand",
    "areas",
    "area",
    "daily",
    "rating",
    "step",
    "steps",
    "ones",
    "way",
    "ways",
    "lot",
    "okay",
    "check",
    "look",
    "looks",
    "looking",
    "start",
    "started",
    "starting",
    "fine",
    "sounds",
    "idea",
    "fix",
    "problem",
    "issue",
    "case",
    // French
    "les",
    "des",
    "une",
    "est",
    "pas",
    "pour",
    "que",
    "qui",
    "dans",
    "sur",
    "avec",
    "par",
    "plus",
    "mais",
    "ou",
    "où",
    "son",
    "ses",
    "sont",
    "aux",
    "cette",
    "ces",
    "tout",
    "tous",
    "toute",
    "toutes",
    "elle",
    "ils",
    "elles",
    "nous",
    "vous",
    "leur",
    "leurs",
    "mon",
    "mes",
    "ton",
    "tes",
    "comme",
    "quand",
    "comment",
    "quoi",
    "quel",
    "quelle",
    "quels",
    "quelles",
    "faire",
    "fait",
    "faut",
    "peut",
    "peux",
    "être",
    "avoir",
    "bien",
    "très",
    "aussi",
    "encore",
    "merci",
    "d'accord",
    "super",
    "alors",
    "donc",
    "c'est",
    "j'ai",
    "n'est",
    "qu'il",
    "qu'on",
    "d'un",
    "d'une",
    "l'on",
    "chez",
    "sans",
    "sous",
    "entre",
    "vers",
    "après",
    "avant",
    "depuis",
    "pendant",
    "ça",
    "cela",
    "celle",
    "celui",
    "même",
    "autre",
    "autres",
    "peu",
    "trop",
    "beaucoup",
    "toujours",
    "jamais",
    "souvent",
    "fois",
    "mieux",
    "était",
    "combien",
    "faire",
    "plaisir",
    "vraiment",
    "avez",
    "suis",
    "ai",
    "as",
    "ont",
    // German
    "der",
    "die",
    "das",
    "den",
    "dem",
    "des",
    "ein",
    "eine",
    "einen",
    "einem",
    "einer",
    "und",
    "oder",
    "aber",
    "nicht",
    "ist",
    "sind",
    "war",
    "mit",
    "für",
    "auf",
    "aus",
    "bei",
    "von",
    "zum",
    "zur",
    "wie",
    "was",
    "wer",
    "wenn",
    "dann",
    "auch",
    "noch",
    "schon",
    "nur",
    "sehr",
    "mehr",
    "kann",
    "können",
    "soll",
    "sollte",
    "muss",
    "mich",
    "mir",
    "dich",
    "dir",
    "sich",
    "ich",
    "sie",
    "wir",
    "ihr",
    "ihre",
    "mein",
    "meine",
    "dein",
    "deine",
    "sein",
    "seine",
    "danke",
    "bitte",
    "gut",
    "also",
    "immer",
    "wird",
    "werden",
    "hat",
    "habe",
    "haben",
    "gibt",
    "ob",
    "weil",
    "dass",
    "doch",
    "mal",
    "ganz",
    "etwa",
    "diese",
    "dieser",
    "dieses",
    "welche",
    "welcher",
    "welches",
    "über",
    "unter",
    "nach",
    "vor",
    "durch",
    "ohne",
    "gegen",
    "bis",
    "beim",
    "vom",
    "ins",
    "ans",
    "einfach",
    "lohnt",
    "als",
    "daher",
    "allem",
    "pro",
    "dann",
    "jetzt",
    "gerade",
    "brauche",
    "brauchst",
    "solltest",
    // Spanish
    "los",
    "las",
    "del",
    "una",
    "uno",
    "unos",
    "unas",
    "por",
    "para",
    "con",
    "sin",
    "que",
    "qué",
    "como",
    "cómo",
    "cuando",
    "cuándo",
    "donde",
    "dónde",
    "pero",
    "más",
    "muy",
    "este",
    "esta",
    "estos",
    "estas",
    "ese",
    "esa",
    "eso",
    "hay",
    "ser",
    "estar",
    "tengo",
    "tiene",
    "puedo",
    "puede",
    "hacer",
    "gracias",
    "vale",
    "bien",
    "también",
    "siempre",
    "nunca",
    "mucho",
    "poco",
    "cada",
    "cuál",
    "cuánto",
    "cuánta",
    "sobre",
    "entre",
    "desde",
    "hasta",
    "mis",
    "sus",
    "nos",
    "les",
    "todo",
    "todos",
    "otra",
    "otro",
    "mejor",
    "fue",
    "nada",
    "directo",
    "abierto",
    "puedes",
    "debería",
    "quiero",
    // Portuguese
    "uma",
    "para",
    "com",
    "não",
    "mais",
    "muito",
    "isso",
    "esse",
    "essa",
    "este",
    "esta",
    "tem",
    "ter",
    "fazer",
    "posso",
    "pode",
    "obrigado",
    "obrigada",
    "valeu",
    "também",
    "sempre",
    "nunca",
    "qual",
    "quais",
    "quanto",
    "onde",
    "quando",
    "porque",
    "pra",
    "pelo",
    "pela",
    "dos",
    "das",
    "nos",
    "nas",
    "meu",
    "minha",
    "seu",
    "sua",
    "vale",
    "melhor",
    "você",
    "vou",
    "dia",
    // Italian
    "gli",
    "della",
    "delle",
    "dello",
    "degli",
    "nel",
    "nella",
    "per",
    "con",
    "non",
    "che",
    "chi",
    "come",
    "quando",
    "dove",
    "perché",
    "anche",
    "sono",
    "essere",
    "avere",
    "fare",
    "posso",
    "può",
    "grazie",
    "molto",
    "più",
    "questo",
    "questa",
    "quello",
    "quella",
    "sempre",
    "mai",
    "ogni",
    "quanto",
    "mio",
    "mia",
    "suo",
    "sua",
    "tra",
    "fra",
    "già",
    "anni",
    "solo",
    "poi",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn m<'a>(id: &'a str, role: Role, text: &'a str, v: &'a [f32]) -> ExtractMessage<'a> {
        ExtractMessage {
            id,
            role,
            text,
            vector: Some(v),
        }
    }

    #[test]
    fn two_subjects_give_two_topics_and_the_instruction_is_sticky() {
        let (k8s, bread, odd) = ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]);
        let msgs = [
            m(
                "1",
                Role::User,
                "My Kubernetes pod cannot reach the service.",
                &k8s,
            ),
            m(
                "2",
                Role::Assistant,
                "Check the Kubernetes service selector and the pod labels.",
                &k8s,
            ),
            m("3", Role::User, "Be concise from now on.", &odd),
            m(
                "4",
                Role::User,
                "The Kubernetes service has no endpoints.",
                &k8s,
            ),
            m(
                "5",
                Role::Assistant,
                "Then the Kubernetes selector matches no pod.",
                &k8s,
            ),
            m(
                "6",
                Role::User,
                "My sourdough starter smells like acetone.",
                &bread,
            ),
            m(
                "7",
                Role::Assistant,
                "Feed the sourdough starter twice a day.",
                &bread,
            ),
            m(
                "8",
                Role::User,
                "How warm should the sourdough starter be?",
                &bread,
            ),
            m(
                "9",
                Role::Assistant,
                "Keep the sourdough starter around 25 degrees.",
                &bread,
            ),
        ];
        let got = extract_offline(&msgs);
        assert_eq!(got.sticky_ids, ["3"]);
        let labels: Vec<(&str, u32)> = got
            .topics
            .iter()
            .map(|t| (t.label.as_str(), t.count))
            .collect();
        assert_eq!(labels.len(), 2, "{labels:?}");
        assert!(
            labels[0].0.contains("Kubernetes") || labels[0].0.contains("ourdough"),
            "{labels:?}"
        );
        assert_eq!(labels[0].1 + labels[1].1, 8);
        assert_eq!(got.assignment[2], None);
        assert_eq!(got.assignment[0], got.assignment[4]);
        assert_ne!(got.assignment[0], got.assignment[6]);
    }

    #[test]
    fn the_demo_conversation_gets_noun_phrases_not_verb_fragments() {
        // Three questions on sourdough (the one on the starter a little apart), three on black
        // holes, one standing instruction: once labelled "Bread comes", "Starter alive".
        let (bread, starter, holes, odd) = (
            [1.0, 0.0, 0.0, 0.0],
            [0.6, 0.8, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
        );
        let msgs = [
            m(
                "1",
                Role::User,
                "My sourdough bread comes out dense and flat.",
                &bread,
            ),
            m(
                "2",
                Role::Assistant,
                "Dense bread usually means the dough was underproofed.",
                &bread,
            ),
            m(
                "3",
                Role::User,
                "How do I keep my starter alive while on holiday?",
                &starter,
            ),
            m(
                "4",
                Role::Assistant,
                "Feed it, then keep the starter in the fridge.",
                &starter,
            ),
            m(
                "5",
                Role::User,
                "Answer in short bullet points from now on.",
                &odd,
            ),
            m(
                "6",
                Role::User,
                "Why does my sourdough bread taste so sour?",
                &bread,
            ),
            m(
                "7",
                Role::Assistant,
                "A long cold proof makes sourdough bread more sour.",
                &bread,
            ),
            m("8", Role::User, "How do black holes form?", &holes),
            m(
                "9",
                Role::Assistant,
                "Black holes form when a massive star collapses.",
                &holes,
            ),
            m("10", Role::User, "What happens inside black holes?", &holes),
            m(
                "11",
                Role::Assistant,
                "Past the event horizon nothing escapes.",
                &holes,
            ),
            m("12", Role::User, "Can black holes evaporate?", &holes),
            m(
                "13",
                Role::Assistant,
                "Yes, slowly, through Hawking radiation.",
                &holes,
            ),
        ];
        let got = extract_offline(&msgs);
        assert_eq!(got.sticky_ids, ["5"]);
        let labels: Vec<&str> = got.topics.iter().map(|t| t.label.as_str()).collect();
        let candidates: Vec<&String> = got.candidates.iter().flatten().collect();
        for fragment in [
            "Bread comes",
            "Starter alive",
            "Holes form",
            "Comes",
            "Alive",
            "Dense",
        ] {
            assert!(
                !candidates.iter().any(|c| *c == fragment),
                "{fragment}: {candidates:?}"
            );
        }
        assert!(labels.contains(&"Black holes"), "{labels:?}");
        assert!(labels.contains(&"Sourdough bread"), "{labels:?}");
    }

    #[test]
    fn labels_by_meaning_pick_the_closest_distinct_phrase() {
        let topic = |label: &str| Topic {
            label: label.into(),
            count: 2,
            ..Default::default()
        };
        let mut found = Extracted {
            topics: vec![topic("Dough"), topic("Dough (2)"), topic("Knight")],
            candidates: vec![
                vec!["Dough".into(), "Sourdough".into()],
                vec!["Dough".into(), "Knight".into()],
                vec!["Knight".into()],
            ],
            centroids: vec![Some(vec![1.0, 0.0]), Some(vec![0.0, 1.0]), None],
            ..Default::default()
        };
        let vectors: HashMap<&str, Vec<f32>> = HashMap::from([
            // "Dough" sits between both topics; "Sourdough" is the first's own.
            ("Dough", vec![0.7, 0.7]),
            ("Sourdough", vec![0.95, 0.3]),
            ("Knight", vec![0.1, 0.99]),
        ]);
        label_by_meaning(&mut found, |c| vectors.get(c).map(Vec::as_slice));
        let labels: Vec<&str> = found.topics.iter().map(|t| t.label.as_str()).collect();
        // The third has no centroid: it keeps its first candidate, told apart from the second.
        assert_eq!(labels, ["Sourdough", "Knight", "Knight (2)"]);
    }

    #[test]
    fn the_phrase_the_others_are_about_beats_the_closest_detail() {
        let topic = |label: &str| Topic {
            label: label.into(),
            count: 2,
            ..Default::default()
        };
        let candidates = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut found = Extracted {
            topics: vec![topic("Yellow leaves"), topic("Espresso")],
            candidates: vec![
                candidates(&["Yellow leaves", "Tomato plants", "Pots"]),
                candidates(&["Espresso"]),
            ],
            centroids: vec![Some(vec![1.0, 0.0, 0.0]), Some(vec![0.0, 0.0, 1.0])],
            ..Default::default()
        };
        // "Yellow leaves" is the closest to the centroid (0.9 against 0.8), but off to one side:
        // "Tomato plants" is what "Pots" and "Yellow leaves" have in common.
        let vectors: HashMap<&str, Vec<f32>> = HashMap::from([
            ("Yellow leaves", vec![0.9, 0.436, 0.0]),
            ("Tomato plants", vec![0.8, -0.6, 0.0]),
            ("Pots", vec![0.6, -0.8, 0.0]),
            ("Espresso", vec![0.0, 0.0, 1.0]),
        ]);
        label_by_meaning(&mut found, |c| vectors.get(c).map(Vec::as_slice));
        assert_eq!(found.topics[0].label, "Tomato plants");
    }

    #[test]
    fn the_phrase_the_opening_message_names_first_beats_a_closer_one() {
        let topic = |label: &str| Topic {
            label: label.into(),
            count: 2,
            ..Default::default()
        };
        let pair = || vec!["Yellow leaves".to_string(), "Tomato plants".to_string()];
        let vectors: HashMap<&str, Vec<f32>> = HashMap::from([
            ("Yellow leaves", vec![0.9, 0.436]),
            ("Tomato plants", vec![0.8, -0.6]),
        ]);
        let mut found = Extracted {
            topics: vec![topic("Yellow leaves")],
            candidates: vec![pair()],
            centroids: vec![Some(vec![1.0, 0.0])],
            ..Default::default()
        };
        // Without the opening message the closer phrase wins (two candidates: each as central).
        label_by_meaning(&mut found, |c| vectors.get(c).map(Vec::as_slice));
        assert_eq!(found.topics[0].label, "Yellow leaves");
        // "My tomato plants have yellow leaves ...": named first, it names the subject.
        found.opening = vec![vec![0.6, 1.0]];
        label_by_meaning(&mut found, |c| vectors.get(c).map(Vec::as_slice));
        assert_eq!(found.topics[0].label, "Tomato plants");
    }

    #[test]
    fn the_opening_message_counts_its_phrases_by_place_past_a_short_preface() {
        let got = opening_phrases("Completely different: my tomato plants have yellow leaves.");
        assert!(
            !got.contains_key("completely") && !got.contains_key("different"),
            "{got:?}"
        );
        let at = |k: &str| got.get(k).copied().unwrap_or(0.0);
        assert_eq!(at("tomato"), 1.0);
        assert!(at("tomato plants") > at("yellow leaves"), "{got:?}");
        assert!(at("yellow leaves") >= 1.0 - OPENING_DECAY, "{got:?}");
        assert_eq!(at("bottom"), 0.0);
        // A colon after more than a preface's words, or in a time, is part of the message.
        let got = opening_phrases("My sourdough starter smells odd after feeding: acetone?");
        assert!(got.contains_key("sourdough starter"), "{got:?}");
        let got = opening_phrases("Chess club at 18:30, which opening should I learn?");
        assert!(got.contains_key("chess club"), "{got:?}");

        // Extraction gives each candidate its place in its topic's opening message.
        let (plants, coffee) = ([1.0, 0.0], [0.0, 1.0]);
        let msgs = [
            m(
                "1",
                Role::User,
                "New topic: my tomato plants have yellow leaves.",
                &plants,
            ),
            m(
                "2",
                Role::Assistant,
                "Yellow leaves low down mean too much water.",
                &plants,
            ),
            m(
                "3",
                Role::User,
                "Should the tomato plants get less water then?",
                &plants,
            ),
            m(
                "4",
                Role::Assistant,
                "Water the tomato plants when the soil is dry.",
                &plants,
            ),
            m("5", Role::User, "My espresso shots run too fast.", &coffee),
            m("6", Role::Assistant, "Grind the espresso finer.", &coffee),
        ];
        let got = extract_offline(&msgs);
        assert_eq!(got.opening.len(), got.candidates.len());
        for (c, o) in got.candidates.iter().zip(&got.opening) {
            assert_eq!(c.len(), o.len());
        }
        let plants = got
            .candidates
            .iter()
            .position(|c| c.iter().any(|l| l == "Tomato plants"))
            .expect("a tomato topic");
        let at = |label: &str| {
            let i = got.candidates[plants].iter().position(|l| l == label);
            i.map(|i| got.opening[plants][i])
        };
        assert!(at("Tomato plants") > at("Yellow leaves"), "{got:?}");
        assert_eq!(at("Water"), Some(0.0), "{got:?}");
    }

    #[test]
    fn a_label_a_larger_topic_has_gives_way_to_the_next_candidate() {
        let topic = |label: &str| Topic {
            label: label.into(),
            count: 2,
            ..Default::default()
        };
        let mut found = Extracted {
            topics: vec![topic("Sourdough starter"), topic("Sourdough starter (2)")],
            candidates: vec![
                vec!["Sourdough starter".into(), "Acetone smell".into()],
                vec!["Sourdough starter".into(), "Rye flour".into()],
            ],
            centroids: vec![Some(vec![1.0, 0.0]), Some(vec![0.8, 0.6])],
            ..Default::default()
        };
        // "Sourdough starter" is the closest phrase to both; the larger topic keeps it.
        let vectors: HashMap<&str, Vec<f32>> = HashMap::from([
            ("Sourdough starter", vec![0.9, 0.44]),
            ("Acetone smell", vec![0.3, -0.95]),
            ("Rye flour", vec![0.0, 1.0]),
        ]);
        label_by_meaning(&mut found, |c| vectors.get(c).map(Vec::as_slice));
        let labels: Vec<&str> = found.topics.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["Sourdough starter", "Rye flour"]);

        // Without vectors the same holds, and brackets are the last resort.
        let mut topics = vec![topic("Chess"), topic("Chess"), topic("Chess"), topic("Go")];
        let candidates = vec![
            vec!["Chess".into()],
            vec!["Chess".into(), "Go".into(), "Endgames".into()],
            vec!["Chess".into()],
            vec!["Go".into()],
        ];
        distinct_labels(&mut topics, &candidates);
        let labels: Vec<&str> = topics.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["Chess", "Endgames", "Chess (2)", "Go"]);
    }

    #[test]
    fn messages_without_vectors_follow_their_neighbour_and_nothing_panics() {
        let v = [1.0, 0.0];
        let msgs = [
            m("1", Role::User, "Tell me about chess openings", &v),
            ExtractMessage {
                id: "2",
                role: Role::Assistant,
                text: "The Italian game is a fine start.",
                vector: None,
            },
            ExtractMessage {
                id: "3",
                role: Role::User,
                text: "and the Sicilian",
                vector: None,
            },
        ];
        let got = extract_offline(&msgs);
        assert_eq!(got.topics.len(), 1);
        assert_eq!(got.topics[0].count, 3);
        assert!(extract_offline(&[]).topics.is_empty());
    }
}
