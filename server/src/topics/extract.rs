//! Topic extraction after each reply, in the background: it never delays the reply or the next
//! message. It starts once the conversation pauses (1.5 s after a reply by default,
//! `GLASSBOX_TOPICS_SETTLE_MS`). Its heavy work (embedding the messages and the candidate labels,
//! clustering) runs on the low-priority thread of [`crate::background`], outside any lock a
//! request takes, so a message sent meanwhile gets the cores first and waits for nothing of it;
//! its other steps (reads, writes) wait while a turn is starting. Topics are regenerated whole
//! from the conversation, stored with a generation number (only a newer extraction may
//! overwrite), and pushed to the session's tabs with the filter's view.
//!
//! With a topic model (`GLASSBOX_TOPIC_MODEL`, the reply model by default): one call with a strict
//! JSON schema. An answer that is not usable (invalid or partial JSON, no topic) keeps the previous
//! topics; a call that fails (timeout, provider error, budget) falls back to offline extraction:
//! embeddings, clustering and key phrases (`core::context::topic_extract`), which is also what runs
//! without a topic model (the offline provider, the demo).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use glassbox_core::context::SessionTopics;
use glassbox_core::context::topic_extract::{
    ExtractMessage, Extracted, extract_offline, label_by_meaning,
};
use glassbox_core::context::topics::{
    EXTRACTION_PROMPT, TopicAnswerError, TopicSource, extraction_schema, extraction_transcript,
    parse_model_topics,
};
use glassbox_core::prompt::{PromptMessage, ProviderRequest, ResponseSchema};
use glassbox_core::wire::Role;
use glassbox_core::wire::{ChatMessage, ServerEvent};
use tokio::sync::Semaphore;

use crate::embed::service::{MAX_INPUTS, Urgency};
use crate::error::AppError;
use crate::state::AppState;
use crate::turn::call::{self, CallFailure};

/// Most messages an extraction reads (the newest).
pub const MAX_MESSAGES: usize = 600;
/// Extractions running at once in this process; more wait their turn.
const CONCURRENT: usize = 2;

/// A generation number larger than every one handed out before, in this process and (being based
/// on the clock in microseconds) by earlier runs of the server.
pub fn next_generation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let mut seen = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(seen + 1);
        match LAST.compare_exchange(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(actual) => seen = actual,
        }
    }
}

fn permits() -> &'static Arc<Semaphore> {
    static PERMITS: std::sync::OnceLock<Arc<Semaphore>> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| Arc::new(Semaphore::new(CONCURRENT)))
}

/// The newest generation started per session (entries are dropped once it finished).
fn started() -> &'static std::sync::Mutex<std::collections::HashMap<String, u64>> {
    static STARTED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, u64>>> =
        std::sync::OnceLock::new();
    STARTED.get_or_init(Default::default)
}

fn newest(session_id: &str) -> Option<u64> {
    started()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(session_id)
        .copied()
}

/// Starts an extraction for the session once the conversation settled (1.5 s from now by
/// default); its generation is taken now, so a later start wins over this one whatever order
/// they finish in, and an older one still waiting is skipped (no model call spent on a
/// conversation a newer extraction reads whole).
pub fn spawn(state: AppState, session_id: String) {
    let generation = next_generation();
    started()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(session_id.clone(), generation);
    tokio::spawn(async move {
        // Topics follow the conversation when it pauses: a message sent right after a reply is
        // never slowed by this one's work, and a burst of replies is extracted once.
        tokio::time::sleep(state.config.topics_settle).await;
        match run(&state, &session_id, generation).await {
            Ok(true) => tracing::debug!(session = %session_id, "topics extracted"),
            Ok(false) => {
                tracing::debug!(session = %session_id, "a newer extraction already stored topics")
            }
            Err(e) => {
                tracing::warn!(session = %session_id, error = %e, "topic extraction failed; previous topics kept")
            }
        }
        let mut map = started().lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&session_id) == Some(&generation) {
            map.remove(&session_id);
        }
    });
}

