//! Chat messages in: store the user message, then start its reply (`turn`) in the background, one
//! reply at a time per session. A failed reply keeps its partial text and can be retried in place.

use std::sync::Arc;

use glassbox_core::limits::{InputError, validate_chat};
use glassbox_core::vocab::{MessageStatus, Role};
use glassbox_core::wire::{Accepted, ChatMessage, ChatRequest, ReplyStart, ServerEvent};

use tracing::Instrument;

use crate::background::TurnStarting;
use crate::budgets::{BudgetError, Budgets};
use crate::cluster::{Cluster, Command};
use crate::drain::{Admitted, Drain};
use crate::hub::Hub;
use crate::ids::{new_id, now_ms};
use crate::rate_limits::{AddressPermit, Caller, RateLimited, RateLimits};
use crate::sessions::UnsavedSession;
use crate::storage::{NewUserMessage, StorageError, Store};
use crate::turn::{Answered, FirstMessage, TurnEngine};
use crate::wire_error::ToWire;

/// Why a message or a retry was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(&'static str),
    #[error("storage failed")]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Files(#[from] crate::files::FilesError),
    #[error("this server is restarting; send the message again in a moment")]
    ShuttingDown,
}

impl ToWire for ChatError {
    fn code(&self) -> glassbox_core::ErrorCode {
        use glassbox_core::ErrorCode;
        match self {
            ChatError::Input(e) => e.code(),
            ChatError::Budget(e) => e.code(),
            ChatError::RateLimited(e) => e.code(),
            ChatError::NotFound(_) => ErrorCode::NotFound,
            ChatError::Conflict(_) => ErrorCode::Conflict,
            ChatError::Storage(e) => e.code(),
            ChatError::Files(e) => e.code(),
            ChatError::ShuttingDown => ErrorCode::Overloaded,
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ChatError::Budget(e) => e.retry_after(),
            ChatError::RateLimited(e) => e.retry_after(),
            ChatError::ShuttingDown => Some(SHUTTING_DOWN_RETRY),
            _ => None,
        }
    }
}

/// When a message refused while the server shuts down may be sent again (by then the client is
/// on its new connection).
const SHUTTING_DOWN_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes chat messages and retries, and starts their replies.
#[derive(Clone)]
pub struct Chat {
    store: Store,
    limits: Arc<RateLimits>,
    budgets: Budgets,
    turns: TurnEngine,
    /// The replies under way, and whether the process is shutting down.
    drain: Drain,
    /// The instances sharing the database (turn leases, stops sent to the instance running a
    /// reply); none on SQLite.
    cluster: Option<Cluster>,
}

/// What `submit` did.
pub struct Submitted {
    /// The stored user message.
    pub message: ChatMessage,
    /// True if this `clientMessageId` was stored before; no reply was started.
    pub duplicate: bool,
    /// The id of the reply being streamed, unless duplicate.
    pub reply_id: Option<String>,
}

impl Chat {
    /// Messages stored in `store`, within `limits` and `budgets`, answered by `turns`, whose
    /// replies run under `drain`, one at a time per session across the instances of `cluster`.
    pub fn new(
        store: Store,
        limits: Arc<RateLimits>,
        budgets: Budgets,
        turns: TurnEngine,
        drain: Drain,
        cluster: Option<Cluster>,
    ) -> Self {
        Self {
            store,
            limits,
            budgets,
            turns,
            drain,
            cluster,
        }
    }

    /// Validates and stores a user message (with its session, when `unsaved` is a new one), then
    /// starts its reply in the background. Nothing is stored when validation fails or a rate
    /// limit of `caller` or the session refuses.
    pub async fn submit(
        &self,
        hub: &Arc<Hub>,
        model: &str,
        mut req: ChatRequest,
        caller: Option<&Caller>,
        unsaved: Option<&UnsavedSession>,
    ) -> Result<Submitted, ChatError> {
        // Counted from here: a shutdown that begins meanwhile waits for this message's reply.
        let admitted = self.drain.admit().ok_or(ChatError::ShuttingDown)?;
        validate_chat(&req)?;
        let session_id = hub.session_id.as_str();
        // Uploaded files as the server recorded them (a file of another session is refused).
        req.attachments = self
            .turns
            .files
            .resolve(session_id, std::mem::take(&mut req.attachments))
            .await?;
        // What refuses without spending comes first, so a refused message costs no allowance. A
        // new session's user is known before its row is stored.
        let owner = unsaved.and_then(|s| s.as_new().user_id);
        self.budgets.check(session_id, owner).await?;
        let permit = self.limits.stream(caller)?;
        self.limits.message(caller, session_id).await?;
        let starting = TurnStarting::begin();
        // Stored and started in a task of its own: a caller that goes away (a client hanging up)
        // while the message is stored cannot leave it stored with a reply that never starts.
        let (chat, hub, model, unsaved) = (
            self.clone(),
            Arc::clone(hub),
            model.to_owned(),
            unsaved.cloned(),
        );
        let stored = tokio::spawn(
            async move {
                chat.store_and_start(
                    &hub,
                    model,
                    req,
                    unsaved.as_ref(),
                    (permit, admitted),
                    starting,
                )
                .await
            }
            .in_current_span(),
        )
        .await;
        match stored {
            Ok(submitted) => submitted,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(ChatError::ShuttingDown),
        }
    }

