//! What an operator watches, in Prometheus' text format (`GET /metrics` on the metrics listener,
//! `GLASSBOX_METRICS_ADDR`): turns by outcome, tokens per model, provider calls' latency and
//! errors, the time Glassbox adds before a provider hears of a message, open WebSockets, the
//! embedding queue, refusals by budgets and rate limits, and tool calls (MCP servers' by server).
//! Each process has its own; several instances are summed by Prometheus.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// How a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum TurnOutcome {
    /// Finished.
    Complete,
    /// Ended by an error (kept with its partial text, retryable).
    Failed,
    /// Stopped by the user.
    Stopped,
}

/// Which way tokens went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Direction {
    /// To the provider (the prompt).
    Input,
    /// From the provider (the reply).
    Output,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    direction: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    provider: &'static str,
    model: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    provider: &'static str,
    model: String,
    code: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    limit: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    server: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

/// A histogram family's constructor (a plain function, so the family's type can be named).
type Make = fn() -> Histogram;

/// Seconds from 1 ms to about 17 minutes (provider calls stream for up to
/// `GLASSBOX_PROVIDER_TOTAL_TIMEOUT_MS`, 10 minutes; tool calls up to `call_timeout_max_ms`).
fn call_seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 21))
}

/// Seconds from 0.1 ms to about 3 s (what Glassbox adds before the provider call).
fn overhead_seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 15))
}

struct Inner {
    registry: Registry,
    turns: Family<OutcomeLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    first_token: Family<CallLabels, Histogram, Make>,
    call: Family<CallLabels, Histogram, Make>,
    provider_errors: Family<ErrorLabels, Counter>,
    overhead: Histogram,
    websockets: Gauge,
    embed_queue: Gauge,
    refusals: Family<RefusalLabels, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_seconds: Family<ServerLabels, Histogram, Make>,
}

/// The process's metrics; cheap to clone, every clone counts into the same registry.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric registered, at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("glassbox");
        let turns = Family::default();
        registry.register("turns", "Replies ended, by outcome", turns.clone());
        let tokens = Family::default();
        registry.register(
            "tokens",
            "Tokens sent to and received from providers (their reported usage, else our count)",
            tokens.clone(),
        );
        let first_token = Family::new_with_constructor(call_seconds as Make);
        registry.register_with_unit(
            "provider_first_event",
            "Time from a provider call's start to its first event",
            Unit::Seconds,
            first_token.clone(),
        );
        let call = Family::new_with_constructor(call_seconds as Make);
        registry.register_with_unit(
            "provider_call",
            "Duration of provider calls that finished",
            Unit::Seconds,
            call.clone(),
        );
        let provider_errors = Family::default();
        registry.register(
            "provider_errors",
            "Provider calls that failed, by error code",
            provider_errors.clone(),
        );
        let overhead = overhead_seconds();
        registry.register_with_unit(
            "added_overhead",
            "Time from accepting a message to handing its first request to the provider",
            Unit::Seconds,
            overhead.clone(),
        );
        let websockets = Gauge::default();
        registry.register(
            "websockets",
            "Open WebSocket connections",
            websockets.clone(),
        );
        let embed_queue = Gauge::default();
        registry.register(
            "embedding_queue_depth",
            "Embedding requests waiting for a worker",
            embed_queue.clone(),
        );
        let refusals = Family::default();
        registry.register(
            "refusals",
            "Requests refused by a budget or a rate limit, by limit",
            refusals.clone(),
        );
        let tool_calls = Family::default();
        registry.register(
            "tool_calls",
            "Tool calls run, by MCP server (`builtin` for the server's own tools) and outcome",
            tool_calls.clone(),
        );
        let tool_seconds = Family::new_with_constructor(call_seconds as Make);
        registry.register_with_unit(
            "tool_call",
            "Duration of tool calls, by MCP server",
            Unit::Seconds,
            tool_seconds.clone(),
        );
        Self(Arc::new(Inner {
            registry,
            turns,
            tokens,
            first_token,
            call,
            provider_errors,
            overhead,
            websockets,
            embed_queue,
            refusals,
            tool_calls,
            tool_seconds,
        }))
    }

    /// A reply ended with `outcome`.
    pub fn turn(&self, outcome: TurnOutcome) {
        self.0
            .turns
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// A provider call to `model` spent `input` and `output` tokens.
    pub fn tokens(&self, model: &str, input: u64, output: u64) {
        for (direction, n) in [(Direction::Input, input), (Direction::Output, output)] {
            self.0
                .tokens
                .get_or_create(&TokenLabels {
                    model: model.to_owned(),
                    direction: direction.into(),
                })
                .inc_by(n);
        }
    }

    /// A call to `provider`'s `model` saw its first event after `waited`.
    pub fn first_event(&self, provider: &'static str, model: &str, waited: Duration) {
        let labels = CallLabels {
            provider,
            model: model.to_owned(),
        };
        self.0
            .first_token
            .get_or_create(&labels)
            .observe(waited.as_secs_f64());
    }

    /// A call to `provider`'s `model` ended after `took`: finished, or failed with `code`.
    pub fn call_ended(
        &self,
        provider: &'static str,
        model: &str,
        took: Duration,
        failed: Option<glassbox_core::ErrorCode>,
    ) {
        match failed {
            None => self
                .0
                .call
                .get_or_create(&CallLabels {
                    provider,
                    model: model.to_owned(),
                })
                .observe(took.as_secs_f64()),
            Some(code) => {
                self.0
                    .provider_errors
                    .get_or_create(&ErrorLabels {
                        provider,
                        model: model.to_owned(),
                        code: code.as_str(),
                    })
                    .inc();
            }
        }
    }

    /// Glassbox took `added` between accepting a message and handing its request to the provider.
    pub fn added_overhead(&self, added: Duration) {
        self.0.overhead.observe(added.as_secs_f64());
    }

    /// A WebSocket connection opened; it counts until the guard is dropped.
    pub fn websocket_opened(&self) -> OpenWebSocket {
        self.0.websockets.inc();
        OpenWebSocket(self.clone())
    }

    /// A budget or rate limit (`limit`, its name in snake case) refused a request.
    pub fn refused(&self, limit: &'static str) {
        self.0
            .refusals
            .get_or_create(&RefusalLabels { limit })
            .inc();
    }

    /// A tool call of `server` (empty: a built-in tool) ended after `took`.
    pub fn tool_call(&self, server: &str, took: Duration, failed: bool) {
        let server = if server.is_empty() { "builtin" } else { server };
        self.0
            .tool_calls
            .get_or_create(&ToolLabels {
                server: server.to_owned(),
                outcome: if failed { "error" } else { "ok" },
            })
            .inc();
        self.0
            .tool_seconds
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// The registry in Prometheus' text format, with `queued` embedding requests waiting now.
    pub fn render(&self, queued: usize) -> String {
        self.0
            .embed_queue
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.0.registry);
        text
    }
}

