//! `cargo xtask sticky`: train the learned reading of standing instructions from the labelled
//! fixtures, and measure it on each fixture by leaving that fixture out of training.

use std::path::PathBuf;

use anyhow::Result;
use glassbox_analysis::sticky::{
    cues_say_so, is_standing_instruction,
    learned::Model,
    standing_by,
    train::{C, EXAMPLES, FIXTURES, Sample, fixture_samples, labelled_sets, train},
};

use crate::tools::root;

/// Where the committed model lives.
fn model_path() -> PathBuf {
    root().join("analysis/src/sticky/model.tsv")
}

/// Every labelled set, by file name.
fn fixtures() -> Result<Vec<(String, Vec<Sample>)>> {
    Ok(labelled_sets(&root().join(FIXTURES))?)
}

/// Trains on every labelled set and writes `analysis/src/sticky/model.tsv`.
pub fn train_committed() -> Result<()> {
    let fixtures = fixtures()?;
    let samples: Vec<Sample> = fixtures.iter().flat_map(|(_, s)| s.clone()).collect();
    let names: Vec<&str> = fixtures.iter().map(|(n, _)| n.as_str()).collect();
    let model = train(&samples, C);
    let header = format!(
        "Standing instructions, learned (analysis/src/sticky/learned.rs). Made by `cargo xtask sticky train`\n\
         from {} user messages ({} marked) of {FIXTURES}: {}. C = {C}.",
        samples.len(),
        samples.iter().filter(|s| s.sticky).count(),
        names.join(", ")
    );
    std::fs::write(model_path(), model.to_tsv(&header))?;
    println!(
        "wrote {} ({} n-grams)",
        model_path().display(),
        model.features.len()
    );
    Ok(())
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tp: usize,
    fp: usize,
    fn_: usize,
}

impl Counts {
    fn add(&mut self, said: bool, marked: bool) {
        match (said, marked) {
            (true, true) => self.tp += 1,
            (true, false) => self.fp += 1,
            (false, true) => self.fn_ += 1,
            (false, false) => {}
        }
    }
    fn cell(self) -> String {
        let p = self.tp as f64 / (self.tp + self.fp).max(1) as f64;
        let r = self.tp as f64 / (self.tp + self.fn_).max(1) as f64;
        format!("{p:.3} / {r:.3}")
    }
}

/// For each fixture: a model trained on the others, read on it. Prints precision / recall of the
/// cues alone (taught on every fixture, so not a fair reading), the model alone (p ≥ 0.5), and
/// the two together as `is_standing_instruction` decides.
pub fn leave_one_out() -> Result<()> {
    let fixtures = fixtures()?;
    println!("| held out | messages | marked | cues (taught on it) | learned ≥ 0.5 | together |");
    println!("|---|---|---|---|---|---|");
    let mut totals = [Counts::default(); 3];
    // The short examples always train; each conversation set is held out in turn.
    for (held, test) in fixtures.iter().filter(|(n, _)| n != EXAMPLES) {
        let rest: Vec<Sample> = fixtures
            .iter()
            .filter(|(n, _)| n != held)
            .flat_map(|(_, s)| s.clone())
            .collect();
        let model: Model = train(&rest, C);
        let mut counts = [Counts::default(); 3];
        for s in test {
            let said = [
                cues_say_so(&s.text),
                model.probability(&s.text) >= 0.5,
                standing_by(&s.text, |t| model.probability(t)),
            ];
            for (i, said) in said.into_iter().enumerate() {
                counts[i].add(said, s.sticky);
                totals[i].add(said, s.sticky);
            }
        }
        println!(
            "| {held} | {} | {} | {} | {} | {} |",
            test.len(),
            test.iter().filter(|s| s.sticky).count(),
            counts[0].cell(),
            counts[1].cell(),
            counts[2].cell()
        );
    }
    println!(
        "| all | | | {} | {} | {} |",
        totals[0].cell(),
        totals[1].cell(),
        totals[2].cell()
    );
    Ok(())
}

/// Reads a labelled set that is not (yet) among the fixtures with the committed reading (cues and
/// model, as the server decides): its first reading is the honest estimate for phrasing the
/// reading never saw. Prints precision / recall and every message it got wrong.
pub fn read(path: &str) -> Result<()> {
    let fixtures = std::fs::canonicalize(root().join(FIXTURES))?;
    if std::fs::canonicalize(path)?.starts_with(&fixtures) {
        anyhow::bail!(
            "{path} is among the fixtures the model was trained on, so this would not be a first \
             reading; `cargo xtask sticky lofo` reads each set held out"
        );
    }
    let samples = fixture_samples(&std::fs::read_to_string(path)?)?;
    let mut counts = Counts::default();
    let mut wrong = Vec::new();
    for s in &samples {
        let said = is_standing_instruction(&s.text);
        counts.add(said, s.sticky);
        if said != s.sticky {
            wrong.push((said, &s.text));
        }
    }
    println!(
        "{path}: {} user messages, {} marked; precision / recall {} ({} found, {} wrong, {} missed)",
        samples.len(),
        samples.iter().filter(|s| s.sticky).count(),
        counts.cell(),
        counts.tp,
        counts.fp,
        counts.fn_
    );
    for (said, text) in wrong {
        let what = if said { "said, not marked" } else { "missed" };
        println!("  {what}: {text}");
    }
    Ok(())
}
