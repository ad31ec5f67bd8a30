//! The receipt of one turn: every part the provider request carried, in order, with why it got in
//! and its tokens, plus what was left out and why (docs/context-planning.md). The request is built
//! from the receipt and nothing else ([`crate::context::plan::build_request`]).
//!
//! Stored compactly: consecutive history messages with the same reason are one range, so the
//! receipt of a long session stays a few hundred bytes. Replies stored before receipts existed
//! carry only the totals (`ContextReport`); they load as receipts without parts.

use serde::{Deserialize, Serialize};

use super::items::{Included, ItemKind, ItemRef, RequestItem};
use super::meter::ContextReport;
use super::score::Score;

/// What one turn sent to the model, and what it left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// Our count of the input, its breakdown, the vocabulary and compression (the figures replies
    /// carried before receipts).
    #[serde(flatten)]
    pub totals: ContextReport,
    /// The parts of the request, in the order the model reads them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    /// Candidates that did not go, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// The model's window (0 on replies stored before receipts).
    #[serde(default)]
    pub context_limit: u32,
    /// Tokens reserved for the reply (the request's output limit).
    #[serde(default)]
    pub output_reserve: u32,
    /// Set when what must be sent does not fit the window: the request was not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Overflow>,
    /// The topic filter that chose the history, when one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterNote>,
    /// How the semantic search for agent items went, when it did not simply run (no agent items
    /// to search, embeddings unavailable, failed): the turn went on without agent items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_search: Option<ItemSearchNote>,
}

/// Why a turn's semantic search for agent items did not run or gave nothing to choose from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemSearchNote {
    pub status: ItemSearchStatus,
    /// What went wrong, in words (`unavailable` and `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How a turn's semantic search for agent items went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemSearchStatus {
    /// It ran (the receipt records no note for it).
    Done,
    /// The agent has no `agent` items the session does not already carry: nothing to search.
    NoAgentItems,
    /// No embeddings to search with (no model configured, or it could not be loaded).
    Unavailable,
    /// Embedding the message or the items failed.
    Failed,
}

/// A context item as a receipt names it, as it was when the request was built (the agent's items
/// may change after the reply): its identity, how it came in (or would have), its score when
/// semantic search scored it, and what the "View context" dialog shows (priority, description).
///
/// On the wire, flat: `{"type": "rule", "name": "auth", "include": "agent", "score": 0.87,
/// "priority": 3, "description": "…"}` (a tool adds `"server"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "ItemNoteWire", try_from = "ItemNoteWire")]
pub struct ItemNote {
    /// Its identity.
    pub item: ItemRef,
    /// How it came into the request (for a near miss: `agent`, the way it would have).
    pub include: Included,
    /// Its similarity, for items semantic search scored (`agent`, `expansion`, near misses).
    pub score: Option<Score>,
    /// Its priority (lower first).
    pub priority: i32,
    /// Its one-line description (empty: none).
    pub description: String,
}

impl ItemNote {
    /// The request item it stands for (identity, how it came in, score).
    pub fn request_item(&self) -> RequestItem {
        RequestItem {
            item: self.item.clone(),
            included: self.include,
            score: self.score,
        }
    }
}

/// [`ItemNote`] on the wire: the item's kind as `type` (parts already use `kind`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ItemNoteWire {
    #[serde(rename = "type")]
    kind: ItemType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    name: String,
    include: Included,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    score: Option<Score>,
    #[serde(default)]
    priority: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    description: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum ItemType {
    Rule,
    Reference,
    Tool,
}

impl From<ItemNote> for ItemNoteWire {
    fn from(n: ItemNote) -> Self {
        let (kind, server) = match n.item.kind {
            ItemKind::Rule => (ItemType::Rule, None),
            ItemKind::Reference => (ItemType::Reference, None),
            ItemKind::Tool { server } => (ItemType::Tool, Some(server)),
        };
        Self {
            kind,
            server,
            name: n.item.name,
            include: n.include,
            score: n.score,
            priority: n.priority,
            description: n.description,
        }
    }
}

