//! Compression (docs/context-planning.md): when the conversation passes a threshold share of its
//! budget, drop low-value messages, slide a window over the oldest, or replace old messages with a
//! summary. Pure: it decides *which* messages go verbatim and which range a summary replaces; the
//! server writes the summary (a model call) and the widget shows the same plan as a preview.

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// Tokens set aside for a summary when choosing what to summarize (the summarizer's output cap).
pub const SUMMARY_RESERVE: u32 = 400;

/// How the conversation is shortened.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Strategy {
    /// Replace the oldest messages with a model-written summary (costs a model call).
    Summarize,
    /// Leave out acknowledgements such as "ok" and "thanks".
    DropLowValue,
    /// Leave out the oldest messages.
    SlidingWindow,
    /// Drop low-value, then slide the window, then summarize what the window left out.
    #[default]
    Hybrid,
}

impl Strategy {
    /// Every strategy, in the order the settings list shows them.
    pub const ALL: [Strategy; 4] = [
        Strategy::Hybrid,
        Strategy::Summarize,
        Strategy::DropLowValue,
        Strategy::SlidingWindow,
    ];

    /// Wire name (`drop-low-value`, …; serde's and strum's, the same); `str::parse` reads it back.
    pub fn id(self) -> &'static str {
        self.into()
    }
}

/// A session's compression settings (docs/context-planning.md), persisted per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompressionSettings {
    pub enabled: bool,
    /// Compress when the conversation reaches this percentage of its budget (1–100).
    pub threshold: u8,
    pub strategy: Strategy,
    /// The last N messages are always sent intact.
    pub preserve_recent_messages: u32,
    /// Show the "↓" indicator in the meter and on replies.
    pub show_indicator: bool,
}

impl Default for CompressionSettings {
    fn default() -> Self {
        CompressionSettings {
            enabled: true,
            threshold: 80,
            strategy: Strategy::Hybrid,
            preserve_recent_messages: 5,
            show_indicator: true,
        }
    }
}

/// Most messages `preserve_recent_messages` may name.
pub const MAX_PRESERVE: u32 = 1000;

impl CompressionSettings {
    /// Checks the ranges; the message says which field is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.threshold) {
            return Err(format!(
                "threshold must be 1–100 (percent), got {}",
                self.threshold
            ));
        }
        if self.preserve_recent_messages > MAX_PRESERVE {
            return Err(format!(
                "preserveRecentMessages must be at most {MAX_PRESERVE}"
            ));
        }
        Ok(())
    }
}

/// A message as compression sees it: its text and its counted content tokens.
#[derive(Debug, Clone, Copy)]
pub struct CountedMessage<'a> {
    pub content: &'a str,
    pub tokens: u32,
}

/// What compression decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompressionOutcome {
    /// Indices of the messages sent verbatim, oldest first.
    pub kept: Vec<usize>,
    /// Messages replaced by one summary placed before the kept ones.
    pub summarized: Option<Range<usize>>,
    /// Messages not sent verbatim (summarized ones included).
    pub dropped_count: usize,
    /// Conversation tokens before compression (content plus per-message overhead).
    pub original_tokens: u32,
    /// Conversation tokens after, counting [`SUMMARY_RESERVE`] for a summary still to be written.
    pub compressed_tokens: u32,
    /// True when at least one message is left out or summarized.
    pub applied: bool,
    pub strategy: Strategy,
}

/// Low-value replies (docs/context-planning.md): the whole message, any case, optionally ending
/// in one period.
const LOW_VALUE: &[&str] = &[
    "ok",
    "okay",
    "sure",
    "thanks",
    "thank you",
    "got it",
    "understood",
    "right",
    "yes",
    "no",
    "yep",
    "nope",
    "sounds good",
    "perfect",
    "great",
    "awesome",
    "cool",
];

/// True for a message that carries no content worth its tokens ("ok", "Thanks.").
pub fn is_low_value(content: &str) -> bool {
    let t = content.trim();
    let t = t.strip_suffix('.').unwrap_or(t);
    LOW_VALUE.iter().any(|w| t.eq_ignore_ascii_case(w))
}

