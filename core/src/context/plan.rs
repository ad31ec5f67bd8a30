//! One plan per turn (docs/context-planning.md): [`plan_turn`] takes what a turn gathered and
//! returns the receipt and the provider request built from it, with the meter's reading. The server
//! (the request it sends), the widget's meter (a draft's preview) and the standalone meter all call
//! it, so they cannot disagree; [`build_request`] is the one function that writes what the model
//! sees, and it reads only the receipt and the texts the receipt names.

use std::borrow::Cow;
use std::cmp::{Ordering, Reverse};
use std::ops::Range;

use crate::attachments::{FileContent, FileContents, FileKind, file_tokens, prompt_files};
use crate::prompt::{
    ProviderRequest, attachments_segment, page_context_segment, replay, replay_round,
    summary_segment,
};
use crate::tokens::Framing;
use crate::vocab::{Attachment, PageContext, Role, ToolDefinition, ToolExchange, ToolRound};

use super::budget::{MEMORY_CAP, knowledge_cap};
use super::compression::{CountedMessage, SUMMARY_RESERVE, Strategy, is_low_value};
use super::items::{Included, ItemKind, ItemRef, RequestItem, item_entry, item_heading};
use super::meter::{self, ContextInfo, ContextReport, MeterReading};
use super::receipt::{
    FilterNote, ItemNote, ItemSearchNote, ItemSearchStatus, LeftOut, LeftOutWhy, Overflow, Part,
    PartKind, Reason, Receipt,
};
use super::score::Score;
use super::selection::{Choice, Dropped, Kept};
use super::tool_parts::{ToolCandidate, ToolInputs, offered, plan_tools};
use super::{CompressionReport, TokenBreakdown};

/// A message that reaches the model, as the model reads it (a stored one: `ChatMessage::as_turn`).
#[derive(Debug, Clone)]
pub struct TurnMessage<'a> {
    /// The stored id (`None` for a draft not sent yet).
    pub id: Option<&'a str>,
    pub role: Role,
    /// The words of the message.
    pub text: Cow<'a, str>,
    /// The user's attachments (a part of their own: `prompt::attachments_segment`).
    pub attachments: &'a [Attachment],
    /// A reply's tool rounds (replayed in the provider's format).
    pub rounds: &'a [ToolRound],
}

impl<'a> TurnMessage<'a> {
    /// A user's message not sent yet (the preview), with its attachments.
    pub fn draft(text: &'a str, attachments: &'a [Attachment]) -> Self {
        Self {
            id: None,
            role: Role::User,
            text: Cow::Borrowed(text),
            attachments,
            rounds: &[],
        }
    }

    /// Tokens of its attachments' metadata part (0 without attachments), and each file whose
    /// contents were gathered with its own tokens.
    fn attachment_tokens(
        &self,
        files: &Files<'_>,
        count: &mut Count<'_>,
    ) -> (u32, Vec<(&'a Attachment, FileKind, u32)>) {
        if self.attachments.is_empty() {
            return (0, Vec::new());
        }
        let metadata = count(None, &attachments_segment(self.attachments));
        let each = self
            .attachments
            .iter()
            .filter_map(|a| {
                let content = files.content(a)?;
                // Keyed by the file's id: its text does not change, so the widget counts it once.
                let tokens =
                    file_tokens(a, content, files.model, &mut |t| count(a.id.as_deref(), t));
                Some((a, content.kind(), tokens))
            })
            .collect();
        (metadata, each)
    }

    /// Its tokens, attachments and tool rounds included (`per_message`: the framing of each
    /// message a tool round adds).
    fn tokens(&self, per_message: u32, files: &Files<'_>, count: &mut Count<'_>) -> u32 {
        let (metadata, each) = self.attachment_tokens(files, count);
        let text =
            count(self.id, &self.text) + metadata + each.iter().map(|(_, _, t)| t).sum::<u32>();
        let rounds: u32 = self
            .rounds
            .iter()
            .flat_map(|r| &r.exchanges)
            .map(|e| exchange_tokens(e, per_message, count))
            .sum();
        text + rounds
    }
}

/// The turn's gathered file contents, and the model their tokens are counted for.
struct Files<'f> {
    contents: Option<&'f FileContents>,
    model: &'f str,
}

impl<'f> Files<'f> {
    fn content(&self, a: &Attachment) -> Option<&'f FileContent> {
        self.contents?.get(a.id.as_deref()?)
    }
}

/// Tokens of one tool exchange: the call (name and arguments) and its result with its images,
/// each a message framed with `per_message` tokens ([`Framing`]).
pub fn exchange_tokens(e: &ToolExchange, per_message: u32, count: &mut Count<'_>) -> u32 {
    count(None, &e.call.name)
        + count(None, &e.call.arguments)
        + count(None, &e.result)
        + e.images.iter().map(|i| i.tokens).sum::<u32>()
        + 2 * per_message
}

/// The reminder of the session's context sets for the first message after a resume.
#[derive(Debug, Clone, Copy)]
pub struct ResumeInput<'a> {
    /// The block as the model reads it (`sets::resume_block`).
    pub block: &'a str,
    /// The names of the sets it mentions.
    pub sets: &'a [String],
}