    /// Stores user message `req` (its attachments resolved; with its session, when `unsaved` is
    /// a new one) and its reply's placeholder, then starts the reply; see [`Self::submit`].
    async fn store_and_start(
        &self,
        hub: &Arc<Hub>,
        model: String,
        req: ChatRequest,
        unsaved: Option<&UnsavedSession>,
        permits: (AddressPermit, Admitted),
        starting: TurnStarting,
    ) -> Result<Submitted, ChatError> {
        let session_id = hub.session_id.as_str();
        let id = new_id();
        let now = now_ms();
        let m = NewUserMessage {
            id: &id,
            content: &req.message,
            client_message_id: req.client_message_id.as_deref(),
            context: req.context.as_ref(),
            attachments: &req.attachments,
            created_at: now,
        };
        // The session's use (or the new session), then the message and its reply's placeholder,
        // in one transaction.
        let (message, reply) = match unsaved {
            Some(session) => {
                let (message, reply) = self
                    .store
                    .insert_first_turn(&session.as_new(), &m, &new_id())
                    .await?;
                (message, Some(reply))
            }
            None => {
                self.store
                    .insert_turn(session_id, &m, &new_id(), now)
                    .await?
            }
        };
        let Some(reply) = reply else {
            hub.publish(ServerEvent::Accepted(Accepted {
                message: message.clone(),
                duplicate: true,
            }));
            return Ok(Submitted {
                message,
                duplicate: true,
                reply_id: None,
            });
        };
        hub.publish(ServerEvent::Accepted(Accepted {
            message: message.clone(),
            duplicate: false,
        }));
        let answered = match unsaved {
            Some(session) => Answered::First(Box::new(FirstMessage {
                settings: session.as_new().settings.clone(),
                message: message.clone(),
            })),
            None => Answered::Stored(message.id.clone()),
        };
        self.spawn_turn(hub.clone(), model, answered, &reply, permits, starting);
        Ok(Submitted {
            message,
            duplicate: false,
            reply_id: Some(reply.id),
        })
    }

    /// Regenerates a failed reply in place (same message id); it counts as a message for the
    /// rate limits.
    pub async fn retry(
        &self,
        hub: &Arc<Hub>,
        model: &str,
        message_id: &str,
        caller: Option<&Caller>,
    ) -> Result<(), ChatError> {
        let admitted = self.drain.admit().ok_or(ChatError::ShuttingDown)?;
        let session_id = hub.session_id.as_str();
        self.budgets.check(session_id, None).await?;
        let permit = self.limits.stream(caller)?;
        self.limits.message(caller, session_id).await?;
        let starting = TurnStarting::begin();
        self.store.touch_session(session_id, now_ms()).await?;
        let reply = self
            .store
            .message(session_id, message_id)
            .await?
            .ok_or(ChatError::NotFound("message"))?;
        let reply_to = match (&reply.role, &reply.reply_to) {
            (Role::Assistant, Some(to)) => to.clone(),
            _ => return Err(ChatError::Conflict("only assistant replies can be retried")),
        };
        if !self.store.restart_reply(session_id, message_id).await? {
            return Err(ChatError::Conflict(
                "only a failed or stopped reply can be retried",
            ));
        }
        self.spawn_turn(
            hub.clone(),
            model.to_owned(),
            Answered::Stored(reply_to),
            &reply,
            (permit, admitted),
            starting,
        );
        Ok(())
    }

