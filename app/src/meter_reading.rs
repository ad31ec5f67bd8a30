//! Builds what the token meter shows from counted texts: the same `core` plan the server sends
//! requests with (`context::plan_turn`), so the preview matches the request that will be sent.

use glassbox_core::context::items::item_heading;
use glassbox_core::context::items::{ItemKind, RequestItem};
use glassbox_core::context::plan::{ChosenItem, ItemSearch, ItemsInput};
use glassbox_core::context::receipt::PartKind;
use glassbox_core::context::{
    Choice, ContextInfo, MeterReading, Overflow, Receipt, Selection, TurnInput, TurnMessage,
    TurnSources, plan_turn,
};
use glassbox_core::tokens::estimate;
use glassbox_core::vocab::PageContext;
use glassbox_core::wire::ReceiptJson;
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

/// The rules and references a receipt's request carried, as the meter's plan takes them: with
/// the server's count of each entry (the widget never has their texts). The first item of each
/// segment carried the segment's heading in its part; the plan adds the heading again.
struct CountedItems {
    items: Vec<(RequestItem, i32, String, u32)>,
}

impl CountedItems {
    fn of(receipt: &Receipt, heading_tokens: &mut dyn FnMut(&str) -> u32) -> Self {
        let mut open: Option<&ItemKind> = None;
        let items = receipt
            .parts
            .iter()
            .filter_map(|part| {
                let PartKind::Item(note) = &part.kind else {
                    return None;
                };
                let first = open != Some(&note.item.kind);
                open = Some(&note.item.kind);
                let heading = if first {
                    item_heading(&note.item.kind).map_or(0, &mut *heading_tokens)
                } else {
                    0
                };
                let request = RequestItem {
                    item: note.item.clone(),
                    included: note.include,
                    score: note.score,
                };
                Some((
                    request,
                    note.priority,
                    note.description.clone(),
                    part.tokens.saturating_sub(heading),
                ))
            })
            .collect();
        Self { items }
    }

    fn chosen(&self) -> Vec<ChosenItem<'_>> {
        self.items
            .iter()
            .map(|(request, priority, description, tokens)| ChosenItem {
                request,
                priority: *priority,
                description,
                text: "",
                tokens: Some(*tokens),
                definition: None,
            })
            .collect()
    }
}

/// Counts `messages` (oldest first, the message being written last) and reads the meter, through
/// the same plan the server sends requests with; `choices` say which history goes (topic filter,
/// pins, excludes), one per message from the first. `knowledge` is the receipt whose rules and
/// references the request is expected to carry (the draft's preview, else the last reply's).
pub fn read(
    counts: &TokenCounts,
    info: &ContextInfo,
    messages: &[TurnMessage<'_>],
    page_context: Option<&PageContext>,
    choices: Option<&[Choice]>,
    knowledge: Option<&ReceiptJson>,
    files: Option<&glassbox_core::attachments::FileContents>,
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
    // A receipt that cannot be read carries no items the meter could expect.
    let knowledge = knowledge.and_then(|r| r.read().ok());
    let counted = knowledge
        .as_ref()
        .map(|r| CountedItems::of(r, &mut |heading| count(None, heading)));
    let chosen = counted
        .as_ref()
        .map(CountedItems::chosen)
        .unwrap_or_default();
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
                items: (!chosen.is_empty()).then_some(ItemsInput {
                    chosen: &chosen,
                    near_misses: &[],
                    search: ItemSearch::Done,
                }),
                files,
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
