//! How the context window is shared out (seed §4): the system prompt and up to 500 tokens of
//! memories are reserved, then knowledge, the conversation the rest. We also reserve the reply's
//! output tokens, since providers count them in the window. Unlike the seed, knowledge (the page
//! context and the resume block) is not capped at a quarter: it is sent whole (the page context is
//! bounded when it arrives), so the conversation gets what it actually leaves and compression makes
//! room for a large context instead of the request overflowing.

use serde::{Deserialize, Serialize};

/// Most tokens memories may take.
pub const MEMORY_CAP: u32 = 500;

/// Tokens used by each part of a request, as counted by our tokenizer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenBreakdown {
    pub system_prompt: u32,
    pub knowledge: u32,
    pub memories: u32,
    pub conversation: u32,
}

impl TokenBreakdown {
    /// Sum of all parts.
    pub fn total(&self) -> u32 {
        self.system_prompt + self.knowledge + self.memories + self.conversation
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
    pub memories: Share,
    pub knowledge: Share,
    pub conversation: Share,
    /// Conversation tokens still free (negative when over).
    pub available: i64,
}

/// Shares out a window of `limit` tokens.
pub fn calculate_budget(limit: u32, output_reserve: u32, used: TokenBreakdown) -> ContextBudget {
    let system = used.system_prompt;
    let memories = used.memories.min(MEMORY_CAP);
    let remaining = limit
        .saturating_sub(output_reserve)
        .saturating_sub(system)
        .saturating_sub(memories);
    let knowledge = used.knowledge.min(remaining);
    let conversation = remaining - knowledge;
    ContextBudget {
        total: limit,
        output_reserve,
        system_prompt: Share {
            allocated: system,
            used: used.system_prompt,
        },
        memories: Share {
            allocated: memories,
            used: used.memories,
        },
        knowledge: Share {
            allocated: knowledge,
            used: used.knowledge,
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
    fn seed_allocation() {
        let used = TokenBreakdown {
            system_prompt: 1000,
            memories: 800,
            knowledge: 5000,
            conversation: 2000,
        };
        let b = calculate_budget(8192, 0, used);
        assert_eq!(b.memories.allocated, 500); // capped
        // remaining = 8192 - 1000 - 500 = 6692; all 5000 of knowledge are sent, so the
        // conversation gets the rest.
        assert_eq!(b.knowledge.allocated, 5000);
        assert_eq!(b.conversation.allocated, 6692 - 5000);
        assert_eq!(b.available, (6692 - 5000) - 2000);
    }

    #[test]
    fn small_knowledge_keeps_its_size_and_output_is_reserved() {
        let used = TokenBreakdown {
            system_prompt: 100,
            memories: 0,
            knowledge: 200,
            conversation: 50,
        };
        let b = calculate_budget(10_000, 1_000, used);
        assert_eq!(b.knowledge.allocated, 200);
        assert_eq!(b.conversation.allocated, 10_000 - 1_000 - 100 - 200);
    }

    #[test]
    fn an_overfull_system_prompt_leaves_nothing_not_a_wrap() {
        let used = TokenBreakdown {
            system_prompt: 9000,
            ..Default::default()
        };
        let b = calculate_budget(8192, 0, used);
        assert_eq!(b.conversation.allocated, 0);
    }
}
