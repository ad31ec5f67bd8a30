//! A learned reading of standing instructions: logistic regression over a message's character and
//! word n-grams (tf-idf), trained on the labelled fixtures in `tests/fixtures` by `cargo xtask
//! sticky train` (see [`super::train`]). It reads the many ways people state a lasting fact or
//! wish ("im vegan btw", "dammi del tu", "we're in Victoria, Australia") that no cue list names,
//! in any of the fixtures' languages; the rules in [`super`] and this model decide together.
//!
//! The model is the committed file `model.tsv`: a `bias` line, then one line per n-gram seen in at
//! least two training messages: its block (`c` characters, `w` words), the n-gram, its idf and its
//! weight.

use std::collections::HashMap;
use std::sync::OnceLock;

use thiserror::Error;

/// The committed model, made by `cargo xtask sticky train` from the fixtures.
const MODEL: &str = include_str!("model.tsv");

/// Character n-gram lengths, inside each word padded with a space on both sides.
const CHAR_NGRAMS: std::ops::RangeInclusive<usize> = 2..=5;

/// The two blocks of features, each scaled to unit length on its own.
/// Its tag in the model file (`c`, `w`) is its strum name; `str::parse` reads it back.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::EnumString,
)]
pub enum Block {
    /// Character n-grams of each word, padded with spaces (`" btw "`, `"vega"`).
    #[strum(serialize = "c")]
    Chars,
    /// Words of two or more letters and pairs of neighbouring words (`"from now"`).
    #[strum(serialize = "w")]
    Words,
}

/// One n-gram of the model: how rare it is in the training messages and how much it says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feature {
    /// Smoothed inverse document frequency, `ln((1 + n) / (1 + df)) + 1`.
    pub idf: f64,
    /// Weight in the logistic regression.
    pub weight: f64,
}

/// A trained model: a bias and weighted n-grams.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    /// The intercept.
    pub bias: f64,
    /// Every n-gram the model knows, by block.
    pub features: HashMap<(Block, String), Feature>,
}

/// A model file that does not read.
#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    /// The file has no `bias` line first.
    #[error("the model has no bias line")]
    NoBias,
    /// A line is not `block \t n-gram \t idf \t weight` with numbers.
    #[error("model line {0} does not read")]
    BadLine(usize),
}

/// The probability, by the committed model, that `text` (a user's message) is a standing
/// instruction.
pub fn probability(text: &str) -> f64 {
    static COMMITTED: OnceLock<Model> = OnceLock::new();
    COMMITTED
        .get_or_init(|| Model::parse(MODEL).expect("the committed model.tsv reads (tested)"))
        .probability(text)
}

impl Model {
    /// The probability that `text` is a standing instruction.
    pub fn probability(&self, text: &str) -> f64 {
        let mut z = self.bias;
        for (block, counts) in ngrams(text) {
            let mut dot = 0.0;
            let mut norm = 0.0;
            for (gram, count) in counts {
                if let Some(f) = self.features.get(&(block, gram)) {
                    let x = tf(count) * f.idf;
                    dot += x * f.weight;
                    norm += x * x;
                }
            }
            if norm > 0.0 {
                z += dot / norm.sqrt();
            }
        }
        sigmoid(z)
    }

    /// Reads a model file (see the module's doc).
    pub fn parse(text: &str) -> Result<Model, ModelError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.starts_with('#') && !l.is_empty());
        let bias = lines
            .next()
            .and_then(|(_, l)| l.strip_prefix("bias\t")?.parse::<f64>().ok())
            .filter(|b| b.is_finite())
            .ok_or(ModelError::NoBias)?;
        let mut features = HashMap::new();
        for (i, line) in lines {
            let bad = || ModelError::BadLine(i + 1);
            let mut fields = line.split('\t');
            let block: Block = fields
                .next()
                .and_then(|tag| tag.parse().ok())
                .ok_or_else(bad)?;
            let gram = fields.next().ok_or_else(bad)?;
            let mut number = || fields.next()?.parse::<f64>().ok().filter(|x| x.is_finite());
            let (Some(idf), Some(weight), None) = (number(), number(), fields.next()) else {
                return Err(bad());
            };
            if features
                .insert((block, gram.to_owned()), Feature { idf, weight })
                .is_some()
            {
                return Err(bad());
            }
        }
        Ok(Model { bias, features })
    }

    /// Writes the model file, n-grams in order (the same model writes the same bytes).
    pub fn to_tsv(&self, header: &str) -> String {
        let mut rows: Vec<_> = self.features.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = String::with_capacity(rows.len() * 32);
        for line in header.lines() {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!("bias\t{:.6}\n", self.bias));
        for ((block, gram), f) in rows {
            out.push_str(&format!(
                "{}\t{gram}\t{:.6}\t{:.6}\n",
                <&str>::from(block),
                f.idf,
                f.weight
            ));
        }
        out
    }
}

