//! A receipt in words, for the "View context" dialog: one row per part (what it is, why it went,
//! its tokens), one per left-out run or item, the totals beside the provider's reported usage, and
//! the items in three columns (rules, references, tools) above the ones that did not go (near
//! misses, the knowledge cap's) and the search's note. Pure, so the wording is tested natively
//! and the widget only lays the rows out (as text, never as HTML).

use super::items::{Included, ItemKind, ItemRef};
use super::receipt::{
    ItemNote, ItemSearchNote, ItemSearchStatus, LeftOut, LeftOutWhy, Part, PartKind, Reason,
    Receipt,
};
use super::score::Score;
use crate::attachments::FileKind;
use crate::number::fixed;
use crate::vocab::Usage;

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
    pub note: Option<&'static str>,
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
pub fn part_rows(receipt: &Receipt) -> Vec<ReceiptRow> {
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
            part_row(part, call)
        })
        .collect()
}

/// Rows for the history that was left out, oldest first. Items left out are not among them: the
/// items section lists them under its columns (`item_misses`), so each shows once.
pub fn left_out_rows(receipt: &Receipt) -> Vec<ReceiptRow> {
    receipt
        .left_out
        .iter()
        .filter(|l| l.item.is_none())
        .map(left_out_row)
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

/// Why a part went, in words.
pub fn reason_words(reason: Reason) -> &'static str {
    match reason {
        Reason::Always => "always sent",
        Reason::Fits => "fits the budget",
        Reason::Preserved => "recent: compression never touches it",
        Reason::Compression => "written by the model in place of older messages",
        Reason::Resume => "first message after the session resumed",
        Reason::ToolLoop => "the model called a tool while answering",
        Reason::Sticky => "a standing instruction: always sent",
        Reason::Pinned => "pinned by you: always sent",
        Reason::TopicMember => "grouped under a selected topic",
        Reason::TopicMatch => "matches a selected topic",
        Reason::Fallback => "no message matched the selected topics, so all of them went",
        Reason::Manual => "added to this conversation by you",
        Reason::Agent => "semantic search matched it to your message",
        Reason::Expansion => "semantic search matched it to an item already chosen",
        Reason::Loaded => "left out over the tool budget, then loaded by the model in this reply",
    }
}

/// Why messages were left out, in words.
pub fn left_out_words(why: LeftOutWhy) -> &'static str {
    match why {
        LeftOutWhy::LowValue => "an acknowledgement compression leaves out",
        LeftOutWhy::Window => "older than compression's sliding window",
        LeftOutWhy::Summarized => "replaced by the summary",
        LeftOutWhy::SummaryUnavailable => "compression wanted a summary but none could be written",
        LeftOutWhy::TopicFilter => "below the threshold for the selected topics",
        LeftOutWhy::OtherTopic => "about a topic you did not select",
        LeftOutWhy::Excluded => "excluded by you",
        LeftOutWhy::MemoryCap => {
            "pinned or a standing instruction beyond the tokens kept for them, so compression \
             treated it as older history and left it out"
        }
        LeftOutWhy::BelowThreshold => "semantic search scored it just below what it chose",
        LeftOutWhy::KnowledgeCap => {
            "rules and references may take only a quarter of the window: lower-ranked items go \
             first"
        }
        LeftOutWhy::ToolCap => {
            "the tools may take only the tool budget: lower-ranked tools go first, and the model \
             can load them"
        }
    }
}

/// The note on a receipt's item search, in words (empty for `done`, which receipts do not record).
pub fn item_search_words(note: &ItemSearchNote) -> String {
    let why = note
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let base = match note.status {
        ItemSearchStatus::Done => return String::new(),
        ItemSearchStatus::NoAgentItems => {
            return "No items for semantic search to choose from.".to_owned();
        }
        ItemSearchStatus::Unavailable => "Semantic search was unavailable",
        ItemSearchStatus::Failed => "Semantic search failed",
    };
    match why {
        Some(why) => format!("{base} ({why}): this reply went without agent-chosen items."),
        None => format!("{base}: this reply went without agent-chosen items."),
    }
}

