//! Chat turns: store the user message, then stream the reply from the provider into the session,
//! storing it as it completes. A failure keeps the partial reply, flagged failed and retryable.

use std::sync::Arc;

use futures::StreamExt;
use glassbox_core::ErrorCode;
use glassbox_core::limits::validate_chat;
use glassbox_core::wire::{
    Accepted, ChatMessage, ChatRequest, Delta, Done, MessageStatus, ReplyStart, Role, ServerEvent,
    Usage, WireError,
};

use crate::error::AppError;
use crate::hub::Hub;
use crate::providers::{ProviderError, ProviderEvent};
use crate::sessions::{new_id, now_ms};
use crate::state::AppState;
use crate::storage::{NewUserMessage, ReplyOutcome};

/// What `submit` did.
pub struct Submitted {
    /// The stored user message.
    pub message: ChatMessage,
    /// True if this `clientMessageId` was stored before; no reply was started.
    pub duplicate: bool,
    /// The id of the reply being streamed, unless duplicate.
    pub reply_id: Option<String>,
}

/// Why a reply stopped early.
#[derive(Debug)]
enum TurnFailure {
    Provider(ProviderError),
    Abandoned,
}

impl TurnFailure {
    fn to_wire(&self) -> WireError {
        match self {
            TurnFailure::Provider(e) => AppError::Provider(e.clone()).to_wire(),
            TurnFailure::Abandoned => WireError::new(
                ErrorCode::Cancelled,
                "the reply was stopped because every client disconnected",
            ),
        }
    }
}

impl AppState {
    /// Validates and stores a user message, then starts its reply in the background.
    /// Nothing is stored when validation fails.
    pub async fn submit(
        &self,
        hub: &Arc<Hub>,
        model: &str,
        req: ChatRequest,
    ) -> Result<Submitted, AppError> {
        validate_chat(&req)?;
        let session_id = hub.session_id.as_str();
        let id = new_id();
        let (message, duplicate) = self
            .store
            .insert_user_message(
                session_id,
                &NewUserMessage {
                    id: &id,
                    content: &req.message,
                    client_message_id: req.client_message_id.as_deref(),
                    context: req.context.as_ref(),
                    attachments: &req.attachments,
                    created_at: now_ms(),
                },
            )
            .await?;
        if duplicate {
            hub.publish(ServerEvent::Accepted(Accepted {
                message: message.clone(),
                duplicate: true,
            }));
            return Ok(Submitted {
                message,
                duplicate,
                reply_id: None,
            });
        }
        let reply = self
            .store
            .insert_reply(session_id, &new_id(), &message.id, now_ms())
            .await?;
        hub.publish(ServerEvent::Accepted(Accepted {
            message: message.clone(),
            duplicate: false,
        }));
        hub.publish(reply_start(&reply));
        self.spawn_turn(
            hub.clone(),
            model.to_owned(),
            message.id.clone(),
            reply.id.clone(),
        );
        Ok(Submitted {
            message,
            duplicate: false,
            reply_id: Some(reply.id),
        })
    }

    /// Regenerates a failed reply in place (same message id).
    pub async fn retry(
        &self,
        hub: &Arc<Hub>,
        model: &str,
        message_id: &str,
    ) -> Result<(), AppError> {
        let session_id = hub.session_id.as_str();
        let reply = self
            .store
            .message(session_id, message_id)
            .await?
            .ok_or(AppError::NotFound("message"))?;
        let reply_to = match (&reply.role, &reply.reply_to) {
            (Role::Assistant, Some(to)) => to.clone(),
            _ => return Err(AppError::Conflict("only assistant replies can be retried")),
        };
        if !self.store.restart_reply(session_id, message_id).await? {
            return Err(AppError::Conflict("only a failed reply can be retried"));
        }
        hub.publish(reply_start(&reply));
        self.spawn_turn(hub.clone(), model.to_owned(), reply_to, reply.id);
        Ok(())
    }

    fn spawn_turn(&self, hub: Arc<Hub>, model: String, user_message_id: String, reply_id: String) {
        let state = self.clone();
        tokio::spawn(async move {
            let _in_order = hub.turn_lock.lock().await;
            if let Err(e) = state
                .run_turn(&hub, &model, &user_message_id, &reply_id)
                .await
            {
                let wire = e.to_wire().for_message(&reply_id);
                hub.publish(ServerEvent::Error(wire));
            }
        });
    }

