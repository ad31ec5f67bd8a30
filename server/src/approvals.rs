//! Approvals (docs/agents.md, "Approvals"): under the tool permission `ask`, a call of a tool that
//! asks waits inside its round for the user's answer. The request goes to every tab of the session
//! (`approval_request`, numbered and replayed like other frames, and in the snapshot while it
//! waits); the first answer wins (`approve` or REST), later or unknown ones change nothing; no
//! answer within the agent's `approval_timeout_ms` is a denial; a reply that ends first cancels it.
//! Every decision is stored as an `approval` message and told to every tab (`approval`).
//! `allow_session` grants the tool, as it is defined now, for the rest of the session (kept in the
//! session's settings record, so it outlives a restart; a changed definition is asked again).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use glassbox_core::ErrorCode;
use glassbox_core::vocab::{ApprovalDecision, MessageStatus, Role, ToolCall, ToolCallApproval};
use glassbox_core::wire::{ApprovalDecided, ApprovalRequest, ChatMessage, ServerEvent};
use tokio::sync::oneshot;

use crate::hub::Hub;
use crate::storage::{StorageError, Store};
use crate::wire_error::ToWire;

/// Longest reason a user may give for a denial, in characters.
pub const MAX_REASON: usize = 1000;
/// Answered approvals remembered (so a second answer is a conflict, not "unknown").
const ANSWERED_KEPT: usize = 10_000;

/// Why an answer was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval {0:?} in this session")]
    NotFound(String),
    #[error("approval {0:?} was already answered")]
    Answered(String),
    #[error("`{0}` is the server's decision; answer allow, deny or allow_session")]
    NotUsers(ApprovalDecision),
    #[error("the reason is longer than {MAX_REASON} characters")]
    ReasonTooLong,
}

impl ToWire for ApprovalError {
    fn code(&self) -> ErrorCode {
        match self {
            ApprovalError::NotFound(_) => ErrorCode::NotFound,
            ApprovalError::Answered(_) => ErrorCode::Conflict,
            ApprovalError::NotUsers(_) | ApprovalError::ReasonTooLong => ErrorCode::InvalidApproval,
        }
    }
}

/// The tool a call is for, as the approval dialog shows it.
#[derive(Debug, Clone)]
pub struct Subject {
    pub server: String,
    pub tool: String,
    pub title: Option<String>,
    pub description: String,
    pub annotations: Option<serde_json::Value>,
    /// Identifies the tool's definition: a session grant holds for this definition only.
    pub definition_key: String,
    /// The definition's tokens in every request that offers it.
    pub tokens: u32,
}

/// A decision and the reason given with it.
pub type Answer = (ApprovalDecision, Option<String>);

struct Pending {
    session_id: String,
    request: ApprovalRequest,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, Pending>,
    /// Answered ids (with their session), oldest first, bounded.
    answered: HashMap<String, String>,
    answered_order: VecDeque<String>,
}

impl State {
    fn remember_answered(&mut self, id: String, session_id: String) {
        if self.answered_order.len() >= ANSWERED_KEPT
            && let Some(old) = self.answered_order.pop_front()
        {
            self.answered.remove(&old);
        }
        self.answered_order.push_back(id.clone());
        self.answered.insert(id, session_id);
    }
}

/// Every session's waiting approvals and grants. Clones share them.
#[derive(Clone)]
pub struct Approvals {
    state: Arc<Mutex<State>>,
    store: Store,
}