/// The reply being written: its text so far and the tool rounds it has made.
#[derive(Debug, Clone, Copy, Default)]
pub struct CurrentReply<'a> {
    pub text: &'a str,
    pub rounds: &'a [ToolRound],
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

impl<'a> SummaryInput<'a> {
    /// The summary's text, when written.
    pub fn text(&self) -> Option<&'a str> {
        match *self {
            Self::Written { text, .. } => Some(text),
            Self::Failed => None,
        }
    }
}

/// Everything gathered for one turn: the window's facts, the history and the other sources.
#[derive(Debug, Clone)]
pub struct TurnInput<'a> {
    /// The window's facts: model, limit, reserve, compression settings.
    pub info: &'a ContextInfo,
    /// The history that reaches the model, oldest first, ending with the message being answered.
    pub messages: &'a [TurnMessage<'a>],
    /// What else the turn brings (system prompt, page context, tools, …).
    pub sources: TurnSources<'a>,
}

impl<'a> TurnInput<'a> {
    /// A turn of only its history (every other source absent).
    pub fn new(info: &'a ContextInfo, messages: &'a [TurnMessage<'a>]) -> Self {
        Self {
            info,
            messages,
            sources: TurnSources::default(),
        }
    }
}

/// The sources of a turn besides its history, one field each, absent by default: a new source is
/// one new field here. The plan reads all of them; [`build_request`] the texts the receipt names.
#[derive(Debug, Clone, Default)]
pub struct TurnSources<'a> {
    /// The operator's system prompt; `None` where only its token count is known (the widget).
    pub system_prompt: Option<&'a str>,
    /// The host page's context sent with the message.
    pub page_context: Option<&'a PageContext>,
    /// The summary compression asked for, once written or failed.
    pub summary: Option<SummaryInput<'a>>,
    /// The tools offered; empty in the widget, which counts them from `info.tool_tokens`.
    pub tools: &'a [ToolDefinition],
    /// The system-prompt section about the tools (the server's; `None` when switched off).
    pub tool_instructions: Option<&'a str>,
    /// Most tokens the tool items' definitions may take (`None`: no limit); the lowest-ranked
    /// over it are left out (`tool_cap`) and [`super::tool_parts::LOAD_TOOLS`] offered.
    pub tool_budget: Option<u32>,
    /// Tool items the model loaded earlier in the session: offered whatever the budget (their
    /// tokens count against it first).
    pub loaded_tools: &'a [ItemRef],
    /// The resume reminder, on the first message after a resume.
    pub resume: Option<ResumeInput<'a>>,
    /// Which history goes (topic filter, sticky, pins, excludes); `None`: all of it.
    pub selection: Option<Selection<'a>>,
    /// The agent's rules and references for this request and how semantic search went; `None`:
    /// the turn has no items (and the receipt says nothing about them).
    pub items: Option<ItemsInput<'a>>,
    /// The contents of the history's uploaded files, by attachment id; a file without contents
    /// here reaches the model as its metadata only.
    pub files: Option<&'a FileContents>,
    /// The history older than what one window can hold, when it was not read (the server reads a
    /// long session's newest messages only); `None`: the history is whole.
    pub earlier: Option<Earlier<'a>>,
}

/// History the turn did not read: older than the newest messages that one window can hold (see
/// docs/context-planning.md, "A turn"). It is left out whole (`beyond_window`), uncounted.
#[derive(Debug, Clone, Copy)]
pub struct Earlier<'a> {
    /// The messages among it that reach the model, and the oldest's and newest's ids.
    pub count: u32,
    pub first_id: &'a str,
    pub last_id: &'a str,
    /// Where the read history starts in `messages`: the messages before it are memories found
    /// among the unread ones (pinned messages, standing instructions), oldest first. Runs of the
    /// receipt and a summary never span it.
    pub from: usize,
}

/// The context items of a turn, gathered by the server: the items for the request with their
/// texts, what semantic search nearly chose, and how the search went. The plan orders the items,
/// counts them, applies knowledge's share of the window and writes them into the receipt; the
/// request carries exactly the item parts of the receipt.
#[derive(Debug, Clone, Copy)]
pub struct ItemsInput<'a> {
    /// The items for the request: the session's (`always`, `manual`), then search's choices
    /// (`agent`, `expansion`; `items::request_items` makes this list), in any order — the plan
    /// orders them. An item listed twice counts once (the first). Tools are not written here
    /// (they are offered through `tools`); a tool listed is skipped.
    pub chosen: &'a [ChosenItem<'a>],
    /// The best agent items search scored but did not choose, best first
    /// (`glassbox_analysis::item_search::SearchOutcome::near_misses`): listed in the receipt as left out.
    pub near_misses: &'a [NearMiss<'a>],
    /// How the search went (recorded in the receipt unless it ran).
    pub search: ItemSearch<'a>,
}

