//! A chat turn as its own engine ([`TurnEngine`]), given what it uses: the store, the provider
//! calls within the budget, the tool registry, the token counter, the context windows and the
//! topics' history selection. It gathers and plans (`gather`), then writes the reply with its tool
//! loop — the model is offered the tools, calls them (several in one round when it wants), the
//! server runs them (`crate::tools`, concurrently, results kept in call order), the results go
//! back and the model continues, up to `GLASSBOX_MAX_CHAT_TURNS` rounds — each round one provider
//! call built from the receipt. Text streams between rounds; every exchange is recorded in the
//! receipt and stored on the reply, so later turns replay it in the provider's own format.

pub mod checkpoint;
pub mod gather;
pub mod history;
pub mod load_tools;

use std::sync::Arc;

use glassbox_core::context::items::ItemRef;
use glassbox_core::context::{CurrentReply, Receipt, SessionSettings, TurnPlan, record_tool_round};
use glassbox_core::limits::{InputError, validate_chat};
use glassbox_core::vocab::Role;
use glassbox_core::vocab::{MessageStatus, ToolExchange, ToolRound, Usage};
use glassbox_core::wire::{
    ChatMessage, ChatRequest, ContextEvent, ContextReason, Delta, Done, ServerEvent, ToolEvent,
    WireError,
};

use crate::background::TurnStarting;
use crate::budgets::{BudgetError, Budgets, Reservation};
use crate::calls::{CallFailure, Calls};
use crate::config::Config;
use crate::context::ContextWindows;
use crate::hub::Hub;
use crate::items::Items;
use crate::metrics::TurnOutcome;
use crate::rate_limits::{RateLimited, RateLimits};
use crate::stops::StopHandle;
use crate::storage::{ReplyOutcome, StorageError, Store};
use crate::tokens::TokenCounter;
use crate::tools::{ToolCtx, ToolSet};
use crate::topics::Topics;
use crate::wire_error::ToWire;
use gather::{Gathered, Planning, TurnExtras};

/// Runs chat turns, given what they use; cheap to clone (each turn's task takes one).
#[derive(Clone)]
pub struct TurnEngine(Arc<TurnServices>);

impl TurnEngine {
    /// The engine over `services`.
    pub fn new(services: TurnServices) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for TurnEngine {
    type Target = TurnServices;

    fn deref(&self) -> &TurnServices {
        &self.0
    }
}

/// What a [`TurnEngine`] uses.
pub struct TurnServices {
    pub config: Arc<Config>,
    pub store: Store,
    /// Provider calls, each within the session's and the day's budget.
    pub calls: Calls,
    pub tokens: Arc<TokenCounter>,
    pub windows: ContextWindows,
    /// Which history goes (the topic filter), and topic work after each reply.
    pub topics: Topics,
    /// The session's items and the agent items each message's search chooses.
    pub items: Items,
    /// The previews' rate limit.
    pub limits: Arc<RateLimits>,
    /// Outgoing HTTP besides providers (the host's file existence check).
    pub http: reqwest::Client,
    /// The uploaded files a turn's messages carry.
    pub files: crate::files::Files,
    /// Where tool calls wait for the user's yes.
    pub approvals: crate::approvals::Approvals,
}

/// Why a turn could not go on (a failed reply is stored and told, not an error).
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("storage failed")]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error("{}", .0.describe())]
    ContextOverflow(glassbox_core::context::Overflow),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error(transparent)]
    Files(#[from] crate::files::FilesError),
    /// The session was deleted while its reply streamed (the reply's spend is recorded).
    #[error("{}", crate::hub::SESSION_DELETED)]
    SessionDeleted,
}

