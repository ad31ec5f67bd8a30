//! Topic extraction after each reply, in the background: it never delays the reply or the next
//! message. It starts once the conversation pauses (1.5 s after a reply by default,
//! `GLASSBOX_TOPICS_SETTLE_MS`). Its heavy work (embedding the messages and the candidate labels,
//! clustering) runs on the low-priority thread of [`crate::background`], outside any lock a
//! request takes, so a message sent meanwhile gets the cores first and waits for nothing of it;
//! its other steps (reads, writes) wait while a turn is starting. Topics are regenerated whole
//! from the conversation, stored with a generation number (only a newer extraction may
//! overwrite), and pushed to the session's tabs with the filter's view.
//!
//! Topics hold still across regenerations (`analysis::topic_follow`): each topic carries its
//! members (message ids); a group found again keeps its label unless a new one names it clearly
//! better; and the session's filter is carried to the topics that hold the selected topics'
//! messages, the view saying which were renamed. A topic model's topics get their members from the
//! embeddings (each exchange under the closest label), so their counts are what a filter sends.
//!
//! With a topic model (`GLASSBOX_TOPIC_MODEL`, the reply model by default): one call with a strict
//! JSON schema. An answer that is not usable (invalid or partial JSON, no topic) keeps the previous
//! topics; a call that fails (timeout, provider error, budget) falls back to offline extraction:
//! embeddings, clustering and key phrases (`analysis::topic_extract`), which is also what runs
//! without a topic model (the offline provider, the demo).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use glassbox_analysis::topic_extract::{
    ExtractMessage, Extracted, extract_offline, label_by_meaning,
};
use glassbox_analysis::topic_follow::{
    carry_filter, centroid, keep_labels, label_score, members_by_label, successors,
};
use glassbox_core::context::topics::{
    EXTRACTION_PROMPT, Renamed, TopicAnswerError, TopicSource, extraction_schema,
    extraction_transcript, parse_model_topics,
};
use glassbox_core::context::{SessionTopics, TopicSettings};
use glassbox_core::prompt::{PromptMessage, ProviderRequest, ResponseSchema};
use glassbox_core::vocab::Role;
use glassbox_core::wire::{ChatMessage, ServerEvent};
use tokio::sync::Semaphore;

use super::{TopicError, Topics};
use crate::calls::CallFailure;
use crate::embed::service::{MAX_INPUTS, Urgency};

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

