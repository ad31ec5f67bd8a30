//! Training the learned reading ([`super::learned`]) from labelled conversations: the vocabulary
//! (n-grams in at least two messages), tf-idf, and an L2-regularised logistic regression with
//! balanced class weights, minimised by L-BFGS. Deterministic: the same samples give the same
//! model, so the committed `model.tsv` can be checked against the fixtures.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

use super::learned::{Block, Feature, Model, ngrams, sigmoid, tf};

/// Inverse regularisation strength (larger fits the training messages more closely). Chosen by
/// leaving one fixture out (`cargo xtask sticky lofo`).
pub const C: f64 = 4.0;
/// An n-gram joins the vocabulary when at least this many training messages hold it.
const MIN_DF: usize = 2;
/// L-BFGS: remembered steps, iteration cap, and the gradient size that counts as converged.
const HISTORY: usize = 10;
const MAX_ITERATIONS: usize = 2_000;
const TOLERANCE: f64 = 1e-5;

/// One user message and whether it is marked as a standing instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The message.
    pub text: String,
    /// Marked by hand as a standing instruction.
    pub sticky: bool,
}

/// Where the labelled sets are, from the workspace root.
pub const FIXTURES: &str = "tests/fixtures";
/// The file of short labelled messages (the others are conversations).
pub const EXAMPLES: &str = "sticky-examples.json";

/// A labelled set that does not read.
#[derive(Debug, Error)]
pub enum TrainError {
    /// The directory or a file could not be read.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// A file is not a labelled set.
    #[error("{0}: {1}")]
    Json(String, serde_json::Error),
}

#[derive(Deserialize)]
struct Conversation {
    messages: Vec<FixtureMessage>,
}

#[derive(Deserialize)]
struct FixtureMessage {
    role: String,
    text: String,
    #[serde(default)]
    sticky: bool,
}

#[derive(Deserialize)]
struct Examples {
    standing: Vec<String>,
    ordinary: Vec<String>,
}

/// The user messages of a conversation fixture (`topic-conversations*.json`).
pub fn fixture_samples(json: &str) -> Result<Vec<Sample>, serde_json::Error> {
    let conversations: Vec<Conversation> = serde_json::from_str(json)?;
    Ok(conversations
        .into_iter()
        .flat_map(|c| c.messages)
        .filter(|m| m.role == "user")
        .map(|m| Sample {
            text: m.text,
            sticky: m.sticky,
        })
        .collect())
}

/// The messages of the short examples file ([`EXAMPLES`]).
pub fn example_samples(json: &str) -> Result<Vec<Sample>, serde_json::Error> {
    let examples: Examples = serde_json::from_str(json)?;
    let marked = |sticky| move |text| Sample { text, sticky };
    Ok(examples
        .standing
        .into_iter()
        .map(marked(true))
        .chain(examples.ordinary.into_iter().map(marked(false)))
        .collect())
}

/// Every labelled set in `dir` ([`FIXTURES`]) by file name, in name order: the conversation
/// fixtures and the examples. What the committed model is trained on.
pub fn labelled_sets(dir: &Path) -> Result<Vec<(String, Vec<Sample>)>, TrainError> {
    let io = |e| TrainError::Io(dir.display().to_string(), e);
    let mut sets = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let conversations = name.starts_with("topic-conversations") && name.ends_with(".json");
        if !conversations && name != EXAMPLES {
            continue;
        }
        let json = std::fs::read_to_string(&path).map_err(|e| TrainError::Io(name.clone(), e))?;
        let samples = if conversations {
            fixture_samples(&json)
        } else {
            example_samples(&json)
        };
        sets.push((
            name.clone(),
            samples.map_err(|e| TrainError::Json(name, e))?,
        ));
    }
    sets.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(sets)
}

