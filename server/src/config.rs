//! Server configuration, read from the environment (`GLASSBOX_*`, provider keys).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::client_addr::{ProxyConfigError, TrustedProxies};
use crate::origins::{AllowedOrigins, OriginConfigError};
use crate::rate_limits::RateLimitConfig;

/// Which provider answers chat requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderKind {
    /// Deterministic local replies; needs no key and no network.
    Offline,
    /// OpenAI Chat Completions or any compatible server (Ollama, vLLM, llama.cpp, OpenRouter).
    OpenAi {
        api_key: Option<String>,
        base_url: String,
    },
    /// Anthropic Messages API.
    Anthropic { api_key: String, base_url: String },
}

/// Everything the server needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    /// Folder with the demo host pages (`public/`).
    pub public_dir: PathBuf,
    /// Folder with the built widget (`dist/`), served under `/widget/`.
    pub widget_dir: PathBuf,
    pub provider: ProviderKind,
    pub model: String,
    /// Models a client may ask for besides `model`.
    pub allowed_models: Vec<String>,
    pub system_prompt: Option<String>,
    pub max_output_tokens: u32,
    /// Context-window overrides, `GLASSBOX_MODEL_LIMITS="gpt-4o=64000,my-model=4096"`.
    pub model_limits: Vec<(String, u32)>,
    /// Model that writes compression summaries (`GLASSBOX_SUMMARY_MODEL`); the reply model if unset.
    pub summary_model: Option<String>,
    /// The model that extracts topics (`GLASSBOX_TOPIC_MODEL`; the reply model by default, `offline`
    /// for extraction from embeddings only; always offline under the offline provider).
    pub topic_model: Option<String>,
    /// Whether topics are extracted after replies (`GLASSBOX_TOPICS`, on).
    pub topics_enabled: bool,
    /// How long after a reply its topic extraction starts, so a burst of replies is extracted
    /// once and a message sent right after a reply never meets it (`GLASSBOX_TOPICS_SETTLE_MS`,
    /// 1,500).
    pub topics_settle: Duration,
    /// The cosine a message needs with a selected topic (`GLASSBOX_SIMILARITY_THRESHOLD`, 0.4).
    pub similarity_threshold: f32,
    /// Whether topic filters select history (`GLASSBOX_EMBEDDING_SEARCH`, on; per session too).
    pub embedding_search: bool,
    /// Folder with the token vocabularies (`*.gbv`); `dist/vocab` by default.
    pub vocab_dir: PathBuf,
    /// Longest wait for the provider's next byte.
    pub provider_idle_timeout: Duration,
    /// Longest a whole reply may take.
    pub provider_total_timeout: Duration,
    /// How long a reply keeps streaming after its session's last client left.
    pub disconnect_grace: Duration,
    /// Pause between words of the offline provider, so streaming is visible in the demo.
    pub offline_delay: Duration,
    /// Folder with the embedding model (`model.onnx`, `tokenizer.json`); `None` switches embeddings off.
    pub embed_model_dir: Option<PathBuf>,
    /// Name the embedding model is reported under.
    pub embed_model: String,
    /// Embedding runs allowed at once (each on its own thread).
    pub embed_workers: usize,
    /// Embedding requests in progress or waiting before new ones are refused with 429.
    pub embed_queue: usize,
    /// Threads one model run may use (the shards of a converted model run side by side).
    pub embed_threads: usize,
    /// Offer the context tools to the model (`GLASSBOX_TOOLS=context`, the default; `off` offers
    /// none, e.g. for a model without tool support or a very small window).
    pub tools_enabled: bool,
    /// Most tool rounds in one reply (`GLASSBOX_MAX_CHAT_TURNS`, default 10).
    pub max_chat_turns: u32,
    /// The system-prompt section about the context tools (`GLASSBOX_CONTEXT_PROMPT`: the text, or
    /// `off`); `sets::DEFAULT_TOOLS_PROMPT` by default (docs/context-sets.md).
    pub context_prompt: Option<String>,
    /// The host's existence check for files in the resume block (`GLASSBOX_FILE_CHECK_URL`, with
    /// `{path}` where the URL-encoded path goes): 2xx exists, 404/410 does not.
    pub file_check_url: Option<String>,
    /// Web pages allowed to use the server (`GLASSBOX_ALLOWED_ORIGINS`).
    pub allowed_origins: AllowedOrigins,
    /// Proxies whose `X-Forwarded-For` names the client (`GLASSBOX_TRUSTED_PROXIES`).
    pub trusted_proxies: TrustedProxies,
    /// Sessions, messages and streaming replies allowed per address and session.
    pub rate_limits: RateLimitConfig,
    /// Token spending caps per session and per day.
    pub budgets: BudgetConfig,
    /// Bytes of attached files the whole server keeps (`GLASSBOX_FILES_MAX_BYTES`, default 4 GiB;
    /// 0: no limit); past it uploads are refused with `storage_full` until sessions or files are
    /// deleted.
    pub files_max_bytes: u64,
    /// Sessions unused this long are deleted with everything in them (`GLASSBOX_SESSION_TTL`,
    /// default 30 days; `off` keeps them).
    pub session_ttl: Option<Duration>,
    /// The agents' configuration file (`GLASSBOX_CONFIG`; `glassbox.toml` in the working
    /// directory when present; `off`: no agents).
    pub agents_file: Option<PathBuf>,
    /// How often the agents' files are checked for changes (`GLASSBOX_CONFIG_POLL_MS`, 2,000;
    /// 0: only on SIGHUP).
    pub agents_poll: Duration,
}

