//! An agent's defaults for its sessions and a session's overrides of them: how many tool rounds,
//! the sampling the provider is asked for, the longest reply, and the semantic search of items.
//! The effective settings of a session are the overrides laid over the defaults.

use serde::{Deserialize, Serialize};

use super::items::{ItemSearchSettings, ItemSettingsError};

/// Whether the model may run tools without asking the user.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum ToolPermission {
    /// Each call waits for the user's yes.
    #[default]
    Ask,
    /// Calls run without asking.
    Allow,
    /// No call runs.
    Deny,
}

/// An agent's defaults for its sessions (the configuration file's keys, camelCase on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSettings {
    /// Most tool rounds in one reply.
    pub max_chat_turns: u32,
    /// Sampling temperature (0–2); the provider's own when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling (0–1); the provider's own when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Longest reply in tokens; the server's when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Chunk matches considered before grouping by item.
    pub context_top_k: u32,
    /// Items chosen by search (items at or above the include score may exceed it).
    pub context_top_n: u32,
    /// Items scoring at least this are always chosen.
    pub context_include_score: f32,
    /// Items scoring below this are never chosen by search (ours; 0.3 by default, so a message
    /// about nothing the agent knows gets no agent item).
    pub context_min_score: f32,
    /// Passes of context-based expansion (0: off).
    pub context_expansion_depth: u32,
    /// The score an item needs to join by expansion.
    pub context_expansion_threshold: f32,
    /// Most items one expansion pass adds.
    pub context_expansion_top_n: u32,
    pub tool_permission: ToolPermission,
    /// Most tokens the tool items' definitions may take in one request (`None`: no limit); the
    /// lowest-ranked over it are left out, and the model can load them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_budget: Option<u32>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        let search = ItemSearchSettings::default();
        Self {
            max_chat_turns: 10,
            temperature: None,
            top_p: None,
            max_output_tokens: None,
            context_top_k: search.top_k,
            context_top_n: search.top_n,
            context_include_score: search.include_score,
            context_min_score: DEFAULT_MIN_SCORE,
            context_expansion_depth: search.expansion_depth,
            context_expansion_threshold: search.expansion_threshold,
            context_expansion_top_n: search.expansion_top_n,
            tool_permission: ToolPermission::default(),
            tool_budget: None,
        }
    }
}

/// A setting out of range: its key (as the configuration file writes it) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} {why}")]
pub struct SettingError {
    pub key: &'static str,
    pub why: String,
}

/// The score below which search chooses no item, unless an agent says otherwise: a cosine of the
/// demo's embedding model under which an item is about something else.
pub const DEFAULT_MIN_SCORE: f32 = 0.3;

/// Most tool rounds a session may ask for.
pub const MAX_CHAT_TURNS: u32 = 50;

impl AgentSettings {
    /// The semantic search of its sessions' requests.
    pub fn search(&self) -> ItemSearchSettings {
        ItemSearchSettings {
            top_k: self.context_top_k,
            top_n: self.context_top_n,
            include_score: self.context_include_score,
            min_score: self.context_min_score,
            expansion_depth: self.context_expansion_depth,
            expansion_threshold: self.context_expansion_threshold,
            expansion_top_n: self.context_expansion_top_n,
            ..ItemSearchSettings::default()
        }
    }

