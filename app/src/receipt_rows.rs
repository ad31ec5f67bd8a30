//! A receipt in words, for the "View context" dialog: one row per part (what it is, why it went,
//! its tokens), one per left-out run or item, the totals beside the provider's reported usage, and
//! the items in three columns (rules, references, tools) above the ones that did not go (near
//! misses, the knowledge cap's) and the search's note. The words come from the widget's table
//! ([`Words`]); the rest is pure, so the wording is tested natively (in English) and the widget
//! only lays the rows out (as text, never as HTML).

use glassbox_core::attachments::FileKind;
use glassbox_core::context::items::{Included, ItemKind, ItemRef};
use glassbox_core::context::receipt::{
    ItemNote, ItemSearchNote, ItemSearchStatus, LeftOut, LeftOutWhy, Part, PartKind, Reason,
    Receipt,
};
use glassbox_core::context::score::Score;
use glassbox_core::number::fixed;
use glassbox_core::vocab::Usage;

use crate::words::{Word, Words};

/// Messages a row stands for: `first..=last` (ids), `count` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRun {
    pub first_id: String,
    pub last_id: String,
    pub count: u32,
}

/// One row of the dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptRow {
    /// The part's kind as on the wire (`system_prompt`, `history`, …), for styling and tests.
    pub kind: &'static str,
    /// What it is ("System prompt", "12 messages", "Tool call: get_relevant_context").
    pub label: String,
    /// Why it went, or why it did not.
    pub why: String,
    pub tokens: u32,
    /// Names listed under the row: page-context keys, tool names, set names.
    pub names: Vec<String>,
    /// The messages it stands for, when it stands for messages.
    pub messages: Option<MessageRun>,
    /// A remark ("Its text stays on the server.").
    pub note: Option<String>,
}

/// The figures under the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiptTotals {
    /// Sum of the parts' tokens.
    pub parts_tokens: u64,
    /// Our count of the input (parts plus the reply's priming).
    pub counted_input: u32,
    /// Whether `counted_input` used the model's own vocabulary (else it is an estimate).
    pub exact: bool,
    pub encoding: String,
    /// Input and output tokens the provider reported, when it did.
    pub reported: Option<(u64, u64)>,
    /// How far our count is from the provider's, in percent of theirs (positive: we counted more).
    pub drift_percent: Option<f64>,
    pub context_limit: u32,
    pub output_reserve: u32,
    /// Tokens left out of the request (all left-out runs).
    pub left_out_tokens: u64,
}

/// Rows for the parts, in the order the model read them.
pub fn part_rows(w: Words, receipt: &Receipt) -> Vec<ReceiptRow> {
    // Calls are numbered within their round, so two calls of one round read apart.
    let mut calls_in_round: (u32, u32) = (u32::MAX, 0);
    receipt
        .parts
        .iter()
        .map(|part| {
            let call = match &part.kind {
                PartKind::ToolExchange { round, .. } => {
                    calls_in_round = if calls_in_round.0 == *round {
                        (*round, calls_in_round.1 + 1)
                    } else {
                        (*round, 1)
                    };
                    calls_in_round.1
                }
                _ => 0,
            };
            part_row(w, part, call)
        })
        .collect()
}

/// Rows for the history that was left out, oldest first. Items left out are not among them: the
/// items section lists them under its columns (`item_misses`), so each shows once.
pub fn left_out_rows(w: Words, receipt: &Receipt) -> Vec<ReceiptRow> {
    receipt
        .left_out
        .iter()
        .filter(|l| l.item.is_none())
        .map(|l| left_out_row(w, l))
        .collect()
}

/// The totals of `receipt` beside `usage`.
pub fn totals(receipt: &Receipt, usage: Option<Usage>) -> ReceiptTotals {
    let counted = receipt.totals.counted_input_tokens;
    // Our own counts (a stopped reply's) are not the provider's report.
    let reported = usage
        .filter(|u| !u.counted)
        .map(|u| (u.input_tokens, u.output_tokens));
    ReceiptTotals {
        parts_tokens: receipt.parts.iter().map(|p| u64::from(p.tokens)).sum(),
        counted_input: counted,
        exact: receipt.totals.exact,
        encoding: receipt.totals.encoding.clone(),
        reported,
        drift_percent: reported
            .filter(|(input, _)| *input > 0)
            .map(|(input, _)| (f64::from(counted) - input as f64) * 100.0 / input as f64),
        context_limit: receipt.context_limit,
        output_reserve: receipt.output_reserve,
        left_out_tokens: receipt.left_out.iter().map(|l| u64::from(l.tokens)).sum(),
    }
}