/// One item for the request, with what the receipt and the request need of it.
#[derive(Debug, Clone, Copy)]
pub struct ChosenItem<'a> {
    /// Its identity, how it came in and its score (`agent`, `expansion`).
    pub request: &'a RequestItem,
    /// Its priority (lower first).
    pub priority: i32,
    /// Its one-line description (empty: none), kept in the receipt for the "View context" dialog.
    pub description: &'a str,
    /// Its text, as the model reads it (delimited, escaped: `prompt::item_entry`).
    pub text: &'a str,
    /// Its entry's tokens when counted elsewhere: the widget's meter has the server's count of
    /// each item (a preview's receipt), not its text. `None`: counted from `text` (a tool item's
    /// from `definition`).
    pub tokens: Option<u32>,
    /// For a tool item, the definition offered for it (one of `TurnSources::tools`); `None` for
    /// rules and references, and in the widget.
    pub definition: Option<&'a ToolDefinition>,
}

/// An agent item semantic search scored among the best but did not choose.
#[derive(Debug, Clone, Copy)]
pub struct NearMiss<'a> {
    /// Its identity.
    pub item: &'a ItemRef,
    /// Its priority (lower first).
    pub priority: i32,
    /// Its one-line description (empty: none).
    pub description: &'a str,
    /// Its best similarity to the message.
    pub score: Score,
}

/// How a turn's semantic search for agent items went. Whatever it was, the turn goes on: without
/// agent items when the search did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemSearch<'a> {
    /// It ran; its choices are among `chosen`, its near misses in `near_misses`.
    Done,
    /// The agent has no `agent` items the session does not carry: nothing to search.
    NoAgentItems,
    /// No embeddings to search with (the reason, in words).
    Unavailable(&'a str),
    /// Embedding the message or the items failed (the reason, in words).
    Failed(&'a str),
}

impl ItemSearch<'_> {
    /// The receipt's note for it (`None` when it ran).
    pub fn note(&self) -> Option<ItemSearchNote> {
        let (status, reason) = match *self {
            Self::Done => return None,
            Self::NoAgentItems => (ItemSearchStatus::NoAgentItems, None),
            Self::Unavailable(r) => (ItemSearchStatus::Unavailable, Some(r.to_owned())),
            Self::Failed(r) => (ItemSearchStatus::Failed, Some(r.to_owned())),
        };
        Some(ItemSearchNote { status, reason })
    }
}

/// The history selection of a turn ([`super::selection::select`]).
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    /// One choice per history message (`messages` without the last, which always goes), in order.
    pub choices: &'a [Choice],
    /// The topic filter that made them, recorded on the receipt.
    pub filter: Option<&'a FilterNote>,
}

/// The plan of one turn.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    pub receipt: Receipt,
    /// Built from the receipt; not to be sent when `receipt.overflow` is set.
    pub request: ProviderRequest,
    /// The meter's reading of the same plan.
    pub reading: MeterReading,
    /// Compression wants these messages (indices into `messages`, oldest first) summarized and no
    /// summary for exactly them was given: write it, then plan again with it.
    pub summary_wanted: Option<Vec<usize>>,
}

/// Counts a text's tokens; `key` is a stored message's id (counts can be cached by it).
pub type Count<'c> = dyn FnMut(Option<&str>, &str) -> u32 + 'c;

