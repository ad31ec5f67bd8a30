//! One plan per turn (`CONTEXT-PIPELINE.md`): [`plan_turn`] takes what was gathered for a turn and
//! returns the receipt and the provider request built from it, with the meter's reading. The server
//! (the request it sends), the widget's meter (a draft's preview) and the standalone meter all call
//! it, so they cannot disagree; [`build_request`] is the one function that writes what the model
//! sees, and it reads only the receipt and the texts the receipt names.

use std::borrow::Cow;
use std::ops::Range;

use crate::prompt::{
    PromptMessage, ProviderRequest, ToolDefinition, page_context_segment, summary_segment,
};
use crate::tokens::MESSAGE_OVERHEAD;
use crate::wire::{PageContext, Role};

use super::compression::{CountedMessage, SUMMARY_RESERVE, Strategy, is_low_value};
use super::meter::{self, ContextInfo, ContextReport, MeterReading, REPLY_PRIMING};
use super::receipt::{LeftOut, LeftOutWhy, Overflow, Part, PartKind, Reason, Receipt};
use super::{CompressionReport, TokenBreakdown};

/// A message that reaches the model, as the model reads it.
#[derive(Debug, Clone)]
pub struct TurnMessage<'a> {
    /// The stored id (`None` for a draft not sent yet).
    pub id: Option<&'a str>,
    pub role: Role,
    /// The text as the model sees it (`prompt::model_text`).
    pub text: Cow<'a, str>,
}

/// The summary a previous plan asked for ([`TurnPlan::summary_wanted`]).
#[derive(Debug, Clone, Copy)]
pub enum SummaryInput<'a> {
    /// Written for the messages `first_id..=last_id`.
    Written {
        first_id: &'a str,
        last_id: &'a str,
        text: &'a str,
    },
    /// Writing it failed: the range is left out without one.
    Failed,
}

/// Everything gathered for one turn.
#[derive(Debug, Clone)]
pub struct TurnInput<'a> {
    pub info: &'a ContextInfo,
    /// The operator's system prompt; `None` where only its token count is known (the widget).
    pub system_prompt: Option<&'a str>,
    /// The history that reaches the model, oldest first, ending with the message being answered.
    pub messages: &'a [TurnMessage<'a>],
    /// The host page's context sent with the message.
    pub page_context: Option<&'a PageContext>,
    /// The summary compression asked for, once written or failed.
    pub summary: Option<SummaryInput<'a>>,
    pub tools: &'a [ToolDefinition],
}

/// The plan of one turn.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    pub receipt: Receipt,
    /// Built from the receipt; not to be sent when `receipt.overflow` is set.
    pub request: ProviderRequest,
    /// The meter's reading of the same plan.
    pub reading: MeterReading,
    /// Compression wants these messages (indices into `messages`) summarized and no summary for
    /// exactly them was given: write it, then plan again with it.
    pub summary_wanted: Option<Range<usize>>,
}

/// Counts a text's tokens; `key` is a stored message's id (counts can be cached by it).
pub type Count<'c> = dyn FnMut(Option<&str>, &str) -> u32 + 'c;

