//! Every setting, once: a flag and the environment variable beside it, with its default. `clap`
//! reads them (`glassbox-server --help` lists them); [`super::Config`] is what they resolve to.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser};

use super::values::{
    LogFormat, OrOff, Switch, Tools, allowed_origins, at_least_one, chat_turns, millis,
    model_limit, or_off, session_ttl, threshold, trusted_proxies,
};
use super::{BudgetConfig, IdentitySecret, ProviderName};
use crate::client_addr::TrustedProxies;
use crate::origins::AllowedOrigins;
use crate::rate_limits::RateLimitConfig;

/// Glassbox: a chat server for the widget, forwarding to an LLM provider. Every setting is a
/// flag or the environment variable named beside it.
#[derive(Debug, Clone, Parser)]
#[command(name = "glassbox-server", version)]
pub struct Settings {
    /// Address to listen on.
    #[arg(long, env = "GLASSBOX_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Where `glassbox.db` (SQLite, WAL) lives.
    #[arg(long, env = "GLASSBOX_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// The database: `sqlite://PATH`, or `postgres://USER:PASSWORD@HOST/DB` for several instances
    /// on one database [default: sqlite://<data dir>/glassbox.db].
    #[arg(long, env = "GLASSBOX_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// The demo pages (`off`: none are served).
    #[arg(long, env = "GLASSBOX_PUBLIC_DIR", default_value = "public", value_parser = or_off::<PathBuf>)]
    pub public_dir: OrOff<PathBuf>,
    /// Where `GET /metrics` (Prometheus text) is served, apart from the public address so it is
    /// never exposed with it (`127.0.0.1:9464`; `off`: not served).
    #[arg(long, env = "GLASSBOX_METRICS_ADDR", default_value = "off", value_parser = or_off::<SocketAddr>)]
    pub metrics_addr: OrOff<SocketAddr>,
    /// The built widget, served under `/widget/`.
    #[arg(long, env = "GLASSBOX_WIDGET_DIR", default_value = "dist")]
    pub widget_dir: PathBuf,
    /// Token vocabularies (`*.gbv`, written by `cargo xtask build`) [default: <widget dir>/vocab].
    #[arg(long, env = "GLASSBOX_VOCAB_DIR")]
    pub vocab_dir: Option<PathBuf>,
    /// Log lines as JSON objects or readable text [default: json when stdout is not a terminal].
    #[arg(long, env = "GLASSBOX_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Web pages that may use the server: a comma list of origins, `https://*.example.com` for
    /// subdomains, `:*` for any port, `*` alone for all [default: this server's own origin and
    /// http://localhost:*, http://127.0.0.1:*, http://[::1]:*].
    #[arg(long, env = "GLASSBOX_ALLOWED_ORIGINS", value_parser = allowed_origins)]
    pub allowed_origins: Option<AllowedOrigins>,
    /// Proxies (addresses or CIDR ranges, comma list) whose `X-Forwarded-For` names the client
    /// [default: none].
    #[arg(long, env = "GLASSBOX_TRUSTED_PROXIES", value_parser = trusted_proxies)]
    pub trusted_proxies: Option<TrustedProxies>,
    /// Bytes of attached files the whole server keeps (0: no cap).
    #[arg(long, env = "GLASSBOX_FILES_MAX_BYTES", default_value_t = super::DEFAULT_FILES_MAX_BYTES)]
    pub files_max_bytes: u64,
    /// Sessions unused this long are deleted with everything in them (`12h`, `90d`, …; `off`
    /// keeps them).
    #[arg(long, env = "GLASSBOX_SESSION_TTL", default_value = "30d", value_parser = session_ttl)]
    pub session_ttl: OrOff<Duration>,
    /// The agents' configuration file; `off`: no agents [default: glassbox.toml when present].
    #[arg(long, env = "GLASSBOX_CONFIG", value_parser = or_off::<PathBuf>)]
    pub config: Option<OrOff<PathBuf>>,
    /// How often the agents' files are checked for changes, in ms (0: only on SIGHUP).
    #[arg(long, env = "GLASSBOX_CONFIG_POLL_MS", default_value = "2000", value_parser = millis)]
    pub config_poll_ms: Duration,
    /// A reply keeps streaming this long (ms) after its last client left, then is cancelled.
    #[arg(long, env = "GLASSBOX_DISCONNECT_GRACE_MS", default_value = "10000", value_parser = millis)]
    pub disconnect_grace_ms: Duration,
    /// On SIGTERM or Ctrl-C, how long (ms) replies under way may take to finish before the process
    /// exits; no new message is taken meanwhile.
    #[arg(long, env = "GLASSBOX_SHUTDOWN_GRACE_MS", default_value = "25000", value_parser = millis)]
    pub shutdown_grace_ms: Duration,
    /// How often (ms) each WebSocket gets a ping and a `heartbeat` frame; a peer that answers none
    /// of three pings in a row is closed (0: never). Keeps quiet sockets open through proxies' idle timeouts.
    #[arg(long, env = "GLASSBOX_WS_HEARTBEAT_MS", default_value = "20000", value_parser = millis)]
    pub ws_heartbeat_ms: Duration,
    /// The secret a host's backend makes users' hashes with (HMAC-SHA256 of the user id; at least
    /// 16 bytes): verified users' sessions are theirs on any device [default: none, every session
    /// is anonymous].
    #[arg(long, env = "GLASSBOX_IDENTITY_SECRET", hide_env_values = true)]
    pub identity_secret: Option<IdentitySecret>,
    #[command(flatten)]
    pub provider: ProviderSettings,
    #[command(flatten)]
    pub replies: ReplySettings,
    #[command(flatten)]
    pub topics: TopicSettings,
    #[command(flatten)]
    pub embeddings: EmbedSettings,
    #[command(flatten)]
    pub rate_limits: RateLimitConfig,
    #[command(flatten)]
    pub budgets: BudgetConfig,
}

