//! Server configuration: flags and environment variables (`GLASSBOX_*`, provider keys), each
//! defined once in [`Settings`], resolved into a [`Config`].

mod identity_secret;
mod settings;
mod values;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches};
use thiserror::Error;

use crate::client_addr::{ProxyConfigError, TrustedProxies};
use crate::origins::{AllowedOrigins, OriginConfigError};
use crate::rate_limits::RateLimitConfig;

pub use identity_secret::IdentitySecret;
pub use settings::Settings;
pub use values::{LogFormat, OrOff, Switch, Tools, ValueError};

/// Which provider answers chat requests.
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(ProviderName),
    derive(clap::ValueEnum, strum::IntoStaticStr),
    value(rename_all = "lowercase"),
    strum(serialize_all = "lowercase")
)]
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

impl ProviderName {
    /// The model a session of this provider replies with unless configured.
    fn default_model(self) -> &'static str {
        match self {
            ProviderName::Offline => "offline",
            ProviderName::OpenAi => "gpt-4o-mini",
            ProviderName::Anthropic => "claude-sonnet-4-5",
        }
    }
}

/// Where `OPENAI_BASE_URL` points unless set.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Everything the server needs to run, resolved from [`Settings`] (which documents each).
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: std::net::SocketAddr,
    pub data_dir: PathBuf,
    /// `GLASSBOX_DATABASE_URL` as given (`None`: SQLite in `data_dir`).
    pub database_url: Option<String>,
    /// Folder with the demo host pages (`None`: none are served).
    pub public_dir: Option<PathBuf>,
    /// Where `/metrics` is served (`None`: nowhere).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Folder with the built widget, served under `/widget/`.
    pub widget_dir: PathBuf,
    /// `None`: JSON when stdout is not a terminal.
    pub log_format: Option<LogFormat>,
    pub provider: ProviderKind,
    pub model: String,
    /// Models a client may ask for besides `model`.
    pub allowed_models: Vec<String>,
    pub system_prompt: Option<String>,
    pub max_output_tokens: u32,
    /// Context-window overrides: model (lowercase) and tokens.
    pub model_limits: Vec<(String, u32)>,
    /// Model that writes compression summaries; the reply model if `None`.
    pub summary_model: Option<String>,
    /// The model that extracts topics; `None`: from embeddings only (always under the offline
    /// provider).
    pub topic_model: Option<String>,
    pub topics_enabled: bool,
    /// How long after a reply its topic extraction starts, so a burst of replies is extracted
    /// once and a message sent right after a reply never meets it.
    pub topics_settle: Duration,
    pub similarity_threshold: f32,
    /// Whether topic filters select history (per session too).
    pub embedding_search: bool,
    pub vocab_dir: PathBuf,
    pub provider_idle_timeout: Duration,
    pub provider_total_timeout: Duration,
    pub disconnect_grace: Duration,
    /// How long replies under way may take to finish on shutdown.
    pub shutdown_grace: Duration,
    /// Every WebSocket's ping and `heartbeat` interval (zero: none).
    pub ws_heartbeat: Duration,
    /// `None`: no user is verified (every session is anonymous).
    pub identity_secret: Option<IdentitySecret>,
    pub offline_delay: Duration,
    /// Folder with the embedding model; `None` switches embeddings off.
    pub embed_model_dir: Option<PathBuf>,
    pub embed_model: String,
    pub embed_workers: usize,
    pub embed_queue: usize,
    pub embed_threads: usize,
    /// Offer the context tools to the model.
    pub tools_enabled: bool,
    pub max_chat_turns: u32,
    /// The system-prompt section about the context tools; `None`: left out.
    pub context_prompt: Option<String>,
    pub file_check_url: Option<String>,
    pub allowed_origins: AllowedOrigins,
    pub trusted_proxies: TrustedProxies,
    pub rate_limits: RateLimitConfig,
    pub budgets: BudgetConfig,
    /// Bytes of attached files the whole server keeps (0: no limit).
    pub files_max_bytes: u64,
    /// `None`: sessions are kept however long unused.
    pub session_ttl: Option<Duration>,
    /// The agents' configuration file; `None`: no agents.
    pub agents_file: Option<PathBuf>,
    /// 0: agents' files are read again only on SIGHUP.
    pub agents_poll: Duration,
}

/// The variables of the rate limits and spending caps, as their definitions on
/// [`RateLimitConfig`] and [`BudgetConfig`] name them (`0` turns each off; test and benchmark
/// harnesses, which send many messages from one address, switch them all off).
pub const LIMIT_VARS: LimitVars = LimitVars;

/// Iterates over the limits' variable names (see [`LIMIT_VARS`]).
#[derive(Debug, Clone, Copy)]
pub struct LimitVars;

impl IntoIterator for LimitVars {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;