    async fn run_turn(
        &self,
        hub: &Hub,
        model: &str,
        user_message_id: &str,
        reply_id: &str,
    ) -> Result<(), AppError> {
        let session_id = hub.session_id.as_str();
        let history = self
            .store
            .history_through(session_id, user_message_id)
            .await?;
        let plan = self.plan_reply(session_id, model, &history, &[]).await?;
        if let Some(overflow) = plan.receipt.overflow {
            // Nothing goes to the provider; the reply fails with the receipt saying why.
            let error = AppError::ContextOverflow(overflow)
                .to_wire()
                .for_message(reply_id);
            tracing::info!(
                session = session_id,
                reply = reply_id,
                needed = overflow.needed,
                room = overflow.room,
                "context overflow"
            );
            self.store
                .finish_reply(
                    session_id,
                    reply_id,
                    ReplyOutcome {
                        content: "",
                        status: MessageStatus::Failed,
                        usage: None,
                        receipt: Some(&plan.receipt),
                        error: Some(&error),
                    },
                )
                .await?;
            hub.publish(ServerEvent::Error(error));
            return Ok(());
        }
        let request = plan.request.clone();
        let mut content = String::new();
        let mut usage = None;
        let result = tokio::select! {
            r = self.stream_reply(hub, reply_id, request, &mut content, &mut usage) => r.map_err(TurnFailure::Provider),
            _ = hub.abandoned() => Err(TurnFailure::Abandoned),
        };
        let error = result
            .as_ref()
            .err()
            .map(|f| f.to_wire().for_message(reply_id));
        if let Err(failure) = &result {
            tracing::warn!(
                session = session_id,
                reply = reply_id,
                ?failure,
                kept = content.len(),
                "reply failed"
            );
        }
        let status = if error.is_some() {
            MessageStatus::Failed
        } else {
            MessageStatus::Complete
        };
        let stored = self
            .store
            .finish_reply(
                session_id,
                reply_id,
                ReplyOutcome {
                    content: &content,
                    status,
                    usage,
                    receipt: Some(&plan.receipt),
                    error: error.as_ref(),
                },
            )
            .await?;
        match error {
            Some(e) => hub.publish(ServerEvent::Error(e)),
            None => hub.publish(ServerEvent::Done(Done { message: stored })),
        };
        Ok(())
    }

    /// Streams provider events into the session until the provider finishes or fails.
    async fn stream_reply(
        &self,
        hub: &Hub,
        reply_id: &str,
        request: glassbox_core::prompt::ProviderRequest,
        content: &mut String,
        usage: &mut Option<Usage>,
    ) -> Result<(), ProviderError> {
        let idle = self.config.provider_idle_timeout;
        let total = self.config.provider_total_timeout;
        let deadline = tokio::time::Instant::now() + total;
        let mut stream = self.provider.stream(request);
        loop {
            let next = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + idle),
                stream.next(),
            )
            .await;
            let event = match next {
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(ProviderError::TotalTimeout(total));
                }
                Err(_) => return Err(ProviderError::IdleTimeout(idle)),
                Ok(None) => return Err(ProviderError::Truncated),
                Ok(Some(event)) => event?,
            };
            match event {
                ProviderEvent::Text(text) => {
                    content.push_str(&text);
                    hub.publish(ServerEvent::Delta(Delta {
                        message_id: reply_id.to_owned(),
                        text,
                    }));
                }
                ProviderEvent::Usage(u) => *usage = Some(u),
                ProviderEvent::ToolCall(call) => {
                    // No tools are offered yet; a call is logged, not run.
                    tracing::info!(tool = %call.name, "provider requested a tool that was not offered");
                }
                ProviderEvent::Finished { .. } => return Ok(()),
            }
        }
    }
}

fn reply_start(reply: &ChatMessage) -> ServerEvent {
    ServerEvent::ReplyStart(ReplyStart {
        message_id: reply.id.clone(),
        reply_to: reply.reply_to.clone().unwrap_or_default(),
        created_at: reply.created_at,
    })
}