/// Plans a turn: compression against the budget, the ordered parts, what was left out, whether it
/// fits, and the request.
///
/// The window is shared out as `budget` describes, with two decisions made here:
///
/// - **Memories** (pinned messages and standing instructions) are protected from compression up to
///   [`MEMORY_CAP`] tokens (less any user memories): pinned messages first (the user's explicit
///   choice), then standing instructions, the newest first within each. Once one does not fit,
///   it and every one after it in that order lose their protection: they are ordinary history,
///   which compression may leave out (`memory_cap` in the receipt) or summarize.
/// - **Knowledge** (rules and references) may take [`knowledge_cap`] tokens. When the items do not
///   fit, the lowest-ranked are left out first (`knowledge_cap`), so an item never goes while a
///   higher-ranked one stays out. Ranked from the first to keep to the first to leave out:
///   `always` items, then `manual` ones (each by priority, then name), then `agent` items by
///   score (best first), then `expansion` items by score (they only resemble chosen items).
pub fn plan_turn(input: &TurnInput<'_>, count: &mut Count<'_>) -> TurnPlan {
    let info = input.info;
    let msgs = input.messages;
    let sources = &input.sources;
    let framing = Framing::for_encoding(&info.encoding);
    let files = Files {
        contents: sources.files,
        model: &info.model,
    };
    let counted: Vec<CountedMessage> = msgs
        .iter()
        .map(|m| CountedMessage {
            // A message with attachments is never an acknowledgement to drop: compression reads
            // no text for it.
            content: if m.attachments.is_empty() {
                &m.text
            } else {
                ""
            },
            tokens: m.tokens(framing.per_message, &files, count),
        })
        .collect();
    let cost = |i: usize| counted[i].tokens + framing.per_message;
    let context_tokens = sources
        .page_context
        .map(|c| count(None, &page_context_segment(c)));
    let system_tokens = match sources.system_prompt {
        Some(text) => count(None, text),
        None => info.system_prompt_tokens,
    };
    let tools = plan_tools(
        ToolInputs {
            candidates: &tool_candidates(sources),
            tools: sources.tools,
            instructions: sources.tool_instructions,
            budget: sources.tool_budget,
            builtin_tokens: info.tool_tokens,
        },
        count,
    );
    let tool_tokens = tools.tokens;
    let resume_tokens = sources.resume.map(|r| count(None, r.block));
    // The tools share the system prompt's part of the window; the resume block the page context's.
    let system_all = system_tokens + tool_tokens;
    let page_tokens = context_tokens.unwrap_or(0) + resume_tokens.unwrap_or(0);

    // Selection first: pinned and sticky messages go whatever compression decides while they fit
    // the memories' cap, dropped ones are out; compression works on the rest and the message
    // answered.
    let last = msgs.len().checked_sub(1);
    let choice = |i: usize| match sources.selection {
        Some(sel) if Some(i) != last => sel
            .choices
            .get(i)
            .copied()
            .unwrap_or(Choice::Kept(Kept::Unfiltered)),
        _ => Choice::Kept(Kept::Unfiltered),
    };
    // Memories: pinned first, then sticky, newest first, while they fit the cap.
    let mut protect_order: Vec<usize> = (0..msgs.len()).filter(|&i| choice(i).is_fixed()).collect();
    protect_order
        .sort_unstable_by_key(|&i| (!matches!(choice(i), Choice::Kept(Kept::Pinned)), Reverse(i)));
    let memory_room = MEMORY_CAP.saturating_sub(info.memory_tokens);
    let mut fixed: Vec<usize> = Vec::new();
    let mut fixed_tokens = 0;
    for i in protect_order {
        if fixed_tokens + cost(i) > memory_room {
            break;
        }
        fixed_tokens += cost(i);
        fixed.push(i);
    }
    fixed.sort_unstable();
    let mut protected = vec![false; msgs.len()];
    for &i in &fixed {
        protected[i] = true;
    }
    let memories = info.memory_tokens + fixed_tokens;
    let flowing: Vec<usize> = (0..msgs.len())
        .filter(|&i| choice(i).is_kept() && !protected[i])
        .collect();

    // Knowledge: the items that fit its share, ordered for the request.
    let cap = knowledge_cap(
        info.context_limit,
        info.output_reserve,
        system_all,
        memories,
    );
    let items = plan_items(sources.items.as_ref(), cap, count);

    let flowing_counted: Vec<CountedMessage> = flowing.iter().map(|&i| counted[i]).collect();
    let others = TokenBreakdown {
        system_prompt: system_tokens,
        tools: tool_tokens,
        knowledge: items.tokens,
        memories,
        conversation: 0,
        page_context: page_tokens,
    };
    let mut reading = meter::read(info, &flowing_counted, others);
    // Compression's indices, back in `messages`.
    let mut kept_idx: Vec<usize> = reading.plan.kept.iter().map(|&k| flowing[k]).collect();
    kept_idx.extend(&fixed);
    kept_idx.sort_unstable();
    // Where the read history starts (after the memories found among unread ones): no run spans it.
    let from = sources.earlier.map_or(0, |e| e.from);
    // A summary replaces one run of consecutive messages: where the selection left a gap (a pinned,
    // sticky or filtered message, or unread history), the summary stops and the rest of compression's range is left
    // out as the window would (so the receipt's range and the summary's text agree).
    let summarized: Option<Vec<usize>> = reading.plan.summarized.clone().map(|r| {
        let mut run: Vec<usize> = Vec::with_capacity(r.len());
        // Memories found among unread history (before `from`) that did not fit the cap are not
        // summarized: they are listed as `memory_cap`, as with the whole history.
        for i in r.map(|k| flowing[k]).skip_while(|&i| i < from) {
            if run.last().is_some_and(|&last| i != last + 1) {
                break;
            }
            run.push(i);
        }
        run
    });

    let mut parts = Vec::new();
    if sources.system_prompt.is_some() || system_tokens > 0 {
        parts.push(Part {
            kind: PartKind::SystemPrompt,
            reason: Reason::Always,
            tokens: system_tokens,
        });
    }
    parts.extend(tools.parts);
    if let (Some(ctx), Some(tokens)) = (sources.page_context, context_tokens) {
        parts.push(Part {
            kind: PartKind::PageContext {
                keys: ctx.keys().cloned().collect(),
            },
            reason: Reason::Always,
            tokens,
        });
    }
    if let (Some(resume), Some(tokens)) = (sources.resume, resume_tokens) {
        parts.push(Part {
            kind: PartKind::Resume {
                sets: resume.sets.to_vec(),
            },
            reason: Reason::Resume,
            tokens,
        });
    }

    // The summary, when compression wants one.
    let id_of = |i: usize| msgs[i].id.unwrap_or_default().to_owned();
    let mut left_out = tools.left_out;
    if let Some(e) = sources.earlier.filter(|e| e.count > 0) {
        left_out.push(LeftOut::messages(
            e.first_id.to_owned(),
            e.last_id.to_owned(),
            e.count,
            LeftOutWhy::BeyondWindow,
            0,
            Vec::new(),
        ));
    }
    let mut summary_wanted = None;
    let mut summary_tokens = 0;
    if let Some(range) = summarized.clone().filter(|r| !r.is_empty()) {
        let (first, last) = (id_of(range[0]), id_of(range[range.len() - 1]));
        let why = match sources.summary {
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
                LeftOutWhy::Summarized
            }
            Some(SummaryInput::Failed) => LeftOutWhy::SummaryUnavailable,
            // Not written yet (or written for another range): count its reserve, ask for it.
            _ => {
                summary_tokens = SUMMARY_RESERVE;
                summary_wanted = Some(range.clone());
                LeftOutWhy::Summarized
            }
        };
        left_out.push(LeftOut::messages(
            first,
            last,
            range.len() as u32,
            why,
            range.iter().map(|&i| cost(i)).sum(),
            Vec::new(),
        ));
    }

    // History: kept messages grouped by reason; dropped ones grouped by why. Compression's
    // preserved tail counts among the messages it worked on.
    let outcome = &reading.plan;
    let preserve_from = match flowing
        .len()
        .checked_sub(info.compression.preserve_recent_messages as usize)
    {
        Some(k) => flowing.get(k).copied().unwrap_or(usize::MAX),
        None => 0,
    };
    let mut kept = vec![false; msgs.len()];
    for &i in &kept_idx {
        kept[i] = true;
    }
    let mut in_summary = vec![false; msgs.len()];
    for &i in summarized.as_deref().unwrap_or_default() {
        in_summary[i] = true;
    }
    let low_value_strategy = matches!(outcome.strategy, Strategy::DropLowValue | Strategy::Hybrid);
    let mut history: Vec<(Range<usize>, Reason)> = Vec::new();
    let mut dropped: Vec<(Range<usize>, LeftOutWhy)> = Vec::new();
    for i in 0..last.unwrap_or(0) {
        match choice(i) {
            Choice::Dropped(d) => {
                let why = match d {
                    Dropped::Excluded => LeftOutWhy::Excluded,
                    Dropped::TopicFilter(_) => LeftOutWhy::TopicFilter,
                    Dropped::OtherTopic(_) => LeftOutWhy::OtherTopic,
                };
                extend_run(&mut dropped, i, why, from);
            }
            Choice::Kept(k) if kept[i] => {
                let reason = match k {
                    Kept::Pinned => Reason::Pinned,
                    Kept::Sticky => Reason::Sticky,
                    Kept::TopicMember(_) => Reason::TopicMember,
                    Kept::TopicMatch(_) => Reason::TopicMatch,
                    Kept::Fallback(_) => Reason::Fallback,
                    Kept::Unfiltered if outcome.applied && i >= preserve_from => Reason::Preserved,
                    Kept::Unfiltered => Reason::Fits,
                };
                extend_run(&mut history, i, reason, from);
            }
            Choice::Kept(_) if in_summary[i] => {}
            Choice::Kept(k) => {
                let why = if matches!(k, Kept::Pinned | Kept::Sticky) {
                    LeftOutWhy::MemoryCap
                } else if low_value_strategy
                    && msgs[i].attachments.is_empty()
                    && is_low_value(&msgs[i].text)
                {
                    LeftOutWhy::LowValue
                } else {
                    LeftOutWhy::Window
                };
                extend_run(&mut dropped, i, why, from);
            }
        }
    }
    let filtered = sources.selection.is_some_and(|s| s.filter.is_some());
    let scores = |range: &Range<usize>| -> Vec<Option<Score>> {
        if !filtered {
            return Vec::new();
        }
        range
            .clone()
            .map(|i| match choice(i) {
                Choice::Kept(Kept::TopicMatch(s)) => Some(Score::of(s)),
                Choice::Kept(Kept::Fallback(s) | Kept::TopicMember(s))
                | Choice::Dropped(Dropped::TopicFilter(s) | Dropped::OtherTopic(s)) => {
                    s.map(Score::of)
                }
                _ => None,
            })
            .collect()
    };
    for (range, reason) in history {
        let scores = match reason {
            Reason::TopicMatch | Reason::TopicMember | Reason::Fallback => scores(&range),
            _ => Vec::new(),
        };
        parts.push(Part {
            kind: PartKind::History {
                first_id: id_of(range.start),
                last_id: id_of(range.end - 1),
                count: range.len() as u32,
                scores,
            },
            reason,
            tokens: range.clone().map(cost).sum(),
        });
    }
    for (range, why) in dropped {
        left_out.push(LeftOut::messages(
            id_of(range.start),
            id_of(range.end - 1),
            range.len() as u32,
            why,
            range.clone().map(cost).sum(),
            match why {
                LeftOutWhy::TopicFilter | LeftOutWhy::OtherTopic => scores(&range),
                _ => Vec::new(),
            },
        ));
    }
    // The items, right after the history, before the message being answered.
    parts.extend(items.parts);
    left_out.extend(items.left_out);
    if let Some(i) = last {
        let (metadata, each) = msgs[i].attachment_tokens(&files, count);
        let file_tokens: u32 = each.iter().map(|(_, _, t)| t).sum();
        parts.push(Part {
            kind: PartKind::UserMessage {
                id: msgs[i].id.map(str::to_owned),
            },
            reason: Reason::Always,
            tokens: cost(i) - metadata - file_tokens,
        });
        if metadata > 0 {
            parts.push(Part {
                kind: PartKind::Attachments {
                    names: msgs[i].attachments.iter().map(|a| a.name.clone()).collect(),
                },
                reason: Reason::Always,
                tokens: metadata,
            });
        }
        // Each file with its contents: an image part, or a text file's segment.
        for (a, kind, tokens) in each {
            parts.push(Part {
                kind: PartKind::File {
                    id: a.id.clone().unwrap_or_default(),
                    name: a.name.clone(),
                    file: kind,
                },
                reason: Reason::Always,
                tokens,
            });
        }
    }

    // Totals, with the summary as written (or its reserve while it is wanted). The protected
    // pinned and sticky messages are memories, not conversation.
    let kept_tokens: u32 = kept_idx
        .iter()
        .filter(|&&i| !protected[i])
        .map(|&i| cost(i))
        .sum();
    let breakdown = TokenBreakdown {
        conversation: kept_tokens + summary_tokens,
        ..reading.breakdown
    };
    // Unread history is dropped too (its tokens, never counted, are not in `original_tokens`).
    let unread = sources.earlier.map_or(0, |e| e.count);
    let compression = reading.compression.clone().map(|c| CompressionReport {
        compressed_tokens: breakdown.conversation,
        saved_tokens: c.original_tokens.saturating_sub(breakdown.conversation),
        dropped_count: c.dropped_count + unread,
        ..c
    });
    let counted_input = breakdown.total() + framing.reply_priming;
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
        filter: sources.selection.and_then(|s| s.filter.cloned()),
        item_search: items.note,
    };
    // The meter reads the plan as planned: the summary as written, every part counted.
    reading.used = counted_input;
    reading.percent = meter::percent(counted_input, info.context_limit);
    reading.state = meter::state(reading.percent, reading.original_percent.is_some());
    reading.breakdown = breakdown;
    reading.compression = compression;
    let request = build_request(
        &receipt,
        &Sources {
            model: &info.model,
            messages: msgs,
            sources: sources.clone(),
            current: CurrentReply::default(),
        },
    );
    TurnPlan {
        receipt,
        request,
        reading,
        summary_wanted,
    }
}