/// Why a part went, in words (the table's).
pub fn reason_words(reason: Reason) -> Word {
    match reason {
        Reason::Always => Word::ReasonAlways,
        Reason::Fits => Word::ReasonFits,
        Reason::Preserved => Word::ReasonPreserved,
        Reason::Compression => Word::ReasonCompression,
        Reason::Resume => Word::ReasonResume,
        Reason::ToolLoop => Word::ReasonToolLoop,
        Reason::Sticky => Word::ReasonSticky,
        Reason::Pinned => Word::ReasonPinned,
        Reason::TopicMember => Word::ReasonTopicMember,
        Reason::TopicMatch => Word::ReasonTopicMatch,
        Reason::Fallback => Word::ReasonFallback,
        Reason::Manual => Word::ReasonManual,
        Reason::Agent => Word::ReasonAgent,
        Reason::Expansion => Word::ReasonExpansion,
        Reason::Loaded => Word::ReasonLoaded,
    }
}

/// Why messages were left out, in words (the table's).
pub fn left_out_words(why: LeftOutWhy) -> Word {
    match why {
        LeftOutWhy::LowValue => Word::LeftOutLowValue,
        LeftOutWhy::Window => Word::LeftOutWindow,
        LeftOutWhy::Summarized => Word::LeftOutSummarized,
        LeftOutWhy::SummaryUnavailable => Word::LeftOutSummaryUnavailable,
        LeftOutWhy::TopicFilter => Word::LeftOutTopicFilter,
        LeftOutWhy::OtherTopic => Word::LeftOutOtherTopic,
        LeftOutWhy::Excluded => Word::LeftOutExcluded,
        LeftOutWhy::BeyondWindow => Word::LeftOutBeyondWindow,
        LeftOutWhy::MemoryCap => Word::LeftOutMemoryCap,
        LeftOutWhy::BelowThreshold => Word::LeftOutBelowThreshold,
        LeftOutWhy::KnowledgeCap => Word::LeftOutKnowledgeCap,
        LeftOutWhy::ToolCap => Word::LeftOutToolCap,
    }
}

/// The note on a receipt's item search, in words (empty for `done`, which receipts do not record).
pub fn item_search_words(w: Words, note: &ItemSearchNote) -> String {
    let why = note
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let (plain, with_why) = match note.status {
        ItemSearchStatus::Done => return String::new(),
        ItemSearchStatus::NoAgentItems => return w.get(Word::ItemSearchNoItems),
        ItemSearchStatus::Unavailable => {
            (Word::ItemSearchUnavailable, Word::ItemSearchUnavailableWhy)
        }
        ItemSearchStatus::Failed => (Word::ItemSearchFailed, Word::ItemSearchFailedWhy),
    };
    match why {
        Some(why) => w.fill(with_why, &[("reason", why)]),
        None => w.get(plain),
    }
}

/// An item's label: "Rule 001 · auth", "Tool fs.read".
fn item_label(w: Words, note: &ItemNote) -> String {
    let name = note.item.name.as_str();
    let priority = format!("{:03}", note.priority);
    match &note.item.kind {
        ItemKind::Rule => w.fill(
            Word::ReceiptRuleItem,
            &[("priority", &priority), ("name", name)],
        ),
        ItemKind::Reference => w.fill(
            Word::ReceiptReferenceItem,
            &[("priority", &priority), ("name", name)],
        ),
        ItemKind::Tool { server } => {
            w.fill(Word::ReceiptToolItem, &[("server", server), ("name", name)])
        }
    }
}

/// One item of the "View context" columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemCell {
    /// The item it stands for (to add or remove it).
    pub item: ItemRef,
    /// Before the name: the priority in three digits ("001") for rules and references, the server
    /// and a dot ("filesystem.") for tools.
    pub prefix: String,
    pub name: String,
    /// How it came in, as a key: "Always", "Manual", "Agent", "Expansion" (lowercased: the badge's
    /// class and the item's `data-include`). Shown in words by [`ItemCell::badge_text`].
    pub badge: &'static str,
    /// How it came in.
    pub include: Included,
    /// Its score to two decimals ("0.87"), for items semantic search chose.
    pub score: Option<String>,
    /// Its one-line description (empty: none).
    pub description: String,
    pub tokens: u32,
}

/// A receipt's items in three columns, as the request carried them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemColumns {
    /// By priority, then name.
    pub rules: Vec<ItemCell>,
    /// By priority, then name.
    pub references: Vec<ItemCell>,
    /// By server, then name.
    pub tools: Vec<ItemCell>,
}