    fn into_iter(self) -> Self::IntoIter {
        let limits =
            BudgetConfig::augment_args(RateLimitConfig::augment_args(clap::Command::new("limits")));
        let names: Vec<String> = limits
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        names.into_iter()
    }
}

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{setting}: {value:?} is not valid: {reason}")]
    Invalid {
        /// The variable and its flag.
        setting: String,
        value: String,
        /// What is allowed.
        reason: String,
    },
    #[error("GLASSBOX_PROVIDER=anthropic needs ANTHROPIC_API_KEY")]
    MissingAnthropicKey,
    #[error(transparent)]
    Origins(#[from] OriginConfigError),
    #[error(transparent)]
    Proxies(#[from] ProxyConfigError),
    /// Not a configuration to run with: `--help`, `--version`, an unknown flag (its `exit()`
    /// prints it as clap does).
    #[error("{0}")]
    Usage(#[from] clap::Error),
}

impl Config {
    /// Reads the command line and the process environment (an empty variable counts as unset).
    pub fn from_env() -> Result<Self, ConfigError> {
        let command = Settings::command().mut_args(|arg| {
            let empty = arg
                .get_env()
                .and_then(std::env::var_os)
                .is_some_and(|v| v.is_empty());
            if empty {
                arg.env(None::<&'static str>)
            } else {
                arg
            }
        });
        Self::parse(command, std::env::args_os())
    }

    /// Reads the settings' variables through `get` only (tests pass a map; the process
    /// environment is not read). An empty value counts as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut argv: Vec<OsString> = vec!["glassbox-server".into()];
        let command = Settings::command().mut_args(|arg| {
            let name = arg.get_env().and_then(|e| e.to_str());
            if let (Some(value), Some(long)) = (name.and_then(&get), arg.get_long())
                && !value.is_empty()
            {
                argv.push(format!("--{long}={value}").into());
            }
            arg.env(None::<&'static str>)
        });
        Self::parse(command, argv)
    }

    /// Parses `argv` with `command` (the [`Settings`] command, its variables read or not).
    fn parse(
        command: clap::Command,
        argv: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    ) -> Result<Self, ConfigError> {
        let settings = command
            .try_get_matches_from(argv)
            .and_then(|m| Settings::from_arg_matches(&m))
            .map_err(ConfigError::from_clap)?;
        Self::try_from(settings)
    }

    /// True if a client may ask for this model.
    pub fn model_allowed(&self, model: &str) -> bool {
        model == self.model || self.allowed_models.iter().any(|m| m == model)
    }
}

impl ConfigError {
    /// A value clap refused, as the setting it was given for (its variable and flag) and what
    /// is allowed; anything else as clap says it.
    fn from_clap(e: clap::Error) -> Self {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        if !matches!(
            e.kind(),
            ErrorKind::ValueValidation | ErrorKind::InvalidValue
        ) {
            return Self::Usage(e);
        }
        let source = std::error::Error::source(&e);
        if let Some(o) = source.and_then(|s| s.downcast_ref::<OriginConfigError>()) {
            return Self::Origins(o.clone());
        }
        if let Some(p) = source.and_then(|s| s.downcast_ref::<ProxyConfigError>()) {
            return Self::Proxies(p.clone());
        }
        let text = |kind| match e.get(kind) {
            Some(ContextValue::String(s)) => Some(s.clone()),
            _ => None,
        };
        let (Some(arg), Some(value)) = (
            text(ContextKind::InvalidArg),
            text(ContextKind::InvalidValue),
        ) else {
            return Self::Usage(e);
        };
        // `arg` is the flag as usage shows it (`--addr <ADDR>`).
        let flag = arg.split_whitespace().next().unwrap_or_default();
        let setting = Settings::command()
            .get_arguments()
            .find(|a| {
                a.get_long()
                    .is_some_and(|long| flag.strip_prefix("--") == Some(long))
            })
            .and_then(|a| Some(format!("{} ({flag})", a.get_env()?.to_str()?)))
            .unwrap_or_else(|| arg.clone());
        let reason = match (e.get(ContextKind::ValidValue), source) {
            (Some(ContextValue::Strings(valid)), _) => format!("use {}", valid.join(", ")),
            (_, Some(source)) => source.to_string(),
            _ => e.kind().to_string(),
        };
        Self::Invalid {
            setting,
            value,
            reason,
        }
    }
}

impl TryFrom<Settings> for Config {
    type Error = ConfigError;

    fn try_from(s: Settings) -> Result<Self, ConfigError> {
        let p = s.provider;
        // Zero-config: offline unless a provider is clearly configured.
        let name = p.provider.unwrap_or(if p.anthropic_api_key.is_some() {
            ProviderName::Anthropic
        } else if p.openai_api_key.is_some() || p.openai_base_url.is_some() {
            ProviderName::OpenAi
        } else {
            ProviderName::Offline
        });
        let provider = match name {
            ProviderName::Offline => ProviderKind::Offline,
            ProviderName::OpenAi => ProviderKind::OpenAi {
                api_key: p.openai_api_key,
                base_url: trim_slash(p.openai_base_url.as_deref().unwrap_or(OPENAI_BASE_URL)),
            },
            ProviderName::Anthropic => ProviderKind::Anthropic {
                api_key: p
                    .anthropic_api_key
                    .ok_or(ConfigError::MissingAnthropicKey)?,
                base_url: trim_slash(&p.anthropic_base_url),
            },
        };
        let r = s.replies;
        let model = r.model.unwrap_or_else(|| name.default_model().to_owned());
        let t = s.topics;
        let topic_model = match t.topic_model {
            _ if name == ProviderName::Offline => None,
            Some(m) if m == "offline" => None,
            Some(m) => Some(m),
            None => Some(model.clone()),
        };
        let e = s.embeddings;
        Ok(Self {
            addr: s.addr,
            vocab_dir: s.vocab_dir.unwrap_or_else(|| s.widget_dir.join("vocab")),
            database_url: s.database_url,
            data_dir: s.data_dir,
            public_dir: s.public_dir.into_option(),
            metrics_addr: s.metrics_addr.into_option(),
            widget_dir: s.widget_dir,
            log_format: s.log_format,
            provider,
            model,
            allowed_models: r
                .allowed_models
                .iter()
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .collect(),
            system_prompt: r.system_prompt,
            max_output_tokens: r.max_output_tokens,
            model_limits: r.model_limits,
            summary_model: r.summary_model,
            topic_model,
            topics_enabled: t.topics.into(),
            topics_settle: t.topics_settle_ms,
            similarity_threshold: t.similarity_threshold,
            embedding_search: t.embedding_search.into(),
            provider_idle_timeout: p.provider_idle_timeout_ms,
            provider_total_timeout: p.provider_total_timeout_ms,
            disconnect_grace: s.disconnect_grace_ms,
            shutdown_grace: s.shutdown_grace_ms,
            ws_heartbeat: s.ws_heartbeat_ms,
            identity_secret: s.identity_secret,
            offline_delay: p.offline_delay_ms,
            embed_model_dir: bool::from(e.embeddings)
                .then(|| e.embed_model_dir.unwrap_or_else(default_model_dir)),
            embed_model: e.embed_model,
            embed_workers: e.embed_workers,
            embed_queue: e.embed_queue,
            embed_threads: e.embed_threads,
            tools_enabled: r.tools == Tools::Context,
            max_chat_turns: r.max_chat_turns,
            context_prompt: match r.context_prompt {
                Some(prompt) => prompt.into_option(),
                None => Some(glassbox_core::context::sets::DEFAULT_TOOLS_PROMPT.to_owned()),
            },
            file_check_url: r.file_check_url,
            allowed_origins: s.allowed_origins.unwrap_or_default(),
            trusted_proxies: s.trusted_proxies.unwrap_or_default(),
            rate_limits: s.rate_limits,
            budgets: s.budgets,
            files_max_bytes: s.files_max_bytes,
            session_ttl: s.session_ttl.into_option(),
            agents_file: match s.config {
                Some(file) => file.into_option(),
                None => Some(PathBuf::from("glassbox.toml")).filter(|p| p.is_file()),
            },
            agents_poll: s.config_poll_ms,
        })
    }
}

/// Where `cargo xtask model` puts the default embedding model.
pub fn default_model_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/glassbox/models/all-MiniLM-L6-v2")
}

fn trim_slash(s: &str) -> String {
    s.trim_end_matches('/').to_owned()
}

/// Bytes of attached files the server keeps unless configured: 4 GiB, 128 sessions at their full
/// 32 MiB each.
pub const DEFAULT_FILES_MAX_BYTES: u64 = 4 << 30;

/// The spending caps in tokens (0: none); see the `budgets` service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
#[command(next_help_heading = "Token budgets (0: no cap)")]
pub struct BudgetConfig {
    /// Tokens (input + output, as the provider reports them) one session may spend.
    #[arg(long, env = "GLASSBOX_BUDGET_SESSION_TOKENS",
        default_value_t = BudgetConfig::default().session_tokens)]
    pub session_tokens: u64,
    /// Tokens the whole server may spend per UTC day.
    #[arg(long, env = "GLASSBOX_BUDGET_DAILY_TOKENS",
        default_value_t = BudgetConfig::default().daily_tokens)]
    pub daily_tokens: u64,
    /// Tokens one verified user may spend per UTC day, over all their sessions.
    #[arg(long, env = "GLASSBOX_BUDGET_USER_DAILY_TOKENS",
        default_value_t = BudgetConfig::default().user_daily_tokens)]
    pub user_daily_tokens: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            session_tokens: 500_000,
            daily_tokens: 10_000_000,
            user_daily_tokens: 1_000_000,
        }
    }
}

#[cfg(test)]
mod tests;
