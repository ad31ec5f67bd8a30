//! What the token meter shows, computed the same way in the widget (preview) and on the server
//! (the request actually sent): budget, compression plan, percentage and state.

use serde::{Deserialize, Serialize};

use super::budget::{TokenBreakdown, calculate_budget};
use super::compression::{self, CompressionSettings, CountedMessage, Strategy};
use super::settings::SessionSettings;
use crate::tokens::Framing;

/// A session's context parameters, sent by the server with the session and after every change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextInfo {
    pub model: String,
    /// The model's window in tokens.
    pub context_limit: u32,
    /// Vocabulary that counts for this model (`o200k_base`, `cl100k_base`).
    pub encoding: String,
    /// False when the vocabulary is not the model's own (counts are close, not exact).
    pub exact: bool,
    /// Tokens of the server's system prompt (its text stays on the server).
    pub system_prompt_tokens: u32,
    /// Tokens of the tools offered with every message (definitions and the instructions about them).
    #[serde(default)]
    pub tool_tokens: u32,
    /// Tokens of user memories (none yet; the plan adds the pinned and standing messages it
    /// protects).
    pub memory_tokens: u32,
    /// Tokens reserved for the reply.
    pub output_reserve: u32,
    pub compression: CompressionSettings,
}

/// What a server knows besides the model and the session's settings: the model-window overrides,
/// the reply cap, and the tokens of what it sends with every message (counted in the model's
/// encoding, `encoding_for(model).0`).
#[derive(Debug, Clone, Copy)]
pub struct ServerFacts<'a> {
    /// `(model, window)` overrides of the built-in table.
    pub model_limits: &'a [(String, u32)],
    /// The configured reply cap.
    pub max_output_tokens: u32,
    pub system_prompt_tokens: u32,
    pub tool_tokens: u32,
    /// Whether the encoding's vocabulary is loaded (else counts are estimates).
    pub vocabulary_loaded: bool,
}

impl ContextInfo {
    /// The meter's parameters for `model` under a session's `settings`: derived, never stored, so
    /// each connection of a session gets the meter of the model it talks to. A small window never
    /// gives more than a quarter of itself to the reply.
    pub fn derive(model: &str, settings: &SessionSettings, facts: ServerFacts<'_>) -> Self {
        let (encoding, exact) = super::encoding_for(model);
        let limit = super::context_limit(model, facts.model_limits);
        ContextInfo {
            model: model.to_owned(),
            context_limit: limit,
            encoding: encoding.to_owned(),
            exact: exact && facts.vocabulary_loaded,
            system_prompt_tokens: facts.system_prompt_tokens,
            tool_tokens: facts.tool_tokens,
            memory_tokens: 0,
            output_reserve: facts.max_output_tokens.min(limit / 4),
            compression: settings.compression,
        }
    }
}

/// Compression as applied to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompressionReport {
    pub strategy: Strategy,
    pub original_tokens: u32,
    pub compressed_tokens: u32,
    pub saved_tokens: u32,
    pub dropped_count: u32,
    pub summarized_count: u32,
}

/// What was sent to the model for one reply, stored on the reply beside the provider's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextReport {
    /// Our count of the request's input tokens (parts plus the reply's priming).
    pub counted_input_tokens: u32,
    pub breakdown: TokenBreakdown,
    pub encoding: String,
    pub exact: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<CompressionReport>,
}

/// Meter states (docs/context-planning.md): warning above 90 %, critical above 98 %.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum MeterState {
    Standard,
    Compressed,
    Warning,
    Critical,
}

/// One reading of the meter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeterReading {
    pub used: u32,
    pub limit: u32,
    pub percent: u32,
    /// Percentage before compression, when compression applies and its indicator is on.
    pub original_percent: Option<u32>,
    pub state: MeterState,
    pub breakdown: TokenBreakdown,
    pub compression: Option<CompressionReport>,
    /// Indices of the messages sent verbatim, and the range a summary replaces.
    pub plan: compression::CompressionOutcome,
}

/// Rounds half up, as JavaScript's `Math.round(used / max * 100)` does.
pub fn percent(used: u32, limit: u32) -> u32 {
    if limit == 0 {
        return 100;
    }
    ((u64::from(used) * 200 + u64::from(limit)) / (2 * u64::from(limit))) as u32
}

/// The state for a percentage; `compressed` when compression is applied and shown.
pub fn state(percent: u32, compressed: bool) -> MeterState {
    if percent > 98 {
        MeterState::Critical
    } else if percent > 90 {
        MeterState::Warning
    } else if compressed {
        MeterState::Compressed
    } else {
        MeterState::Standard
    }
}

