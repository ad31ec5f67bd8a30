//! A chat turn as its own engine: gather and plan (`gather`), then the reply with its tool loop —
//! the model is offered the tools, calls them, the server runs them (`tools`), the results go back
//! and the model continues, up to `GLASSBOX_MAX_CHAT_TURNS` rounds — each round one provider call
//! (`call`) built from the receipt. Text streams between rounds; every exchange is recorded in the
//! receipt and stored on the reply, so later turns replay it in the provider's own format.

pub mod call;
pub mod checkpoint;
pub mod gather;
pub mod tools;

use glassbox_core::context::{CurrentReply, Receipt, record_tool_round};
use glassbox_core::wire::{
    ChatMessage, ContextEvent, ContextReason, Delta, Done, MessageStatus, ServerEvent, ToolEvent,
    ToolExchange, ToolRound, Usage, WireError,
};

use crate::background::TurnStarting;
use crate::error::AppError;
use crate::hub::Hub;
use crate::state::AppState;
use crate::storage::ReplyOutcome;
use gather::{TurnExtras, plan_reply, resume_reminder};
use tools::ToolCtx;

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
        }
    }
}

/// Runs the reply `reply_id` to the user message `user_message_id` with `model`: plans it, streams
/// it through the tool loop, stores it and tells the session's clients. `starting` is let go at
/// the first token (background work waits for it until then).
pub async fn run(
    state: &AppState,
    hub: &Hub,
    model: &str,
    user_message_id: &str,
    reply_id: &str,
    starting: TurnStarting,
) -> Result<(), AppError> {
    let mut starting = Some(starting);
    let session_id = hub.session_id.as_str();
    let history = state
        .store
        .history_through(session_id, user_message_id)
        .await?;
    let resume = if hub.take_resume() && history.len() > 1 {
        let sets = state.store.settings(session_id).await?.context;
        let reminder = resume_reminder(state, &sets).await;
        if reminder.is_some() {
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
    let extras = TurnExtras {
        tools: state.tools.definitions(),
        resume,
    };
    let (gathered, mut plan) =
        plan_reply(state, session_id, model, history, extras, hub.abandoned()).await?;
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
        let error = AppError::ContextOverflow(overflow).to_wire();
        return finish(state, hub, reply_id, &reply, &plan.receipt, Some(error)).await;
    }
    let encoding = gathered.info.encoding.clone();
    let max_rounds = state.config.max_chat_turns;
    let mut request = plan.request.clone();
    let mut round: u32 = 0;
    let checkpoints = checkpoint::Checkpoints::start(
        state.store.clone(),
        reply_id.to_owned(),
        reply.content.clone(),
    );
    loop {
        // Every provider call is within the session's and the day's budget, or not made.
        if let Err(e) = state.check_budget(session_id).await {
            return finish(
                state,
                hub,
                reply_id,
                &reply,
                &plan.receipt,
                Some(e.to_wire()),
            )
            .await;
        }
        let text_before = reply.content.len();
        let mut on_text = |text: String| {
            starting.take();
            reply.content.push_str(&text);
            checkpoints.text(&text);
            hub.publish(ServerEvent::Delta(Delta {
                message_id: reply_id.to_owned(),
                text,
            }));
        };
        let out = call::call(
            &*state.provider,
            request,
            state.call_limits(),
            hub.abandoned(),
            &mut on_text,
        )
        .await;
        // A call that answered with tool calls and no text: the turn is under way all the same.
        starting.take();
        // Spent, failure or not: what the provider reported, else our count of what went and came
        // back.
        let usage = out.as_ref().ok().and_then(|o| o.usage);
        state
            .record_call(session_id, Some(hub), usage, || {
                u64::from(plan.receipt.totals.counted_input_tokens)
                    + u64::from(state.tokens.count(&encoding, &reply.content[text_before..]))
            })
            .await?;
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
                return finish(
                    state,
                    hub,
                    reply_id,
                    &reply,
                    &plan.receipt,
                    Some(failure.to_wire()),
                )
                .await;
            }
        };
        reply.add_usage(out.usage);
        if out.calls.is_empty() {
            return finish(state, hub, reply_id, &reply, &plan.receipt, None).await;
        }
        let at = reply.content.len();
        let text_from = reply.rounds.last().map_or(0, |r| r.at as usize);
        let over_limit = round >= max_rounds;
        let mut exchanges = Vec::with_capacity(out.calls.len());
        for call in out.calls {
            let exchange = if over_limit {
                not_run(call, max_rounds)
            } else {
                state.tools.run(ToolCtx { state, hub }, call).await
            };
            hub.publish(ServerEvent::Tool(ToolEvent {
                message_id: reply_id.to_owned(),
                round,
                at: at as u32,
                exchange: exchange.clone(),
            }));
            exchanges.push(exchange);
        }
        let mut count = |_: Option<&str>, text: &str| state.tokens.count(&encoding, text);
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
        if over_limit {
            tracing::info!(
                session = session_id,
                reply = reply_id,
                max_rounds,
                "tool round limit reached"
            );
            return finish(state, hub, reply_id, &reply, &plan.receipt, None).await;
        }
        if let Some(overflow) = plan.receipt.overflow {
            let error = AppError::ContextOverflow(overflow).to_wire();
            return finish(state, hub, reply_id, &reply, &plan.receipt, Some(error)).await;
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

/// The answer to calls made after the last allowed round: not run, and the model is told why.
fn not_run(call: glassbox_core::prompt::ToolCall, max_rounds: u32) -> ToolExchange {
    let name: String = call.name.chars().take(64).collect();
    ToolExchange {
        call,
        result: format!("Error: not run; this reply reached its limit of {max_rounds} tool rounds"),
        is_error: true,
        line: format!("{name} · not run (limit of {max_rounds} rounds)"),
    }
}

/// Stores the reply's final state and tells the clients: `done`, or `error` (the partial text and
/// the rounds made are kept, and the reply can be retried).
async fn finish(
    state: &AppState,
    hub: &Hub,
    reply_id: &str,
    reply: &Reply,
    receipt: &Receipt,
    error: Option<WireError>,
) -> Result<(), AppError> {
    let error = error.map(|e| e.for_message(reply_id));
    let stored: ChatMessage = state
        .store
        .finish_reply(
            &hub.session_id,
            reply_id,
            ReplyOutcome {
                content: &reply.content,
                status: if error.is_some() {
                    MessageStatus::Failed
                } else {
                    MessageStatus::Complete
                },
                usage: reply.usage,
                receipt: Some(receipt),
                tool_rounds: &reply.rounds,
                error: error.as_ref(),
            },
        )
        .await?;
    match error {
        Some(e) => hub.publish(ServerEvent::Error(e)),
        None => {
            let frame = hub.publish(ServerEvent::Done(Done { message: stored }));
            // Topics follow each reply, in the background.
            if state.config.topics_enabled {
                crate::topics::warm_reply(state.clone(), hub.session_id.clone());
                crate::topics::extract::spawn(state.clone(), hub.session_id.clone());
            }
            frame
        }
    };
    Ok(())
}