/// Who answers, and how long the server waits for it.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Provider")]
pub struct ProviderSettings {
    /// Which provider answers [default: anthropic when ANTHROPIC_API_KEY is set, openai when
    /// OPENAI_API_KEY or OPENAI_BASE_URL is, else offline].
    #[arg(long, env = "GLASSBOX_PROVIDER", value_enum)]
    pub provider: Option<ProviderName>,
    /// Key for `openai` (optional for local servers).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<String>,
    /// Any Chat Completions server, e.g. http://localhost:11434/v1 for Ollama
    /// [default: https://api.openai.com/v1].
    #[arg(long, env = "OPENAI_BASE_URL")]
    pub openai_base_url: Option<String>,
    /// Key for `anthropic`.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    pub anthropic_api_key: Option<String>,
    /// Messages API host.
    #[arg(
        long,
        env = "ANTHROPIC_BASE_URL",
        default_value = "https://api.anthropic.com"
    )]
    pub anthropic_base_url: String,
    /// Longest wait for the provider's next byte, in ms.
    #[arg(long, env = "GLASSBOX_PROVIDER_IDLE_TIMEOUT_MS", default_value = "60000", value_parser = millis)]
    pub provider_idle_timeout_ms: Duration,
    /// Longest a whole reply may take, in ms.
    #[arg(long, env = "GLASSBOX_PROVIDER_TOTAL_TIMEOUT_MS", default_value = "600000", value_parser = millis)]
    pub provider_total_timeout_ms: Duration,
    /// Pause between words of the offline provider, in ms.
    #[arg(long, env = "GLASSBOX_OFFLINE_DELAY_MS", default_value = "25", value_parser = millis)]
    pub offline_delay_ms: Duration,
}

