//! Provider calls, used for replies, summaries, topic extraction and every tool round alike: each
//! streams a request under the idle and total timeouts and stops as soon as `cancel` resolves
//! (every client gone).

use std::future::Future;
use std::time::{Duration, Instant};

use futures::StreamExt;
use glassbox_core::ErrorCode;
use glassbox_core::prompt::ProviderRequest;
use glassbox_core::vocab::ToolCall;
use glassbox_core::vocab::Usage;
use glassbox_core::wire::WireError;

use std::sync::Arc;

use crate::budgets::{BudgetError, Budgets};
use crate::metrics::Metrics;
use crate::providers::{Provider, ProviderError, ProviderEvent};
use crate::tokens::TokenCounter;
use crate::wire_error::ToWire;

/// How long a call may wait for the next event, and take in all.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub idle: Duration,
    pub total: Duration,
}

/// Why a call stopped early.
#[derive(Debug)]
pub enum CallFailure {
    Provider(ProviderError),
    /// Every client went away; nobody waits for the answer.
    Cancelled,
}

impl CallFailure {
    /// The failure as clients see it.
    pub fn to_wire(&self) -> WireError {
        match self {
            CallFailure::Provider(e) => e.to_wire(),
            CallFailure::Cancelled => WireError::new(
                ErrorCode::Cancelled,
                "the reply was stopped because every client disconnected",
            ),
        }
    }
}

/// What a finished call produced besides its text (which went to `on_text` as it came).
#[derive(Debug, Default)]
pub struct CallOutput {
    /// Tool calls the model made, complete, in order.
    pub calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    /// The provider's finish reason (`stop`, `length`, `tool_calls`, `end_turn`, `max_tokens`, …).
    pub finish: Option<String>,
}

impl CallOutput {
    /// True when the model stopped because it ran out of output tokens.
    pub fn cut_short(&self) -> bool {
        matches!(self.finish.as_deref(), Some("length" | "max_tokens"))
    }
}

/// The provider with its limits, and the budget every call is made within.
#[derive(Clone)]
pub struct Calls {
    pub provider: Arc<dyn Provider>,
    pub limits: Limits,
    pub budgets: Budgets,
    tokens: Arc<TokenCounter>,
    /// Where calls' latency, errors and tokens (and the turns') are counted.
    pub metrics: Metrics,
}

impl Calls {
    /// Calls to `provider` under `limits`, spending from `budgets` (counted with `tokens` when the
    /// provider reports no usage), measured in `metrics`.
    pub fn new(
        provider: Arc<dyn Provider>,
        limits: Limits,
        budgets: Budgets,
        tokens: Arc<TokenCounter>,
        metrics: Metrics,
    ) -> Self {
        Self {
            provider,
            limits,
            budgets,
            tokens,
            metrics,
        }
    }

    /// Streams `request` under the limits; text goes to `on_text` piece by piece. The caller
    /// reserves from the budget before and settles the spend after (and its tokens, [`Calls::spent`]).
    /// The call's latency, or its error, is counted.
    pub async fn stream(
        &self,
        request: ProviderRequest,
        cancel: impl Future<Output = ()>,
        on_text: &mut (dyn FnMut(String) + Send),
    ) -> Result<CallOutput, CallFailure> {
        let (provider, model) = (self.provider.name(), request.model.clone());
        let started = Instant::now();
        let mut first = None;
        let out = tokio::select! {
            r = stream(&*self.provider, request, self.limits, &mut first, on_text) => {
                r.map_err(CallFailure::Provider)
            }
            _ = cancel => Err(CallFailure::Cancelled),
        };
        if let Some(first) = first {
            self.metrics
                .first_event(provider, &model, first.duration_since(started));
        }
        match &out {
            Ok(_) => self
                .metrics
                .call_ended(provider, &model, started.elapsed(), None),
            Err(CallFailure::Provider(e)) => {
                let code = e.code();
                self.metrics
                    .call_ended(provider, &model, started.elapsed(), Some(code));
            }
            // Nobody waits for the answer: not the provider's failure.
            Err(CallFailure::Cancelled) => {}
        }
        out
    }

    /// Counts what a call to `model` spent (the provider's usage, else our count).
    pub fn spent(&self, model: &str, usage: &Usage) {
        self.metrics
            .tokens(model, usage.input_tokens, usage.output_tokens);
    }

    /// A call whose text nobody watches stream (a summary, topic extraction): its prompt and reply
    /// cap held within the session's budget first, its spend recorded after (the provider's usage, else our count of
    /// the request's texts and the answer). Returns the whole text beside the call's outcome.
    pub async fn collected(
        &self,
        session_id: &str,
        mut request: ProviderRequest,
        cancel: impl Future<Output = ()>,
    ) -> Result<(String, Result<CallOutput, CallFailure>), BudgetError> {
        let (encoding, _) = glassbox_core::context::encoding_for(&request.model);
        let model = request.model.clone();
        let sent: u32 = request
            .system
            .iter()
            .chain(request.messages.iter().map(|m| &m.content))
            .map(|t| self.tokens.count(encoding, t))
            .sum();
        // Background work nobody asked for: its refusals are not counted as refused requests.
        let reservation = self
            .budgets
            .reserve(session_id, u64::from(sent), request.max_output_tokens, true)
            .await?;
        request.max_output_tokens = reservation.output;
        let mut text = String::new();
        let out = self
            .stream(request, cancel, &mut |t| text.push_str(&t))
            .await;
        let usage = out
            .as_ref()
            .ok()
            .and_then(|o| o.usage)
            .unwrap_or_else(|| Usage {
                input_tokens: u64::from(sent),
                output_tokens: u64::from(self.tokens.count(encoding, &text)),
                counted: true,
            });
        self.spent(&model, &usage);
        self.budgets
            .settle(
                reservation,
                session_id,
                None,
                usage.input_tokens + usage.output_tokens,
            )
            .await?;
        Ok((text, out))
    }
}

/// Streams `request`; text goes to `on_text` piece by piece as it arrives, and `first` is when
/// the first event came.
async fn stream(
    provider: &dyn Provider,
    request: ProviderRequest,
    limits: Limits,
    first: &mut Option<Instant>,
    on_text: &mut (dyn FnMut(String) + Send),
) -> Result<CallOutput, ProviderError> {
    let deadline = tokio::time::Instant::now() + limits.total;
    let mut events = provider.stream(request);
    let mut out = CallOutput::default();
    loop {
        let next = tokio::time::timeout_at(
            deadline.min(tokio::time::Instant::now() + limits.idle),
            events.next(),
        )
        .await;
        let event = match next {
            Err(_) if tokio::time::Instant::now() >= deadline => {
                return Err(ProviderError::TotalTimeout(limits.total));
            }
            Err(_) => return Err(ProviderError::IdleTimeout(limits.idle)),
            Ok(None) => return Err(ProviderError::Truncated),
            Ok(Some(event)) => {
                let event = event?;
                // A failure is no first event: only what the provider says counts.
                first.get_or_insert_with(Instant::now);
                event
            }
        };
        match event {
            // NUL is no text a reply can keep (PostgreSQL refuses it): left out.
            ProviderEvent::Text(text) if text.contains('\0') => on_text(text.replace('\0', "")),
            ProviderEvent::Text(text) => on_text(text),
            ProviderEvent::Usage(u) => out.usage = Some(u),
            ProviderEvent::ToolCall(call) => out.calls.push(call),
            ProviderEvent::Finished { reason } => {
                out.finish = reason;
                return Ok(out);
            }
        }
    }
}