/// Counts an open WebSocket until dropped.
pub struct OpenWebSocket(Metrics);

impl Drop for OpenWebSocket {
    fn drop(&mut self) {
        self.0.0.websockets.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample line starting with `series` (name and labels, as written).
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn what_is_counted_is_rendered_with_its_labels() {
        let m = Metrics::new();
        m.turn(TurnOutcome::Complete);
        m.turn(TurnOutcome::Complete);
        m.turn(TurnOutcome::Stopped);
        m.tokens("gpt-4o", 120, 30);
        m.call_ended(
            "openai",
            "gpt-4o",
            Duration::from_millis(5),
            Some(glassbox_core::ErrorCode::ProviderError),
        );
        m.refused("session_messages");
        m.tool_call("", Duration::from_millis(2), false);
        m.tool_call("clock", Duration::from_millis(2), true);
        let open = m.websocket_opened();
        let text = m.render(3);
        assert_eq!(
            sample(&text, "glassbox_turns_total{outcome=\"complete\"}"),
            Some(2.0)
        );
        assert_eq!(
            sample(&text, "glassbox_turns_total{outcome=\"stopped\"}"),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                "glassbox_tokens_total{model=\"gpt-4o\",direction=\"input\"}"
            ),
            Some(120.0)
        );
        assert_eq!(
            sample(
                &text,
                "glassbox_provider_errors_total{provider=\"openai\",model=\"gpt-4o\",code=\"provider_error\"}"
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "glassbox_refusals_total{limit=\"session_messages\"}"),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                "glassbox_tool_calls_total{server=\"builtin\",outcome=\"ok\"}"
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                "glassbox_tool_calls_total{server=\"clock\",outcome=\"error\"}"
            ),
            Some(1.0)
        );
        assert_eq!(sample(&text, "glassbox_websockets"), Some(1.0));
        assert_eq!(sample(&text, "glassbox_embedding_queue_depth"), Some(3.0));
        drop(open);
        assert_eq!(sample(&m.render(0), "glassbox_websockets"), Some(0.0));
    }

    #[test]
    fn a_label_value_from_outside_is_escaped() {
        let m = Metrics::new();
        m.tool_call("a\"b\nc", Duration::from_millis(1), false);
        let text = m.render(0);
        assert!(
            text.contains(r#"server="a\"b\nc""#),
            "label not escaped: {text}"
        );
    }
}
