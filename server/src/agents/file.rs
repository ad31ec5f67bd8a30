//! The configuration file: `[[agents]]` tables with their defaults, checked field by field.

use std::path::Path;

use glassbox_core::context::items::ItemSearchSettings;
use serde::Deserialize;

use super::items::read_items;
use super::{Agent, AgentConfigError};

/// Whether the model may run tools without asking the user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolPermission {
    /// Each call waits for the user's yes.
    #[default]
    Ask,
    /// Calls run without asking.
    Allow,
    /// No call runs.
    Deny,
}

/// An agent's defaults for its sessions (each may be overridden per session).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDefaults {
    /// Most tool rounds in one reply.
    pub max_chat_turns: u32,
    /// Sampling temperature (0–2); the provider's own when unset.
    pub temperature: Option<f32>,
    /// Nucleus sampling (0–1); the provider's own when unset.
    pub top_p: Option<f32>,
    /// Longest reply in tokens; the server's `GLASSBOX_MAX_OUTPUT_TOKENS` when unset.
    pub max_output_tokens: Option<u32>,
    /// Chunk matches considered before grouping by item.
    pub context_top_k: u32,
    /// Items chosen by search (items at or above the include score may exceed it).
    pub context_top_n: u32,
    /// Items scoring at least this are always chosen.
    pub context_include_score: f32,
    /// Passes of context-based expansion (0: off).
    pub context_expansion_depth: u32,
    /// The score an item needs to join by expansion.
    pub context_expansion_threshold: f32,
    /// Most items one expansion pass adds.
    pub context_expansion_top_n: u32,
    pub tool_permission: ToolPermission,
}

mod defaults {
    pub fn max_chat_turns() -> u32 {
        10
    }
    pub fn top_k() -> u32 {
        20
    }
    pub fn top_n() -> u32 {
        5
    }
    pub fn include_score() -> f32 {
        0.7
    }
    pub fn expansion_threshold() -> f32 {
        0.75
    }
    pub fn expansion_top_n() -> u32 {
        3
    }
}

impl Default for AgentDefaults {
    fn default() -> Self {
        Self {
            max_chat_turns: defaults::max_chat_turns(),
            temperature: None,
            top_p: None,
            max_output_tokens: None,
            context_top_k: defaults::top_k(),
            context_top_n: defaults::top_n(),
            context_include_score: defaults::include_score(),
            context_expansion_depth: 0,
            context_expansion_threshold: defaults::expansion_threshold(),
            context_expansion_top_n: defaults::expansion_top_n(),
            tool_permission: ToolPermission::default(),
        }
    }
}

impl AgentDefaults {
    /// The semantic search of its sessions' requests.
    pub fn search(&self) -> ItemSearchSettings {
        ItemSearchSettings {
            top_k: self.context_top_k,
            top_n: self.context_top_n,
            include_score: self.context_include_score,
            expansion_depth: self.context_expansion_depth,
            expansion_threshold: self.context_expansion_threshold,
            expansion_top_n: self.context_expansion_top_n,
            ..ItemSearchSettings::default()
        }
    }

    /// The first value out of range, as (field, why).
    fn check(&self) -> Result<(), (&'static str, String)> {
        let within = |name: &'static str, v: f32, lo: f32, hi: f32| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err((name, format!("{v} is outside {lo}–{hi}")))
            }
        };
        if let Some(t) = self.temperature {
            within("temperature", t, 0.0, 2.0)?;
        }
        if let Some(p) = self.top_p {
            within("top_p", p, 0.0, 1.0)?;
        }
        within(
            "context_include_score",
            self.context_include_score,
            -1.0,
            1.0,
        )?;
        within(
            "context_expansion_threshold",
            self.context_expansion_threshold,
            -1.0,
            1.0,
        )?;
        let positive = |name: &'static str, v: u32| {
            if v == 0 {
                Err((name, "must be at least 1".to_owned()))
            } else {
                Ok(())
            }
        };
        positive("context_top_k", self.context_top_k)?;
        positive("context_top_n", self.context_top_n)?;
        if self.max_output_tokens == Some(0) {
            return Err(("max_output_tokens", "must be at least 1".to_owned()));
        }
        Ok(())
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
    #[serde(default)]
    context_expansion_depth: u32,
    #[serde(default = "defaults::expansion_threshold")]
    context_expansion_threshold: f32,
    #[serde(default = "defaults::expansion_top_n")]
    context_expansion_top_n: u32,
    #[serde(default)]
    tool_permission: ToolPermission,
}

impl AgentShape {
    fn defaults(&self) -> AgentDefaults {
        AgentDefaults {
            max_chat_turns: self.max_chat_turns,
            temperature: self.temperature,
            top_p: self.top_p,
            max_output_tokens: self.max_output_tokens,
            context_top_k: self.context_top_k,
            context_top_n: self.context_top_n,
            context_include_score: self.context_include_score,
            context_expansion_depth: self.context_expansion_depth,
            context_expansion_threshold: self.context_expansion_threshold,
            context_expansion_top_n: self.context_expansion_top_n,
            tool_permission: self.tool_permission,
        }
    }
}

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Reads the configuration file and the items of each agent.
pub(super) fn read(file: &Path) -> Result<Vec<Agent>, AgentConfigError> {
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
        defaults.check().map_err(|(field, why)| {
            AgentConfigError::new(file, line, format!("agent {:?}: {field} {why}", a.name))
        })?;
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
            Some(dir) => read_items(dir)?,
        };
        agents.push(Agent {
            name: a.name,
            system_prompt: a.system_prompt.filter(|p| !p.trim().is_empty()),
            model: a.model,
            defaults,
            items_dir,
            items,
        });
    }
    Ok(agents)
}