/// The variables of the rate limits and spending caps (`0` turns each off; test and benchmark
/// harnesses, which send many messages from one address, switch them all off).
pub const LIMIT_VARS: [&str; 10] = [
    "GLASSBOX_LIMIT_SESSIONS_PER_HOUR",
    "GLASSBOX_LIMIT_MESSAGES_PER_MINUTE",
    "GLASSBOX_LIMIT_ADDRESS_MESSAGES_PER_MINUTE",
    "GLASSBOX_LIMIT_STREAMS_PER_ADDRESS",
    "GLASSBOX_LIMIT_UPLOADS_PER_ADDRESS",
    "GLASSBOX_LIMIT_COMMANDS_PER_MINUTE",
    "GLASSBOX_LIMIT_JOINS_PER_MINUTE",
    "GLASSBOX_LIMIT_PREVIEWS_PER_MINUTE",
    "GLASSBOX_BUDGET_SESSION_TOKENS",
    "GLASSBOX_BUDGET_DAILY_TOKENS",
];

/// A configuration value that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{name}={value:?} is not valid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("GLASSBOX_PROVIDER=anthropic needs ANTHROPIC_API_KEY")]
    MissingAnthropicKey,
    #[error(transparent)]
    Origins(#[from] OriginConfigError),
    #[error(transparent)]
    Proxies(#[from] ProxyConfigError),
}

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// Reads the configuration through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let addr = parse(&get, "GLASSBOX_ADDR", "127.0.0.1:8080")?;
        let data_dir = PathBuf::from(get("GLASSBOX_DATA_DIR").unwrap_or_else(|| "data".into()));
        let public_dir =
            PathBuf::from(get("GLASSBOX_PUBLIC_DIR").unwrap_or_else(|| "public".into()));
        let widget_dir = PathBuf::from(get("GLASSBOX_WIDGET_DIR").unwrap_or_else(|| "dist".into()));
        let openai_key = get("OPENAI_API_KEY");
        let anthropic_key = get("ANTHROPIC_API_KEY");
        let openai_base = get("OPENAI_BASE_URL");
        let kind = get("GLASSBOX_PROVIDER").unwrap_or_else(|| {
            // Zero-config: offline unless a provider is clearly configured.
            if anthropic_key.is_some() {
                "anthropic".into()
            } else if openai_key.is_some() || openai_base.is_some() {
                "openai".into()
            } else {
                "offline".into()
            }
        });
        let provider = match kind.as_str() {
            "offline" => ProviderKind::Offline,
            "openai" => ProviderKind::OpenAi {
                api_key: openai_key,
                base_url: trim_slash(
                    openai_base.unwrap_or_else(|| "https://api.openai.com/v1".into()),
                ),
            },
            "anthropic" => ProviderKind::Anthropic {
                api_key: anthropic_key.ok_or(ConfigError::MissingAnthropicKey)?,
                base_url: trim_slash(
                    get("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into()),
                ),
            },
            other => {
                return Err(ConfigError::Invalid {
                    name: "GLASSBOX_PROVIDER",
                    value: other.into(),
                    reason: "use offline, openai or anthropic".into(),
                });
            }
        };
        let default_model = match provider {
            ProviderKind::Offline => "offline",
            ProviderKind::OpenAi { .. } => "gpt-4o-mini",
            ProviderKind::Anthropic { .. } => "claude-sonnet-4-5",
        };
        let allowed_models = get("GLASSBOX_ALLOWED_MODELS")
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let vocab_dir = get("GLASSBOX_VOCAB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| widget_dir.join("vocab"));
        let topic_model = match get("GLASSBOX_TOPIC_MODEL") {
            _ if matches!(provider, ProviderKind::Offline) => None,
            Some(m) if m == "offline" => None,
            Some(m) => Some(m),
            None => Some(get("GLASSBOX_MODEL").unwrap_or_else(|| default_model.into())),
        };
        Ok(Self {
            addr,
            data_dir,
            public_dir,
            widget_dir,
            provider,
            model: get("GLASSBOX_MODEL").unwrap_or_else(|| default_model.into()),
            allowed_models,
            system_prompt: get("GLASSBOX_SYSTEM_PROMPT"),
            max_output_tokens: parse(&get, "GLASSBOX_MAX_OUTPUT_TOKENS", "4096")?,
            model_limits: model_limits(get("GLASSBOX_MODEL_LIMITS"))?,
            summary_model: get("GLASSBOX_SUMMARY_MODEL"),
            topic_model,
            topics_enabled: switch(&get, "GLASSBOX_TOPICS", true)?,
            topics_settle: millis(&get, "GLASSBOX_TOPICS_SETTLE_MS", 1_500)?,
            similarity_threshold: {
                let t: f32 = parse(&get, "GLASSBOX_SIMILARITY_THRESHOLD", "0.4")?;
                glassbox_core::context::topics::check_threshold(t).map_err(|e| {
                    ConfigError::Invalid {
                        name: "GLASSBOX_SIMILARITY_THRESHOLD",
                        value: t.to_string(),
                        reason: e.to_string(),
                    }
                })?
            },
            embedding_search: switch(&get, "GLASSBOX_EMBEDDING_SEARCH", true)?,
            vocab_dir,
            provider_idle_timeout: millis(&get, "GLASSBOX_PROVIDER_IDLE_TIMEOUT_MS", 60_000)?,
            provider_total_timeout: millis(&get, "GLASSBOX_PROVIDER_TOTAL_TIMEOUT_MS", 600_000)?,
            disconnect_grace: millis(&get, "GLASSBOX_DISCONNECT_GRACE_MS", 10_000)?,
            offline_delay: millis(&get, "GLASSBOX_OFFLINE_DELAY_MS", 25)?,
            embed_model_dir: match get("GLASSBOX_EMBEDDINGS").as_deref() {
                Some("off") => None,
                _ => Some(
                    get("GLASSBOX_EMBED_MODEL_DIR")
                        .map(PathBuf::from)
                        .unwrap_or_else(default_model_dir),
                ),
            },
            embed_model: get("GLASSBOX_EMBED_MODEL").unwrap_or_else(|| "all-MiniLM-L6-v2".into()),
            embed_workers: parse(&get, "GLASSBOX_EMBED_WORKERS", "2")?,
            embed_queue: parse(&get, "GLASSBOX_EMBED_QUEUE", "64")?,
            embed_threads: parse(&get, "GLASSBOX_EMBED_THREADS", "2")?,
            tools_enabled: match get("GLASSBOX_TOOLS").as_deref() {
                None | Some("context") => true,
                Some("off") => false,
                Some(other) => {
                    return Err(ConfigError::Invalid {
                        name: "GLASSBOX_TOOLS",
                        value: other.into(),
                        reason: "use context or off".into(),
                    });
                }
            },
            max_chat_turns: parse(&get, "GLASSBOX_MAX_CHAT_TURNS", "10")?,
            context_prompt: match get("GLASSBOX_CONTEXT_PROMPT") {
                Some(v) if v == "off" => None,
                Some(v) => Some(v),
                None => Some(glassbox_core::context::sets::DEFAULT_TOOLS_PROMPT.to_owned()),
            },
            file_check_url: get("GLASSBOX_FILE_CHECK_URL"),
            allowed_origins: AllowedOrigins::parse(get("GLASSBOX_ALLOWED_ORIGINS").as_deref())?,
            trusted_proxies: TrustedProxies::parse(get("GLASSBOX_TRUSTED_PROXIES").as_deref())?,
            budgets: {
                let d = BudgetConfig::default();
                BudgetConfig {
                    session_tokens: parse(
                        &get,
                        "GLASSBOX_BUDGET_SESSION_TOKENS",
                        &d.session_tokens.to_string(),
                    )?,
                    daily_tokens: parse(
                        &get,
                        "GLASSBOX_BUDGET_DAILY_TOKENS",
                        &d.daily_tokens.to_string(),
                    )?,
                }
            },
            files_max_bytes: parse(
                &get,
                "GLASSBOX_FILES_MAX_BYTES",
                &DEFAULT_FILES_MAX_BYTES.to_string(),
            )?,
            session_ttl: match get("GLASSBOX_SESSION_TTL").as_deref().map(str::trim) {
                None => Some(Duration::from_secs(30 * 24 * 3600)),
                Some("off") => None,
                Some(v) => {
                    Some(
                        humantime::parse_duration(v).map_err(|e| ConfigError::Invalid {
                            name: "GLASSBOX_SESSION_TTL",
                            value: v.to_owned(),
                            reason: format!("{e}; e.g. 30d, 12h or off"),
                        })?,
                    )
                }
            },
            agents_file: match get("GLASSBOX_CONFIG") {
                Some(v) if v == "off" => None,
                Some(v) => Some(PathBuf::from(v)),
                None => Some(PathBuf::from("glassbox.toml")).filter(|p| p.is_file()),
            },
            agents_poll: millis(&get, "GLASSBOX_CONFIG_POLL_MS", 2_000)?,
            rate_limits: {
                let d = RateLimitConfig::default();
                let n = |name: &'static str, default: u32| {
                    parse::<u32>(&get, name, &default.to_string())
                };
                RateLimitConfig {
                    sessions_per_hour: n("GLASSBOX_LIMIT_SESSIONS_PER_HOUR", d.sessions_per_hour)?,
                    messages_per_minute: n(
                        "GLASSBOX_LIMIT_MESSAGES_PER_MINUTE",
                        d.messages_per_minute,
                    )?,
                    address_messages_per_minute: n(
                        "GLASSBOX_LIMIT_ADDRESS_MESSAGES_PER_MINUTE",
                        d.address_messages_per_minute,
                    )?,
                    streams_per_address: n(
                        "GLASSBOX_LIMIT_STREAMS_PER_ADDRESS",
                        d.streams_per_address,
                    )?,
                    uploads_per_address: n(
                        "GLASSBOX_LIMIT_UPLOADS_PER_ADDRESS",
                        d.uploads_per_address,
                    )?,
                    commands_per_minute: n(
                        "GLASSBOX_LIMIT_COMMANDS_PER_MINUTE",
                        d.commands_per_minute,
                    )?,
                    joins_per_minute: n("GLASSBOX_LIMIT_JOINS_PER_MINUTE", d.joins_per_minute)?,
                    previews_per_minute: n(
                        "GLASSBOX_LIMIT_PREVIEWS_PER_MINUTE",
                        d.previews_per_minute,
                    )?,
                }
            },
        })
    }

    /// True if a client may ask for this model.
    pub fn model_allowed(&self, model: &str) -> bool {
        model == self.model || self.allowed_models.iter().any(|m| m == model)
    }
}