/// The model that replies, and what it is sent.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Replies")]
pub struct ReplySettings {
    /// Model replies come from [default: offline, gpt-4o-mini or claude-sonnet-4-5, by provider].
    #[arg(long, env = "GLASSBOX_MODEL")]
    pub model: Option<String>,
    /// Models a widget may ask for besides the default (comma list).
    #[arg(long, env = "GLASSBOX_ALLOWED_MODELS", value_delimiter = ',')]
    pub allowed_models: Vec<String>,
    /// System prompt before the page-context segment.
    #[arg(long, env = "GLASSBOX_SYSTEM_PROMPT")]
    pub system_prompt: Option<String>,
    /// Reply length limit, sent to every provider and reserved in the context budget.
    #[arg(long, env = "GLASSBOX_MAX_OUTPUT_TOKENS", default_value_t = 4096)]
    pub max_output_tokens: u32,
    /// Context windows that override the built-in table, e.g. `gpt-4o=64000,my-model=4096`.
    #[arg(long, env = "GLASSBOX_MODEL_LIMITS", value_delimiter = ',', value_parser = model_limit)]
    pub model_limits: Vec<(String, u32)>,
    /// Model that writes compression summaries [default: the reply model].
    #[arg(long, env = "GLASSBOX_SUMMARY_MODEL")]
    pub summary_model: Option<String>,
    /// `context` offers the model the context-set tools with every reply; `off` offers none.
    #[arg(long, env = "GLASSBOX_TOOLS", value_enum, default_value_t = Tools::Context)]
    pub tools: Tools,
    /// Most tool rounds in one reply.
    #[arg(long, env = "GLASSBOX_MAX_CHAT_TURNS", default_value_t = 10, value_parser = chat_turns())]
    pub max_chat_turns: u32,
    /// System-prompt text about the context tools; `off` leaves it out [default: a "Session
    /// Context" section describing them, docs/context-sets.md].
    #[arg(long, env = "GLASSBOX_CONTEXT_PROMPT", value_parser = or_off::<String>)]
    pub context_prompt: Option<OrOff<String>>,
    /// The host's existence check for files in the resume reminder, `{path}` replaced by the
    /// URL-encoded path; 404/410 means gone.
    #[arg(long, env = "GLASSBOX_FILE_CHECK_URL")]
    pub file_check_url: Option<String>,
}

/// Topics and the filter.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Topics")]
pub struct TopicSettings {
    /// Whether topics are extracted after replies.
    #[arg(long, env = "GLASSBOX_TOPICS", value_enum, default_value_t = Switch::On)]
    pub topics: Switch,
    /// Model that extracts topics; `offline` extracts them from the embeddings only [default: the
    /// reply model; offline under the offline provider].
    #[arg(long, env = "GLASSBOX_TOPIC_MODEL")]
    pub topic_model: Option<String>,
    /// How long (ms) after a reply its topic extraction starts.
    #[arg(long, env = "GLASSBOX_TOPICS_SETTLE_MS", default_value = "1500", value_parser = millis)]
    pub topics_settle_ms: Duration,
    /// Cosine a message needs with a selected topic to be sent (0–1).
    #[arg(long, env = "GLASSBOX_SIMILARITY_THRESHOLD", default_value = "0.4", value_parser = threshold)]
    pub similarity_threshold: f32,
    /// Whether topic filters select history (per session too).
    #[arg(long, env = "GLASSBOX_EMBEDDING_SEARCH", value_enum, default_value_t = Switch::On)]
    pub embedding_search: Switch,
}

/// The embedding model.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Embeddings")]
pub struct EmbedSettings {
    /// Whether the embedding model runs.
    #[arg(long, env = "GLASSBOX_EMBEDDINGS", value_enum, default_value_t = Switch::On)]
    pub embeddings: Switch,
    /// Folder with `model.onnx` and `tokenizer.json` (and `shards/`)
    /// [default: ~/.cache/glassbox/models/all-MiniLM-L6-v2].
    #[arg(long, env = "GLASSBOX_EMBED_MODEL_DIR")]
    pub embed_model_dir: Option<PathBuf>,
    /// Name the model is served under.
    #[arg(long, env = "GLASSBOX_EMBED_MODEL", default_value = "all-MiniLM-L6-v2")]
    pub embed_model: String,
    /// Embedding worker threads.
    #[arg(long, env = "GLASSBOX_EMBED_WORKERS", default_value_t = 2, value_parser = at_least_one())]
    pub embed_workers: usize,
    /// Embedding requests that may wait; more get 429.
    #[arg(long, env = "GLASSBOX_EMBED_QUEUE", default_value_t = 64, value_parser = at_least_one())]
    pub embed_queue: usize,
    /// Threads one model run may use.
    #[arg(long, env = "GLASSBOX_EMBED_THREADS", default_value_t = 2, value_parser = at_least_one())]
    pub embed_threads: usize,
}