    /// Stops reply `message_id` of the session: true when it was under way (or waiting its turn)
    /// and is asked to end as `stopped` (every tab receives `done`; a reply whose stream had
    /// already finished as the stop came still ends `complete`); false when it had already ended.
    /// An id that is no reply of the session is `not_found`.
    pub async fn stop(&self, hub: &Hub, message_id: &str) -> Result<bool, ChatError> {
        if hub.stops.stop(message_id) {
            tracing::info!(session = %hub.session_id, reply = message_id, "reply stopped by the user");
            return Ok(true);
        }
        match self.store.message(&hub.session_id, message_id).await? {
            // Running on another instance: told through the database.
            Some(m) if m.role == Role::Assistant && m.status == MessageStatus::Streaming => {
                let Some(cluster) = &self.cluster else {
                    return Ok(false);
                };
                cluster
                    .send(&Command::Stop {
                        session_id: hub.session_id.clone(),
                        reply_id: message_id.to_owned(),
                    })
                    .await
                    .map_err(StorageError::from)?;
                tracing::info!(session = %hub.session_id, reply = message_id, "stop sent to the instance running the reply");
                Ok(true)
            }
            Some(m) if m.role == Role::Assistant => Ok(false),
            _ => Err(ChatError::NotFound("reply")),
        }
    }

    /// Tells every tab the reply starts (`reply_start`) and runs it in the background; `permit`
    /// holds the address's streaming slot until it ends, `admitted` has a shutdown wait for it,
    /// `starting` counts the turn as starting until its first token (not while it waits for the
    /// session's reply under way).
    fn spawn_turn(
        &self,
        hub: Arc<Hub>,
        model: String,
        answered: Answered,
        reply: &ChatMessage,
        (permit, admitted): (AddressPermit, Admitted),
        starting: TurnStarting,
    ) {
        // Registered before `reply_start`, so a stop that answers it finds the reply.
        let stop = hub.stops.register(&reply.id);
        hub.publish(reply_start(reply));
        let reply_id = reply.id.clone();
        let turns = self.turns.clone();
        let leases = self.cluster.as_ref().map(|c| c.leases.clone());
        // The turn logs under the request or connection that started it.
        let span = tracing::Span::current();
        admitted.run(
            async move {
                let _permit = permit;
                let mut starting = starting;
                let _in_order = match hub.turn_lock.try_lock() {
                    Ok(alone) => alone,
                    // Queued behind the session's reply under way (which may stream for
                    // minutes): not counted as starting until its turn comes.
                    Err(_) => {
                        drop(starting);
                        let queued = tokio::select! {
                            queued = hub.turn_lock.lock() => queued,
                            () = stop.stopped() => {
                                if let Err(e) = turns.stopped_while_queued(&hub, &reply_id).await {
                                    tracing::error!(reply = %reply_id, error = %e, "a stopped reply was not stored");
                                }
                                return;
                            }
                        };
                        starting = TurnStarting::begin();
                        queued
                    }
                };
                // Across instances, the session's turn is a lease in the database.
                let lease = match leases {
                    None => None,
                    Some(leases) => {
                        tokio::select! {
                            lease = leases.acquire(&hub.session_id, &reply_id) => Some(lease),
                            () = stop.stopped() => {
                                if let Err(e) = turns.stopped_while_queued(&hub, &reply_id).await {
                                    tracing::error!(reply = %reply_id, error = %e, "a stopped reply was not stored");
                                }
                                return;
                            }
                        }
                    }
                };
                let run = turns.run(&hub, &model, answered, &reply_id, starting, &stop);
                tokio::pin!(run);
                let ran = match &lease {
                    None => run.await,
                    Some(lease) => tokio::select! {
                        ran = &mut run => ran,
                        // Another instance took the turn (this one stalled past the lease):
                        // the reply ends as stopped, keeping its text, and can be retried.
                        () = lease.lost() => {
                            hub.stops.stop(&reply_id);
                            run.await
                        }
                    },
                };
                if let Err(e) = ran {
                    // Ended before the reply could be stored (its outcome is counted here).
                    turns.calls.metrics.turn(crate::metrics::TurnOutcome::Failed);
                    let wire = e.to_wire().for_message(&reply_id);
                    hub.publish(ServerEvent::Error(wire));
                }
            }
            .instrument(span),
        );
    }
}

fn reply_start(reply: &ChatMessage) -> ServerEvent {
    ServerEvent::ReplyStart(ReplyStart {
        message_id: reply.id.clone(),
        reply_to: reply.reply_to.clone().unwrap_or_default(),
        created_at: reply.created_at,
    })
}