/// Where `cargo xtask model` puts the default embedding model.
pub fn default_model_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/glassbox/models/all-MiniLM-L6-v2")
}

/// Parses `name=tokens,name=tokens`.
fn model_limits(raw: Option<String>) -> Result<Vec<(String, u32)>, ConfigError> {
    let Some(raw) = raw else { return Ok(vec![]) };
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let invalid = |reason: &str| ConfigError::Invalid {
                name: "GLASSBOX_MODEL_LIMITS",
                value: pair.to_owned(),
                reason: reason.to_owned(),
            };
            let (model, limit) = pair
                .split_once('=')
                .ok_or_else(|| invalid("use model=tokens"))?;
            let limit: u32 = limit
                .trim()
                .parse()
                .map_err(|_| invalid("tokens must be a positive integer"))?;
            if limit == 0 {
                return Err(invalid("tokens must be a positive integer"));
            }
            Ok((model.trim().to_lowercase(), limit))
        })
        .collect()
}

fn trim_slash(s: String) -> String {
    s.trim_end_matches('/').to_owned()
}

/// An on/off setting (`on`/`off`, or `true`/`false`), `default` when unset.
fn switch(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    match get(name).as_deref().map(str::trim) {
        None => Ok(default),
        Some("on" | "true") => Ok(true),
        Some("off" | "false") => Ok(false),
        Some(other) => Err(ConfigError::Invalid {
            name,
            value: other.into(),
            reason: "use on or off".into(),
        }),
    }
}