/// An item's label: "Rule 001 · auth", "Tool fs.read".
fn item_label(note: &ItemNote) -> String {
    match &note.item.kind {
        ItemKind::Rule => format!("Rule {:03} · {}", note.priority, note.item.name),
        ItemKind::Reference => format!("Reference {:03} · {}", note.priority, note.item.name),
        ItemKind::Tool { server } => format!("Tool {server}.{}", note.item.name),
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
    /// How it came in: "Always", "Manual", "Agent", "Expansion".
    pub badge: &'static str,
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

    /// Its badge with its score, when it has one: "Always", "Agent 0.87".
    pub fn badge_text(&self) -> String {
        match &self.score {
            Some(score) => format!("{} {score}", self.badge),
            None => self.badge.to_owned(),
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
    /// Its type: "Rule", "Reference", "Tool".
    pub kind: &'static str,
    /// Why it did not go: "0.62, below the threshold", "left out: over the knowledge budget".
    pub why: String,
}

/// The items a receipt's request did not carry: the near misses, best first, then the items the
/// knowledge cap left out, in the receipt's order (lowest-ranked first).
pub fn item_misses(receipt: &Receipt) -> Vec<MissRow> {
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
        kind: match note.item.kind {
            ItemKind::Rule => "Rule",
            ItemKind::Reference => "Reference",
            ItemKind::Tool { .. } => "Tool",
        },
        why,
    };
    let near = near.into_iter().map(|(note, tokens)| {
        let why = match note.score {
            Some(s) => format!("{}, below the threshold", fixed(s.value().into(), 2)),
            None => "below the threshold".to_owned(),
        };
        row(note, tokens, "below_threshold", why)
    });
    let capped = capped.into_iter().map(|(note, tokens, tool)| match tool {
        false => row(
            note,
            tokens,
            "knowledge_cap",
            "left out: over the knowledge budget".to_owned(),
        ),
        true => row(
            note,
            tokens,
            "tool_cap",
            "left out: over the tool budget (the model can load it)".to_owned(),
        ),
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
pub fn item_section(receipt: &Receipt) -> Option<ItemSection> {
    let section = ItemSection {
        columns: item_columns(receipt),
        misses: item_misses(receipt),
        search: receipt
            .item_search
            .as_ref()
            .map(item_search_words)
            .filter(|w| !w.is_empty()),
    };
    let empty = section.columns.is_empty() && section.misses.is_empty() && section.search.is_none();
    (!empty).then_some(section)
}

/// `why` with the scores of a run under the topic filter: "… (score 0.62)", "… (scores 0.41–0.80)".
fn with_scores(why: &str, scores: &[Option<Score>]) -> String {
    let known: Vec<f32> = scores.iter().flatten().map(|s| s.value()).collect();
    let (Some(lo), Some(hi)) = (
        known.iter().copied().reduce(f32::min),
        known.iter().copied().reduce(f32::max),
    ) else {
        return why.to_owned();
    };
    if known.len() == 1 || (hi - lo).abs() < 0.0005 {
        format!("{why} (score {})", fixed(lo.into(), 2))
    } else {
        format!(
            "{why} (scores {}–{})",
            fixed(lo.into(), 2),
            fixed(hi.into(), 2)
        )
    }
}

fn messages(count: u32) -> String {
    if count == 1 {
        "1 message".to_owned()
    } else {
        format!("{count} messages")
    }
}

/// `call` is the tool call's number within its round (1-based; 0 for other parts).
fn part_row(part: &Part, call: u32) -> ReceiptRow {
    let row = |kind, label: String| ReceiptRow {
        kind,
        label,
        why: reason_words(part.reason).to_owned(),
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
    match &part.kind {
        PartKind::SystemPrompt => ReceiptRow {
            note: Some("Its text stays on the server."),
            ..row("system_prompt", "System prompt".to_owned())
        },
        PartKind::PageContext { keys } => ReceiptRow {
            names: keys.clone(),
            note: Some("Sent as data from the page, not as instructions."),
            ..row("page_context", "Page context".to_owned())
        },
        PartKind::Summary {
            first_id,
            last_id,
            count,
        } => ReceiptRow {
            messages: run(first_id, last_id, *count),
            ..row("summary", format!("Summary of {}", messages(*count)))
        },
        PartKind::History {
            first_id,
            last_id,
            count,
            scores,
        } => ReceiptRow {
            messages: run(first_id, last_id, *count),
            why: with_scores(reason_words(part.reason), scores),
            ..row("history", messages(*count))
        },
        PartKind::Tools { names } => ReceiptRow {
            names: names.clone(),
            note: Some(
                "Definitions and instructions stay on the server; each tool item has a row of its own.",
            ),
            ..row("tools", "Tools offered".to_owned())
        },
        PartKind::Resume { sets } => ReceiptRow {
            names: sets.clone(),
            ..row("resume", "Reminder of the session's context".to_owned())
        },
        PartKind::ToolExchange {
            round, name, error, ..
        } => row(
            "tool_exchange",
            format!(
                "Tool round {}, call {call}: {name}{}",
                round + 1,
                if *error { " (error)" } else { "" }
            ),
        ),
        PartKind::Attachments { names } => ReceiptRow {
            names: names.clone(),
            note: Some("Their metadata (name, type, size, link), sent as data."),
            ..row("attachments", "Its attachments".to_owned())
        },
        PartKind::File { name, file, .. } => ReceiptRow {
            names: vec![name.clone()],
            note: Some(match file {
                FileKind::Image => "Sent as an image; tokens by the provider's rule for its size.",
                FileKind::Text => "Its text, sent as delimited data.",
            }),
            ..row(
                "file",
                match file {
                    FileKind::Image => format!("Image {name}"),
                    FileKind::Text => format!("Text file {name}"),
                },
            )
        },
        PartKind::UserMessage { id } => ReceiptRow {
            messages: id.as_ref().and_then(|id| run(id, id, 1)),
            ..row("user_message", "The message being answered".to_owned())
        },
        PartKind::Item(note) => item_row(
            "item",
            note,
            reason_words(part.reason),
            part.tokens,
            Some(match note.item.kind {
                ItemKind::Tool { .. } => {
                    "Its definition is offered with the request; its results come back as data."
                }
                _ => "Sent as data in your message's turn, after the conversation.",
            }),
        ),
    }
}

/// A row for an item: its label, `why` with its score, its description listed under it.
fn item_row(
    kind: &'static str,
    note: &ItemNote,
    why: &str,
    tokens: u32,
    remark: Option<&'static str>,
) -> ReceiptRow {
    ReceiptRow {
        kind,
        label: item_label(note),
        why: with_scores(why, &[note.score]),
        tokens,
        names: (!note.description.is_empty())
            .then(|| note.description.clone())
            .into_iter()
            .collect(),
        messages: None,
        note: remark,
    }
}

fn left_out_row(l: &LeftOut) -> ReceiptRow {
    ReceiptRow {
        kind: "left_out",
        label: messages(l.count),
        why: with_scores(left_out_words(l.why), &l.scores),
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
    use crate::context::TokenBreakdown;
    use crate::context::items::ItemRef;
    use crate::context::meter::ContextReport;
    use crate::context::receipt::Overflow;

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
        let rows = part_rows(&receipt());
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
        assert!(rows[0].note.is_some_and(|n| n.contains("server")));

        let left = left_out_rows(&receipt());
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
            part_rows(&r)[0].why,
            "matches a selected topic (scores 0.41–0.80)"
        );
        assert_eq!(
            left_out_rows(&r)[0].why,
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
        let rows = part_rows(&r);
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
            rows[3].note,
            Some("Its definition is offered with the request; its results come back as data.")
        );
        assert!(
            rows.iter()
                .all(|r| r.kind == "item" && r.messages.is_none())
        );
        // Items left out show under the columns only, not among the history left out.
        assert!(left_out_rows(&r).is_empty());

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
        assert_eq!(auth.badge_text(), "Agent 0.87");
        let api = cell(note(ItemRef::reference("api"), Included::Manual, None, 12));
        assert_eq!(
            (api.label(), api.badge_text()),
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
        assert_eq!(grown.badge_text(), "Expansion 0.50");
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
        let misses = item_misses(&r);
        let summary: Vec<(&str, String, &str, &str, u32)> = misses
            .iter()
            .map(|m| {
                (
                    m.cause,
                    m.cell.label(),
                    m.kind,
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
        assert_eq!(misses[4].cell.badge_text(), "Manual");
        assert_eq!(misses[5].cell.badge_text(), "Expansion 0.55");
        assert!(item_misses(&receipt()).is_empty());
    }

    #[test]
    fn the_section_shows_only_when_there_is_something_to_show() {
        assert_eq!(item_section(&receipt()), None);
        let with_part = Receipt {
            parts: vec![Part {
                kind: PartKind::Item(note(ItemRef::rule("style"), Included::Always, None, 1)),
                reason: Reason::Always,
                tokens: 40,
            }],
            ..receipt()
        };
        let section = item_section(&with_part).unwrap();
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
        let section = item_section(&with_miss).unwrap();
        assert!(section.columns.is_empty());
        assert_eq!(section.misses.len(), 1);

        let with_note = Receipt {
            item_search: Some(ItemSearchNote {
                status: ItemSearchStatus::Unavailable,
                reason: Some("the embedding model is still loading".into()),
            }),
            ..receipt()
        };
        let section = item_section(&with_note).unwrap();
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
        assert_eq!(item_section(&done), None);
    }

    #[test]
    fn the_search_note_says_why_no_agent_items_went() {
        let note = |status, reason: Option<&str>| ItemSearchNote {
            status,
            reason: reason.map(str::to_owned),
        };
        assert_eq!(
            item_search_words(&note(
                ItemSearchStatus::Unavailable,
                Some("no embedding model")
            )),
            "Semantic search was unavailable (no embedding model): this reply went without \
             agent-chosen items."
        );
        assert_eq!(
            item_search_words(&note(ItemSearchStatus::Failed, None)),
            "Semantic search failed: this reply went without agent-chosen items."
        );
        assert!(
            item_search_words(&note(ItemSearchStatus::NoAgentItems, None)).starts_with("No items")
        );
        assert_eq!(item_search_words(&note(ItemSearchStatus::Done, None)), "");
        assert!(left_out_words(LeftOutWhy::MemoryCap).contains("pinned"));
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
        let labels: Vec<String> = part_rows(&r).into_iter().map(|r| r.label).collect();
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
