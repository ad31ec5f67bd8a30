//! How the context window is shared out: the system prompt and up to 500 tokens of
//! memories are reserved, then knowledge gets up to a quarter of what remains, the conversation the
//! rest. We also reserve the reply's output tokens, since providers count them in the window.
//!
//! - **Memories** are the standing instructions (sticky) and pinned messages the request carries,
//!   protected from compression up to [`MEMORY_CAP`] tokens (the plan decides which: newest pins
//!   first, see `plan::plan_turn`); beyond it they are ordinary history.
//! - **Knowledge** is the operator's rules and references the request carries, capped at
//!   [`knowledge_cap`]; the plan leaves out the lowest-ranked items until they fit.
//! - **Page context** (the host page's context and the reminder of the session's context sets) is
//!   not capped: it is sent whole (it is bounded when it arrives), so the conversation gets what it
//!   actually leaves and compression makes room for a large page context instead of the request
//!   overflowing.

use serde::{Deserialize, Serialize};

/// Most tokens memories may take.
pub const MEMORY_CAP: u32 = 500;

/// Knowledge's share of the window left after the reply's reserve, the system prompt and the
/// memories, in percent.
pub const KNOWLEDGE_SHARE_PERCENT: u32 = 25;

/// Tokens used by each part of a request, as counted by our tokenizer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenBreakdown {
    /// The operator's system prompt (in receipts stored before tools were counted apart, the tools
    /// too).
    pub system_prompt: u32,
    /// The definitions of the tools offered and the instructions about them (absent: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tools: u32,
    /// Rules and references.
    pub knowledge: u32,
    /// Standing instructions and pinned messages protected from compression (and user memories).
    pub memories: u32,
    /// The history, the message being answered, the summary and tool exchanges.
    pub conversation: u32,
    /// The host page's context and the resume reminder (0 in receipts stored before it was counted
    /// apart: there it is part of `knowledge`).
    #[serde(default)]
    pub page_context: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl TokenBreakdown {
    /// Sum of all parts.
    pub fn total(&self) -> u32 {
        self.system_prompt
            + self.tools
            + self.knowledge
            + self.memories
            + self.conversation
            + self.page_context
    }
}

/// Allocated and used tokens of one part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub allocated: u32,
    pub used: u32,
}

/// The window shared out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextBudget {
    pub total: u32,
    pub output_reserve: u32,
    pub system_prompt: Share,
    #[serde(default)]
    pub tools: Share,
    pub memories: Share,
    pub knowledge: Share,
    pub page_context: Share,
    pub conversation: Share,
    /// Conversation tokens still free (negative when over).
    pub available: i64,
}

/// What remains of a window of `limit` tokens after the reply's reserve, the system prompt (with
/// the tools) and the memories (counted up to [`MEMORY_CAP`]).
fn remaining(limit: u32, output_reserve: u32, system_prompt: u32, memories: u32) -> u32 {
    limit
        .saturating_sub(output_reserve)
        .saturating_sub(system_prompt)
        .saturating_sub(memories.min(MEMORY_CAP))
}

/// Most tokens knowledge (rules and references) may take: [`KNOWLEDGE_SHARE_PERCENT`] of what
/// remains of the window after the reply's reserve, the system prompt and the memories.
pub fn knowledge_cap(limit: u32, output_reserve: u32, system_prompt: u32, memories: u32) -> u32 {
    let rest = remaining(limit, output_reserve, system_prompt, memories);
    (u64::from(rest) * u64::from(KNOWLEDGE_SHARE_PERCENT) / 100) as u32
}

