//! The kinds of value settings take, and their parsers: each error says what is allowed.

use std::num::ParseIntError;
use std::str::FromStr;
use std::time::Duration;

use clap::ValueEnum;
use clap::builder::RangedU64ValueParser;
use thiserror::Error;

use crate::client_addr::{ProxyConfigError, TrustedProxies};
use crate::origins::{AllowedOrigins, OriginConfigError};

/// A value that cannot be used, and what can.
#[derive(Debug, Error)]
pub enum ValueError {
    #[error("use model=tokens, tokens a positive integer")]
    ModelLimit,
    #[error("{0}; e.g. 30d, 12h or off")]
    Duration(#[from] humantime::DurationError),
    #[error("{0}")]
    Threshold(String),
    #[error("a number between 0 and 1")]
    NotANumber,
}

/// A setting that the word `off` switches off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrOff<T> {
    Off,
    On(T),
}

impl<T> OrOff<T> {
    /// The value, `None` when off.
    pub fn into_option(self) -> Option<T> {
        match self {
            OrOff::Off => None,
            OrOff::On(v) => Some(v),
        }
    }
}

/// `on` or `off` (or `true`/`false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    #[value(alias = "true")]
    On,
    #[value(alias = "false")]
    Off,
}

impl From<Switch> for bool {
    fn from(s: Switch) -> bool {
        s == Switch::On
    }
}

/// Which tools the model is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tools {
    /// The context-set tools.
    Context,
    /// None (a model without tool support, a very small window).
    Off,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Readable lines, coloured on a terminal.
    Text,
}

/// `off`, or a value.
pub fn or_off<T: FromStr>(s: &str) -> Result<OrOff<T>, T::Err> {
    match s.trim() {
        "off" => Ok(OrOff::Off),
        _ => s.parse().map(OrOff::On),
    }
}

/// A duration as people write it (`30d`, `12h 30m`), or `off`.
pub fn session_ttl(s: &str) -> Result<OrOff<Duration>, ValueError> {
    match s.trim() {
        "off" => Ok(OrOff::Off),
        v => Ok(OrOff::On(humantime::parse_duration(v)?)),
    }
}

/// Milliseconds.
pub fn millis(s: &str) -> Result<Duration, ParseIntError> {
    s.trim().parse().map(Duration::from_millis)
}

/// A cosine threshold, 0–1.
pub fn threshold(s: &str) -> Result<f32, ValueError> {
    let t: f32 = s.trim().parse().map_err(|_| ValueError::NotANumber)?;
    glassbox_core::context::topics::check_threshold(t)
        .map_err(|e| ValueError::Threshold(e.to_string()))
}

/// One `model=tokens` pair (the model lowercased).
pub fn model_limit(pair: &str) -> Result<(String, u32), ValueError> {
    let (model, limit) = pair.split_once('=').ok_or(ValueError::ModelLimit)?;
    match limit.trim().parse::<u32>() {
        Ok(limit) if limit > 0 => Ok((model.trim().to_lowercase(), limit)),
        _ => Err(ValueError::ModelLimit),
    }
}

/// `GLASSBOX_ALLOWED_ORIGINS`'s comma list.
pub fn allowed_origins(s: &str) -> Result<AllowedOrigins, OriginConfigError> {
    AllowedOrigins::parse(Some(s))
}

/// `GLASSBOX_TRUSTED_PROXIES`'s comma list.
pub fn trusted_proxies(s: &str) -> Result<TrustedProxies, ProxyConfigError> {
    TrustedProxies::parse(Some(s))
}

/// A count of at least one.
pub fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// Tool rounds in one reply: 1 to the most a session may ask for.
pub fn chat_turns() -> RangedU64ValueParser<u32> {
    RangedU64ValueParser::new()
        .range(1..=u64::from(glassbox_core::context::agent_settings::MAX_CHAT_TURNS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_limits_are_model_equals_tokens() {
        assert_eq!(
            model_limit(" GPT-4o = 64000").ok(),
            Some(("gpt-4o".to_owned(), 64_000))
        );
        for bad in ["gpt-4o", "gpt-4o=0", "gpt-4o=many", ""] {
            assert!(model_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn off_switches_a_setting_off() {
        assert_eq!(session_ttl("off").ok(), Some(OrOff::Off));
        assert_eq!(
            session_ttl("12h").ok(),
            Some(OrOff::On(Duration::from_secs(12 * 3600)))
        );
        let e = session_ttl("soon").unwrap_err().to_string();
        assert!(e.contains("30d"), "{e}");
        assert_eq!(or_off::<String>("off").ok(), Some(OrOff::Off));
        assert_eq!(
            or_off::<String>("Be brief.").ok(),
            Some(OrOff::On("Be brief.".to_owned()))
        );
    }
}