impl TryFrom<ItemNoteWire> for ItemNote {
    type Error = &'static str;

    fn try_from(w: ItemNoteWire) -> Result<Self, Self::Error> {
        let kind = match (w.kind, w.server) {
            (ItemType::Rule, _) => ItemKind::Rule,
            (ItemType::Reference, _) => ItemKind::Reference,
            (ItemType::Tool, Some(server)) => ItemKind::Tool { server },
            (ItemType::Tool, None) => return Err("a tool item names its server"),
        };
        Ok(Self {
            item: ItemRef { kind, name: w.name },
            include: w.include,
            score: w.score,
            priority: w.priority,
            description: w.description,
        })
    }
}

/// The topic filter a turn's history was chosen by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterNote {
    /// The selected topics' labels.
    pub labels: Vec<String>,
    /// The cosine a message needed with one of them.
    pub threshold: Score,
}

impl Receipt {
    /// Input tokens the window can take besides the reply's reserve.
    pub fn input_room(&self) -> u32 {
        self.context_limit.saturating_sub(self.output_reserve)
    }
}

/// One part of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(flatten)]
    pub kind: PartKind,
    pub reason: Reason,
    /// Tokens counted with the meter's counter (message overhead included for messages).
    pub tokens: u32,
}

/// What a part is, with its identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PartKind {
    /// The operator's system prompt (its text stays on the server).
    SystemPrompt,
    /// The host page's context for this message: its top-level key names (values stay out).
    PageContext { keys: Vec<String> },
    /// A summary replacing the messages `first..=last` (ids), `count` of them.
    #[serde(rename_all = "camelCase")]
    Summary {
        first_id: String,
        last_id: String,
        count: u32,
    },
    /// Consecutive history messages `first..=last` (ids, among the messages that reach the
    /// model), `count` of them.
    /// `scores`: each message's best topic score, under a topic filter (`null`: no vector).
    #[serde(rename_all = "camelCase")]
    History {
        first_id: String,
        last_id: String,
        count: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scores: Vec<Option<Score>>,
    },
    /// The tools offered that are not items (the built-in ones, by name) and the instructions
    /// about tools (definitions and text stay on the server; their tokens are counted here). Each
    /// tool item offered is an `Item` part of its own, with its definition's tokens.
    Tools { names: Vec<String> },
    /// The reminder of the session's context sets on the first message after a resume (set names).
    Resume { sets: Vec<String> },
    /// A tool call of this reply and its result, in round `round` (0-based).
    #[serde(rename_all = "camelCase")]
    ToolExchange {
        round: u32,
        name: String,
        call_id: String,
        #[serde(default)]
        error: bool,
    },
    /// The attachments of the message being answered (their metadata; file names here).
    Attachments { names: Vec<String> },
    /// One uploaded file of the message being answered, with its contents: an image the model
    /// looks at, or a text file it reads as delimited data.
    File {
        id: String,
        name: String,
        /// Image or text (`kind` names the part).
        file: crate::attachments::FileKind,
    },
    /// The message being answered (no id for a draft in the preview).
    #[serde(rename_all = "camelCase")]
    UserMessage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// A rule or reference of the agent, written into the answered message's turn as delimited
    /// data (`prompt::item_entry`): the rules first, then the references, each by priority then
    /// name. Its tokens include its segment's heading for the first item of each segment.
    Item(ItemNote),
}