/// The items a receipt's request carried, in three columns.
pub fn item_columns(receipt: &Receipt) -> ItemColumns {
    let mut columns = ItemColumns::default();
    let mut keyed: Vec<(&ItemNote, u32)> = receipt
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Item(note) => Some((note, p.tokens)),
            _ => None,
        })
        .collect();
    keyed.sort_by(|(a, _), (b, _)| match (&a.item.kind, &b.item.kind) {
        (ItemKind::Tool { server: x }, ItemKind::Tool { server: y }) => {
            x.cmp(y).then_with(|| a.item.name.cmp(&b.item.name))
        }
        _ => a
            .priority
            .cmp(&b.priority)
            .then_with(|| a.item.name.cmp(&b.item.name)),
    });
    for (note, tokens) in keyed {
        let column = match &note.item.kind {
            ItemKind::Rule => &mut columns.rules,
            ItemKind::Reference => &mut columns.references,
            ItemKind::Tool { .. } => &mut columns.tools,
        };
        column.push(item_cell(note, tokens));
    }
    columns
}

impl ItemColumns {
    /// Whether no column has an item.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.references.is_empty() && self.tools.is_empty()
    }
}

impl ItemCell {
    /// Its prefix and name: "001 • auth" for rules and references, "filesystem.read" for tools.
    pub fn label(&self) -> String {
        if self.prefix.ends_with('.') {
            format!("{}{}", self.prefix, self.name)
        } else {
            format!("{} • {}", self.prefix, self.name)
        }
    }

    /// Its badge in words with its score, when it has one: "Always", "Agent 0.87".
    pub fn badge_text(&self, w: Words) -> String {
        let badge = w.get(match self.include {
            Included::Always => Word::BadgeAlways,
            Included::Manual => Word::BadgeManual,
            Included::Agent => Word::BadgeAgent,
            Included::Expansion => Word::BadgeExpansion,
        });
        match &self.score {
            Some(score) => format!("{badge} {score}"),
            None => badge,
        }
    }
}

/// The cell of the item `note` stands for, `tokens` its tokens.
fn item_cell(note: &ItemNote, tokens: u32) -> ItemCell {
    ItemCell {
        item: note.item.clone(),
        prefix: match &note.item.kind {
            ItemKind::Rule | ItemKind::Reference => format!("{:03}", note.priority),
            ItemKind::Tool { server } => format!("{server}."),
        },
        name: note.item.name.clone(),
        badge: match note.include {
            Included::Always => "Always",
            Included::Manual => "Manual",
            Included::Agent => "Agent",
            Included::Expansion => "Expansion",
        },
        include: note.include,
        score: note.score.map(|s| fixed(s.value().into(), 2)),
        description: note.description.clone(),
        tokens,
    }
}

/// An item the request did not carry, under the columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissRow {
    /// Why, as on the wire (`below_threshold`, `knowledge_cap`), for styling and tests.
    pub cause: &'static str,
    /// The item as a column would show it (its badge: how it came in, or would have; its tokens: 0
    /// for a near miss, whose text was never a candidate).
    pub cell: ItemCell,
    /// Its type in words: "Rule", "Reference", "Tool".
    pub kind: String,
    /// Why it did not go: "0.62, below the threshold", "left out: over the knowledge budget".
    pub why: String,
}

/// The items a receipt's request did not carry: the near misses, best first, then the items the
/// knowledge cap left out, in the receipt's order (lowest-ranked first).
pub fn item_misses(w: Words, receipt: &Receipt) -> Vec<MissRow> {
    let mut near: Vec<(&ItemNote, u32)> = Vec::new();
    let mut capped: Vec<(&ItemNote, u32, bool)> = Vec::new();
    for l in &receipt.left_out {
        match (&l.item, l.why) {
            (Some(note), LeftOutWhy::BelowThreshold) => near.push((note, l.tokens)),
            (Some(note), LeftOutWhy::KnowledgeCap) => capped.push((note, l.tokens, false)),
            (Some(note), LeftOutWhy::ToolCap) => capped.push((note, l.tokens, true)),
            _ => {}
        }
    }
    // Best first; `None` (no score) last; equal scores by name.
    near.sort_by(|(a, _), (b, _)| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.item.name.cmp(&b.item.name))
    });
    let row = |note: &ItemNote, tokens, cause, why: String| MissRow {
        cause,
        cell: item_cell(note, tokens),
        kind: w.get(match note.item.kind {
            ItemKind::Rule => Word::KindRule,
            ItemKind::Reference => Word::KindReference,
            ItemKind::Tool { .. } => Word::KindTool,
        }),
        why,
    };
    let near = near.into_iter().map(|(note, tokens)| {
        let why = match note.score {
            Some(s) => w.fill(
                Word::ReceiptMissBelowThresholdScore,
                &[("score", &fixed(s.value().into(), 2))],
            ),
            None => w.get(Word::ReceiptMissBelowThreshold),
        };
        row(note, tokens, "below_threshold", why)
    });
    let capped = capped.into_iter().map(|(note, tokens, tool)| match tool {
        false => row(
            note,
            tokens,
            "knowledge_cap",
            w.get(Word::ReceiptMissKnowledgeCap),
        ),
        true => row(note, tokens, "tool_cap", w.get(Word::ReceiptMissToolCap)),
    });
    near.chain(capped).collect()
}