/// Extracts and stores the session's topics as generation `generation`; true when they were
/// written (false: a newer generation is stored). Tells the tabs either way.
pub async fn run(state: &AppState, session_id: &str, generation: u64) -> Result<bool, AppError> {
    // The semaphore is never closed, so a permit always comes.
    let _permit = permits().clone().acquire_owned().await.ok();
    // A newer extraction of this session is waiting: it will read everything this one would.
    if newest(session_id).is_some_and(|n| n > generation) {
        return Ok(false);
    }
    // Each step at normal priority (reads, writes, lookups) first lets turns that are starting
    // reach their first token.
    let whole = super::model_history_in_pages(state, session_id, super::MAX_SCORED).await?;
    let first = whole.len().saturating_sub(MAX_MESSAGES);
    let history = &whole[first..];
    // Whether the newest `history.len()` messages' vectors are computed (offline extraction).
    let (mut topics, embedded) = match &state.config.topic_model {
        None => offline(state, session_id, history).await?,
        Some(model) => match from_model(state, session_id, model, history).await {
            Ok(t) => (t, false),
            // The model answered, but not usably: the previous topics stay.
            Err(ModelTopicsError::Answer(e)) => {
                publish(state, session_id).await?;
                return Err(AppError::Internal(format!(
                    "topic model answer not used: {e}"
                )));
            }
            // No answer at all (timeout, provider error, budget): topics from the embeddings.
            Err(e) => {
                tracing::warn!(session = session_id, error = %e, "topic model failed; extracting offline");
                offline(state, session_id, history).await?
            }
        },
    };
    topics.generation = generation;
    topics.message_count = history.len() as u32;
    // Selected labels that no longer exist stay in the settings but select nothing
    // (`history_filter` reads only current labels), so no write races a newer extraction's.
    crate::background::after_turns_start().await;
    let written = state.store.put_topics(session_id, &topics).await?;
    if written && let Some(hub) = state.hubs.get(session_id) {
        hub.labels.keep_only(&topics);
    }
    crate::background::after_turns_start().await;
    publish(state, session_id).await?;
    // The filter scores more messages than extraction reads (and a topic model embeds none):
    // they are embedded now, while nobody waits, rather than by the first filter switched on
    // (`whole` is the newest `MAX_SCORED`; offline extraction has the newest `history.len()`
    // already). Still under the extraction permit, so two sessions at most do this at once.
    let done = if embedded { history.len() } else { 0 };
    let ahead = &whole[..whole.len() - done];
    if !ahead.is_empty()
        && let Err(e) = super::warm_vectors(state, session_id, ahead, Urgency::Background).await
    {
        tracing::info!(session = session_id, error = %e, "vectors not computed ahead");
    }
    Ok(written)
}

/// Tells the session's tabs its stored topics and the filter's view.
async fn publish(state: &AppState, session_id: &str) -> Result<(), AppError> {
    if let Some(hub) = state.hubs.get(session_id) {
        if let Some(stored) = state.store.topics(session_id).await? {
            hub.publish(ServerEvent::Topics(stored));
        }
        super::publish_view(state, &hub, Urgency::Background).await?;
    }
    Ok(())
}

/// Why the topic model gave no topics.
#[derive(Debug, thiserror::Error)]
enum ModelTopicsError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error("topic model call failed: {0:?}")]
    Call(CallFailure),
    #[error(transparent)]
    Answer(#[from] TopicAnswerError),
}

/// Most characters of conversation the topic model reads (the newest messages).
const MODEL_TRANSCRIPT_CHARS: usize = 40_000;
/// The answer's token cap.
const MODEL_OUTPUT_TOKENS: u32 = 1_024;

/// One call to the topic model with the extraction schema; spends from the session's budget.
async fn from_model(
    state: &AppState,
    session_id: &str,
    model: &str,
    history: &[ChatMessage],
) -> Result<SessionTopics, ModelTopicsError> {
    // The newest messages that fit the transcript's size.
    let mut chars = 0;
    let from = history
        .iter()
        .rposition(|m| {
            chars += m.content.chars().count().min(600) + m.id.len() + 16;
            chars > MODEL_TRANSCRIPT_CHARS
        })
        .map_or(0, |i| i + 1);
    let read = &history[from..];
    let transcript = extraction_transcript(
        read.iter()
            .map(|m| (m.id.as_str(), m.role, m.content.as_str())),
    );
    let request = ProviderRequest {
        model: model.to_owned(),
        system: Some(EXTRACTION_PROMPT.to_owned()),
        messages: vec![PromptMessage::text(Role::User, transcript)],
        max_output_tokens: MODEL_OUTPUT_TOKENS,
        response_schema: Some(ResponseSchema {
            name: SCHEMA_NAME.to_owned(),
            schema: extraction_schema(),
        }),
        ..Default::default()
    };
    // Nobody waits for topics, so only the timeouts stop the call.
    let (text, out) =
        call::call_collected(state, session_id, request, std::future::pending::<()>()).await?;
    let out = out.map_err(ModelTopicsError::Call)?;
    // Anthropic answers through the forced tool; OpenAI-compatible servers in the text.
    let answer = out
        .calls
        .iter()
        .find(|c| c.name == SCHEMA_NAME)
        .map_or(text, |c| c.arguments.clone());
    let users: Vec<(&str, &str)> = read
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.id.as_str(), m.content.as_str()))
        .collect();
    let (topics, sticky_ids) = parse_model_topics(&answer, &users)?;
    Ok(SessionTopics {
        topics,
        sticky_ids,
        source: TopicSource::Model,
        generation: 0,
        message_count: 0,
    })
}

