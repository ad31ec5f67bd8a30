//! The context window of each session: its `ContextInfo` (budget, reserves, what is counted),
//! derived from the session's settings, the model it talks to and the tools it is offered, and
//! its compression settings.

use std::sync::Arc;

use glassbox_core::context::agent_settings::ToolPermission;
use glassbox_core::context::{
    CompressionSettings, ContextInfo, ServerFacts, SessionSettings, encoding_for,
};
use glassbox_core::wire::SessionInfo;

use crate::agents::Agent;
use crate::budgets::Budgets;
use crate::config::Config;
use crate::items::Items;
use crate::storage::{StorageError, Store};
use crate::tokens::TokenCounter;
use crate::tools::{ToolRegistry, ToolSet};
use crate::wire_error::ToWire;

/// Why settings were refused or not stored.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("invalid settings: {0}")]
    Invalid(String),
    #[error("the settings could not be stored")]
    Storage(#[from] StorageError),
}

impl ToWire for SettingsError {
    fn code(&self) -> glassbox_core::ErrorCode {
        match self {
            SettingsError::Invalid(_) => glassbox_core::ErrorCode::InvalidSettings,
            SettingsError::Storage(e) => e.code(),
        }
    }
}

/// Derives and changes the sessions' context windows.
#[derive(Clone)]
pub struct ContextWindows {
    config: Arc<Config>,
    store: Store,
    tokens: Arc<TokenCounter>,
    tools: ToolRegistry,
    budgets: Budgets,
    items: Items,
}

impl ContextWindows {
    /// The windows of sessions stored in `store`, offered `tools`, under `config`.
    pub fn new(
        config: Arc<Config>,
        store: Store,
        tokens: Arc<TokenCounter>,
        tools: ToolRegistry,
        budgets: Budgets,
        items: Items,
    ) -> Self {
        Self {
            config,
            store,
            tokens,
            tools,
            budgets,
            items,
        }
    }

    /// The agent a session was created for, as configured now (`None`: no agent, or one the
    /// configuration no longer has).
    pub fn agent(&self, settings: &SessionSettings) -> Option<Arc<Agent>> {
        self.items.agent(settings)
    }

    /// A session's system prompt: its agent's, else the server's (`GLASSBOX_SYSTEM_PROMPT`).
    pub fn system_prompt(&self, settings: &SessionSettings) -> Option<String> {
        self.agent(settings)
            .and_then(|a| a.system_prompt.clone())
            .or_else(|| self.config.system_prompt.clone())
    }

    /// The context parameters of a session replying with `model`.
    pub async fn info(&self, session_id: &str, model: &str) -> Result<ContextInfo, StorageError> {
        let settings = self.store.settings(session_id).await?;
        Ok(self.info_with(session_id, model, &settings))
    }

    /// The context parameters for `model` under a session's `settings`: derived, never stored, so
    /// each connection of a session gets the meter for the model it talks to.
    pub fn info_with(
        &self,
        session_id: &str,
        model: &str,
        settings: &SessionSettings,
    ) -> ContextInfo {
        self.info_for(model, settings, &self.tools_for(session_id, settings))
    }

    /// The tools a turn of the session is offered: its agent's and its own; none when its tool
    /// permission is `deny`; under `ask`, calls of a tool that asks (`Tool::asks`) wait for the
    /// user's yes (`approvals`).
    pub fn tools_for(&self, session_id: &str, settings: &SessionSettings) -> ToolSet {
        let all = self.tools.for_turn(settings.agent.as_deref(), session_id);
        match self.items.effective(settings).tool_permission {
            ToolPermission::Deny => ToolSet::new(Vec::new()),
            ToolPermission::Ask => all.asking(),
            ToolPermission::Allow => all,
        }
    }

    /// The context parameters for `model` under `settings`, offered `tools` (a turn's own set).
    pub fn info_for(
        &self,
        model: &str,
        settings: &SessionSettings,
        tools: &ToolSet,
    ) -> ContextInfo {
        let encoding = encoding_for(model).0;
        let count = |text: &str| self.tokens.count(encoding, text);
        let facts = ServerFacts {
            model_limits: &self.config.model_limits,
            // The session's own longest reply, else its agent's, else the server's.
            max_output_tokens: self
                .items
                .effective(settings)
                .max_output_tokens
                .unwrap_or(self.config.max_output_tokens),
            system_prompt_tokens: self.system_prompt(settings).as_deref().map_or(0, count),
            // The tools offered that are not items and the instructions about them, as the plan
            // counts them (counts are cached by text); the widget has each tool item's count from
            // the receipt.
            tool_tokens: if tools.is_empty() {
                0
            } else {
                tools
                    .builtin_definitions()
                    .map(|d| count(&serde_json::to_string(&d).unwrap_or_default()))
                    .sum::<u32>()
                    + self.config.context_prompt.as_deref().map_or(0, count)
            },
            vocabulary_loaded: self.tokens.has(encoding),
        };
        ContextInfo::derive(model, settings, facts)
    }

    /// `info` with its `context` filled in, for the answers that carry it (`hello`, new sessions);
    /// other routes skip the settings read.
    pub async fn with_context(&self, mut info: SessionInfo) -> Result<SessionInfo, StorageError> {
        info.context = Some(self.info(&info.session_id, &info.model).await?);
        info.budget = self.budgets.of_session(&info.session_id).await?;
        Ok(info)
    }

    /// Validates, stores and returns new compression settings for a session.
    pub async fn update_compression(
        &self,
        session_id: &str,
        model: &str,
        settings: CompressionSettings,
    ) -> Result<ContextInfo, SettingsError> {
        settings.validate().map_err(SettingsError::Invalid)?;
        let ((), stored) = self
            .store
            .update_settings(session_id, |s| -> Result<(), SettingsError> {
                s.compression = settings;
                Ok(())
            })
            .await?;
        Ok(self.info_with(session_id, model, &stored))
    }
}