    /// Refuses the first value out of range.
    pub fn validate(&self) -> Result<(), SettingError> {
        let err = |key, why: String| Err(SettingError { key, why });
        let within = |key, v: f32, lo: f32, hi: f32| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                let s = |x: f32| crate::number::short(x.into());
                err(key, format!("is {}, outside {}–{}", s(v), s(lo), s(hi)))
            }
        };
        if let Some(t) = self.temperature {
            within("temperature", t, 0.0, 2.0)?;
        }
        if let Some(p) = self.top_p {
            within("top_p", p, 0.0, 1.0)?;
        }
        if self.max_output_tokens == Some(0) {
            return err("max_output_tokens", "must be at least 1".into());
        }
        if self.context_min_score > self.context_include_score {
            return err(
                "context_min_score",
                format!(
                    "is {}, above context_include_score ({})",
                    crate::number::short(self.context_min_score.into()),
                    crate::number::short(self.context_include_score.into())
                ),
            );
        }
        if !(1..=MAX_CHAT_TURNS).contains(&self.max_chat_turns) {
            return err(
                "max_chat_turns",
                format!("is {}, outside 1–{MAX_CHAT_TURNS}", self.max_chat_turns),
            );
        }
        self.search().validate().map_err(|e| {
            use ItemSettingsError::*;
            let key = match e {
                TopK(_) => "context_top_k",
                TopN(_) => "context_top_n",
                IncludeScore(_) => "context_include_score",
                MinScore(_) => "context_min_score",
                ExpansionDepth(_) => "context_expansion_depth",
                ExpansionThreshold(_) => "context_expansion_threshold",
                ExpansionTopN(_) => "context_expansion_top_n",
                PerQueryChunkMin(_) => "the per-sentence minimum",
            };
            SettingError {
                key,
                why: format!("is out of range ({e})"),
            }
        })
    }

    /// Checks a session's `overrides` of these defaults: the result in range, and nothing that
    /// costs raised past the defaults (a session may lower its tool rounds and longest reply, not
    /// raise them). The server checks with this before storing; the widget before sending.
    pub fn check_overrides(&self, overrides: &SessionOverrides) -> Result<(), SettingError> {
        self.with(overrides).validate()?;
        let above = |key: &'static str, asked: u32, most: u32| SettingError {
            key,
            why: format!("is {asked}; this session may use at most {most}"),
        };
        if let Some(t) = overrides.max_chat_turns
            && t > self.max_chat_turns
        {
            return Err(above("max_chat_turns", t, self.max_chat_turns));
        }
        if let (Some(t), Some(most)) = (overrides.max_output_tokens, self.max_output_tokens)
            && t > most
        {
            return Err(above("max_output_tokens", t, most));
        }
        Ok(())
    }

    /// These settings with `overrides` laid over them.
    pub fn with(&self, overrides: &SessionOverrides) -> AgentSettings {
        AgentSettings {
            max_chat_turns: overrides.max_chat_turns.unwrap_or(self.max_chat_turns),
            temperature: overrides.temperature.or(self.temperature),
            top_p: overrides.top_p.or(self.top_p),
            max_output_tokens: overrides.max_output_tokens.or(self.max_output_tokens),
            context_top_k: overrides.context_top_k.unwrap_or(self.context_top_k),
            context_top_n: overrides.context_top_n.unwrap_or(self.context_top_n),
            context_include_score: overrides
                .context_include_score
                .unwrap_or(self.context_include_score),
            context_min_score: overrides
                .context_min_score
                .unwrap_or(self.context_min_score),
            context_expansion_depth: overrides
                .context_expansion_depth
                .unwrap_or(self.context_expansion_depth),
            context_expansion_threshold: overrides
                .context_expansion_threshold
                .unwrap_or(self.context_expansion_threshold),
            context_expansion_top_n: overrides
                .context_expansion_top_n
                .unwrap_or(self.context_expansion_top_n),
            tool_permission: overrides.tool_permission.unwrap_or(self.tool_permission),
            tool_budget: overrides.tool_budget.or(self.tool_budget),
        }
    }
}

/// A session's overrides of its agent's defaults; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chat_turns: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_top_n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_include_score: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_min_score: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_expansion_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_expansion_threshold: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_expansion_top_n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_permission: Option<ToolPermission>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_budget: Option<u32>,
}

impl SessionOverrides {
    /// Every key of the overrides as on the wire (camelCase), in the struct's order. The list is
    /// the one serde's derive reads the struct by, so a field added to the struct is in it with
    /// nothing else to update (the widget's test of the drawer checks it shows one row per key).
    pub fn keys() -> &'static [&'static str] {
        wire_keys::<Self>()
    }
}

