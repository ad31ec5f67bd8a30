//! The configuration file: `[[agents]]` tables with their defaults, checked field by field.

use std::path::Path;

use glassbox_core::context::agent_settings::{AgentSettings, ToolPermission};
use glassbox_core::wire::Greeting;
use serde::Deserialize;

use super::items::read_items;
use super::mcp_servers::McpServerShape;
use super::{Agent, AgentConfigError};

mod defaults {
    use glassbox_core::context::agent_settings::AgentSettings;

    pub fn max_chat_turns() -> u32 {
        AgentSettings::default().max_chat_turns
    }
    pub fn top_k() -> u32 {
        AgentSettings::default().context_top_k
    }
    pub fn top_n() -> u32 {
        AgentSettings::default().context_top_n
    }
    pub fn include_score() -> f32 {
        AgentSettings::default().context_include_score
    }
    pub fn min_score() -> f32 {
        AgentSettings::default().context_min_score
    }
    pub fn expansion_threshold() -> f32 {
        AgentSettings::default().context_expansion_threshold
    }
    pub fn expansion_top_n() -> u32 {
        AgentSettings::default().context_expansion_top_n
    }
    pub fn approval_timeout_ms() -> u64 {
        super::DEFAULT_APPROVAL_TIMEOUT_MS
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    agents: Vec<toml::Spanned<AgentShape>>,
}

/// An `[[agents]]` table as written (every key known, so a typo is an error with its line).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentShape {
    name: String,
    system_prompt: Option<String>,
    /// The item folder, relative to the configuration file.
    items: Option<String>,
    model: Option<String>,
    #[serde(default = "defaults::max_chat_turns")]
    max_chat_turns: u32,
    temperature: Option<f32>,
    top_p: Option<f32>,
    max_output_tokens: Option<u32>,
    #[serde(default = "defaults::top_k")]
    context_top_k: u32,
    #[serde(default = "defaults::top_n")]
    context_top_n: u32,
    #[serde(default = "defaults::include_score")]
    context_include_score: f32,
    #[serde(default = "defaults::min_score")]
    context_min_score: f32,
    #[serde(default)]
    context_expansion_depth: u32,
    #[serde(default = "defaults::expansion_threshold")]
    context_expansion_threshold: f32,
    #[serde(default = "defaults::expansion_top_n")]
    context_expansion_top_n: u32,
    #[serde(default)]
    tool_permission: ToolPermission,
    /// Most tokens the tool items' definitions may take in one request (unset: no limit).
    tool_budget: Option<u32>,
    /// `[[agents.mcp_servers]]`.
    #[serde(default)]
    mcp_servers: Vec<toml::Spanned<McpServerShape>>,
    /// How long a call waits for the user's answer (milliseconds).
    #[serde(default = "defaults::approval_timeout_ms")]
    approval_timeout_ms: u64,
    /// The composer's placeholder in its sessions.
    placeholder: Option<String>,
    /// Shown before the first message, never sent to the model.
    welcome: Option<String>,
    /// Up to four prompts shown as chips on an empty chat.
    #[serde(default)]
    starters: Vec<String>,
}

impl AgentShape {
    fn defaults(&self) -> AgentSettings {
        AgentSettings {
            max_chat_turns: self.max_chat_turns,
            temperature: self.temperature,
            top_p: self.top_p,
            max_output_tokens: self.max_output_tokens,
            context_top_k: self.context_top_k,
            context_top_n: self.context_top_n,
            context_include_score: self.context_include_score,
            context_min_score: self.context_min_score,
            context_expansion_depth: self.context_expansion_depth,
            context_expansion_threshold: self.context_expansion_threshold,
            context_expansion_top_n: self.context_expansion_top_n,
            tool_permission: self.tool_permission,
            tool_budget: self.tool_budget,
        }
    }
}

/// How long a call waits for the user's answer unless the agent says otherwise (5 minutes).
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 300_000;
/// The longest wait an agent may set (a day).
pub const MAX_APPROVAL_TIMEOUT_MS: u64 = 86_400_000;

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Reads the configuration file and the items of each agent; `${VAR}`s in MCP server settings
/// are filled in from `lookup` (the process environment, in the server).
pub(super) fn read(
    file: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Agent>, AgentConfigError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| AgentConfigError::new(file, None, format!("cannot be read: {e}")))?;
    let shape: FileShape = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| line_of(&text, s.start));
        AgentConfigError::new(file, line, e.message().to_owned())
    })?;
    if shape.agents.is_empty() {
        return Err(AgentConfigError::new(
            file,
            None,
            "no [[agents]] table: add one with at least a name",
        ));
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut agents: Vec<Agent> = Vec::with_capacity(shape.agents.len());
    for spanned in shape.agents {
        let line = Some(line_of(&text, spanned.span().start));
        let a = spanned.into_inner();
        if a.name.trim().is_empty() {
            return Err(AgentConfigError::new(file, line, "an agent needs a name"));
        }
        if agents.iter().any(|b| b.name == a.name) {
            return Err(AgentConfigError::new(
                file,
                line,
                format!("agent {:?} is configured twice", a.name),
            ));
        }
        let defaults = a.defaults();
        defaults
            .validate()
            .map_err(|e| AgentConfigError::new(file, line, format!("agent {:?}: {e}", a.name)))?;
        let mut mcp_servers = Vec::with_capacity(a.mcp_servers.len());
        for server in a.mcp_servers {
            let at = line_of(&text, server.span().start);
            let server = server.into_inner().resolve(
                &a.name,
                (file, at, &|offset| line_of(&text, offset)),
                lookup,
            )?;
            if mcp_servers
                .iter()
                .any(|s: &super::McpServerConfig| s.name == server.name)
            {
                return Err(AgentConfigError::new(
                    file,
                    Some(at),
                    format!(
                        "agent {:?}: MCP server {:?} is configured twice",
                        a.name, server.name
                    ),
                ));
            }
            mcp_servers.push(server);
        }
        if !(1..=MAX_APPROVAL_TIMEOUT_MS).contains(&a.approval_timeout_ms) {
            return Err(AgentConfigError::new(
                file,
                line,
                format!(
                    "agent {:?}: approval_timeout_ms must be between 1 and {MAX_APPROVAL_TIMEOUT_MS}",
                    a.name
                ),
            ));
        }
        let greeting = Greeting {
            placeholder: a.placeholder.clone().filter(|p| !p.trim().is_empty()),
            welcome: a.welcome.clone().filter(|w| !w.trim().is_empty()),
            starters: a.starters.clone(),
        };
        greeting
            .check()
            .map_err(|e| AgentConfigError::new(file, line, format!("agent {:?}: {e}", a.name)))?;
        let items_dir = a.items.as_deref().map(|d| base.join(d));
        let items = match &items_dir {
            None => Vec::new(),
            Some(dir) if !dir.is_dir() => {
                return Err(AgentConfigError::new(
                    file,
                    line,
                    format!(
                        "agent {:?}: the items folder {} does not exist",
                        a.name,
                        dir.display()
                    ),
                ));
            }
            Some(dir) => read_items(dir)?
                .into_iter()
                .map(std::sync::Arc::new)
                .collect(),
        };
        agents.push(Agent {
            name: a.name,
            system_prompt: a.system_prompt.filter(|p| !p.trim().is_empty()),
            model: a.model,
            defaults,
            items_dir,
            items,
            mcp_servers,
            approval_timeout: std::time::Duration::from_millis(a.approval_timeout_ms),
            greeting,
        });
    }
    Ok(agents)
}
