//! Builds what the token meter shows from counted texts: the same `core` budget and compression
//! plan the server applies, so the preview matches the request that will be sent.

use std::borrow::Cow;

use glassbox_core::context::compression::CountedMessage;
use glassbox_core::context::{ContextInfo, MeterReading, meter};
use glassbox_core::prompt::page_context_segment;
use glassbox_core::tokens::estimate;
use glassbox_core::wire::PageContext;
use leptos::prelude::GetUntracked;

use crate::token_counts::{TokenCounts, VocabState};

/// One meter reading with how much to trust it.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterView {
    pub reading: MeterReading,
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

/// A text to count: stored messages carry their id so their key is cached.
pub struct MeterText<'a> {
    pub id: Option<&'a str>,
    pub text: Cow<'a, str>,
}

/// Counts `texts` (oldest first, the message being written last) and reads the meter.
pub fn read(
    counts: &TokenCounts,
    info: &ContextInfo,
    texts: &[MeterText<'_>],
    page_context: Option<&PageContext>,
) -> MeterView {
    let mut estimated = false;
    let mut tokens_of = |id: Option<&str>, text: &str| {
        let exact = match id {
            Some(id) => counts.count_message(id, text),
            None => counts.count(text),
        };
        exact.unwrap_or_else(|| {
            estimated = true;
            estimate(text) as u32
        })
    };
    let counted: Vec<CountedMessage> = texts
        .iter()
        .map(|t| CountedMessage {
            content: &t.text,
            tokens: tokens_of(t.id, &t.text),
        })
        .collect();
    let knowledge = page_context.map_or(0, |c| tokens_of(None, &page_context_segment(c)));
    MeterView {
        reading: meter::read(info, &counted, knowledge),
        estimated,
        exact_vocab: info.exact,
        encoding: info.encoding.clone(),
        vocab: counts.vocab.get_untracked(),
    }
}
