//! The context window: model limits, how the window is shared out, and compression.

pub mod agent_settings;
pub mod budget;
pub mod capture;
pub mod compression;
pub mod footer;
pub mod items;
pub mod model_limits;

pub use budget::{ContextBudget, TokenBreakdown, calculate_budget};
pub use compression::{CompressionOutcome, CompressionSettings, CountedMessage, Strategy};
pub use items::{
    AgentItem, IncludeMode, Included, ItemKind, ItemRef, ItemSearchSettings, RequestItem,
    SessionItem,
};
pub use model_limits::{context_limit, encoding_for};
pub mod meter;
pub mod plan;
pub mod receipt;
pub mod score;
pub mod selection;
pub mod sets;
pub mod settings;
pub mod tool_parts;
pub mod topics;

pub use meter::{
    CompressionReport, ContextInfo, ContextReport, MeterReading, MeterState, ServerFacts,
};
pub use plan::{
    ChosenItem, CurrentReply, Earlier, ItemSearch, ItemsInput, NearMiss, ResumeInput, Selection,
    SummaryInput, TurnInput, TurnMessage, TurnPlan, TurnSources, plan_turn, record_tool_round,
};
pub use receipt::{
    FilterNote, ItemNote, ItemSearchNote, ItemSearchStatus, LeftOut, LeftOutWhy, Overflow, Part,
    PartKind, Reason, Receipt,
};
pub use score::Score;
pub use selection::{Candidate, Choice, MessageMark};
pub use sets::{ContextSets, MergeMode};
pub use settings::SessionSettings;
pub use topics::{FilterView, SessionTopics, Topic, TopicSettings};