/// Trains a model on `samples` with regularisation `c`.
pub fn train(samples: &[Sample], c: f64) -> Model {
    let counted: Vec<_> = samples.iter().map(|s| ngrams(&s.text)).collect();
    // Vocabulary in a fixed order, so the sums below run in the same order every time.
    let mut df: BTreeMap<(Block, &str), usize> = BTreeMap::new();
    for blocks in &counted {
        for (block, grams) in blocks {
            for gram in grams.keys() {
                *df.entry((*block, gram.as_str())).or_insert(0) += 1;
            }
        }
    }
    df.retain(|_, n| *n >= MIN_DF);
    let n = samples.len() as f64;
    let vocab: Vec<((Block, &str), f64)> = df
        .iter()
        .map(|(k, &d)| (*k, ((1.0 + n) / (1.0 + d as f64)).ln() + 1.0))
        .collect();
    let index: HashMap<(Block, &str), usize> = vocab
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (*k, i))
        .collect();
    let rows: Vec<Vec<(usize, f64)>> = counted
        .iter()
        .map(|blocks| {
            let mut row = Vec::new();
            for (block, grams) in blocks {
                let start = row.len();
                for (gram, &count) in grams {
                    if let Some(&j) = index.get(&(*block, gram.as_str())) {
                        row.push((j, tf(count) * vocab[j].1));
                    }
                }
                // In vocabulary order, so the norm sums the same way every time.
                row[start..].sort_by_key(|&(j, _)| j);
                let norm = row[start..].iter().map(|(_, x)| x * x).sum::<f64>().sqrt();
                for (_, x) in &mut row[start..] {
                    *x /= norm;
                }
            }
            row
        })
        .collect();
    let positives = samples.iter().filter(|s| s.sticky).count().max(1) as f64;
    let negatives = (n - positives).max(1.0);
    let problem = Problem {
        rows: &rows,
        labels: samples
            .iter()
            .map(|s| if s.sticky { 1.0 } else { -1.0 })
            .collect(),
        // Balanced: each class weighs as much as the other in all.
        weights: samples
            .iter()
            .map(|s| n / (2.0 * if s.sticky { positives } else { negatives }))
            .collect(),
        c,
        dims: vocab.len(),
    };
    let theta = lbfgs(&problem);
    Model {
        bias: theta[vocab.len()],
        features: vocab
            .iter()
            .zip(&theta)
            .map(|(((block, gram), idf), &weight)| {
                ((*block, (*gram).to_owned()), Feature { idf: *idf, weight })
            })
            .collect(),
    }
}

/// The objective: `½‖w‖² + c Σ sᵢ ln(1 + e^(−yᵢ zᵢ))`, the bias not regularised.
struct Problem<'a> {
    rows: &'a [Vec<(usize, f64)>],
    labels: Vec<f64>,
    weights: Vec<f64>,
    c: f64,
    dims: usize,
}