/// How a part got in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Always sent (system prompt, the user's message, page context).
    Always,
    /// History that fits the budget.
    Fits,
    /// History among the last N messages compression never touches.
    Preserved,
    /// A summary written by the model in place of older messages.
    Compression,
    /// The first message after the session was resumed.
    Resume,
    /// The model called a tool while answering; the call and its result go back to it.
    ToolLoop,
    /// A standing instruction ("be concise"): sent whatever the topic filter.
    Sticky,
    /// Pinned by the user: sent whatever the topic filter and compression.
    Pinned,
    /// Grouped under a selected topic by extraction (the part's `scores`, where it has a vector).
    TopicMember,
    /// Matches a selected topic (the part's `scores`).
    TopicMatch,
    /// No message matched the selected topics, so the whole history went.
    Fallback,
    /// An item the user added to the session.
    Manual,
    /// An item semantic search matched to the message (the item's `score`).
    Agent,
    /// An item semantic search matched to an item already chosen (the item's `score`).
    Expansion,
    /// A tool left out over the tool budget that the model loaded (`load_tools`) in this reply.
    Loaded,
}

impl From<Included> for Reason {
    fn from(i: Included) -> Self {
        match i {
            Included::Always => Reason::Always,
            Included::Manual => Reason::Manual,
            Included::Agent => Reason::Agent,
            Included::Expansion => Reason::Expansion,
        }
    }
}

/// Candidates that did not go: a run of messages, or one context item (`item`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftOut {
    /// Messages `first..=last` (ids), `count` of them (empty and 0 for an item).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub first_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_id: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub count: u32,
    pub why: LeftOutWhy,
    /// Their tokens, overhead included (0 for a near miss: its text was never a candidate).
    pub tokens: u32,
    /// Under `topic_filter`: each message's best score (`null`: it has no vector).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<Option<Score>>,
    /// The item left out (`below_threshold`, `knowledge_cap`), with its score where search gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemNote>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl LeftOut {
    /// Messages `first..=last`, `count` of them, left out for `why`.
    pub fn messages(
        first_id: String,
        last_id: String,
        count: u32,
        why: LeftOutWhy,
        tokens: u32,
        scores: Vec<Option<Score>>,
    ) -> Self {
        Self {
            first_id,
            last_id,
            count,
            why,
            tokens,
            scores,
            item: None,
        }
    }

    /// One item left out for `why`.
    pub fn item(item: ItemNote, why: LeftOutWhy, tokens: u32) -> Self {
        Self {
            first_id: String::new(),
            last_id: String::new(),
            count: 0,
            why,
            tokens,
            scores: Vec::new(),
            item: Some(item),
        }
    }
}

/// Why something did not go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeftOutWhy {
    /// Compression left out an acknowledgement ("ok", "thanks").
    LowValue,
    /// Compression left out the oldest messages (sliding window).
    Window,
    /// Replaced by the summary part.
    Summarized,
    /// Compression wanted a summary, but none could be written: left out without one.
    SummaryUnavailable,
    /// Below the threshold for every selected topic (`scores`).
    TopicFilter,
    /// Grouped under a topic that is not selected (`scores`: its best over the selected ones).
    OtherTopic,
    /// The user excluded it.
    Excluded,
    /// Older than the newest messages one window can hold: not read for this turn, so not
    /// counted (`tokens` 0).
    BeyondWindow,
    /// A pinned message or standing instruction beyond the memories' cap: treated as ordinary
    /// history, and compression left it out.
    MemoryCap,
    /// An agent item semantic search scored among the best but did not choose (a near miss, with
    /// its score).
    BelowThreshold,
    /// An item the request would have carried, left out because rules and references may take
    /// only their share of the window (the lowest-ranked go first).
    KnowledgeCap,
    /// A tool item the request would have offered, left out because the tools' definitions may
    /// take only the tool budget (the lowest-ranked go first); the model can load it.
    ToolCap,
}

/// What must be sent does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overflow {
    /// Input tokens the request needs after compression.
    pub needed: u32,
    /// Input tokens the window has room for (its size less the reply's reserve).
    pub room: u32,
}

impl Overflow {
    /// The reason in words, for the meter and the error.
    pub fn describe(&self) -> String {
        format!(
            "This message cannot be sent: the conversation needs {} tokens but the model's window \
             has room for {} (after reserving the reply). Shorten the message, turn on compression \
             or lower “Keep recent messages”, or start a new chat.",
            self.needed, self.room
        )
    }
}