/// Bytes of attached files the server keeps unless configured: 4 GiB, 128 sessions at their full
/// 32 MiB each.
pub const DEFAULT_FILES_MAX_BYTES: u64 = 4 << 30;

fn parse<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: &str,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    let value = get(name).unwrap_or_else(|| default.into());
    value.parse().map_err(|e: T::Err| ConfigError::Invalid {
        name,
        value,
        reason: e.to_string(),
    })
}

fn millis(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
    default: u64,
) -> Result<Duration, ConfigError> {
    parse::<u64>(get, name, &default.to_string()).map(Duration::from_millis)
}

/// The spending caps in tokens (0: none); see the `budgets` service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Tokens one session may spend (`GLASSBOX_BUDGET_SESSION_TOKENS`).
    pub session_tokens: u64,
    /// Tokens the whole server may spend per UTC day (`GLASSBOX_BUDGET_DAILY_TOKENS`).
    pub daily_tokens: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            session_tokens: 500_000,
            daily_tokens: 10_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn no_keys_means_offline_on_localhost_8080() {
        let c = config(&[]).unwrap();
        assert_eq!(c.provider, ProviderKind::Offline);
        assert_eq!(c.addr.to_string(), "127.0.0.1:8080");
    }

    #[test]
    fn openai_base_url_is_configurable() {
        let c = config(&[
            ("GLASSBOX_PROVIDER", "openai"),
            ("OPENAI_BASE_URL", "http://localhost:11434/v1/"),
        ])
        .unwrap();
        assert_eq!(
            c.provider,
            ProviderKind::OpenAi {
                api_key: None,
                base_url: "http://localhost:11434/v1".into()
            }
        );
    }

    #[test]
    fn anthropic_without_key_is_an_error() {
        assert!(matches!(
            config(&[("GLASSBOX_PROVIDER", "anthropic")]),
            Err(ConfigError::MissingAnthropicKey)
        ));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = config(&[("GLASSBOX_ADDR", "nowhere")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("GLASSBOX_ADDR"), "{err}");
    }
}