impl Topics {
    /// Starts an extraction for the session once the conversation settled (1.5 s from now by
    /// default); its generation is taken now, so a later start wins over this one whatever order
    /// they finish in, and an older one still waiting is skipped (no model call spent on a
    /// conversation a newer extraction reads whole).
    pub fn spawn_extraction(self, session_id: String) {
        let generation = next_generation();
        started()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session_id.clone(), generation);
        tokio::spawn(async move {
            // Topics follow the conversation when it pauses: a message sent right after a reply is
            // never slowed by this one's work, and a burst of replies is extracted once.
            tokio::time::sleep(self.config.topics_settle).await;
            match self.extract(&session_id, generation).await {
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
    pub async fn extract(&self, session_id: &str, generation: u64) -> Result<bool, TopicError> {
        // One extraction of a session at a time (taken before a permit, so a waiting one holds none):
        // each reads the topics the one before stored, and carries the filter from them.
        static EXTRACTING: super::SessionLocks = super::SessionLocks::new();
        let one_at_a_time = EXTRACTING.of(session_id);
        let _alone = one_at_a_time.lock().await;
        // The semaphore is never closed, so a permit always comes.
        let _permit = permits().clone().acquire_owned().await.ok();
        // A newer extraction of this session is waiting: it will read everything this one would.
        if newest(session_id).is_some_and(|n| n > generation) {
            return Ok(false);
        }
        // Each step at normal priority (reads, writes, lookups) first lets turns that are starting
        // reach their first token.
        let whole = self
            .model_history_in_pages(session_id, super::MAX_SCORED)
            .await?;
        let first = whole.len().saturating_sub(MAX_MESSAGES);
        let history = &whole[first..];
        crate::background::after_turns_start().await;
        let before = self.store.topics(session_id).await?.unwrap_or_default();
        // The messages' vectors (cached, the missing computed): offline extraction groups by them, a
        // topic model's topics get their members by them, and the filter follows its topics by them.
        let vectors = self.history_vectors(session_id, history).await;
        let embedded = vectors.len() == history.len();
        let by_id: HashMap<&str, &[f32]> = history
            .iter()
            .zip(&vectors)
            .map(|(m, v)| (m.id.as_str(), &v[..]))
            .collect();
        let (mut topics, mut label_vectors) = match &self.config.topic_model {
            None => self.offline(history, &vectors).await?,
            Some(model) => match self.topics_from_model(session_id, model, history).await {
                Ok(t) => self.with_members(t, history, &vectors).await,
                // The model answered, but not usably: the previous topics stay.
                Err(ModelTopicsError::Answer(e)) => {
                    self.publish(session_id, Vec::new()).await?;
                    return Err(TopicError::Internal(format!(
                        "topic model answer not used: {e}"
                    )));
                }
                // No answer at all (timeout, provider error, budget): topics from the embeddings.
                Err(e) => {
                    tracing::warn!(session = session_id, error = %e, "topic model failed; extracting offline");
                    self.offline(history, &vectors).await?
                }
            },
        };
        self.settle_labels(session_id, &before, &mut topics, &mut label_vectors, &by_id)
            .await;
        self.keep_label_vectors(session_id, &topics.topics, label_vectors);
        topics.generation = generation;
        topics.message_count = history.len() as u32;
        crate::background::after_turns_start().await;
        let read: HashSet<&str> = history.iter().map(|m| m.id.as_str()).collect();
        // Stored with the filter carried to them, in one transaction.
        let carried = self
            .store
            .put_topics_and_settings(session_id, &topics, |replaced, settings| {
                carry_selection(replaced, &topics, &mut settings.topics, &read, &by_id)
            })
            .await?;
        let written = carried.is_some();
        let renamed = carried.unwrap_or_default();
        if written && let Some(hub) = self.hubs.get(session_id) {
            hub.labels.keep_only(&topics);
        }
        if !renamed.is_empty() {
            tracing::debug!(
                session = session_id,
                ?renamed,
                "the filter followed renamed topics"
            );
        }
        crate::background::after_turns_start().await;
        self.publish(session_id, renamed).await?;
        // The filter scores more messages than extraction reads: they are embedded now, while nobody
        // waits, rather than by the first filter switched on (`whole` is the newest `MAX_SCORED`; the
        // newest `history.len()` have their vectors already). Still under the extraction permit, so
        // two sessions at most do this at once.
        let done = if embedded { history.len() } else { 0 };
        let ahead = &whole[..whole.len() - done];
        if !ahead.is_empty()
            && let Err(e) = self
                .warm_vectors(session_id, ahead, Urgency::Background)
                .await
        {
            tracing::info!(session = session_id, error = %e, "vectors not computed ahead");
        }
        Ok(written)
    }

    /// The vectors of `history`'s messages, computed on the low-priority thread where missing; none
    /// when embeddings are unavailable (topics then come from the text alone, without members).
    async fn history_vectors(&self, session_id: &str, history: &[ChatMessage]) -> Vec<Arc<[f32]>> {
        if history.is_empty() {
            return Vec::new();
        }
        match self
            .message_vectors(session_id, history, Urgency::Background)
            .await
        {
            Ok(v) => v,
            Err(e) => {
                tracing::info!(error = %e, "topics without the messages' vectors");
                Vec::new()
            }
        }
    }
}

/// Carries the session's filter (`settings`) from the topics `after` replaces to `after`: each
/// selected topic to the new topic that holds most of its messages among those extraction `read`
/// (or is nearest by centroid); a selected topic with no successor stays selected, greyed in the
/// panel, until the user clears it. Returns the renamed ones.
///
/// Only a filter that names the replaced topics is carried (its `filter_generation`; 0 for one
/// stored before that was kept): labels that name other topics (the user chose them against topics
/// stored meanwhile) are not mapped by the wrong ones; either way the filter names `after` from
/// then on, and its labels that `after` lacks show as vanished.
fn carry_selection(
    replaced: Option<&SessionTopics>,
    after: &SessionTopics,
    settings: &mut TopicSettings,
    read: &HashSet<&str>,
    by_id: &HashMap<&str, &[f32]>,
) -> Vec<Renamed> {
    if settings.filter.is_empty() {
        return Vec::new();
    }
    let names = settings.filter_generation;
    let mut renamed = Vec::new();
    if let Some(before) = replaced
        && (names == 0 || names == before.generation)
    {
        let successors = successors(before, after, read, |id| by_id.get(id).copied());
        let carried = carry_filter(&settings.filter, &successors);
        settings.filter = carried.labels;
        renamed = carried.renamed;
    }
    settings.filter_generation = after.generation;
    renamed
}

impl Topics {
    /// Gives each group found again its previous label unless the new one is clearly better
    /// (`analysis::topic_follow::keep_labels`), scoring labels by their vectors against the
    /// topics' centroids; the previous labels are embedded here when `label_vectors` lacks them.
    async fn settle_labels(
        &self,
        session_id: &str,
        before: &SessionTopics,
        topics: &mut SessionTopics,
        label_vectors: &mut HashMap<String, Vec<f32>>,
        by_id: &HashMap<&str, &[f32]>,
    ) {
        if before.topics.is_empty() {
            return;
        }
        let centroids: Vec<Option<Vec<f32>>> = topics
            .topics
            .iter()
            .map(|t| centroid(&t.message_ids, &|id: &str| by_id.get(id).copied()))
            .collect();
        if centroids.iter().any(Option::is_some) {
            let missing: Vec<String> = before
                .topics
                .iter()
                .chain(&topics.topics)
                .map(|t| t.label.clone())
                .filter(|l| !label_vectors.contains_key(l))
                .collect();
            // The current labels' vectors are kept with the session's hub.
            let hub = self.hubs.get(session_id);
            let (kept, missing): (Vec<String>, Vec<String>) = missing
                .into_iter()
                .partition(|l| hub.as_ref().is_some_and(|h| h.labels.get(l).is_some()));
            for l in kept {
                if let Some(v) = hub.as_ref().and_then(|h| h.labels.get(&l)) {
                    label_vectors.insert(l, v.to_vec());
                }
            }
            label_vectors.extend(self.embed_phrases(missing).await);
        }
        keep_labels(before, &mut topics.topics, |k, label| {
            label_score(label_vectors.get(label)?, k, &centroids)
        });
    }

    /// Embeds short phrases (labels) on the low-priority thread; none when that fails.
    async fn embed_phrases(&self, mut phrases: Vec<String>) -> HashMap<String, Vec<f32>> {
        let mut seen = std::collections::HashSet::new();
        phrases.retain(|p| seen.insert(p.clone()));
        phrases.truncate(MAX_INPUTS);
        if phrases.is_empty() {
            return HashMap::new();
        }
        match self
            .embeddings
            .embed_with(phrases.clone(), Urgency::Background)
            .await
        {
            Ok(vectors) => phrases
                .into_iter()
                .zip(vectors.into_iter().map(|e| e.vector))
                .collect(),
            Err(e) => {
                tracing::info!(error = %e, "labels not embedded");
                HashMap::new()
            }
        }
    }

    /// A topic model's topics with members: each exchange under the label it is closest to; the
    /// count becomes the members' number (what a filter on it sends), and topics no exchange is
    /// closest to go. Without vectors, or when no exchange is close to any label, the model's counts
    /// stay (without members). Returns the labels' vectors too.
    async fn with_members(
        &self,
        mut topics: SessionTopics,
        history: &[ChatMessage],
        vectors: &[Arc<[f32]>],
    ) -> (SessionTopics, HashMap<String, Vec<f32>>) {
        if vectors.len() != history.len() || history.is_empty() {
            return (topics, HashMap::new());
        }
        let labels: Vec<String> = topics.topics.iter().map(|t| t.label.clone()).collect();
        let label_vectors = self.embed_phrases(labels.clone()).await;
        if label_vectors.is_empty() {
            return (topics, label_vectors);
        }
        let messages: Vec<(&str, bool, Option<&[f32]>)> = history
            .iter()
            .zip(vectors)
            .map(|(m, v)| (m.id.as_str(), m.role == Role::User, Some(&v[..])))
            .collect();
        let anchors: Vec<Option<&[f32]>> = labels
            .iter()
            .map(|l| label_vectors.get(l).map(Vec::as_slice))
            .collect();
        let members = members_by_label(&messages, &topics.sticky_ids, &anchors);
        if members.iter().all(Vec::is_empty) {
            return (topics, label_vectors);
        }
        for (t, ids) in topics.topics.iter_mut().zip(members) {
            t.count = ids.len() as u32;
            t.message_ids = ids;
        }
        topics.topics.retain(|t| t.count > 0);
        topics.topics.sort_by_key(|t| std::cmp::Reverse(t.count));
        (topics, label_vectors)
    }

    /// Tells the session's tabs its stored topics and the filter's view (with the selected topics
    /// this extraction `renamed`).
    async fn publish(&self, session_id: &str, renamed: Vec<Renamed>) -> Result<(), TopicError> {
        if let Some(hub) = self.hubs.get(session_id) {
            if let Some(stored) = self.store.topics(session_id).await? {
                hub.publish(ServerEvent::Topics(stored));
            }
            self.publish_view(&hub, Urgency::Background, renamed)
                .await?;
        }
        Ok(())
    }
}

/// Why the topic model gave no topics.
#[derive(Debug, thiserror::Error)]
enum ModelTopicsError {
    #[error(transparent)]
    Topic(#[from] TopicError),
    #[error(transparent)]
    Budget(#[from] crate::budgets::BudgetError),
    #[error("topic model call failed: {0:?}")]
    Call(CallFailure),
    #[error(transparent)]
    Answer(#[from] TopicAnswerError),
}

/// Most characters of conversation the topic model reads (the newest messages).
const MODEL_TRANSCRIPT_CHARS: usize = 40_000;
/// The answer's token cap.
const MODEL_OUTPUT_TOKENS: u32 = 1_024;

impl Topics {
    /// One call to the topic model with the extraction schema; spends from the session's budget.
    async fn topics_from_model(
        &self,
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
            temperature: None,
            top_p: None,
            response_schema: Some(ResponseSchema {
                name: SCHEMA_NAME.to_owned(),
                schema: extraction_schema(),
            }),
            ..Default::default()
        };
        // Nobody waits for topics, so only the timeouts stop the call.
        let (text, out) = self
            .calls
            .collected(session_id, request, std::future::pending::<()>())
            .await?;
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
}

/// The structured answer's name (OpenAI schema name, Anthropic tool name).
const SCHEMA_NAME: &str = "report_topics";

impl Topics {
    /// Offline extraction over the messages' `vectors` (one per message of `history`, the newest
    /// [`MAX_MESSAGES`]; none when embeddings are unavailable), labels chosen by meaning among each
    /// topic's key phrases; without vectors, from the text alone (one group, key-phrase labels).
    /// Returns the candidate labels' vectors too.
    async fn offline(
        &self,
        history: &[ChatMessage],
        vectors: &[Arc<[f32]>],
    ) -> Result<(SessionTopics, HashMap<String, Vec<f32>>), TopicError> {
        let owned: Vec<(String, glassbox_core::vocab::Role, String)> = history
            .iter()
            .map(|m| (m.id.clone(), m.role, m.content.clone()))
            .collect();
        let vectors = vectors.to_vec();
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
        .map_err(|e| TopicError::Internal(format!("offline topic extraction failed: {e}")))?;
        let label_vectors = self.label_by_meaning_of(&mut found).await;
        let topics = SessionTopics {
            topics: found.topics,
            sticky_ids: found.sticky_ids,
            source: TopicSource::Offline,
            generation: 0,
            message_count: 0,
        };
        Ok((topics, label_vectors))
    }

    /// Keeps the new labels' vectors with the session's hub (when live), so that neither the view
    /// published next nor a turn under a filter embeds them again (a label kept already keeps its
    /// vector).
    fn keep_label_vectors(
        &self,
        session_id: &str,
        topics: &[glassbox_core::context::topics::Topic],
        mut vectors: HashMap<String, Vec<f32>>,
    ) {
        let Some(hub) = self.hubs.get(session_id) else {
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
    async fn label_by_meaning_of(&self, found: &mut Extracted) -> HashMap<String, Vec<f32>> {
        if found.centroids.iter().all(Option::is_none) {
            return HashMap::new();
        }
        // At most 8 topics of 8 candidates: one request (`MAX_INPUTS` is 128).
        let mut phrases: Vec<String> = Vec::new();
        for c in found.candidates.iter().flatten() {
            if !phrases.contains(c) {
                phrases.push(c.clone());
            }
        }
        let by_phrase = self.embed_phrases(phrases).await;
        if by_phrase.is_empty() {
            tracing::info!("topic labels from key phrases alone");
        } else {
            label_by_meaning(found, |c| by_phrase.get(c).map(Vec::as_slice));
        }
        by_phrase
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
