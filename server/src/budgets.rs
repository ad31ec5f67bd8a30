//! Spending caps: tokens (input + output) per session, per UTC day for the whole server, and per
//! UTC day for each verified user over all their sessions, from
//! the provider's reported usage (our own count when it reports none). A message, a retry, every
//! tool round and every summary is refused with `budget_exhausted` before the provider is called
//! once a cap is reached; the daily one says when it resets. 0 turns a cap off.

use std::time::Duration;

use glassbox_core::wire::{ServerEvent, SessionBudget};

use crate::config::BudgetConfig;
use crate::hub::Hub;
use crate::ids::now_ms;
use crate::storage::{StorageError, Store};
use crate::wire_error::ToWire;

const DAY_MS: i64 = 86_400_000;

/// Which cap is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BudgetExhausted {
    #[error("this conversation has used its budget of {limit} tokens; start a new chat")]
    Session { limit: u64 },
    #[error("this server has used today's budget of {limit} tokens; it resets at midnight UTC")]
    Daily { limit: u64, resets_in: Duration },
    #[error("you have used today's budget of {limit} tokens; it resets at midnight UTC")]
    UserDaily { limit: u64, resets_in: Duration },
}

impl BudgetExhausted {
    /// For the daily cap: how long until it resets.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BudgetExhausted::Session { .. } => None,
            BudgetExhausted::Daily { resets_in, .. }
            | BudgetExhausted::UserDaily { resets_in, .. } => Some(*resets_in),
        }
    }
}

impl ToWire for BudgetExhausted {
    fn code(&self) -> glassbox_core::ErrorCode {
        glassbox_core::ErrorCode::BudgetExhausted
    }

    fn retry_after(&self) -> Option<Duration> {
        BudgetExhausted::retry_after(self)
    }
}

/// Why a budget check or a spend record failed.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error(transparent)]
    Exhausted(#[from] BudgetExhausted),
    #[error("the spend could not be read or recorded")]
    Storage(#[from] StorageError),
}

impl ToWire for BudgetError {
    fn code(&self) -> glassbox_core::ErrorCode {
        match self {
            BudgetError::Exhausted(e) => e.code(),
            BudgetError::Storage(e) => e.code(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            BudgetError::Exhausted(e) => ToWire::retry_after(e),
            BudgetError::Storage(_) => None,
        }
    }
}

/// The spending caps over the store's ledger.
#[derive(Clone)]
pub struct Budgets {
    store: Store,
    caps: BudgetConfig,
    /// Where refusals are counted.
    metrics: Option<crate::metrics::Metrics>,
}

fn today(now: i64) -> i64 {
    now.div_euclid(DAY_MS)
}

impl Budgets {
    /// The caps `caps` over `store`.
    pub fn new(store: Store, caps: BudgetConfig) -> Self {
        Self {
            store,
            caps,
            metrics: None,
        }
    }

    /// The same caps, counting their refusals in `metrics`.
    pub fn counting(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Refuses when the session, the server today, or the session's verified user today has no
    /// tokens left.
    pub async fn check(&self, session_id: &str) -> Result<(), BudgetError> {
        let checked = self.refusal(session_id).await;
        if let (Err(BudgetError::Exhausted(e)), Some(m)) = (&checked, &self.metrics) {
            m.refused(match e {
                BudgetExhausted::Session { .. } => "budget_session",
                BudgetExhausted::Daily { .. } => "budget_daily",
                BudgetExhausted::UserDaily { .. } => "budget_user_daily",
            });
        }
        checked
    }

    /// [`Budgets::check`] for background work (summaries, topic extraction): a refusal is not
    /// counted in the metrics, which count refused requests.
    pub async fn check_quietly(&self, session_id: &str) -> Result<(), BudgetError> {
        self.refusal(session_id).await
    }

    async fn refusal(&self, session_id: &str) -> Result<(), BudgetError> {
        let caps = self.caps;
        if caps.session_tokens == 0 && caps.daily_tokens == 0 && caps.user_daily_tokens == 0 {
            return Ok(());
        }
        let now = now_ms();
        let spent = self.store.tokens_spent(session_id, today(now)).await?;
        let reached = |limit: u64, used: u64| limit > 0 && used >= limit;
        let resets_in = Duration::from_millis(((today(now) + 1) * DAY_MS - now).max(0) as u64);
        if reached(caps.session_tokens, spent.session) {
            return Err(BudgetExhausted::Session {
                limit: caps.session_tokens,
            }
            .into());
        }
        if reached(caps.user_daily_tokens, spent.user_day) {
            return Err(BudgetExhausted::UserDaily {
                limit: caps.user_daily_tokens,
                resets_in,
            }
            .into());
        }
        if reached(caps.daily_tokens, spent.server_day) {
            return Err(BudgetExhausted::Daily {
                limit: caps.daily_tokens,
                resets_in,
            }
            .into());
        }
        Ok(())
    }

    /// Records `tokens` spent by one provider call of `session_id`, and tells the session's tabs
    /// (through `hub`) its budget when one is set.
    pub async fn record_spend(
        &self,
        session_id: &str,
        hub: Option<&Hub>,
        tokens: u64,
    ) -> Result<(), BudgetError> {
        if tokens == 0 {
            return Ok(());
        }
        let used = self
            .store
            .spend_tokens(session_id, today(now_ms()), tokens)
            .await?;
        let limit = self.caps.session_tokens;
        if let (true, Some(hub)) = (limit > 0, hub) {
            hub.publish(ServerEvent::Budget(SessionBudget { limit, used }));
        }
        Ok(())
    }

    /// The session's budget for `session` frames, when one is set.
    pub async fn of_session(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionBudget>, StorageError> {
        let limit = self.caps.session_tokens;
        if limit == 0 {
            return Ok(None);
        }
        let used = self
            .store
            .tokens_spent(session_id, today(now_ms()))
            .await?
            .session;
        Ok(Some(SessionBudget { limit, used }))
    }
}