impl Problem<'_> {
    /// The objective and its gradient at `theta` (weights, then the bias).
    fn evaluate(&self, theta: &[f64]) -> (f64, Vec<f64>) {
        let bias = theta[self.dims];
        let mut grad: Vec<f64> = theta.to_vec();
        grad[self.dims] = 0.0;
        let mut value = 0.5 * theta[..self.dims].iter().map(|w| w * w).sum::<f64>();
        for ((row, &y), &s) in self.rows.iter().zip(&self.labels).zip(&self.weights) {
            let z = bias + row.iter().map(|&(j, x)| theta[j] * x).sum::<f64>();
            let margin = -y * z;
            // ln(1 + e^m), stable for large |m|.
            value += self.c * s * (margin.max(0.0) + (-margin.abs()).exp().ln_1p());
            let d = self.c * s * -y * sigmoid(margin);
            for &(j, x) in row {
                grad[j] += d * x;
            }
            grad[self.dims] += d;
        }
        (value, grad)
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Limited-memory BFGS with a backtracking (Armijo) line search, from zero.
fn lbfgs(problem: &Problem) -> Vec<f64> {
    let mut theta = vec![0.0; problem.dims + 1];
    let (mut value, mut grad) = problem.evaluate(&theta);
    let mut history: Vec<(Vec<f64>, Vec<f64>, f64)> = Vec::new();
    for _ in 0..MAX_ITERATIONS {
        if grad.iter().fold(0.0f64, |m, g| m.max(g.abs())) < TOLERANCE {
            break;
        }
        // Two-loop recursion: the direction −H∇.
        let mut q = grad.clone();
        let mut alphas = Vec::with_capacity(history.len());
        for (s, y, rho) in history.iter().rev() {
            let a = rho * dot(s, &q);
            q.iter_mut().zip(y).for_each(|(qi, yi)| *qi -= a * yi);
            alphas.push(a);
        }
        let gamma = history
            .last()
            .map_or(1.0 / dot(&grad, &grad).sqrt(), |(s, y, _)| {
                dot(s, y) / dot(y, y)
            });
        q.iter_mut().for_each(|qi| *qi *= gamma);
        for ((s, y, rho), a) in history.iter().zip(alphas.iter().rev()) {
            let b = rho * dot(y, &q);
            q.iter_mut().zip(s).for_each(|(qi, si)| *qi += (a - b) * si);
        }
        let slope = -dot(&grad, &q);
        if slope >= 0.0 {
            // Not a descent direction (numerical trouble): start the memory again.
            history.clear();
            continue;
        }
        let mut step = 1.0;
        let found = loop {
            let candidate: Vec<f64> = theta.iter().zip(&q).map(|(t, d)| t - step * d).collect();
            let (v, g) = problem.evaluate(&candidate);
            if v <= value + 1e-4 * step * slope {
                break Some((candidate, v, g));
            }
            if step < 1e-12 {
                break None;
            }
            step *= 0.5;
        };
        let Some((next, next_value, next_grad)) = found else {
            // No step along this direction descends: try the gradient itself, else stop here.
            if history.is_empty() {
                break;
            }
            history.clear();
            continue;
        };
        let s: Vec<f64> = next.iter().zip(&theta).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = next_grad.iter().zip(&grad).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 {
            if history.len() == HISTORY {
                history.remove(0);
            }
            history.push((s, y, 1.0 / sy));
        }
        // At the objective's precision a step no longer lowers it: as close as it gets.
        let stalled = next_value >= value;
        (theta, value, grad) = (next, next_value, next_grad);
        if stalled {
            break;
        }
    }
    theta
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, sticky: bool) -> Sample {
        Sample {
            text: text.into(),
            sticky,
        }
    }

    #[test]
    fn learns_a_separable_set_and_leaves_out_rare_ngrams() {
        let samples = [
            sample("from now on answer briefly", true),
            sample("from now on no emojis", true),
            sample("btw im vegan so no meat", true),
            sample("btw we live in spain", true),
            sample("what is the capital of peru", false),
            sample("what is a good name for a cat", false),
            sample("how do i fix a flat tyre", false),
            sample("how do i bake bread", false),
        ];
        let model = train(&samples, C);
        for s in &samples {
            let p = model.probability(&s.text);
            assert_eq!(p > 0.5, s.sticky, "{}: {p}", s.text);
        }
        // "peru" is in one message only.
        assert!(!model.features.contains_key(&(Block::Words, "peru".into())));
        assert!(
            model
                .features
                .contains_key(&(Block::Words, "from now".into()))
        );
        assert_eq!(
            train(&samples, C),
            model,
            "the same samples give the same model"
        );
    }

    #[test]
    fn reads_the_user_messages_of_a_fixture() {
        let json = r#"[{"id":"x","messages":[
            {"role":"user","text":"be brief","sticky":true},
            {"role":"assistant","text":"ok","topic":"t"},
            {"role":"user","text":"why?","topic":"t"}]}]"#;
        assert_eq!(
            fixture_samples(json).unwrap(),
            vec![sample("be brief", true), sample("why?", false)]
        );
        assert!(fixture_samples("[{}]").is_err());
    }

    /// The four newest sets, each written apart from the rules and never taught to the cues, read
    /// with a model trained without them: the estimate for phrasing nobody has seen (0.938 / 0.866
    /// over 157 instructions when this test was written; each set's first reading, with
    /// `cargo xtask sticky read`, gave 0.910 / 0.803 for blind9 and blind10 together, 0.974 / 0.902
    /// for blind11 and 0.950 / 0.950 for blind12). New misses belong in a new set, not in the cues.
    #[test]
    fn sets_held_out_of_training_still_read_well() {
        const HELD_OUT: [&str; 4] = [
            "topic-conversations-blind11.json",
            "topic-conversations-blind12.json",
            "topic-conversations-blind9.json",
            "topic-conversations-blind10.json",
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(FIXTURES);
        let sets = labelled_sets(&dir).unwrap();
        let (held, rest): (Vec<_>, Vec<_>) = sets
            .into_iter()
            .partition(|(name, _)| HELD_OUT.contains(&name.as_str()));
        assert_eq!(held.len(), HELD_OUT.len());
        let training: Vec<Sample> = rest.into_iter().flat_map(|(_, s)| s).collect();
        let model = train(&training, C);
        let (mut tp, mut fp, mut fn_) = (0, 0, 0);
        for sample in held.iter().flat_map(|(_, s)| s) {
            match (
                super::super::standing_by(&sample.text, |t| model.probability(t)),
                sample.sticky,
            ) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fn_ += 1,
                (false, false) => {}
            }
        }
        let precision = tp as f64 / (tp + fp).max(1) as f64;
        let recall = tp as f64 / (tp + fn_).max(1) as f64;
        eprintln!(
            "held out: precision {precision:.3}, recall {recall:.3} ({tp} found, {fp} wrong, {fn_} missed)"
        );
        assert!(
            precision >= 0.9 && recall >= 0.8,
            "precision {precision:.3}, recall {recall:.3}"
        );
    }

    /// The committed `model.tsv` is what `cargo xtask sticky train` makes of the labelled sets:
    /// a changed fixture without a retrained model fails here.
    #[test]
    fn the_committed_model_is_what_the_labelled_sets_train() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(FIXTURES);
        let samples: Vec<Sample> = labelled_sets(&dir)
            .unwrap()
            .into_iter()
            .flat_map(|(_, s)| s)
            .collect();
        let fresh = train(&samples, C);
        let committed = Model::parse(include_str!("model.tsv")).unwrap();
        assert_eq!(
            fresh.features.len(),
            committed.features.len(),
            "retrain: cargo xtask sticky train"
        );
        // The vocabulary and idf exactly (as written, 6 decimals); the weights as close as two
        // solutions stopped at a gradient of 1e-5 can differ (another libm may take other steps).
        assert!((fresh.bias - committed.bias).abs() < 1e-4);
        for (key, f) in &fresh.features {
            let c = committed.features.get(key);
            assert!(
                c.is_some_and(
                    |c| (c.weight - f.weight).abs() < 1e-4 && (c.idf - f.idf).abs() < 1e-6
                ),
                "{key:?}: fresh {f:?}, committed {c:?} (retrain: cargo xtask sticky train)"
            );
        }
    }
}