impl ToWire for TurnError {
    fn code(&self) -> glassbox_core::ErrorCode {
        match self {
            TurnError::Storage(e) => e.code(),
            TurnError::Budget(e) => e.code(),
            TurnError::ContextOverflow(_) => glassbox_core::ErrorCode::ContextOverflow,
            TurnError::Input(e) => e.code(),
            TurnError::RateLimited(e) => e.code(),
            TurnError::Files(e) => e.code(),
            TurnError::SessionDeleted => glassbox_core::ErrorCode::Unauthorized,
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            TurnError::Budget(e) => e.retry_after(),
            TurnError::RateLimited(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// A reply's last provider call, settled when the reply is stored.
struct LastCall {
    reservation: Reservation,
    tokens: u64,
}

/// How a reply ends.
enum Ending {
    Complete,
    /// Kept with its partial text; retryable.
    Failed(WireError),
    /// The user stopped it; kept with its partial text, no error; retryable.
    Stopped,
}

/// What the reply holds so far.
#[derive(Default)]
struct Reply {
    content: String,
    rounds: Vec<ToolRound>,
    usage: Option<Usage>,
}

impl Reply {
    /// Adds one call's usage (a reply with tool rounds makes several calls).
    fn add_usage(&mut self, usage: Option<Usage>) {
        if let Some(u) = usage {
            let total = self.usage.get_or_insert_with(Usage::default);
            total.input_tokens += u.input_tokens;
            total.output_tokens += u.output_tokens;
            total.counted |= u.counted;
        }
    }
}

/// The message a turn answers.
pub enum Answered {
    /// The stored message with this id.
    Stored(String),
    /// A new session's first message, stored with it just now: what the turn would read back is
    /// known (the session's settings, no topics, this one message), so it is not read.
    First(Box<FirstMessage>),
    /// A draft after the newest message (a preview).
    Draft(Box<ChatMessage>),
}

/// A new session's first message and the settings the session was stored with.
pub struct FirstMessage {
    pub settings: SessionSettings,
    pub message: ChatMessage,
}

impl TurnEngine {
    /// Gathers and plans a turn answering a stored message (a reply) or
    /// `draft` after the newest one (a preview): the history it can use (`history::read`), the
    /// resume reminder (taken by a reply, only looked at by a preview), the tools of the session
    /// (fixed for the turn, whatever the registry does meanwhile), and the plan. The one way both
    /// a reply and a preview are planned, so they cannot disagree.
    async fn plan_for(
        &self,
        hub: &Hub,
        model: &str,
        answered: Answered,
        planning: Planning,
    ) -> Result<(ToolSet, Gathered, TurnPlan), TurnError> {
        let session_id = hub.session_id.as_str();
        let (settings, topics) = match &answered {
            Answered::First(first) => (first.settings.clone(), None),
            _ => self.store.settings_and_topics(session_id).await?,
        };
        let standing = topics.as_ref().map_or(&[][..], |t| &t.sticky_ids[..]);
        let info = self
            .windows
            .info_for(model, &settings, &ToolSet::new(Vec::new()));
        let reach = history::Reach {
            info: &info,
            standing,
            filtered: !settings.topics.filter.is_empty(),
        };
        let read_through =
            |through| history::read(&self.store, &self.tokens, session_id, through, &reach);
        let (read, draft) = match &answered {
            Answered::Stored(id) => (read_through(history::Through::Message(id)).await?, None),
            Answered::First(first) => (
                history::ReadHistory {
                    messages: vec![first.message.clone()],
                    unread: None,
                },
                None,
            ),
            Answered::Draft(draft) => (
                read_through(history::Through::Newest).await?,
                Some(draft.as_ref().clone()),
            ),
        };
        if read.messages.is_empty() && draft.is_none() {
            return Err(StorageError::Corrupt("the message answered is not stored".into()).into());
        }
        let mut history = read.messages;
        history.extend(draft);
        let due = match planning {
            Planning::Reply => hub.take_resume(),
            Planning::Preview => hub.resume_due(),
        };
        let resume = if due && history.len() > 1 {
            let sets = self.store.settings(session_id).await?.context;
            let reminder = self.resume_reminder(&sets, planning).await;
            if reminder.is_some() && planning == Planning::Reply {
                hub.publish(ServerEvent::Context(ContextEvent {
                    reason: ContextReason::Resume,
                    context: sets,
                    set_name: None,
                }));
            }
            reminder
        } else {
            None
        };
        let tools = self.windows.tools_for(session_id, &settings);
        let extras = TurnExtras {
            planning,
            tools: Some(tools),
            resume,
            unread: read.unread,
            session: Some((settings, topics)),
        };
        let (gathered, plan) = self
            .plan_reply(session_id, model, history, extras, hub.abandoned())
            .await?;
        Ok((gathered.offered.clone(), gathered, plan))
    }

    /// The receipt the turn answering `draft` would have now, without calling the provider or
    /// changing anything: the same plan as the reply's (`plan_for`). Rate-limited per session.
    pub async fn preview(
        &self,
        hub: &Hub,
        model: &str,
        draft: &ChatRequest,
    ) -> Result<Receipt, TurnError> {
        validate_chat(draft)?;
        self.limits.preview(&hub.session_id).await?;
        let draft = ChatMessage {
            role: Role::User,
            content: draft.message.clone(),
            context: draft.context.clone(),
            attachments: self
                .files
                .resolve(&hub.session_id, draft.attachments.clone())
                .await?,
            ..ChatMessage::default()
        };
        let (_, _, plan) = self
            .plan_for(
                hub,
                model,
                Answered::Draft(Box::new(draft)),
                Planning::Preview,
            )
            .await?;
        Ok(plan.receipt)
    }

    /// Runs the reply `reply_id` to the user message `answered` with `model`: plans it,
    /// streams it through the tool loop, stores it and tells the session's clients. `starting` is
    /// let go at the first token (background work waits for it until then).
    pub async fn run(
        &self,
        hub: &Hub,
        model: &str,
        answered: Answered,
        reply_id: &str,
        starting: TurnStarting,
        stop: &StopHandle,
    ) -> Result<(), TurnError> {
        let _running = crate::background::TurnRunning::begin();
        let mut starting = Some(starting);
        let session_id = hub.session_id.as_str();
        let (tools, gathered, mut plan) =
            self.plan_for(hub, model, answered, Planning::Reply).await?;
        let mut reply = Reply::default();
        if let Some(overflow) = plan.receipt.overflow {
            // Nothing goes to the provider; the reply fails with the receipt saying why.
            tracing::info!(
                session = session_id,
                reply = reply_id,
                needed = overflow.needed,
                room = overflow.room,
                "context overflow"
            );
            let error = TurnError::ContextOverflow(overflow).to_wire();
            return self
                .finish(
                    hub,
                    reply_id,
                    &reply,
                    Some(&plan.receipt),
                    Ending::Failed(error),
                )
                .await;
        }
        let encoding = gathered.info.encoding.clone();
        let max_rounds = gathered.effective.max_chat_turns;
        let mut request = gathered.sampled(plan.request.clone());
        let mut round: u32 = 0;
        // Offered when the plan left tools out over the tool budget.
        let loader = load_tools::LoadTools::for_receipt(&plan.receipt);
        let checkpoints = checkpoint::Checkpoints::start(
            self.store.clone(),
            reply_id.to_owned(),
            reply.content.clone(),
        );
        loop {
            // Stopped while planning, or during the tool round before: no further call.
            if stop.is_stopped() {
                return self
                    .finish(hub, reply_id, &reply, Some(&plan.receipt), Ending::Stopped)
                    .await;
            }
            // Every provider call is within the session's and the day's budget, or not made: its
            // prompt and its reply's cap are held until it ends (our count of the plan's input,
            // plus what earlier rounds of this reply added), the cap cut to what is left.
            let prompt = u64::from(plan.receipt.totals.counted_input_tokens)
                + u64::from(self.tokens.count(&encoding, &reply.content))
                + reply
                    .rounds
                    .iter()
                    .flat_map(|r| &r.exchanges)
                    .map(|x| u64::from(self.tokens.count(&encoding, &x.result)))
                    .sum::<u64>();
            let reservation = match self
                .calls
                .budgets
                .reserve(session_id, prompt, request.max_output_tokens, false)
                .await
            {
                Ok(reservation) => reservation,
                Err(e) => {
                    return self
                        .finish(
                            hub,
                            reply_id,
                            &reply,
                            Some(&plan.receipt),
                            Ending::Failed(e.to_wire()),
                        )
                        .await;
                }
            };
            request.max_output_tokens = reservation.output;
            let text_before = reply.content.len();
            // Only what this request offers runs (a tool left out is unknown until loaded).
            let extra = loader
                .iter()
                .map(|l| Arc::clone(l) as Arc<dyn crate::tools::Tool>)
                .collect();
            let offered = tools.only(&request.tools, extra);
            if let (0, Some(s), false) = (round, &starting, gathered.asked_provider) {
                self.calls.metrics.added_overhead(s.began().elapsed());
            }
            let mut on_text = |text: String| {
                starting.take();
                reply.content.push_str(&text);
                checkpoints.text(&text);
                hub.publish(ServerEvent::Delta(Delta {
                    message_id: reply_id.to_owned(),
                    text,
                }));
            };
            // Cancelled when the user stops the reply (dropping the stream closes the provider's
            // connection: nothing more is read or billed), or when nobody is left to read it.
            let cancel = async {
                tokio::select! {
                    () = hub.abandoned() => {}
                    () = stop.stopped() => {}
                }
            };
            let out = self.calls.stream(request, cancel, &mut on_text).await;
            // A call that answered with tool calls and no text: the turn is under way all the same.
            starting.take();
            // Spent, failure or not: what the provider reported, else our count of what went and
            // came back.
            let spent = out
                .as_ref()
                .ok()
                .and_then(|o| o.usage)
                .unwrap_or_else(|| Usage {
                    input_tokens: u64::from(plan.receipt.totals.counted_input_tokens),
                    output_tokens: u64::from(
                        self.tokens.count(&encoding, &reply.content[text_before..]),
                    ),
                    counted: true,
                });
            self.calls.spent(model, &spent);
            let tokens = spent.input_tokens + spent.output_tokens;
            // A call that ends the reply (stopped, failed, or no tool calls) is settled with the
            // reply's final state, in one write; one followed by a tool round is settled now.
            let mut last = Some(LastCall {
                reservation,
                tokens,
            });
            if out.as_ref().is_ok_and(|o| !o.calls.is_empty())
                && let Some(call) = last.take()
            {
                self.calls
                    .budgets
                    .settle(call.reservation, session_id, Some(hub), call.tokens)
                    .await?;
            }
            if stop.is_stopped() && matches!(out, Err(CallFailure::Cancelled)) {
                reply.add_usage(Some(spent));
                return self
                    .finish_spent(
                        hub,
                        reply_id,
                        &reply,
                        Some(&plan.receipt),
                        Ending::Stopped,
                        last,
                    )
                    .await;
            }
            let out = match out {
                Ok(out) => out,
                Err(failure) => {
                    tracing::warn!(
                        session = session_id,
                        reply = reply_id,
                        ?failure,
                        kept = reply.content.len(),
                        rounds = reply.rounds.len(),
                        "reply failed"
                    );
                    return self
                        .finish_spent(
                            hub,
                            reply_id,
                            &reply,
                            Some(&plan.receipt),
                            Ending::Failed(failure.to_wire()),
                            last,
                        )
                        .await;
                }
            };
            reply.add_usage(out.usage);
            if out.calls.is_empty() {
                return self
                    .finish_spent(
                        hub,
                        reply_id,
                        &reply,
                        Some(&plan.receipt),
                        Ending::Complete,
                        last,
                    )
                    .await;
            }
            let at = reply.content.len();
            let text_from = reply.rounds.last().map_or(0, |r| r.at as usize);
            let over_limit = round >= max_rounds;
            // The round's calls run (together when their tools allow it); their results are told
            // and kept in call order.
            let count = |text: &str| self.tokens.count(&encoding, text);
            let ctx = ToolCtx {
                store: &self.store,
                hub,
                reply_id,
                approvals: &self.approvals,
                approval_timeout: gathered.approval_timeout,
                count: &count,
                model,
                stop: stop.token(),
                metrics: &self.calls.metrics,
            };
            let exchanges: Vec<ToolExchange> = if over_limit {
                out.calls
                    .into_iter()
                    .map(|call| not_run(call, max_rounds))
                    .collect()
            } else {
                offered.run_round(ctx, out.calls).await
            };
            for exchange in &exchanges {
                hub.publish(ServerEvent::Tool(ToolEvent {
                    message_id: reply_id.to_owned(),
                    round,
                    at: at as u32,
                    exchange: exchange.clone(),
                }));
            }
            let mut count = |_: Option<&str>, text: &str| self.tokens.count(&encoding, text);
            record_tool_round(
                &mut plan.receipt,
                round,
                &reply.content[text_from..at],
                &exchanges,
                &mut count,
            );
            reply.rounds.push(ToolRound {
                at: at as u32,
                exchanges,
            });
            checkpoints.rounds(&reply.rounds);
            if let Some(loader) = &loader {
                self.load_tools(hub, &mut plan.receipt, loader.take()).await;
            }
            if over_limit {
                tracing::info!(
                    session = session_id,
                    reply = reply_id,
                    max_rounds,
                    "tool round limit reached"
                );
                return self
                    .finish(hub, reply_id, &reply, Some(&plan.receipt), Ending::Complete)
                    .await;
            }
            if let Some(overflow) = plan.receipt.overflow {
                let error = TurnError::ContextOverflow(overflow).to_wire();
                return self
                    .finish(
                        hub,
                        reply_id,
                        &reply,
                        Some(&plan.receipt),
                        Ending::Failed(error),
                    )
                    .await;
            }
            request = gathered.request(
                &plan.receipt,
                CurrentReply {
                    text: &reply.content,
                    rounds: &reply.rounds,
                },
            );
            round += 1;
        }
    }

    /// Offers the tools `loaded` (left out over the tool budget, loaded by the model) from the next
    /// round on, and keeps them in the session for its next messages.
    async fn load_tools(&self, hub: &Hub, receipt: &mut Receipt, loaded: Vec<ItemRef>) {
        if loaded.is_empty() {
            return;
        }
        let moved = glassbox_core::context::tool_parts::load_tools(receipt, &loaded);
        let kept = self
            .store
            .update_settings(&hub.session_id, |s| {
                for item in moved {
                    if !s.loaded_tools.contains(&item) {
                        s.loaded_tools.push(item);
                    }
                }
                Ok::<_, StorageError>(())
            })
            .await;
        if let Err(e) = kept {
            tracing::warn!(session = %hub.session_id, error = %e, "loaded tools not kept in the session");
        }
    }

    /// Ends reply `reply_id`, stopped while it waited behind the session's reply under way: it
    /// is stored `stopped`, empty, and told (`done`).
    pub async fn stopped_while_queued(&self, hub: &Hub, reply_id: &str) -> Result<(), TurnError> {
        self.finish(hub, reply_id, &Reply::default(), None, Ending::Stopped)
            .await
    }

    /// Stores the reply's final state and tells the clients: `done` (complete or stopped), or
    /// `error` (the partial text and the rounds made are kept, and the reply can be retried).
    async fn finish(
        &self,
        hub: &Hub,
        reply_id: &str,
        reply: &Reply,
        receipt: Option<&Receipt>,
        ending: Ending,
    ) -> Result<(), TurnError> {
        self.finish_spent(hub, reply_id, reply, receipt, ending, None)
            .await
    }

    /// As [`Self::finish`], settling the reply's `last` provider call in the same write.
    async fn finish_spent(
        &self,
        hub: &Hub,
        reply_id: &str,
        reply: &Reply,
        receipt: Option<&Receipt>,
        ending: Ending,
        last: Option<LastCall>,
    ) -> Result<(), TurnError> {
        let (status, error, outcome) = match ending {
            Ending::Complete => (MessageStatus::Complete, None, TurnOutcome::Complete),
            Ending::Stopped => (MessageStatus::Stopped, None, TurnOutcome::Stopped),
            Ending::Failed(e) => (
                MessageStatus::Failed,
                Some(e.for_message(reply_id)),
                TurnOutcome::Failed,
            ),
        };
        let spend = last
            .as_ref()
            .and_then(|call| Budgets::spend(&call.reservation, call.tokens));
        let finished = self
            .store
            .finish_reply(
                &hub.session_id,
                reply_id,
                ReplyOutcome {
                    content: &reply.content,
                    status,
                    usage: reply.usage,
                    receipt,
                    tool_rounds: &reply.rounds,
                    error: error.as_ref(),
                },
                spend,
            )
            .await;
        let (stored, used) = match finished {
            Ok((Some(stored), used)) => (stored, used),
            // The write settled the last call all the same: not settled again.
            Ok((None, _)) => return Err(TurnError::SessionDeleted),
            Err(e) => {
                // The reply's state is lost to the error; its last call's tokens are not.
                if let Some(call) = last
                    && let Err(settle) = self
                        .calls
                        .budgets
                        .settle(call.reservation, &hub.session_id, Some(hub), call.tokens)
                        .await
                {
                    tracing::error!(session = %hub.session_id, error = %settle, "a reply's last call not settled");
                }
                return Err(e.into());
            }
        };
        if let Some(used) = used {
            self.calls.budgets.settled(hub, used);
        }
        self.calls.metrics.turn(outcome);
        match error {
            Some(e) => hub.publish(ServerEvent::Error(e)),
            None => {
                let said = !stored.content.trim().is_empty();
                hub.publish(ServerEvent::Done(Done { message: stored }));
                // Topics follow each reply that says something, in the background.
                if self.config.topics_enabled && said {
                    self.topics.clone().warm_reply(hub.session_id.clone());
                    self.topics.clone().spawn_extraction(hub.session_id.clone());
                }
            }
        }
        Ok(())
    }
}

/// The answer to calls made after the last allowed round: not run, and the model is told why.
fn not_run(call: glassbox_core::vocab::ToolCall, max_rounds: u32) -> ToolExchange {
    let name: String = call.name.chars().take(64).collect();
    ToolExchange {
        call,
        result: format!("Error: not run; this reply reached its limit of {max_rounds} tool rounds"),
        is_error: true,
        line: format!("{name} · not run (limit of {max_rounds} rounds)"),
        images: Vec::new(),
    }
}
