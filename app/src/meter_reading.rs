//! Builds what the token meter shows from counted texts: the same `core` plan the server sends
//! requests with (`context::plan_turn`), so the preview matches the request that will be sent.

use glassbox_core::context::{
    Choice, ContextInfo, MeterReading, Overflow, Selection, TurnInput, TurnMessage, TurnSources,
    plan_turn,
};
use glassbox_core::tokens::estimate;
use glassbox_core::wire::PageContext;
use leptos::prelude::GetUntracked;

use crate::token_counts::{TokenCounts, VocabState};

/// One meter reading with how much to trust it.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterView {
    pub reading: MeterReading,
    /// What must be sent does not fit the window (the server will refuse it with `context_overflow`).
    pub overflow: Option<Overflow>,
    /// Some counts are still estimates (vocabulary loading or an answer pending): shown with "~".
    pub estimated: bool,
    /// The vocabulary is the model's own (false: a close approximation).
    pub exact_vocab: bool,
    pub encoding: String,
    pub vocab: VocabState,
}

/// What hosts see of a reading (`glassbox:meter` events, `reading()`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeterSummary {
    pub used: u32,
    pub limit: u32,
    pub percent: u32,
    pub original_percent: Option<u32>,
    pub state: glassbox_core::context::MeterState,
    pub estimated: bool,
    pub encoding: String,
    pub breakdown: glassbox_core::context::TokenBreakdown,
}

impl MeterView {
    /// The reading as hosts see it.
    pub fn summary(&self) -> MeterSummary {
        MeterSummary {
            used: self.reading.used,
            limit: self.reading.limit,
            percent: self.reading.percent,
            original_percent: self.reading.original_percent,
            state: self.reading.state,
            estimated: self.estimated,
            encoding: self.encoding.clone(),
            breakdown: self.reading.breakdown,
        }
    }
}

/// Counts `messages` (oldest first, the message being written last) and reads the meter, through
/// the same plan the server sends requests with; `choices` say which history goes (topic filter,
/// pins, excludes), one per message from the first.
pub fn read(
    counts: &TokenCounts,
    info: &ContextInfo,
    messages: &[TurnMessage<'_>],
    page_context: Option<&PageContext>,
    choices: Option<&[Choice]>,
) -> MeterView {
    let mut estimated = false;
    let mut count = |id: Option<&str>, text: &str| {
        let exact = match id {
            Some(id) => counts.count_message(id, text),
            None => counts.count(text),
        };
        exact.unwrap_or_else(|| {
            estimated = true;
            estimate(text) as u32
        })
    };
    let plan = plan_turn(
        &TurnInput {
            info,
            messages,
            sources: TurnSources {
                page_context,
                selection: choices.map(|choices| Selection {
                    choices,
                    filter: None,
                }),
                ..Default::default()
            },
        },
        &mut count,
    );
    MeterView {
        reading: plan.reading,
        overflow: plan.receipt.overflow,
        estimated,
        exact_vocab: info.exact,
        encoding: info.encoding.clone(),
        vocab: counts.vocab.get_untracked(),
    }
}