/// Reads the meter for `messages` (the conversation compression works on, the message being
/// written last) beside `others`, the tokens of every other part of the request (its
/// `conversation` is ignored), under `info`. Messages and the reply's priming are framed as
/// `info.encoding`'s family frames them ([`Framing::for_encoding`]).
pub fn read(
    info: &ContextInfo,
    messages: &[CountedMessage<'_>],
    others: TokenBreakdown,
) -> MeterReading {
    let framing = Framing::for_encoding(&info.encoding);
    let conversation = compression::conversation_tokens(messages, framing.per_message);
    let used = TokenBreakdown {
        conversation,
        ..others
    };
    let budget = calculate_budget(info.context_limit, info.output_reserve, used);
    let plan = compression::plan(
        messages,
        budget.conversation.allocated,
        &info.compression,
        framing.per_message,
    );
    let breakdown = TokenBreakdown {
        conversation: plan.compressed_tokens,
        ..used
    };
    let total = breakdown.total() + framing.reply_priming;
    let pct = percent(total, info.context_limit);
    let report = plan.applied.then(|| CompressionReport {
        strategy: plan.strategy,
        original_tokens: plan.original_tokens,
        compressed_tokens: plan.compressed_tokens,
        saved_tokens: plan.original_tokens.saturating_sub(plan.compressed_tokens),
        dropped_count: plan.dropped_count as u32,
        summarized_count: plan.summarized.as_ref().map_or(0, |r| r.len() as u32),
    });
    let shown = report.is_some() && info.compression.show_indicator;
    MeterReading {
        used: total,
        limit: info.context_limit,
        percent: pct,
        original_percent: shown
            .then(|| percent(used.total() + framing.reply_priming, info.context_limit)),
        state: state(pct, shown),
        breakdown,
        compression: report,
        plan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_is_derived_per_model_from_the_sessions_settings() {
        let mut settings = SessionSettings::default();
        settings.compression.threshold = 55;
        let facts = ServerFacts {
            model_limits: &[("tiny-model".to_owned(), 8_000)],
            max_output_tokens: 4_096,
            system_prompt_tokens: 12,
            tool_tokens: 300,
            vocabulary_loaded: true,
        };
        let big = ContextInfo::derive("gpt-4o", &settings, facts);
        assert_eq!(
            (big.context_limit, big.encoding.as_str(), big.exact),
            (128_000, "o200k_base", true)
        );
        assert_eq!(
            (
                big.output_reserve,
                big.tool_tokens,
                big.compression.threshold
            ),
            (4_096, 300, 55)
        );
        let tiny = ContextInfo::derive("tiny-model", &settings, facts);
        assert_eq!(tiny.context_limit, 8_000);
        assert_eq!(
            tiny.output_reserve, 2_000,
            "at most a quarter of a small window"
        );
        assert!(
            !tiny.exact,
            "an unknown model is counted with o200k, approximately"
        );
        let unloaded = ContextInfo::derive(
            "gpt-4o",
            &settings,
            ServerFacts {
                vocabulary_loaded: false,
                ..facts
            },
        );
        assert!(!unloaded.exact);
    }

    fn info(limit: u32, compression: CompressionSettings) -> ContextInfo {
        ContextInfo {
            model: "m".into(),
            context_limit: limit,
            encoding: "o200k_base".into(),
            exact: true,
            system_prompt_tokens: 97,
            memory_tokens: 0,
            tool_tokens: 0,
            output_reserve: 0,
            compression,
        }
    }

    /// The system prompt of [`info`] and nothing else besides the conversation.
    fn others() -> TokenBreakdown {
        TokenBreakdown {
            system_prompt: 97,
            ..Default::default()
        }
    }

    #[test]
    fn percent_rounds_half_up_like_math_round() {
        assert_eq!(percent(78, 100), 78);
        assert_eq!(percent(785, 1000), 79);
        assert_eq!(percent(784, 1000), 78);
        assert_eq!(percent(0, 0), 100);
    }

    #[test]
    fn states_change_above_90_and_98() {
        assert_eq!(state(90, false), MeterState::Standard);
        assert_eq!(state(91, false), MeterState::Warning);
        assert_eq!(state(98, true), MeterState::Warning);
        assert_eq!(state(99, false), MeterState::Critical);
        assert_eq!(state(50, true), MeterState::Compressed);
    }

    #[test]
    fn uncompressed_reading_sums_every_part() {
        let off = CompressionSettings {
            enabled: false,
            ..Default::default()
        };
        let msgs = [
            CountedMessage {
                content: "hi",
                tokens: 396,
            },
            CountedMessage {
                content: "yo",
                tokens: 496,
            },
        ];
        let r = read(&info(1000, off), &msgs, others());
        // 97 system + (400 + 500) conversation + 3 priming = 1000 → 100 %.
        assert_eq!(r.used, 1000);
        assert_eq!(r.percent, 100);
        assert_eq!(r.state, MeterState::Critical);
        assert_eq!(r.original_percent, None);
    }

    #[test]
    fn compressed_reading_shows_both_percentages() {
        let msgs: Vec<CountedMessage> = (0..20)
            .map(|_| CountedMessage {
                content: "a long answer",
                tokens: 96,
            })
            .collect();
        // 2000 conversation tokens in a 2000 window.
        let r = read(
            &info(
                2000,
                CompressionSettings {
                    strategy: Strategy::SlidingWindow,
                    ..Default::default()
                },
            ),
            &msgs,
            others(),
        );
        assert_eq!(r.original_percent, Some(percent(2000 + 97 + 3, 2000)));
        assert!(r.percent <= 80, "{}", r.percent);
        assert_eq!(r.state, MeterState::Compressed);
        let c = r.compression.unwrap();
        assert_eq!(c.saved_tokens, c.original_tokens - c.compressed_tokens);
    }
}