/// What "View context" shows of a receipt's items: the columns, what did not go, and the search's
/// note in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemSection {
    pub columns: ItemColumns,
    pub misses: Vec<MissRow>,
    /// Why semantic search did not choose items, when it did not run (`item_search_words`).
    pub search: Option<String>,
}

/// The items section of `receipt`, when it has anything to show: an item part, an item left out,
/// or a note on the search.
pub fn item_section(w: Words, receipt: &Receipt) -> Option<ItemSection> {
    let section = ItemSection {
        columns: item_columns(receipt),
        misses: item_misses(w, receipt),
        search: receipt
            .item_search
            .as_ref()
            .map(|note| item_search_words(w, note))
            .filter(|s| !s.is_empty()),
    };
    let empty = section.columns.is_empty() && section.misses.is_empty() && section.search.is_none();
    (!empty).then_some(section)
}

/// `why` with the scores of a run under the topic filter: "… (score 0.62)", "… (scores 0.41–0.80)".
fn with_scores(w: Words, why: &str, scores: &[Option<Score>]) -> String {
    let known: Vec<f32> = scores.iter().flatten().map(|s| s.value()).collect();
    let (Some(lo), Some(hi)) = (
        known.iter().copied().reduce(f32::min),
        known.iter().copied().reduce(f32::max),
    ) else {
        return why.to_owned();
    };
    if known.len() == 1 || (hi - lo).abs() < 0.0005 {
        w.fill(
            Word::ReceiptWhyScore,
            &[("why", why), ("score", &fixed(lo.into(), 2))],
        )
    } else {
        w.fill(
            Word::ReceiptWhyScores,
            &[
                ("why", why),
                ("low", &fixed(lo.into(), 2)),
                ("high", &fixed(hi.into(), 2)),
            ],
        )
    }
}

fn messages(w: Words, count: u32) -> String {
    if count == 1 {
        w.get(Word::ReceiptMessagesOne)
    } else {
        w.fill(Word::ReceiptMessagesMany, &[("count", &count.to_string())])
    }
}

/// `call` is the tool call's number within its round (1-based; 0 for other parts).
fn part_row(w: Words, part: &Part, call: u32) -> ReceiptRow {
    let why = w.get(reason_words(part.reason));
    let row = |kind, label: String| ReceiptRow {
        kind,
        label,
        why: why.clone(),
        tokens: part.tokens,
        names: Vec::new(),
        messages: None,
        note: None,
    };
    let run = |first: &str, last: &str, count: u32| {
        Some(MessageRun {
            first_id: first.to_owned(),
            last_id: last.to_owned(),
            count,
        })
    };
    let note = |word| Some(w.get(word));
    match &part.kind {
        PartKind::SystemPrompt => ReceiptRow {
            note: note(Word::ReceiptNoteSystemPrompt),
            ..row("system_prompt", w.get(Word::MeterSystemPrompt))
        },
        PartKind::PageContext { keys } => ReceiptRow {
            names: keys.clone(),
            note: note(Word::ReceiptNotePageContext),
            ..row("page_context", w.get(Word::MeterPageContext))
        },
        PartKind::Summary {
            first_id,
            last_id,
            count,
        } => ReceiptRow {
            messages: run(first_id, last_id, *count),
            ..row(
                "summary",
                if *count == 1 {
                    w.get(Word::ReceiptSummaryOne)
                } else {
                    w.fill(Word::ReceiptSummaryMany, &[("count", &count.to_string())])
                },
            )
        },
        PartKind::History {
            first_id,
            last_id,
            count,
            scores,
        } => ReceiptRow {
            messages: run(first_id, last_id, *count),
            why: with_scores(w, &why, scores),
            ..row("history", messages(w, *count))
        },
        PartKind::Tools { names } => ReceiptRow {
            names: names.clone(),
            note: note(Word::ReceiptNoteTools),
            ..row("tools", w.get(Word::ReceiptToolsOffered))
        },
        PartKind::Resume { sets } => ReceiptRow {
            names: sets.clone(),
            ..row("resume", w.get(Word::ReceiptResume))
        },
        PartKind::ToolExchange {
            round, name, error, ..
        } => row(
            "tool_exchange",
            w.fill(
                if *error {
                    Word::ReceiptToolCallError
                } else {
                    Word::ReceiptToolCall
                },
                &[
                    ("round", &(round + 1).to_string()),
                    ("call", &call.to_string()),
                    ("name", name),
                ],
            ),
        ),
        PartKind::Attachments { names } => ReceiptRow {
            names: names.clone(),
            note: note(Word::ReceiptNoteAttachments),
            ..row("attachments", w.get(Word::ReceiptAttachments))
        },
        PartKind::File { name, file, .. } => ReceiptRow {
            names: vec![name.clone()],
            note: note(match file {
                FileKind::Image => Word::ReceiptNoteImage,
                FileKind::Text => Word::ReceiptNoteTextFile,
            }),
            ..row(
                "file",
                w.fill(
                    match file {
                        FileKind::Image => Word::ReceiptImage,
                        FileKind::Text => Word::ReceiptTextFile,
                    },
                    &[("name", name)],
                ),
            )
        },
        PartKind::UserMessage { id } => ReceiptRow {
            messages: id.as_ref().and_then(|id| run(id, id, 1)),
            ..row("user_message", w.get(Word::ReceiptUserMessage))
        },
        PartKind::Item(item) => item_row(
            w,
            "item",
            item,
            &why,
            part.tokens,
            note(match item.item.kind {
                ItemKind::Tool { .. } => Word::ReceiptNoteToolItem,
                _ => Word::ReceiptNoteItem,
            }),
        ),
    }
}

