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
use crate::storage::{Caps, Hold, Reached, Spend, StorageError, Store};
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

/// Tokens held for one provider call until it is settled ([`Budgets::reserve`]).
#[derive(Debug)]
#[must_use = "a reservation is settled when its call ends"]
pub struct Reservation {
    /// None when no cap is set (nothing held).
    id: Option<String>,
    /// The day it counts against (a call across midnight spends on the day it began).
    day: i64,
    /// The reply's cap the call may use.
    pub output: u32,
}

/// The spending caps over the store's ledger.
#[derive(Clone)]
pub struct Budgets {
    store: Store,
    caps: BudgetConfig,
    /// How long a call's reservation lasts unless settled (longer than any call).
    hold_for: Duration,
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
            hold_for: Duration::from_secs(3_600),
            metrics: None,
        }
    }

    /// The same caps, a call's reservation lasting `hold_for` unless settled (set it longer than
    /// the longest call: a reservation outlives only a process that ended mid-call).
    pub fn holding_for(mut self, hold_for: Duration) -> Self {
        self.hold_for = hold_for;
        self
    }

    /// The same caps, counting their refusals in `metrics`.
    pub fn counting(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Refuses when the session, the server today, or the session's verified user today (`user_id`
    /// when given: a session not stored yet) has no tokens left.
    pub async fn check(&self, session_id: &str, user_id: Option<&str>) -> Result<(), BudgetError> {
        let checked = self.refusal(session_id, user_id).await;
        if let Err(BudgetError::Exhausted(e)) = &checked {
            self.count_refusal(e);
        }
        checked
    }

    /// Holds tokens for one provider call of `session_id` — its prompt (`prompt`, our count) and
    /// its reply's cap (`output`) — when every cap has tokens left, those held by calls under way
    /// (on any instance) counted; the reservation says which reply cap the call may use: `output`,
    /// cut to what is left after the prompt. Calls together spend no more than a budget, but for
    /// one whose prompt alone is larger than what was left (or whose prompt the provider counts
    /// higher than we do). `quietly`: background work (a summary, topic extraction), refused rather
    /// than cut short, its refusal not counted as a refused request.
    pub async fn reserve(
        &self,
        session_id: &str,
        prompt: u64,
        output: u32,
        quietly: bool,
    ) -> Result<Reservation, BudgetError> {
        let caps = self.caps;
        let now = now_ms();
        let day = today(now);
        let mut reservation = Reservation {
            id: None,
            day,
            output,
        };
        if caps.session_tokens == 0 && caps.daily_tokens == 0 && caps.user_daily_tokens == 0 {
            return Ok(reservation);
        }
        let id = crate::ids::new_id();
        let held = self
            .store
            .reserve_tokens(
                &Hold {
                    id: &id,
                    session_id,
                    day,
                    prompt,
                    output,
                    whole: quietly,
                    now,
                    expires_at: now + self.hold_for.as_millis() as i64,
                },
                Caps {
                    session: caps.session_tokens,
                    server_day: caps.daily_tokens,
                    user_day: caps.user_daily_tokens,
                },
            )
            .await?;
        match held {
            Ok(output) => {
                reservation.id = Some(id);
                reservation.output = output;
                Ok(reservation)
            }
            Err(reached) => {
                let resets_in = Duration::from_millis(((day + 1) * DAY_MS - now).max(0) as u64);
                let e = match reached {
                    Reached::Session => BudgetExhausted::Session {
                        limit: caps.session_tokens,
                    },
                    Reached::UserDay => BudgetExhausted::UserDaily {
                        limit: caps.user_daily_tokens,
                        resets_in,
                    },
                    Reached::ServerDay => BudgetExhausted::Daily {
                        limit: caps.daily_tokens,
                        resets_in,
                    },
                };
                if !quietly {
                    self.count_refusal(&e);
                }
                Err(e.into())
            }
        }
    }

    fn count_refusal(&self, e: &BudgetExhausted) {
        if let Some(m) = &self.metrics {
            m.refused(match e {
                BudgetExhausted::Session { .. } => "budget_session",
                BudgetExhausted::Daily { .. } => "budget_daily",
                BudgetExhausted::UserDaily { .. } => "budget_user_daily",
            });
        }
    }

    async fn refusal(&self, session_id: &str, user_id: Option<&str>) -> Result<(), BudgetError> {
        let caps = self.caps;
        if caps.session_tokens == 0 && caps.daily_tokens == 0 && caps.user_daily_tokens == 0 {
            return Ok(());
        }
        let now = now_ms();
        let spent = self
            .store
            .tokens_spent_of(session_id, user_id, today(now))
            .await?;
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

    /// Ends one provider call of `session_id`: its reservation ends and the `tokens` it spent are
    /// recorded; the session's tabs are told (through `hub`) its budget when one is set.
    pub async fn settle(
        &self,
        reservation: Reservation,
        session_id: &str,
        hub: Option<&Hub>,
        tokens: u64,
    ) -> Result<(), BudgetError> {
        let Some(spend) = Self::spend(&reservation, tokens) else {
            return Ok(());
        };
        let used = self.store.settle_tokens(session_id, spend).await?;
        if let Some(hub) = hub {
            self.settled(hub, used);
        }
        Ok(())
    }

    /// What ending `reservation`'s call, which spent `tokens`, records (none when nothing was
    /// held or spent): for a caller that stores it with other writes ([`Store::finish_reply`]),
    /// then calls [`Self::settled`].
    pub fn spend(reservation: &Reservation, tokens: u64) -> Option<Spend<'_>> {
        (tokens > 0 || reservation.id.is_some()).then_some(Spend {
            reservation: reservation.id.as_deref(),
            day: reservation.day,
            tokens,
        })
    }

    /// Tells the session's tabs its budget after a settled call left `used`, when one is set.
    pub fn settled(&self, hub: &Hub, used: u64) {
        let limit = self.caps.session_tokens;
        if limit > 0 {
            hub.publish(ServerEvent::Budget(SessionBudget { limit, used }));
        }
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