/// The items of a turn as planned: their parts (in the request's order), what was left out, their
/// tokens and the search's note.
#[derive(Default)]
struct PlannedItems {
    parts: Vec<Part>,
    left_out: Vec<LeftOut>,
    tokens: u32,
    note: Option<ItemSearchNote>,
}

/// The order items are kept in under knowledge's cap, the first to keep first (see [`plan_turn`]).
fn by_rank(a: &ChosenItem<'_>, b: &ChosenItem<'_>) -> Ordering {
    let tier = |c: &ChosenItem| match c.request.included {
        Included::Always => 0,
        Included::Manual => 1,
        Included::Agent => 2,
        Included::Expansion => 3,
    };
    tier(a)
        .cmp(&tier(b))
        .then_with(|| b.request.score.cmp(&a.request.score))
        .then_with(|| by_request_order(a, b))
}

/// The order items are written in: rules, then references, each by priority (lower first), then
/// name.
fn by_request_order(a: &ChosenItem<'_>, b: &ChosenItem<'_>) -> Ordering {
    let segment = |c: &ChosenItem| matches!(c.request.item.kind, ItemKind::Reference);
    segment(a)
        .cmp(&segment(b))
        .then(a.priority.cmp(&b.priority))
        .then_with(|| a.request.item.name.cmp(&b.request.item.name))
        .then_with(|| a.request.item.kind.cmp(&b.request.item.kind))
}

