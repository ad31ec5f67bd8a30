//! LLM providers behind one trait: each turns a provider-neutral request into a stream of events.
//!
//! Both wire formats are spoken with `reqwest` (rustls) + `eventsource-stream` rather than a per-vendor
//! SDK: `async-openai` speaks only OpenAI and rejects the extra or missing fields that compatible servers
//! (Ollama, vLLM, llama.cpp) send, and the Anthropic crates are thinly maintained. One HTTP client gives
//! both providers the same timeout, cancellation (drop the stream) and error mapping, and we decode only
//! the fields we use, so compatible servers' extensions never break a reply.

pub mod anthropic;
mod offline;
pub mod openai;

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use glassbox_core::ErrorCode;
use glassbox_core::prompt::ProviderRequest;
use glassbox_core::vocab::ToolCall;
use glassbox_core::vocab::Usage;
use thiserror::Error;

pub use anthropic::AnthropicProvider;
pub use offline::OfflineProvider;
pub use openai::OpenAiProvider;

use crate::config::{Config, ProviderKind};

/// One thing a provider streams back.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A piece of reply text.
    Text(String),
    /// A complete tool call (arguments assembled from the streamed fragments).
    ToolCall(ToolCall),
    /// Token usage as the provider reports it.
    Usage(Usage),
    /// The provider finished normally.
    Finished { reason: Option<String> },
}

/// Why a provider call failed.
#[derive(Debug, Clone, Error)]
pub enum ProviderError {
    #[error("provider answered HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error("provider could not be reached: {0}")]
    Unreachable(String),
    #[error("provider stream broke off: {0}")]
    Transport(String),
    #[error("provider sent nothing for {0:?}")]
    IdleTimeout(Duration),
    #[error("reply took longer than {0:?}")]
    TotalTimeout(Duration),
    #[error("provider sent something we cannot read: {0}")]
    Protocol(String),
    #[error("provider reported an error: {0}")]
    Upstream(String),
    #[error("provider stream ended without finishing")]
    Truncated,
}

impl ProviderError {
    /// The wire code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProviderError::Status { status: 429, .. } => ErrorCode::RateLimited,
            ProviderError::Status { status, .. } if *status >= 500 => {
                ErrorCode::ProviderUnavailable
            }
            ProviderError::Unreachable(_) => ErrorCode::ProviderUnavailable,
            ProviderError::IdleTimeout(_) | ProviderError::TotalTimeout(_) => {
                ErrorCode::ProviderTimeout
            }
            _ => ErrorCode::ProviderError,
        }
    }

    fn from_reqwest(e: reqwest::Error) -> Self {
        if e.is_connect() || e.is_timeout() {
            ProviderError::Unreachable(e.to_string())
        } else {
            ProviderError::Transport(e.to_string())
        }
    }
}

/// The stream of a provider reply.
pub type ProviderStream = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

/// A chat model provider.
pub trait Provider: Send + Sync {
    /// Short name for logs and `/healthz`.
    fn name(&self) -> &'static str;
    /// Starts a reply. Dropping the stream cancels the upstream call.
    fn stream(&self, request: ProviderRequest) -> ProviderStream;
}

/// Builds the provider the configuration names.
pub fn from_config(config: &Config) -> Result<Arc<dyn Provider>, reqwest::Error> {
    let http = || {
        reqwest::Client::builder()
            // Idle and total timeouts are enforced per reply by the chat turn, for every provider alike.
            .connect_timeout(Duration::from_secs(10))
            .build()
    };
    Ok(match &config.provider {
        ProviderKind::Offline => Arc::new(OfflineProvider::new(config.offline_delay)),
        ProviderKind::OpenAi { api_key, base_url } => Arc::new(OpenAiProvider::new(
            http()?,
            base_url.clone(),
            api_key.clone(),
        )),
        ProviderKind::Anthropic { api_key, base_url } => Arc::new(AnthropicProvider::new(
            http()?,
            base_url.clone(),
            api_key.clone(),
        )),
    })
}

/// Sends a request and checks the status, turning an error response into a typed error.
async fn send_checked(req: reqwest::RequestBuilder) -> Result<reqwest::Response, ProviderError> {
    let resp = req.send().await.map_err(ProviderError::from_reqwest)?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = resp.text().await.unwrap_or_default();
    Err(ProviderError::Status {
        status: status.as_u16(),
        message: upstream_message(&body),
    })
}

/// The human part of a provider error body (`{"error": {"message": ...}}` in both formats).
fn upstream_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let msg = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
        })
        .and_then(|m| m.as_str().map(str::to_owned));
    let mut msg = msg.unwrap_or_else(|| body.to_owned());
    msg.truncate(msg.floor_char_boundary(300));
    msg
}

/// A setting as the decimal it was written as (`0.4`, not the `0.4000000059604645` an `f32`
/// widens to).
fn decimal(x: f32) -> serde_json::Value {
    x.to_string()
        .parse::<f64>()
        .map_or_else(|_| serde_json::json!(x), |d| serde_json::json!(d))
}
