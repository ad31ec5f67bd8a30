//! Similarity scores as receipts and item choices carry them.

use serde::{Deserialize, Serialize};

/// A cosine similarity kept to three decimals (so receipts compare exactly); a number on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "f64", from = "f64")]
pub struct Score(i16);

impl Score {
    /// The score of `cosine` (clamped to -1..=1).
    pub fn of(cosine: f32) -> Self {
        Self((cosine.clamp(-1.0, 1.0) * 1000.0).round() as i16)
    }

    /// The score as a number.
    pub fn value(self) -> f32 {
        f32::from(self.0) / 1000.0
    }
}

impl From<Score> for f64 {
    fn from(s: Score) -> f64 {
        f64::from(s.0) / 1000.0
    }
}

impl From<f64> for Score {
    fn from(v: f64) -> Self {
        Score::of(v as f32)
    }
}