/// Stores a decision's `approval` message; a failed write is logged (the turn goes on).
async fn store_decision(store: &Store, session_id: &str, message: &ChatMessage) {
    if let Err(e) = store.insert_approval(session_id, message).await {
        tracing::error!(session = %session_id, error = %e, "approval not stored");
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Removes a waiting approval that was not decided when its wait ends early (the reply stopped
/// or failed while it waited): it is then `cancelled`.
struct Waiting<'a> {
    approvals: &'a Approvals,
    hub: &'a Hub,
    id: String,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(pending) = self.approvals.take(&self.id) {
            // A drop cannot wait for the write: the cancellation is stored in the background.
            let message = self.approvals.decided(
                self.hub,
                &pending.request,
                ApprovalDecision::Cancelled,
                None,
                None,
            );
            let store = self.approvals.store.clone();
            let session_id = self.hub.session_id.clone();
            tokio::spawn(async move { store_decision(&store, &session_id, &message).await });
        }
    }
}

impl Approvals {
    /// No approvals yet; decisions are stored in `store`.
    pub fn new(store: Store) -> Self {
        Self {
            state: Arc::default(),
            store,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, id: &str) -> Option<Pending> {
        let mut state = self.lock();
        let pending = state.pending.remove(id)?;
        state.remember_answered(id.to_owned(), pending.session_id.clone());
        Some(pending)
    }

    /// Whether the session granted this definition for the rest of the session.
    async fn granted(&self, session_id: &str, definition_key: &str) -> bool {
        match self.store.settings(session_id).await {
            Ok(settings) => settings.granted.iter().any(|k| k == definition_key),
            Err(e) => {
                tracing::error!(session = session_id, error = %e, "grants not read; asking");
                false
            }
        }
    }

    /// Keeps a session's grant of a definition.
    async fn grant(&self, session_id: &str, definition_key: &str) {
        let stored = self
            .store
            .update_settings(session_id, |s| {
                if !s.granted.iter().any(|k| k == definition_key) {
                    s.granted.push(definition_key.to_owned());
                }
                Ok::<_, StorageError>(())
            })
            .await;
        if let Err(e) = stored {
            tracing::error!(session = session_id, error = %e, "grant not stored");
        }
    }

    /// The approvals waiting in a session, oldest first (a snapshot carries them).
    pub fn pending(&self, session_id: &str) -> Vec<ApprovalRequest> {
        let mut out: Vec<ApprovalRequest> = self
            .lock()
            .pending
            .values()
            .filter(|p| p.session_id == session_id)
            .map(|p| p.request.clone())
            .collect();
        out.sort_by_key(|r| r.expires_at);
        out
    }

    /// Asks the session's users about `call` of `subject`, made by reply `message_id`, and waits
    /// for the answer: a granted definition is allowed at once; no answer within `timeout` is
    /// `timed_out`. Dropping the future (the reply ended) cancels the approval.
    pub async fn ask(
        &self,
        hub: &Hub,
        message_id: &str,
        call: &ToolCall,
        subject: &Subject,
        timeout: Duration,
    ) -> Answer {
        if self.granted(&hub.session_id, &subject.definition_key).await {
            return (ApprovalDecision::AllowSession, None);
        }
        let id = format!("apr_{}", uuid::Uuid::new_v4().simple());
        let arguments = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
        let request = ApprovalRequest {
            message_id: message_id.to_owned(),
            approval_id: id.clone(),
            server: subject.server.clone(),
            tool: subject.tool.clone(),
            title: subject.title.clone(),
            description: subject.description.clone(),
            arguments,
            annotations: subject.annotations.clone(),
            tokens: subject.tokens,
            expires_at: now_ms() + timeout.as_millis() as i64,
        };
        let (tx, rx) = oneshot::channel();
        self.lock().pending.insert(
            id.clone(),
            Pending {
                session_id: hub.session_id.clone(),
                request: request.clone(),
                answer: tx,
            },
        );
        let mut waiting = Waiting {
            approvals: self,
            hub,
            id: id.clone(),
            done: false,
        };
        hub.publish(ServerEvent::ApprovalRequest(request.clone()));
        tracing::info!(session = %hub.session_id, approval = %id, server = %subject.server, tool = %subject.tool, "tool call waits for approval");
        let answer = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer,
            // Nobody answered in time (or the session was deleted meanwhile): a denial. An answer
            // racing the deadline finds nothing waiting.
            Ok(Err(_)) | Err(_) => {
                self.take(&id);
                (ApprovalDecision::TimedOut, None)
            }
        };
        waiting.done = true;
        if answer.0 == ApprovalDecision::AllowSession {
            self.grant(&hub.session_id, &subject.definition_key).await;
        }
        let message = self.decided(hub, &request, answer.0, answer.1.clone(), Some(&call.id));
        // Stored before the turn goes on: once the reply is done, its history has the decision.
        // In a task of its own, so a stop that drops this wait meanwhile does not cut the write.
        let (store, session_id) = (self.store.clone(), hub.session_id.clone());
        let _ =
            tokio::spawn(async move { store_decision(&store, &session_id, &message).await }).await;
        answer
    }

    /// Tells every tab a decision and returns the `approval` message that records it, for the
    /// caller to store with [`store_decision`].
    fn decided(
        &self,
        hub: &Hub,
        request: &ApprovalRequest,
        decision: ApprovalDecision,
        reason: Option<String>,
        call_id: Option<&str>,
    ) -> ChatMessage {
        tracing::info!(session = %hub.session_id, approval = %request.approval_id, %decision, "approval decided");
        let record = ToolCallApproval {
            approval_id: request.approval_id.clone(),
            message_id: request.message_id.clone(),
            call_id: call_id.unwrap_or_default().to_owned(),
            server: request.server.clone(),
            tool: request.tool.clone(),
            arguments: request.arguments.to_string(),
            decision,
            reason,
        };
        // Its content is the line the history shows ("Denied: demo.add_note (not today)").
        let content = format!(
            "{}: {}.{}{}",
            decision.in_words(),
            record.server,
            record.tool,
            record
                .reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
        let message = ChatMessage {
            id: uuid::Uuid::new_v4().simple().to_string(),
            role: Role::Approval,
            content,
            status: MessageStatus::Complete,
            created_at: now_ms(),
            reply_to: Some(request.message_id.clone()),
            approvals: vec![record],
            ..ChatMessage::default()
        };
        hub.publish(ServerEvent::Approval(ApprovalDecided {
            approval_id: request.approval_id.clone(),
            message_id: request.message_id.clone(),
            decision,
            message: message.clone(),
        }));
        message
    }

    /// The user's answer to approval `id` of session `session_id`: the first answer wins.
    pub fn answer(
        &self,
        session_id: &str,
        id: &str,
        decision: ApprovalDecision,
        reason: Option<String>,
    ) -> Result<(), ApprovalError> {
        if !decision.is_users() {
            return Err(ApprovalError::NotUsers(decision));
        }
        let reason = reason.filter(|r| !r.trim().is_empty());
        if reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON)
        {
            return Err(ApprovalError::ReasonTooLong);
        }
        let mut state = self.lock();
        match state.pending.get(id) {
            Some(p) if p.session_id == session_id => {}
            _ => {
                return Err(match state.answered.get(id) {
                    Some(s) if s == session_id => ApprovalError::Answered(id.to_owned()),
                    _ => ApprovalError::NotFound(id.to_owned()),
                });
            }
        }
        let Some(pending) = state.pending.remove(id) else {
            return Err(ApprovalError::NotFound(id.to_owned()));
        };
        state.remember_answered(id.to_owned(), session_id.to_owned());
        drop(state);
        // The waiting turn tells every tab and stores it.
        let _ = pending.answer.send((decision, reason));
        Ok(())
    }
}

/// What the model reads for a call that did not run.
pub fn not_run_text(decision: ApprovalDecision, reason: Option<&str>, timeout: Duration) -> String {
    match decision {
        ApprovalDecision::Deny => match reason {
            Some(r) => format!(
                "The user denied this call and said why (their words, as data): <reason>{}</reason>",
                glassbox_core::vocab::escape_tags(r)
            ),
            None => "The user denied this call.".to_owned(),
        },
        ApprovalDecision::TimedOut => format!(
            "The user did not answer within {} s; the call did not run.",
            timeout.as_secs()
        ),
        ApprovalDecision::Cancelled => {
            "The reply ended before the user answered; the call did not run.".to_owned()
        }
        ApprovalDecision::Allow | ApprovalDecision::AllowSession => String::new(),
    }
}