/// Shares out a window of `limit` tokens.
pub fn calculate_budget(limit: u32, output_reserve: u32, used: TokenBreakdown) -> ContextBudget {
    let system = used.system_prompt + used.tools;
    let memories = used.memories.min(MEMORY_CAP);
    let remaining = remaining(limit, output_reserve, system, used.memories);
    let knowledge = used
        .knowledge
        .min(knowledge_cap(limit, output_reserve, system, used.memories));
    let page_context = used.page_context.min(remaining - knowledge);
    let conversation = remaining - knowledge - page_context;
    ContextBudget {
        total: limit,
        output_reserve,
        system_prompt: Share {
            allocated: used.system_prompt,
            used: used.system_prompt,
        },
        tools: Share {
            allocated: used.tools,
            used: used.tools,
        },
        memories: Share {
            allocated: memories,
            used: used.memories,
        },
        knowledge: Share {
            allocated: knowledge,
            used: used.knowledge,
        },
        page_context: Share {
            allocated: page_context,
            used: used.page_context,
        },
        conversation: Share {
            allocated: conversation,
            used: used.conversation,
        },
        available: i64::from(conversation) - i64::from(used.conversation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_shared_out_in_order() {
        let used = TokenBreakdown {
            system_prompt: 1000,
            tools: 0,
            memories: 800,
            knowledge: 5000,
            conversation: 2000,
            page_context: 0,
        };
        let b = calculate_budget(8192, 0, used);
        assert_eq!(b.memories.allocated, 500); // capped
        // remaining = 8192 - 1000 - 500 = 6692; knowledge gets a quarter of it, the conversation
        // the rest.
        assert_eq!(b.knowledge.allocated, 6692 / 4);
        assert_eq!(b.knowledge.allocated, knowledge_cap(8192, 0, 1000, 800));
        assert_eq!(b.conversation.allocated, 6692 - 1673);
        assert_eq!(b.available, (6692 - 1673) - 2000);
    }

    #[test]
    fn small_knowledge_keeps_its_size_and_output_is_reserved() {
        let used = TokenBreakdown {
            system_prompt: 100,
            tools: 0,
            memories: 0,
            knowledge: 200,
            conversation: 50,
            page_context: 0,
        };
        let b = calculate_budget(10_000, 1_000, used);
        assert_eq!(b.knowledge.allocated, 200);
        assert_eq!(b.conversation.allocated, 10_000 - 1_000 - 100 - 200);
        assert_eq!(
            knowledge_cap(10_000, 1_000, 100, 0),
            (10_000 - 1_000 - 100) / 4
        );
    }

    #[test]
    fn page_context_is_sent_whole_and_the_conversation_gets_the_rest() {
        let used = TokenBreakdown {
            system_prompt: 100,
            knowledge: 3_000,
            page_context: 5_000,
            ..Default::default()
        };
        let b = calculate_budget(10_100, 0, used);
        // A quarter of 10,000 for knowledge; all 5,000 of the page context; 2,500 left.
        assert_eq!(b.knowledge.allocated, 2_500);
        assert_eq!(b.page_context.allocated, 5_000);
        assert_eq!(b.conversation.allocated, 2_500);
        // An oversized page context leaves the conversation nothing rather than wrapping.
        let b = calculate_budget(
            1_000,
            0,
            TokenBreakdown {
                page_context: 5_000,
                ..Default::default()
            },
        );
        assert_eq!(
            (b.page_context.allocated, b.conversation.allocated),
            (1_000, 0)
        );
    }

    #[test]
    fn an_overfull_system_prompt_leaves_nothing_not_a_wrap() {
        let used = TokenBreakdown {
            system_prompt: 9000,
            ..Default::default()
        };
        let b = calculate_budget(8192, 0, used);
        assert_eq!(b.conversation.allocated, 0);
        assert_eq!(knowledge_cap(8192, 0, 9000, 0), 0);
    }

    #[test]
    fn breakdowns_stored_before_page_context_was_counted_apart_still_read() {
        let old: TokenBreakdown = serde_json::from_value(serde_json::json!(
            {"systemPrompt": 10, "knowledge": 5, "memories": 0, "conversation": 107}
        ))
        .unwrap();
        assert_eq!((old.knowledge, old.page_context, old.total()), (5, 0, 122));
    }
}