/// A message's n-grams, counted, in both blocks. The one reading of a message, for training and
/// for scoring.
pub fn ngrams(text: &str) -> [(Block, HashMap<String, u32>); 2] {
    let lower = text.to_lowercase().replace(['\u{2019}', '\u{2018}'], "'");
    let mut chars = HashMap::new();
    for word in lower.split_whitespace() {
        let padded: Vec<char> = std::iter::once(' ')
            .chain(word.chars())
            .chain(std::iter::once(' '))
            .collect();
        for n in CHAR_NGRAMS {
            for gram in padded.windows(n) {
                *chars.entry(gram.iter().collect()).or_insert(0) += 1;
            }
        }
    }
    let tokens: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() >= 2)
        .collect();
    let mut words = HashMap::new();
    for (i, w) in tokens.iter().enumerate() {
        *words.entry((*w).to_owned()).or_insert(0) += 1;
        if let Some(next) = tokens.get(i + 1) {
            *words.entry(format!("{w} {next}")).or_insert(0) += 1;
        }
    }
    [(Block::Chars, chars), (Block::Words, words)]
}

/// Sublinear term frequency: `1 + ln(count)`.
pub fn tf(count: u32) -> f64 {
    1.0 + f64::from(count).ln()
}

/// The logistic function.
pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ngrams_read_words_padded_and_pairs_of_words() {
        let [(_, chars), (_, words)] = ngrams("Im VEGAN btw’s");
        assert_eq!(chars.get(" im"), Some(&1));
        assert_eq!(chars.get("an "), Some(&1));
        assert_eq!(chars.get(" btw'"), Some(&1));
        assert_eq!(words.get("im vegan"), Some(&1));
        assert_eq!(words.get("vegan btw"), Some(&1));
        // One-letter words are not words ("btw's" splits into "btw" and "s").
        assert_eq!(words.get("btw s"), None);
        assert_eq!(words.len(), 5);
    }

    #[test]
    fn a_model_reads_back_what_it_wrote() {
        let mut model = Model {
            bias: -1.5,
            ..Model::default()
        };
        model.features.insert(
            (Block::Words, "from now".into()),
            Feature {
                idf: 2.0,
                weight: 3.25,
            },
        );
        model.features.insert(
            (Block::Chars, " btw ".into()),
            Feature {
                idf: 1.5,
                weight: 1.0,
            },
        );
        let read = Model::parse(&model.to_tsv("a test")).unwrap();
        assert_eq!(read, model);
        // Only "from now" is known in its block, so it alone makes the block's unit vector.
        let p = model.probability("From now on");
        assert!((p - sigmoid(-1.5 + 3.25)).abs() < 1e-12, "{p}");
        assert_eq!(Model::parse("w\tx\t1\t2"), Err(ModelError::NoBias));
        // Numbers that are not, numbers that are not finite, extra fields, an n-gram twice.
        for bad in [
            "w\tx\tone\t2",
            "w\tx\tNaN\t2",
            "w\tx\t1\tinf",
            "w\tx\t1\t2\t3",
            "w\tx\t1\t2\nw\tx\t1\t2",
        ] {
            let line = if bad.contains('\n') { 3 } else { 2 };
            assert_eq!(
                Model::parse(&format!("bias\t0\n{bad}")),
                Err(ModelError::BadLine(line)),
                "{bad:?}"
            );
        }
        assert_eq!(Model::parse("bias\tNaN"), Err(ModelError::NoBias));
    }

    #[test]
    fn the_committed_model_reads() {
        let model = Model::parse(MODEL).unwrap();
        assert!(model.features.len() > 10_000, "{}", model.features.len());
        assert!(probability("im vegan btw, keep that in mind for recipes") > 0.5);
        assert!(probability("what time is it in Tokyo?") < 0.5);
    }
}
