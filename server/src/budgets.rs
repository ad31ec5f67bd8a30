//! Spending caps: tokens (input + output) per session and per UTC day for the whole server, from
//! the provider's reported usage (our own count when it reports none). A message, a retry, every
//! tool round and every summary is refused with `budget_exhausted` before the provider is called
//! once a cap is reached; the daily one says when it resets. 0 turns a cap off.

use std::time::Duration;

use glassbox_core::wire::{ServerEvent, SessionBudget};

use crate::error::AppError;
use crate::hub::Hub;
use crate::sessions::now_ms;
use crate::state::AppState;

const DAY_MS: i64 = 86_400_000;

/// The caps (0: none).
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

/// Which cap is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BudgetExhausted {
    #[error("this conversation has used its budget of {limit} tokens; start a new chat")]
    Session { limit: u64 },
    #[error("this server has used today's budget of {limit} tokens; it resets at midnight UTC")]
    Daily { limit: u64, resets_in: Duration },
}

impl BudgetExhausted {
    /// For the daily cap: how long until it resets.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BudgetExhausted::Session { .. } => None,
            BudgetExhausted::Daily { resets_in, .. } => Some(*resets_in),
        }
    }
}

fn today(now: i64) -> i64 {
    now.div_euclid(DAY_MS)
}

impl AppState {
    /// Refuses when the session or the server has no tokens left today.
    pub async fn check_budget(&self, session_id: &str) -> Result<(), AppError> {
        let caps = self.config.budgets;
        if caps.session_tokens == 0 && caps.daily_tokens == 0 {
            return Ok(());
        }
        let now = now_ms();
        let (session, day) = self.store.tokens_spent(session_id, today(now)).await?;
        if caps.session_tokens > 0 && session >= caps.session_tokens {
            return Err(BudgetExhausted::Session {
                limit: caps.session_tokens,
            }
            .into());
        }
        if caps.daily_tokens > 0 && day >= caps.daily_tokens {
            let resets = (today(now) + 1) * DAY_MS - now;
            return Err(BudgetExhausted::Daily {
                limit: caps.daily_tokens,
                resets_in: Duration::from_millis(resets.max(0) as u64),
            }
            .into());
        }
        Ok(())
    }

    /// Records one provider call's spend: the usage the provider reported, else `counted()` (our
    /// count of what went and came back). Failed calls are billed too, so they count.
    pub async fn record_call(
        &self,
        session_id: &str,
        hub: Option<&Hub>,
        usage: Option<glassbox_core::wire::Usage>,
        counted: impl FnOnce() -> u64,
    ) -> Result<(), AppError> {
        let spent = usage.map_or_else(counted, |u| u.input_tokens + u.output_tokens);
        self.record_spend(session_id, hub, spent).await
    }

    /// Records `tokens` spent by one provider call of `session_id`, and tells the session's tabs
    /// (through `hub`) its budget when one is set.
    pub async fn record_spend(
        &self,
        session_id: &str,
        hub: Option<&Hub>,
        tokens: u64,
    ) -> Result<(), AppError> {
        if tokens == 0 {
            return Ok(());
        }
        let used = self
            .store
            .spend_tokens(session_id, today(now_ms()), tokens)
            .await?;
        let limit = self.config.budgets.session_tokens;
        if let (true, Some(hub)) = (limit > 0, hub) {
            hub.publish(ServerEvent::Budget(SessionBudget { limit, used }));
        }
        Ok(())
    }

    /// The session's budget for `session` frames, when one is set.
    pub async fn session_budget(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionBudget>, AppError> {
        let limit = self.config.budgets.session_tokens;
        if limit == 0 {
            return Ok(None);
        }
        let (used, _) = self.store.tokens_spent(session_id, today(now_ms())).await?;
        Ok(Some(SessionBudget { limit, used }))
    }
}