/// Plans a turn: compression against the budget, the ordered parts, what was left out, whether it
/// fits, and the request.
pub fn plan_turn(input: &TurnInput<'_>, count: &mut Count<'_>) -> TurnPlan {
    let info = input.info;
    let msgs = input.messages;
    let counted: Vec<CountedMessage> = msgs
        .iter()
        .map(|m| CountedMessage {
            content: &m.text,
            tokens: count(m.id, &m.text),
        })
        .collect();
    let cost = |i: usize| counted[i].tokens + MESSAGE_OVERHEAD as u32;
    let context_tokens = input
        .page_context
        .map(|c| count(None, &page_context_segment(c)));
    let system_tokens = match input.system_prompt {
        Some(text) => count(None, text),
        None => info.system_prompt_tokens,
    };
    let info_now = ContextInfo {
        system_prompt_tokens: system_tokens,
        ..info.clone()
    };
    let mut reading = meter::read(&info_now, &counted, context_tokens.unwrap_or(0));
    let outcome = reading.plan.clone();

    let mut parts = Vec::new();
    if input.system_prompt.is_some() || system_tokens > 0 {
        parts.push(Part {
            kind: PartKind::SystemPrompt,
            reason: Reason::Always,
            tokens: system_tokens,
        });
    }
    if let (Some(ctx), Some(tokens)) = (input.page_context, context_tokens) {
        parts.push(Part {
            kind: PartKind::PageContext {
                keys: ctx.keys().cloned().collect(),
            },
            reason: Reason::Always,
            tokens,
        });
    }

    // The summary, when compression wants one.
    let id_of = |i: usize| msgs[i].id.unwrap_or_default().to_owned();
    let mut left_out = Vec::new();
    let mut summary_wanted = None;
    let mut summary_tokens = 0;
    if let Some(range) = outcome.summarized.clone() {
        let (first, last) = (id_of(range.start), id_of(range.end - 1));
        let range_tokens = range.clone().map(cost).sum();
        match input.summary {
            Some(SummaryInput::Written {
                first_id,
                last_id,
                text,
            }) if first_id == first && last_id == last => {
                summary_tokens = count(None, &summary_segment(text));
                parts.push(Part {
                    kind: PartKind::Summary {
                        first_id: first.clone(),
                        last_id: last.clone(),
                        count: range.len() as u32,
                    },
                    reason: Reason::Compression,
                    tokens: summary_tokens,
                });
                left_out.push(LeftOut {
                    first_id: first,
                    last_id: last,
                    count: range.len() as u32,
                    why: LeftOutWhy::Summarized,
                    tokens: range_tokens,
                });
            }
            Some(SummaryInput::Failed) => left_out.push(LeftOut {
                first_id: first,
                last_id: last,
                count: range.len() as u32,
                why: LeftOutWhy::SummaryUnavailable,
                tokens: range_tokens,
            }),
            // Not written yet (or written for another range): count its reserve, ask for it.
            _ => {
                summary_tokens = SUMMARY_RESERVE;
                left_out.push(LeftOut {
                    first_id: first,
                    last_id: last,
                    count: range.len() as u32,
                    why: LeftOutWhy::Summarized,
                    tokens: range_tokens,
                });
                summary_wanted = Some(range);
            }
        }
    }

    // History: kept messages grouped by reason; dropped ones grouped by why.
    let last = msgs.len().checked_sub(1);
    let preserve_from = msgs
        .len()
        .saturating_sub(info.compression.preserve_recent_messages as usize);
    let mut kept = vec![false; msgs.len()];
    for &i in &outcome.kept {
        kept[i] = true;
    }
    let low_value_strategy = matches!(outcome.strategy, Strategy::DropLowValue | Strategy::Hybrid);
    let mut history: Vec<(Range<usize>, Reason)> = Vec::new();
    let mut dropped: Vec<(Range<usize>, LeftOutWhy)> = Vec::new();
    for i in 0..msgs.len() {
        if Some(i) == last {
            break;
        }
        if kept[i] {
            let reason = if outcome.applied && i >= preserve_from {
                Reason::Preserved
            } else {
                Reason::Fits
            };
            extend_run(&mut history, i, reason);
        } else if !outcome.summarized.as_ref().is_some_and(|r| r.contains(&i)) {
            let why = if low_value_strategy && is_low_value(&msgs[i].text) {
                LeftOutWhy::LowValue
            } else {
                LeftOutWhy::Window
            };
            extend_run(&mut dropped, i, why);
        }
    }
    for (range, reason) in history {
        parts.push(Part {
            kind: PartKind::History {
                first_id: id_of(range.start),
                last_id: id_of(range.end - 1),
                count: range.len() as u32,
            },
            reason,
            tokens: range.clone().map(cost).sum(),
        });
    }
    for (range, why) in dropped {
        left_out.push(LeftOut {
            first_id: id_of(range.start),
            last_id: id_of(range.end - 1),
            count: range.len() as u32,
            why,
            tokens: range.clone().map(cost).sum(),
        });
    }
    if let Some(i) = last {
        parts.push(Part {
            kind: PartKind::UserMessage {
                id: msgs[i].id.map(str::to_owned),
            },
            reason: Reason::Always,
            tokens: cost(i),
        });
    }

    // Totals, with the summary as written (or its reserve while it is wanted).
    let kept_tokens: u32 = outcome.kept.iter().map(|&i| cost(i)).sum();
    let breakdown = TokenBreakdown {
        conversation: kept_tokens + summary_tokens,
        ..reading.breakdown
    };
    let compression = reading.compression.clone().map(|c| CompressionReport {
        compressed_tokens: breakdown.conversation,
        saved_tokens: c.original_tokens.saturating_sub(breakdown.conversation),
        ..c
    });
    let counted_input = breakdown.total() + REPLY_PRIMING;
    let room = info.context_limit.saturating_sub(info.output_reserve);
    let receipt = Receipt {
        totals: ContextReport {
            counted_input_tokens: counted_input,
            breakdown,
            encoding: info.encoding.clone(),
            exact: info.exact,
            compression: compression.clone(),
        },
        parts,
        left_out,
        context_limit: info.context_limit,
        output_reserve: info.output_reserve,
        overflow: (counted_input > room).then_some(Overflow {
            needed: counted_input,
            room,
        }),
    };
    reading.breakdown = breakdown;
    reading.compression = compression;
    let request = build_request(
        &receipt,
        &Sources {
            model: &info.model,
            system_prompt: input.system_prompt,
            messages: msgs,
            page_context: input.page_context,
            summary: match input.summary {
                Some(SummaryInput::Written { text, .. }) => Some(text),
                _ => None,
            },
            tools: input.tools,
        },
    );
    TurnPlan {
        receipt,
        request,
        reading,
        summary_wanted,
    }
}