/// The tool items a turn may offer, best-ranked first, each once.
fn tool_candidates<'a>(sources: &TurnSources<'a>) -> Vec<ToolCandidate<'a>> {
    let mut chosen: Vec<&ChosenItem<'a>> = Vec::new();
    for c in sources.items.iter().flat_map(|i| i.chosen) {
        if matches!(c.request.item.kind, ItemKind::Tool { .. })
            && !chosen.iter().any(|o| o.request.item == c.request.item)
        {
            chosen.push(c);
        }
    }
    chosen.sort_by(|a, b| by_rank(a, b));
    chosen
        .into_iter()
        .map(|c| ToolCandidate {
            note: note_of(c),
            reason: c.request.included.into(),
            tokens: c.tokens,
            definition: c.definition,
            loaded: sources.loaded_tools.contains(&c.request.item),
        })
        .collect()
}

/// The receipt's note of a chosen item.
fn note_of(c: &ChosenItem<'_>) -> ItemNote {
    ItemNote {
        item: c.request.item.clone(),
        include: c.request.included,
        score: c.request.score,
        priority: c.priority,
        description: c.description.to_owned(),
    }
}

/// Orders, counts and caps a turn's items: each item's part counts its entry, and the first of each
/// segment its heading too; the best-ranked that fit `cap` go.
fn plan_items(items: Option<&ItemsInput<'_>>, cap: u32, count: &mut Count<'_>) -> PlannedItems {
    let Some(items) = items else {
        return PlannedItems::default();
    };
    let mut chosen: Vec<&ChosenItem> = Vec::with_capacity(items.chosen.len());
    for c in items.chosen {
        let written = item_heading(&c.request.item.kind).is_some();
        if written && !chosen.iter().any(|o| o.request.item == c.request.item) {
            chosen.push(c);
        }
    }
    let entry_tokens: Vec<u32> = chosen
        .iter()
        .map(|c| {
            c.tokens.unwrap_or_else(|| {
                item_entry(&c.request.item, c.text).map_or(0, |e| count(None, &e))
            })
        })
        .collect();
    let mut heading_tokens = |kind: &ItemKind| item_heading(kind).map_or(0, |h| count(None, h));
    let rules_heading = heading_tokens(&ItemKind::Rule);
    let references_heading = heading_tokens(&ItemKind::Reference);
    let heading_of = |c: &ChosenItem| match c.request.item.kind {
        ItemKind::Reference => references_heading,
        _ => rules_heading,
    };

    // Keep the best-ranked while they fit (a segment's heading counts with its first item).
    let mut ranked: Vec<usize> = (0..chosen.len()).collect();
    ranked.sort_by(|&a, &b| by_rank(chosen[a], chosen[b]));
    let (mut used, mut has_rules, mut has_references) = (0u32, false, false);
    let mut sent = vec![false; chosen.len()];
    let mut cut: Vec<usize> = Vec::new();
    for &i in &ranked {
        let is_reference = matches!(chosen[i].request.item.kind, ItemKind::Reference);
        let opens = if is_reference {
            !has_references
        } else {
            !has_rules
        };
        let cost = entry_tokens[i] + if opens { heading_of(chosen[i]) } else { 0 };
        if !cut.is_empty() || used + cost > cap {
            cut.push(i);
            continue;
        }
        used += cost;
        sent[i] = true;
        if is_reference {
            has_references = true;
        } else {
            has_rules = true;
        }
    }

    let mut order: Vec<usize> = (0..chosen.len()).filter(|&i| sent[i]).collect();
    order.sort_by(|&a, &b| by_request_order(chosen[a], chosen[b]));
    let mut parts = Vec::with_capacity(order.len());
    let mut open: Option<&ItemKind> = None;
    for i in order {
        let c = chosen[i];
        let first = open != Some(&c.request.item.kind);
        open = Some(&c.request.item.kind);
        parts.push(Part {
            kind: PartKind::Item(note_of(c)),
            reason: c.request.included.into(),
            tokens: entry_tokens[i] + if first { heading_of(c) } else { 0 },
        });
    }
    let mut left_out: Vec<LeftOut> = cut
        .into_iter()
        .map(|i| {
            LeftOut::item(
                note_of(chosen[i]),
                LeftOutWhy::KnowledgeCap,
                entry_tokens[i],
            )
        })
        .collect();
    for m in items.near_misses {
        if chosen.iter().any(|c| &c.request.item == m.item) {
            continue;
        }
        let note = ItemNote {
            item: m.item.clone(),
            include: Included::Agent,
            score: Some(m.score),
            priority: m.priority,
            description: m.description.to_owned(),
        };
        left_out.push(LeftOut::item(note, LeftOutWhy::BelowThreshold, 0));
    }
    PlannedItems {
        parts,
        left_out,
        tokens: used,
        note: items.search.note(),
    }
}