/// The structured answer's name (OpenAI schema name, Anthropic tool name).
const SCHEMA_NAME: &str = "report_topics";

/// Offline extraction over the messages' cached vectors (computed when missing; `history` is the
/// newest [`MAX_MESSAGES`] already), labels chosen by meaning among each topic's key phrases;
/// without embeddings, from the text alone (one group, key-phrase labels). True with the topics
/// when every message's vector was computed.
async fn offline(
    state: &AppState,
    session_id: &str,
    history: &[ChatMessage],
) -> Result<(SessionTopics, bool), AppError> {
    let vectors = if history.is_empty() {
        Vec::new()
    } else {
        match super::message_vectors(state, session_id, history, Urgency::Background).await {
            Ok(v) => v,
            Err(e) => {
                tracing::info!(error = %e, "topics from text alone: no embeddings");
                Vec::new()
            }
        }
    };
    let embedded = vectors.len() == history.len();
    let owned: Vec<(String, glassbox_core::wire::Role, String)> = history
        .iter()
        .map(|m| (m.id.clone(), m.role, m.content.clone()))
        .collect();
    // Clustering is CPU work (quadratic in the exchanges): off the async runtime, on the
    // low-priority background thread, so a turn meanwhile is not slowed.
    let mut found = crate::background::run(move || {
        let input: Vec<ExtractMessage> = owned
            .iter()
            .enumerate()
            .map(|(i, (id, role, text))| ExtractMessage {
                id,
                role: *role,
                text,
                vector: vectors.get(i).map(|v| &v[..]),
            })
            .collect();
        extract_offline(&input)
    })
    .await
    .map_err(|e| AppError::Internal(format!("offline topic extraction failed: {e}")))?;
    let label_vectors = label_by_meaning_of(state, &mut found).await;
    keep_label_vectors(state, session_id, &found.topics, label_vectors);
    let topics = SessionTopics {
        topics: found.topics,
        sticky_ids: found.sticky_ids,
        source: TopicSource::Offline,
        generation: 0,
        message_count: 0,
    };
    Ok((topics, embedded))
}

/// Keeps the new labels' vectors with the session's hub (when live), so that neither the view
/// published next nor a turn under a filter embeds them again (a label kept already keeps its
/// vector).
fn keep_label_vectors(
    state: &AppState,
    session_id: &str,
    topics: &[glassbox_core::context::topics::Topic],
    mut vectors: HashMap<String, Vec<f32>>,
) {
    let Some(hub) = state.hubs.get(session_id) else {
        return;
    };
    for t in topics {
        if let Some(v) = vectors.remove(&t.label) {
            hub.labels.put(&t.label, Arc::from(v));
        }
    }
}

/// Embeds the topics' candidate labels (a few dozen short phrases, not in the embedding cache)
/// and relabels each topic by meaning; when that fails the key-phrase labels stay. Returns the
/// candidates' vectors.
async fn label_by_meaning_of(state: &AppState, found: &mut Extracted) -> HashMap<String, Vec<f32>> {
    if found.centroids.iter().all(Option::is_none) {
        return HashMap::new();
    }
    // At most 8 topics of 8 candidates: one request (`MAX_INPUTS` is 128).
    let mut phrases: Vec<String> = Vec::new();
    for c in found.candidates.iter().flatten() {
        if !phrases.contains(c) && phrases.len() < MAX_INPUTS {
            phrases.push(c.clone());
        }
    }
    if phrases.is_empty() {
        return HashMap::new();
    }
    match state
        .embeddings
        .embed_with(phrases.clone(), Urgency::Background)
        .await
    {
        Ok(vectors) => {
            let by_phrase: HashMap<String, Vec<f32>> = phrases
                .into_iter()
                .zip(vectors.into_iter().map(|e| e.vector))
                .collect();
            label_by_meaning(found, |c| by_phrase.get(c).map(Vec::as_slice));
            by_phrase
        }
        Err(e) => {
            tracing::info!(error = %e, "topic labels from key phrases alone");
            HashMap::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_only_grow() {
        let a = next_generation();
        let b = next_generation();
        assert!(b > a);
    }
}