/// A row for an item: its label, `why` with its score, its description listed under it.
fn item_row(
    w: Words,
    kind: &'static str,
    note: &ItemNote,
    why: &str,
    tokens: u32,
    remark: Option<String>,
) -> ReceiptRow {
    ReceiptRow {
        kind,
        label: item_label(w, note),
        why: with_scores(w, why, &[note.score]),
        tokens,
        names: (!note.description.is_empty())
            .then(|| note.description.clone())
            .into_iter()
            .collect(),
        messages: None,
        note: remark,
    }
}

fn left_out_row(w: Words, l: &LeftOut) -> ReceiptRow {
    ReceiptRow {
        kind: "left_out",
        label: messages(w, l.count),
        why: with_scores(w, &w.get(left_out_words(l.why)), &l.scores),
        tokens: l.tokens,
        names: Vec::new(),
        messages: Some(MessageRun {
            first_id: l.first_id.clone(),
            last_id: l.last_id.clone(),
            count: l.count,
        }),
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::context::TokenBreakdown;
    use glassbox_core::context::items::ItemRef;
    use glassbox_core::context::meter::ContextReport;
    use glassbox_core::context::receipt::Overflow;

    /// The table in English.
    fn en() -> Words {
        Words::english_in_full()
    }

    fn receipt() -> Receipt {
        let part = |kind, reason, tokens| Part {
            kind,
            reason,
            tokens,
        };
        Receipt {
            totals: ContextReport {
                counted_input_tokens: 1_003,
                breakdown: TokenBreakdown::default(),
                encoding: "o200k_base".into(),
                exact: true,
                compression: None,
            },
            parts: vec![
                part(PartKind::SystemPrompt, Reason::Always, 100),
                part(
                    PartKind::PageContext {
                        keys: vec!["page".into(), "entity".into()],
                    },
                    Reason::Always,
                    50,
                ),
                part(
                    PartKind::History {
                        first_id: "m1".into(),
                        last_id: "m9".into(),
                        count: 9,
                        scores: vec![],
                    },
                    Reason::Fits,
                    800,
                ),
                part(
                    PartKind::ToolExchange {
                        round: 0,
                        name: "get_relevant_context".into(),
                        call_id: "c1".into(),
                        error: true,
                    },
                    Reason::ToolLoop,
                    20,
                ),
                part(
                    PartKind::UserMessage {
                        id: Some("m10".into()),
                    },
                    Reason::Always,
                    27,
                ),
                part(
                    PartKind::Attachments {
                        names: vec!["spec.pdf".into()],
                    },
                    Reason::Always,
                    3,
                ),
            ],
            left_out: vec![LeftOut::messages(
                "m0".into(),
                "m0".into(),
                1,
                LeftOutWhy::LowValue,
                7,
                vec![],
            )],
            context_limit: 128_000,
            output_reserve: 4_096,
            overflow: None::<Overflow>,
            filter: None,
            item_search: None,
        }
    }

    #[test]
    fn rows_say_what_each_part_is_and_why_it_went() {
        let rows = part_rows(en(), &receipt());
        let summary: Vec<(&str, &str, &str, u32)> = rows
            .iter()
            .map(|r| (r.kind, r.label.as_str(), r.why.as_str(), r.tokens))
            .collect();
        assert_eq!(
            summary,
            [
                ("system_prompt", "System prompt", "always sent", 100),
                ("page_context", "Page context", "always sent", 50),
                ("history", "9 messages", "fits the budget", 800),
                (
                    "tool_exchange",
                    "Tool round 1, call 1: get_relevant_context (error)",
                    "the model called a tool while answering",
                    20
                ),
                (
                    "user_message",
                    "The message being answered",
                    "always sent",
                    27
                ),
                ("attachments", "Its attachments", "always sent", 3),
            ]
        );
        assert_eq!(rows[5].names, ["spec.pdf"]);
        assert_eq!(rows[1].names, ["page", "entity"]);
        assert_eq!(
            rows[2].messages,
            Some(MessageRun {
                first_id: "m1".into(),
                last_id: "m9".into(),
                count: 9
            })
        );
        assert_eq!(
            rows[4].messages.as_ref().map(|m| m.first_id.as_str()),
            Some("m10")
        );
        assert!(rows[0].note.as_ref().is_some_and(|n| n.contains("server")));

        let left = left_out_rows(en(), &receipt());
        assert_eq!(left[0].label, "1 message");
        assert_eq!(left[0].why, "an acknowledgement compression leaves out");
        assert_eq!(left[0].tokens, 7);
    }

    #[test]
    fn topic_runs_show_their_scores() {
        let s = |v: f32| Some(Score::of(v));
        let r = Receipt {
            parts: vec![Part {
                kind: PartKind::History {
                    first_id: "m1".into(),
                    last_id: "m3".into(),
                    count: 3,
                    scores: vec![s(0.41), s(0.8), s(0.55)],
                },
                reason: Reason::TopicMatch,
                tokens: 30,
            }],
            left_out: vec![LeftOut::messages(
                "m0".into(),
                "m0".into(),
                1,
                LeftOutWhy::TopicFilter,
                7,
                vec![s(0.123)],
            )],
            ..receipt()
        };
        assert_eq!(
            part_rows(en(), &r)[0].why,
            "matches a selected topic (scores 0.41–0.80)"
        );
        assert_eq!(
            left_out_rows(en(), &r)[0].why,
            "below the threshold for the selected topics (score 0.12)"
        );
    }

    fn note(item: ItemRef, include: Included, score: Option<f32>, priority: i32) -> ItemNote {
        ItemNote {
            item,
            include,
            score: score.map(Score::of),
            priority,
            description: String::new(),
        }
    }

    #[test]
    fn items_read_as_rows_and_three_columns() {
        let part = |n: ItemNote, tokens| Part {
            reason: n.include.into(),
            kind: PartKind::Item(n),
            tokens,
        };
        let auth = ItemNote {
            description: "How we sign in".into(),
            ..note(ItemRef::rule("auth"), Included::Agent, Some(0.8712), 3)
        };
        let r = Receipt {
            parts: vec![
                part(note(ItemRef::rule("style"), Included::Always, None, 1), 40),
                part(auth, 25),
                part(
                    note(ItemRef::reference("api"), Included::Manual, None, 2),
                    300,
                ),
                part(
                    note(ItemRef::tool("fs", "read"), Included::Always, None, 0),
                    10,
                ),
            ],
            left_out: vec![
                LeftOut::item(
                    note(ItemRef::reference("big"), Included::Always, None, 9),
                    LeftOutWhy::KnowledgeCap,
                    5_000,
                ),
                LeftOut::item(
                    note(ItemRef::rule("errors"), Included::Agent, Some(0.612), 2),
                    LeftOutWhy::BelowThreshold,
                    0,
                ),
            ],
            item_search: None,
            ..receipt()
        };
        let rows = part_rows(en(), &r);
        assert_eq!(rows[0].label, "Rule 001 · style");
        assert_eq!(rows[0].why, "always sent");
        assert_eq!(rows[1].label, "Rule 003 · auth");
        assert_eq!(
            rows[1].why,
            "semantic search matched it to your message (score 0.87)"
        );
        assert_eq!(rows[1].names, ["How we sign in"]);
        assert_eq!(rows[2].why, "added to this conversation by you");
        assert_eq!(rows[3].label, "Tool fs.read");
        assert_eq!(
            rows[3].note.as_deref(),
            Some("Its definition is offered with the request; its results come back as data.")
        );
        assert!(
            rows.iter()
                .all(|r| r.kind == "item" && r.messages.is_none())
        );
        // Items left out show under the columns only, not among the history left out.
        assert!(left_out_rows(en(), &r).is_empty());

        let columns = item_columns(&r);
        let cells = |c: &[ItemCell]| -> Vec<(String, String, &str, Option<String>)> {
            c.iter()
                .map(|c| (c.prefix.clone(), c.name.clone(), c.badge, c.score.clone()))
                .collect()
        };
        assert_eq!(
            cells(&columns.rules),
            [
                ("001".into(), "style".into(), "Always", None),
                ("003".into(), "auth".into(), "Agent", Some("0.87".into())),
            ]
        );
        assert_eq!(columns.rules[1].description, "How we sign in");
        assert_eq!(
            cells(&columns.references),
            [("002".into(), "api".into(), "Manual", None)]
        );
        assert_eq!(
            cells(&columns.tools),
            [("fs.".into(), "read".into(), "Always", None)]
        );
        assert_eq!(columns.references[0].tokens, 300);
    }

    #[test]
    fn cells_read_as_labels_and_badges() {
        let cell = |n: ItemNote| item_cell(&n, 12);
        let auth = cell(note(
            ItemRef::rule("auth"),
            Included::Agent,
            Some(0.8712),
            3,
        ));
        assert_eq!(auth.label(), "003 • auth");
        assert_eq!(auth.badge_text(en()), "Agent 0.87");
        let api = cell(note(ItemRef::reference("api"), Included::Manual, None, 12));
        assert_eq!(
            (api.label(), api.badge_text(en())),
            ("012 • api".into(), "Manual".into())
        );
        let read = cell(note(ItemRef::tool("fs", "read"), Included::Always, None, 0));
        assert_eq!(read.label(), "fs.read");
        let grown = cell(note(
            ItemRef::reference("b"),
            Included::Expansion,
            Some(0.5),
            1,
        ));
        assert_eq!(grown.badge_text(en()), "Expansion 0.50");
    }

    #[test]
    fn misses_list_near_misses_best_first_then_the_capped_ones() {
        let miss = |n: ItemNote| LeftOut::item(n, LeftOutWhy::BelowThreshold, 0);
        let r = Receipt {
            left_out: vec![
                LeftOut::messages("m0".into(), "m0".into(), 1, LeftOutWhy::LowValue, 7, vec![]),
                LeftOut::item(
                    note(ItemRef::reference("big"), Included::Manual, None, 9),
                    LeftOutWhy::KnowledgeCap,
                    5_000,
                ),
                miss(note(
                    ItemRef::rule("errors"),
                    Included::Agent,
                    Some(0.612),
                    2,
                )),
                LeftOut::item(
                    note(ItemRef::rule("late"), Included::Expansion, Some(0.55), 4),
                    LeftOutWhy::KnowledgeCap,
                    80,
                ),
                miss(note(
                    ItemRef::reference("zeta"),
                    Included::Agent,
                    Some(0.7),
                    1,
                )),
                miss(note(
                    ItemRef::reference("alpha"),
                    Included::Agent,
                    Some(0.7),
                    5,
                )),
                miss(note(ItemRef::rule("unscored"), Included::Agent, None, 1)),
            ],
            ..receipt()
        };
        let misses = item_misses(en(), &r);
        let summary: Vec<(&str, String, &str, &str, u32)> = misses
            .iter()
            .map(|m| {
                (
                    m.cause,
                    m.cell.label(),
                    m.kind.as_str(),
                    m.why.as_str(),
                    m.cell.tokens,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "below_threshold",
                    "005 • alpha".into(),
                    "Reference",
                    "0.70, below the threshold",
                    0
                ),
                (
                    "below_threshold",
                    "001 • zeta".into(),
                    "Reference",
                    "0.70, below the threshold",
                    0
                ),
                (
                    "below_threshold",
                    "002 • errors".into(),
                    "Rule",
                    "0.61, below the threshold",
                    0
                ),
                (
                    "below_threshold",
                    "001 • unscored".into(),
                    "Rule",
                    "below the threshold",
                    0
                ),
                (
                    "knowledge_cap",
                    "009 • big".into(),
                    "Reference",
                    "left out: over the knowledge budget",
                    5_000
                ),
                (
                    "knowledge_cap",
                    "004 • late".into(),
                    "Rule",
                    "left out: over the knowledge budget",
                    80
                ),
            ]
        );
        // A capped item keeps how it would have come in.
        assert_eq!(misses[4].cell.badge_text(en()), "Manual");
        assert_eq!(misses[5].cell.badge_text(en()), "Expansion 0.55");
        assert!(item_misses(en(), &receipt()).is_empty());
    }

    #[test]
    fn the_section_shows_only_when_there_is_something_to_show() {
        assert_eq!(item_section(en(), &receipt()), None);
        let with_part = Receipt {
            parts: vec![Part {
                kind: PartKind::Item(note(ItemRef::rule("style"), Included::Always, None, 1)),
                reason: Reason::Always,
                tokens: 40,
            }],
            ..receipt()
        };
        let section = item_section(en(), &with_part).unwrap();
        assert_eq!(section.columns.rules.len(), 1);
        assert!(section.columns.references.is_empty() && section.columns.tools.is_empty());
        assert!(section.misses.is_empty() && section.search.is_none());

        let with_miss = Receipt {
            left_out: vec![LeftOut::item(
                note(ItemRef::rule("errors"), Included::Agent, Some(0.612), 2),
                LeftOutWhy::BelowThreshold,
                0,
            )],
            ..receipt()
        };
        let section = item_section(en(), &with_miss).unwrap();
        assert!(section.columns.is_empty());
        assert_eq!(section.misses.len(), 1);

        let with_note = Receipt {
            item_search: Some(ItemSearchNote {
                status: ItemSearchStatus::Unavailable,
                reason: Some("the embedding model is still loading".into()),
            }),
            ..receipt()
        };
        let section = item_section(en(), &with_note).unwrap();
        assert!(section.columns.is_empty() && section.misses.is_empty());
        assert_eq!(
            section.search.as_deref(),
            Some(
                "Semantic search was unavailable (the embedding model is still loading): this \
                 reply went without agent-chosen items."
            )
        );
        // `done` says nothing, so it alone shows no section.
        let done = Receipt {
            item_search: Some(ItemSearchNote {
                status: ItemSearchStatus::Done,
                reason: None,
            }),
            ..receipt()
        };
        assert_eq!(item_section(en(), &done), None);
    }

    #[test]
    fn the_search_note_says_why_no_agent_items_went() {
        let note = |status, reason: Option<&str>| ItemSearchNote {
            status,
            reason: reason.map(str::to_owned),
        };
        assert_eq!(
            item_search_words(
                en(),
                &note(ItemSearchStatus::Unavailable, Some("no embedding model"))
            ),
            "Semantic search was unavailable (no embedding model): this reply went without \
             agent-chosen items."
        );
        assert_eq!(
            item_search_words(en(), &note(ItemSearchStatus::Failed, None)),
            "Semantic search failed: this reply went without agent-chosen items."
        );
        assert!(
            item_search_words(en(), &note(ItemSearchStatus::NoAgentItems, None))
                .starts_with("No items")
        );
        assert_eq!(
            item_search_words(en(), &note(ItemSearchStatus::Done, None)),
            ""
        );
        assert!(
            en().get(left_out_words(LeftOutWhy::MemoryCap))
                .contains("pinned")
        );
    }

    #[test]
    fn calls_of_one_round_are_numbered_apart() {
        let exchange = |round, call_id: &str| Part {
            kind: PartKind::ToolExchange {
                round,
                name: "set_relevant_context".into(),
                call_id: call_id.into(),
                error: false,
            },
            reason: Reason::ToolLoop,
            tokens: 10,
        };
        let r = Receipt {
            parts: vec![exchange(0, "a"), exchange(0, "b"), exchange(1, "c")],
            ..receipt()
        };
        let labels: Vec<String> = part_rows(en(), &r).into_iter().map(|r| r.label).collect();
        assert_eq!(
            labels,
            [
                "Tool round 1, call 1: set_relevant_context",
                "Tool round 1, call 2: set_relevant_context",
                "Tool round 2, call 1: set_relevant_context",
            ]
        );
    }

    #[test]
    fn totals_put_our_count_beside_the_providers() {
        let r = receipt();
        let t = totals(
            &r,
            Some(Usage {
                input_tokens: 1_000,
                output_tokens: 42,
                counted: false,
            }),
        );
        assert_eq!(t.parts_tokens, 1_000);
        assert_eq!(t.counted_input, 1_003);
        assert_eq!(t.reported, Some((1_000, 42)));
        assert!((t.drift_percent.unwrap() - 0.3).abs() < 1e-9);
        assert_eq!(t.left_out_tokens, 7);
        let none = totals(&r, None);
        assert_eq!((none.reported, none.drift_percent), (None, None));
        // A provider reporting 0 input tokens gives no ratio rather than infinity.
        let zero = totals(
            &r,
            Some(Usage {
                input_tokens: 0,
                output_tokens: 0,
                counted: false,
            }),
        );
        assert_eq!(zero.drift_percent, None);
        // Our counts of a stopped reply are no report to compare with.
        let ours = totals(
            &r,
            Some(Usage {
                input_tokens: 1_003,
                output_tokens: 9,
                counted: true,
            }),
        );
        assert_eq!((ours.reported, ours.drift_percent), (None, None));
    }
}