/// Tokens a list of messages costs, with `per_message` tokens of framing each
/// ([`crate::tokens::Framing`]).
pub fn conversation_tokens(messages: &[CountedMessage<'_>], per_message: u32) -> u32 {
    messages.iter().map(|m| m.tokens + per_message).sum()
}

/// Decides how to send `messages` when the conversation may use `allocation` tokens, each message
/// costing its tokens plus `per_message` ([`crate::tokens::Framing`]).
pub fn plan(
    messages: &[CountedMessage<'_>],
    allocation: u32,
    settings: &CompressionSettings,
    per_message: u32,
) -> CompressionOutcome {
    let original = conversation_tokens(messages, per_message);
    let target = (u64::from(allocation) * u64::from(settings.threshold) / 100) as u32;
    let mut outcome = CompressionOutcome {
        kept: (0..messages.len()).collect(),
        summarized: None,
        dropped_count: 0,
        original_tokens: original,
        compressed_tokens: original,
        applied: false,
        strategy: settings.strategy,
    };
    if !settings.enabled || original <= target {
        return outcome;
    }
    // The message being answered always goes, whatever the setting.
    let preserve = (settings.preserve_recent_messages as usize).max(1);
    let cost = |i: &usize| messages[*i].tokens + per_message;
    let total = |idx: &[usize]| idx.iter().map(cost).sum::<u32>();
    let mut kept = outcome.kept.clone();
    let mut summarized = None;
    match settings.strategy {
        Strategy::DropLowValue => kept = drop_low_value(messages, &kept, preserve),
        Strategy::SlidingWindow => {
            slide_window(&mut kept, target, preserve, &total);
        }
        Strategy::Summarize => summarized = summarize_oldest(&mut kept, target, preserve, &total),
        Strategy::Hybrid => {
            kept = drop_low_value(messages, &kept, preserve);
            if total(&kept) > target {
                let removed = slide_window(
                    &mut kept,
                    target.saturating_sub(SUMMARY_RESERVE),
                    preserve,
                    &total,
                );
                if total(&removed) > SUMMARY_RESERVE {
                    summarized = Some(removed[0]..removed[removed.len() - 1] + 1);
                }
            }
        }
    }
    if kept.len() == messages.len() {
        return outcome; // nothing could be left out (all preserved or none low-value)
    }
    outcome.dropped_count = messages.len() - kept.len();
    outcome.compressed_tokens = total(&kept)
        + if summarized.is_some() {
            SUMMARY_RESERVE
        } else {
            0
        };
    outcome.kept = kept;
    outcome.summarized = summarized;
    outcome.applied = true;
    outcome
}

/// Leaves out low-value messages, except the last `preserve`.
fn drop_low_value(messages: &[CountedMessage<'_>], kept: &[usize], preserve: usize) -> Vec<usize> {
    let split = kept.len().saturating_sub(preserve);
    let (old, recent) = kept.split_at(split);
    old.iter()
        .copied()
        .filter(|&i| !is_low_value(messages[i].content))
        .chain(recent.iter().copied())
        .collect()
}

/// Removes the oldest messages until `kept` fits `target` or only `preserve` remain; returns them.
fn slide_window(
    kept: &mut Vec<usize>,
    target: u32,
    preserve: usize,
    total: &dyn Fn(&[usize]) -> u32,
) -> Vec<usize> {
    let mut cut = 0;
    let mut sum = total(kept);
    while sum > target && kept.len() - cut > preserve {
        sum -= total(&kept[cut..=cut]);
        cut += 1;
    }
    kept.drain(..cut).collect()
}

/// Replaces the fewest oldest messages (never the last `preserve`) whose summary brings the
/// conversation under `target`; all older messages if none suffices. `None` when it would not help.
fn summarize_oldest(
    kept: &mut Vec<usize>,
    target: u32,
    preserve: usize,
    total: &dyn Fn(&[usize]) -> u32,
) -> Option<Range<usize>> {
    let compressible = kept.len().saturating_sub(preserve);
    let whole = total(kept);
    let mut take = 0;
    let mut removed = 0;
    while take < compressible {
        removed += total(&kept[take..=take]);
        take += 1;
        if whole - removed + SUMMARY_RESERVE <= target {
            break;
        }
    }
    if take == 0 || removed <= SUMMARY_RESERVE {
        return None;
    }
    let range = kept[0]..kept[take - 1] + 1;
    kept.drain(..take);
    Some(range)
}

#[cfg(test)]
mod tests;
