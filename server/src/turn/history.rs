//! The history a turn reads (docs/context-planning.md, "A turn"): in a long session, only what
//! the plan can use — the newest messages until they surely fill the window, the memories
//! (pinned messages, standing instructions) among the older ones, and how many older ones there
//! are — so a turn costs the same at ten messages and at ten thousand.

use glassbox_core::context::compression::is_low_value;
use glassbox_core::context::{ContextInfo, Earlier, MessageMark, Strategy};
use glassbox_core::tokens::Framing;
use glassbox_core::wire::ChatMessage;

use crate::storage::{PageEnd, StorageError, Store, Unread};
use crate::tokens::TokenCounter;

/// Messages read at a time from the newest end.
const PAGE: i64 = 128;
/// The most memories read from the older history: more cannot fit the memories' cap (each
/// message costs at least its framing).
const MEMORIES_READ: i64 = 128;

/// What a turn read of its session's history.
#[derive(Debug, Default)]
pub struct ReadHistory {
    /// Oldest first: the memories found among the unread history, then the newest messages,
    /// ending with the one answered.
    pub messages: Vec<ChatMessage>,
    /// The older history not read; `None` when all of it was.
    pub unread: Option<UnreadHistory>,
}

/// The history older than what a turn read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadHistory {
    /// The messages that reach the model among it (the memories read from it not counted).
    pub count: u32,
    pub first_id: String,
    pub last_id: String,
    /// How many memories read from it start the messages that reach the model.
    pub memories: usize,
}

impl UnreadHistory {
    /// As the plan takes it.
    pub fn earlier(&self) -> Earlier<'_> {
        Earlier {
            count: self.count,
            first_id: &self.first_id,
            last_id: &self.last_id,
            from: self.memories,
        }
    }
}

/// How much history a turn must read.
pub struct Reach<'a> {
    /// The window's facts (limit, reply reserve, encoding, compression).
    pub info: &'a ContextInfo,
    /// Ids of the session's standing instructions.
    pub standing: &'a [String],
    /// A topic filter is on: the whole history is read (the filter may keep any of it).
    pub filtered: bool,
}

/// The message a turn's history ends with.
#[derive(Debug, Clone, Copy)]
pub enum Through<'a> {
    /// The stored message with this id (a reply's).
    Message(&'a str),
    /// The session's newest (a preview's draft comes after it).
    Newest,
}

/// The session's history through `through`:
/// newest first, a page at a time, until the messages that may go cost more than the window
/// holds and the preserved tail is read. Each is counted at least at its words and its framing
/// (attachments and tool rounds only add), and neither excluded messages nor acknowledgements
/// (which compression may drop) count, so an older message could never have been sent.
pub async fn read(
    store: &Store,
    tokens: &TokenCounter,
    session_id: &str,
    through: Through<'_>,
    reach: &Reach<'_>,
) -> Result<ReadHistory, StorageError> {
    // The first page ends with the message answered; each next one before the last read.
    let page = |before: Option<i64>, limit: i64| {
        let end = match (before, through) {
            (Some(before), _) => PageEnd::Before(before),
            (None, Through::Message(id)) => PageEnd::Through(id),
            (None, Through::Newest) => PageEnd::Before(i64::MAX),
        };
        store.messages_before(session_id, end, limit)
    };
    if reach.filtered {
        let mut messages: Vec<ChatMessage> = Vec::new();
        let mut before = None;
        loop {
            let page = page(before, PAGE * 8).await?;
            let last = page.len() < (PAGE * 8) as usize;
            before = page.last().map(|(seq, _)| *seq).or(before);
            messages.extend(page.into_iter().map(|(_, m)| m));
            if last {
                break;
            }
        }
        messages.reverse();
        return Ok(ReadHistory {
            messages,
            unread: None,
        });
    }
    let info = reach.info;
    // What compression may keep word for word is at most the room; a summary replaces what it
    // leaves out, and the summary model reads up to a window of that: twice the room then.
    let room = u64::from(info.context_limit.saturating_sub(info.output_reserve));
    let summarizes = info.compression.enabled
        && matches!(
            info.compression.strategy,
            Strategy::Summarize | Strategy::Hybrid
        );
    let room = if summarizes { 2 * room } else { room };
    let per_message = u64::from(Framing::for_encoding(&info.encoding).per_message);
    let preserve = info.compression.preserve_recent_messages as usize + 1;
    let mut tail: Vec<ChatMessage> = Vec::new();
    let (mut cost, mut counted, mut before) = (0u64, 0usize, None);
    let full = 'reading: loop {
        let page = page(before, PAGE).await?;
        let last = page.len() < PAGE as usize;
        for (seq, m) in page {
            before = Some(seq);
            if m.reaches_model()
                && m.mark != Some(MessageMark::Excluded)
                && !(m.attachments.is_empty() && is_low_value(&m.content))
            {
                cost += u64::from(tokens.count(&info.encoding, &m.content)) + per_message;
                counted += 1;
            }
            tail.push(m);
            if cost > room && counted > preserve {
                break 'reading true;
            }
        }
        if last {
            break false;
        }
    };
    tail.reverse();
    if !full {
        return Ok(ReadHistory {
            messages: tail,
            unread: None,
        });
    }
    // Full: at least one message was read.
    let before = before.unwrap_or(i64::MAX);
    // As the plan's history keeps them (`ChatMessage::reaches_model`), so `from` lines up.
    let memories: Vec<ChatMessage> = store
        .memories_before(session_id, before, reach.standing, MEMORIES_READ)
        .await?
        .into_iter()
        .filter(ChatMessage::reaches_model)
        .collect();
    let unread = store.unread_before(session_id, before).await?;
    let unread = unread.map(
        |Unread {
             count,
             first_id,
             last_id,
         }| UnreadHistory {
            count: u32::try_from(count)
                .unwrap_or(u32::MAX)
                .saturating_sub(memories.len() as u32),
            first_id,
            last_id,
            memories: memories.len(),
        },
    );
    let mut messages = memories;
    messages.extend(tail);
    Ok(ReadHistory { messages, unread })
}