/// Adds index `i` to the last run when it continues it with the same label, else starts a run.
fn extend_run<T: PartialEq + Copy>(runs: &mut Vec<(Range<usize>, T)>, i: usize, label: T) {
    match runs.last_mut() {
        Some((r, l)) if r.end == i && *l == label => r.end = i + 1,
        _ => runs.push((i..i + 1, label)),
    }
}

/// The texts a receipt names: the stored messages (those that reach the model, oldest first), the
/// system prompt, the message's page context and the summary.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    pub model: &'a str,
    pub system_prompt: Option<&'a str>,
    pub messages: &'a [TurnMessage<'a>],
    pub page_context: Option<&'a PageContext>,
    pub summary: Option<&'a str>,
    pub tools: &'a [ToolDefinition],
}

/// Builds the provider request from a receipt: exactly its parts, in its order, and nothing else.
/// Used for every request, and to rebuild a stored reply's request from its receipt.
pub fn build_request(receipt: &Receipt, src: &Sources<'_>) -> ProviderRequest {
    let mut system: Vec<Cow<str>> = Vec::new();
    let mut messages = Vec::new();
    let position = |id: &str| src.messages.iter().position(|m| m.id == Some(id));
    let mut push = |m: &TurnMessage| {
        messages.push(PromptMessage {
            role: m.role,
            content: m.text.clone().into_owned(),
        })
    };
    for part in &receipt.parts {
        match &part.kind {
            PartKind::SystemPrompt => {
                if let Some(p) = src.system_prompt {
                    system.push(Cow::Borrowed(p));
                }
            }
            PartKind::PageContext { .. } => {
                if let Some(c) = src.page_context {
                    system.push(Cow::Owned(page_context_segment(c)));
                }
            }
            PartKind::Summary { .. } => {
                if let Some(s) = src.summary {
                    system.push(Cow::Owned(summary_segment(s)));
                }
            }
            PartKind::History {
                first_id,
                last_id,
                count,
            } => {
                // The run as recorded: first..=last, and only if it still has `count` messages
                // (a message that reaches the model since, e.g. a retried reply, is not guessed in).
                if let (Some(a), Some(b)) = (position(first_id), position(last_id))
                    && b >= a
                    && b - a + 1 == *count as usize
                {
                    for m in &src.messages[a..=b] {
                        push(m);
                    }
                }
            }
            PartKind::UserMessage { id } => {
                let m = match id {
                    Some(id) => position(id).map(|i| &src.messages[i]),
                    None => src.messages.last(),
                };
                if let Some(m) = m {
                    push(m);
                }
            }
        }
    }
    ProviderRequest {
        model: src.model.to_owned(),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        tools: src.tools.to_vec(),
        max_output_tokens: receipt.output_reserve,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