/// Adds index `i` to the last run when it continues it with the same label, else starts a run.
/// Up to `from` (where the read history starts) every index is a run of its own: the memories
/// before it were found far apart among unread history.
fn extend_run<T: PartialEq + Copy>(
    runs: &mut Vec<(Range<usize>, T)>,
    i: usize,
    label: T,
    from: usize,
) {
    match runs.last_mut() {
        Some((r, l)) if r.end == i && *l == label && i > from => r.end = i + 1,
        _ => runs.push((i..i + 1, label)),
    }
}

/// The texts a receipt names: the messages that reach the model (oldest first), the turn's other
/// sources and the reply being written.
#[derive(Debug, Clone)]
pub struct Sources<'a> {
    /// The model the request is for.
    pub model: &'a str,
    /// The history that reaches the model, oldest first (a receipt names its messages by id).
    pub messages: &'a [TurnMessage<'a>],
    /// The turn's sources, as planned (the request reads the texts the receipt's parts name).
    pub sources: TurnSources<'a>,
    /// The reply being written, whose tool rounds the receipt's tool exchanges name.
    pub current: CurrentReply<'a>,
}

/// Builds the provider request from a receipt: exactly its parts, in its order, and nothing else.
/// Used for every request, and to rebuild a stored reply's request from its receipt.
pub fn build_request(receipt: &Receipt, src: &Sources<'_>) -> ProviderRequest {
    let turn = &src.sources;
    let mut system: Vec<Cow<str>> = Vec::new();
    let mut messages = Vec::new();
    let position = |id: &str| src.messages.iter().position(|m| m.id == Some(id));
    let files = turn.files;
    let replayed = |m: &TurnMessage| {
        let mut sent = replay(m.role, &m.text, m.attachments, m.rounds);
        if let (Some(first), Some(files)) = (sent.first_mut(), files) {
            first.files = prompt_files(m.attachments, files);
        }
        sent
    };
    // The message being answered, once its part is written (its attachments part follows it).
    let mut answered: Option<(&TurnMessage, usize)> = None;
    let item_definitions: Vec<(&ItemRef, &ToolDefinition)> = turn
        .items
        .iter()
        .flat_map(|i| i.chosen)
        .filter_map(|c| Some((&c.request.item, c.definition?)))
        .collect();
    let tools = offered(receipt, turn.tools, &item_definitions);
    // Rounds of the current reply already written, and where its text continues.
    let (mut next_round, mut text_from) = (0usize, 0usize);
    // The rules and references segments, each with the kind of the items it holds.
    let mut segments: Vec<(&ItemKind, String)> = Vec::new();
    for part in &receipt.parts {
        match &part.kind {
            PartKind::SystemPrompt => {
                if let Some(p) = turn.system_prompt {
                    system.push(Cow::Borrowed(p));
                }
            }
            PartKind::Tools { .. } => {
                if let Some(t) = turn.tool_instructions {
                    system.push(Cow::Borrowed(t));
                }
            }
            PartKind::PageContext { .. } => {
                if let Some(c) = turn.page_context {
                    system.push(Cow::Owned(page_context_segment(c)));
                }
            }
            PartKind::Resume { .. } => {
                if let Some(r) = turn.resume {
                    system.push(Cow::Borrowed(r.block));
                }
            }
            PartKind::ToolExchange { round, .. } => {
                let rounds = src.current.rounds;
                while next_round <= *round as usize && next_round < rounds.len() {
                    messages.extend(replay_round(
                        src.current.text,
                        &mut text_from,
                        &rounds[next_round],
                    ));
                    next_round += 1;
                }
            }
            PartKind::Summary { .. } => {
                if let Some(s) = turn.summary.and_then(|s| s.text()) {
                    system.push(Cow::Owned(summary_segment(s)));
                }
            }
            PartKind::History {
                first_id,
                last_id,
                count,
                ..
            } => {
                // The run as recorded: first..=last, and only if it still has `count` messages
                // (a message that reaches the model since, e.g. a retried reply, is not guessed in).
                if let (Some(a), Some(b)) = (position(first_id), position(last_id))
                    && b >= a
                    && b - a + 1 == *count as usize
                {
                    for m in &src.messages[a..=b] {
                        messages.extend(replayed(m));
                    }
                }
            }
            PartKind::UserMessage { id } => {
                let m = match id {
                    Some(id) => position(id).map(|i| &src.messages[i]),
                    None => src.messages.last(),
                };
                if let Some(m) = m {
                    // Its words here; its attachments are a part of their own, which follows.
                    answered = Some((m, messages.len()));
                    messages.extend(replay(m.role, &m.text, &[], m.rounds));
                }
            }
            PartKind::Attachments { .. } => {
                if let Some((m, at)) = answered
                    && let Some(sent) = messages.get_mut(at)
                {
                    sent.attachments = m.attachments.to_vec();
                }
            }
            PartKind::File { id, .. } => {
                if let Some((m, at)) = answered
                    && let Some(sent) = messages.get_mut(at)
                    && let Some(a) = m.attachments.iter().find(|a| a.id.as_ref() == Some(id))
                    && let Some(files) = files
                {
                    sent.files
                        .extend(prompt_files(std::slice::from_ref(a), files));
                }
            }
            PartKind::Item(note) => {
                let text = turn.items.and_then(|items| {
                    items
                        .chosen
                        .iter()
                        .find(|c| c.request.item == note.item)
                        .map(|c| c.text)
                });
                let kind = &note.item.kind;
                if let (Some(text), Some(heading)) = (text, item_heading(kind))
                    && let Some(entry) = item_entry(&note.item, text)
                {
                    match segments.last_mut() {
                        Some((k, segment)) if *k == kind => segment.push_str(&entry),
                        _ => segments.push((kind, format!("{heading}{entry}"))),
                    }
                }
            }
        }
    }
    // The rules and references open the turn of the message being answered.
    if let Some((_, at)) = answered
        && let Some(sent) = messages.get_mut(at)
    {
        sent.segments = segments.into_iter().map(|(_, s)| s).collect();
    }
    ProviderRequest {
        model: src.model.to_owned(),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        tools,
        max_output_tokens: receipt.output_reserve,
        temperature: None,
        top_p: None,
        response_schema: None,
    }
}

/// Adds a finished tool round of the current reply to its receipt: one part per exchange (the text
/// the model wrote before the calls counted with the first), the totals, and whether the next
/// request still fits.
pub fn record_tool_round(
    receipt: &mut Receipt,
    round: u32,
    text_before: &str,
    exchanges: &[ToolExchange],
    count: &mut Count<'_>,
) {
    let per_message = Framing::for_encoding(&receipt.totals.encoding).per_message;
    let mut added = 0;
    for (i, e) in exchanges.iter().enumerate() {
        let mut tokens = exchange_tokens(e, per_message, count);
        if i == 0 && !text_before.is_empty() {
            tokens += count(None, text_before);
        }
        added += tokens;
        receipt.parts.push(Part {
            kind: PartKind::ToolExchange {
                round,
                name: e.call.name.clone(),
                call_id: e.call.id.clone(),
                error: e.is_error,
            },
            reason: Reason::ToolLoop,
            tokens,
        });
    }
    receipt.totals.breakdown.conversation += added;
    receipt.totals.counted_input_tokens += added;
    let (needed, room) = (receipt.totals.counted_input_tokens, receipt.input_room());
    receipt.overflow = (needed > room).then_some(Overflow { needed, room });
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