/// The keys `T`'s derived `Deserialize` reads: serde's derive hands its (renamed) field names to
/// `Deserializer::deserialize_struct`, where this deserializer returns them as its error.
fn wire_keys<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{self, Visitor};

    /// The field names handed over (none when `T` is not a struct).
    #[derive(Debug)]
    struct Keys(&'static [&'static str]);

    impl std::fmt::Display for Keys {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "keys {:?}", self.0)
        }
    }

    impl std::error::Error for Keys {}

    impl de::Error for Keys {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Keys(&[])
        }
    }

    struct KeysOf;

    impl<'de> de::Deserializer<'de> for KeysOf {
        type Error = Keys;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Keys> {
            Err(Keys(&[]))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Keys> {
            Err(Keys(fields))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    match T::deserialize(KeysOf) {
        Err(Keys(keys)) => keys,
        Ok(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_values() {
        let d = AgentSettings::default();
        assert_eq!(
            (d.max_chat_turns, d.context_top_k, d.context_top_n),
            (10, 20, 5)
        );
        assert_eq!(d.context_include_score, 0.7);
        assert_eq!(d.context_expansion_depth, 0);
        assert_eq!(d.context_expansion_threshold, 0.75);
        assert_eq!(d.context_expansion_top_n, 3);
        assert_eq!(d.tool_permission, ToolPermission::Ask);
        assert!(d.validate().is_ok());
    }

    #[test]
    fn overrides_replace_only_what_they_set() {
        let d = AgentSettings {
            temperature: Some(0.3),
            ..AgentSettings::default()
        };
        let o: SessionOverrides =
            serde_json::from_str(r#"{"topP": 0.5, "contextTopN": 2, "toolPermission": "deny"}"#)
                .unwrap();
        let e = d.with(&o);
        assert_eq!(e.temperature, Some(0.3));
        assert_eq!(e.top_p, Some(0.5));
        assert_eq!(e.context_top_n, 2);
        assert_eq!(e.context_top_k, 20);
        assert_eq!(e.tool_permission, ToolPermission::Deny);
        assert_eq!(d.with(&SessionOverrides::default()), d);
        assert!(serde_json::from_str::<SessionOverrides>(r#"{"temprature": 1}"#).is_err());
    }

    #[test]
    fn every_default_has_an_override_and_each_key_reads_alone() {
        let keys = SessionOverrides::keys();
        assert_eq!(keys.first(), Some(&"maxChatTurns"));
        assert!(keys.contains(&"contextExpansionTopN"));
        // The same keys as the defaults they override, both taken from serde's derives.
        let mut overrides = keys.to_vec();
        let mut defaults = wire_keys::<AgentSettings>().to_vec();
        overrides.sort_unstable();
        defaults.sort_unstable();
        assert_eq!(overrides, defaults);
        // Each is a key the wire accepts (the struct refuses unknown ones).
        for key in keys {
            let one = serde_json::json!({ *key: null });
            assert_eq!(
                serde_json::from_value::<SessionOverrides>(one).ok(),
                Some(SessionOverrides::default()),
                "{key}"
            );
        }
    }

    #[test]
    fn a_session_may_lower_what_costs_but_not_raise_it() {
        let d = AgentSettings {
            max_output_tokens: Some(1000),
            ..AgentSettings::default()
        };
        let lower = SessionOverrides {
            max_chat_turns: Some(3),
            max_output_tokens: Some(500),
            ..SessionOverrides::default()
        };
        assert!(d.check_overrides(&lower).is_ok());
        let turns = SessionOverrides {
            max_chat_turns: Some(11),
            ..SessionOverrides::default()
        };
        assert_eq!(d.check_overrides(&turns).unwrap_err().key, "max_chat_turns");
        let longest = SessionOverrides {
            max_output_tokens: Some(1001),
            ..SessionOverrides::default()
        };
        assert_eq!(
            d.check_overrides(&longest).unwrap_err().key,
            "max_output_tokens"
        );
        let hot = SessionOverrides {
            temperature: Some(2.5),
            ..SessionOverrides::default()
        };
        assert_eq!(d.check_overrides(&hot).unwrap_err().key, "temperature");
    }

    #[test]
    fn out_of_range_values_name_their_key() {
        let bad = |s: AgentSettings| s.validate().unwrap_err().key;
        let d = AgentSettings::default();
        assert_eq!(
            bad(AgentSettings {
                temperature: Some(2.5),
                ..d.clone()
            }),
            "temperature"
        );
        assert_eq!(
            bad(AgentSettings {
                top_p: Some(-0.1),
                ..d.clone()
            }),
            "top_p"
        );
        assert_eq!(
            bad(AgentSettings {
                max_chat_turns: 0,
                ..d.clone()
            }),
            "max_chat_turns"
        );
        assert_eq!(
            bad(AgentSettings {
                context_top_k: 0,
                ..d.clone()
            }),
            "context_top_k"
        );
        assert_eq!(
            bad(AgentSettings {
                max_output_tokens: Some(0),
                ..d
            }),
            "max_output_tokens"
        );
    }
}
