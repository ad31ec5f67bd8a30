//! A session's settings: one versioned record (compression, context sets, the topic filter, its
//! agent's items and the overrides of the agent's defaults), stored whole and changed whole, so
//! every change is one read-modify-write.

use serde::{Deserialize, Serialize};

use super::agent_settings::SessionOverrides;
use super::compression::CompressionSettings;
use super::items::SessionItem;
use super::sets::ContextSets;
use super::topics::TopicSettings;

/// The record's current shape. Older records are read with defaults for what they lack.
pub const SETTINGS_VERSION: u32 = 2;

fn current_version() -> u32 {
    SETTINGS_VERSION
}

/// Everything a session has chosen or accumulated about its context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSettings {
    #[serde(default = "current_version")]
    pub version: u32,
    #[serde(default)]
    pub compression: CompressionSettings,
    /// Context sets (files, applet, endpoints, ports, …) kept by the model, the host and REST.
    #[serde(default)]
    pub context: ContextSets,
    /// The topic filter and similarity mode.
    #[serde(default)]
    pub topics: TopicSettings,
    /// The agent the session was created for (`None` on a server without agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The agent's items in the session: its `always` items from the start, and those added by
    /// hand (`manual`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<SessionItem>,
    /// Items the user removed: an `always` item among them that the agent gains later (a tool of
    /// an MCP server that connected after the session began) does not come in
    /// ([`super::items::carried`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<super::items::ItemRef>,
    /// Tool definitions the user allowed for the rest of the session (`allow_session`), by key:
    /// a server that changes a definition is asked about it again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted: Vec<String>,
    /// Tools left out over the tool budget that the model loaded (`load_tools`): offered with
    /// every later message of the session, whatever the budget.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded_tools: Vec<super::items::ItemRef>,
    /// The session's overrides of its agent's defaults.
    #[serde(default)]
    pub overrides: SessionOverrides,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            version: SETTINGS_VERSION,
            compression: CompressionSettings::default(),
            context: ContextSets::new(),
            topics: TopicSettings::default(),
            agent: None,
            items: Vec::new(),
            removed: Vec::new(),
            granted: Vec::new(),
            loaded_tools: Vec::new(),
            overrides: SessionOverrides::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_before_context_sets_still_reads() {
        let old: SessionSettings =
            serde_json::from_str(r#"{"version":1,"compression":{"enabled":false}}"#).unwrap();
        assert!(!old.compression.enabled);
        assert!(old.context.is_empty());
        assert!(old.topics.filter.is_empty());
        let empty: SessionSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, SessionSettings::default());
    }
}
