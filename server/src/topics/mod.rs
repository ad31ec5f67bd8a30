//! Topics and the topic filter on the server: which history a turn sends ([`history_filter`]:
//! a selected topic's members, and the other messages scored against its label and its members'
//! centroid with vectors from the embedding cache; scoring and choices in `core`), the filter's
//! view for the panel, and extraction after each reply ([`extract`]), which carries the filter to
//! the regenerated topics.

pub mod commands;
pub mod extract;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use glassbox_analysis::topic_follow::centroid;
use glassbox_core::context::selection::{Candidate, Choice, Kept, select, topic_scores};
use glassbox_core::context::topics::Renamed;
use glassbox_core::context::{
    FilterNote, FilterView, Score, SessionSettings, SessionTopics, Topic, TopicSettings,
};
use glassbox_core::wire::{ChatMessage, ServerEvent};

use crate::budgets::BudgetError;
use crate::calls::Calls;
use crate::config::Config;
use crate::embed::labels::LabelVectors;
use crate::embed::service::{EmbedServiceError, EmbeddingService};
use crate::embed::service::{EmbedStatus, Urgency, message_cache_key};
use crate::hub::{Hub, Hubs};
use crate::rate_limits::{RateLimited, RateLimits};
use crate::storage::{StorageError, Store};
use crate::wire_error::ToWire;

/// Most history messages scored against a filter (the newest); older ones have no score and are
/// left out while a filter applies, so a turn's cost stays bounded as sessions grow.
pub const MAX_SCORED: usize = 2_000;
/// Characters of a message that go into its embedding (the model reads 256 tokens at most).
const EMBED_CHARS: usize = 2_000;
/// Messages per step of [`message_vectors`]: the session's gate is taken per step, so another
/// request of the session (a turn's filter, a new tab's view) waits one step at most.
const WARM_STEP: usize = 256;

/// Topics, the filter and extraction over the sessions' stored messages.
#[derive(Clone)]
pub struct Topics {
    config: Arc<Config>,
    store: Store,
    embeddings: Arc<EmbeddingService>,
    hubs: Arc<Hubs>,
    limits: Arc<RateLimits>,
    /// The topic model's calls, within the session's budget.
    calls: Calls,
}

impl Topics {
    /// The topics of the sessions in `store`; `hubs` tells their tabs.
    pub fn new(
        config: Arc<Config>,
        store: Store,
        embeddings: Arc<EmbeddingService>,
        hubs: Arc<Hubs>,
        limits: Arc<RateLimits>,
        calls: Calls,
    ) -> Self {
        Self {
            config,
            store,
            embeddings,
            hubs,
            limits,
            calls,
        }
    }
}

/// Why a topic command or extraction failed.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("{0}")]
    Filter(#[from] glassbox_core::context::topics::FilterError),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    #[error(transparent)]
    Embed(#[from] EmbedServiceError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error("storage failed")]
    Storage(#[from] StorageError),
    /// A bug; details go to the log only.
    #[error("{0}")]
    Internal(String),
}

impl ToWire for TopicError {
    fn code(&self) -> glassbox_core::ErrorCode {
        use glassbox_core::ErrorCode;
        match self {
            TopicError::Filter(_) => ErrorCode::InvalidFilter,
            TopicError::NotFound(_) => ErrorCode::NotFound,
            TopicError::RateLimited(e) => e.code(),
            TopicError::Embed(e) => e.code(),
            TopicError::Budget(e) => e.code(),
            TopicError::Storage(e) => e.code(),
            TopicError::Internal(_) => ErrorCode::Internal,
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            TopicError::RateLimited(e) => e.retry_after(),
            TopicError::Budget(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// A turn's history selection: one choice per candidate, the receipt's filter note, the panel's view.
#[derive(Debug, Clone)]
pub struct HistoryFilter {
    pub choices: Vec<Choice>,
    pub note: Option<FilterNote>,
    pub view: FilterView,
}

/// A message as the embedding cache takes it: its key (`{id}:{hash of the whole text}`) and the
/// text that is embedded (the first 2,000 characters; the model reads 256 tokens at most).
pub fn message_embed_item(m: &ChatMessage) -> (String, String) {
    (
        message_cache_key(&m.id, &m.content),
        m.content.chars().take(EMBED_CHARS).collect(),
    )
}

impl Topics {
    /// Decides which of `candidates` (stored messages that reach the model, oldest first, without the
    /// message being answered) go, under the session's filter, marks and sticky topic: a selected
    /// topic's members go, and the messages whose score clears the threshold. When the filter cannot
    /// apply (similarity mode off, no current label, embeddings unavailable or failing) every message
    /// goes, except excluded ones.
    pub async fn history_filter(
        &self,
        session_id: &str,
        settings: &SessionSettings,
        topics: Option<&SessionTopics>,
        candidates: &[ChatMessage],
    ) -> HistoryFilter {
        let t = &settings.topics;
        let mode = t.similarity_mode.unwrap_or(self.config.embedding_search);
        let threshold = t.threshold_or(Some(self.config.similarity_threshold));
        let (labels, orphaned): (Vec<String>, Vec<String>) = t
            .filter
            .iter()
            .cloned()
            .partition(|l| topics.is_some_and(|s| s.has(l)));
        let selected: Vec<&Topic> = topics
            .map(|s| {
                s.topics
                    .iter()
                    .filter(|t| labels.contains(&t.label))
                    .collect()
            })
            .unwrap_or_default();
        let members: HashSet<&str> = selected
            .iter()
            .flat_map(|t| t.message_ids.iter().map(String::as_str))
            .collect();
        // Messages the other topics hold: they go with their own bubbles, not by similarity.
        let elsewhere: HashSet<&str> = topics
            .into_iter()
            .flat_map(|s| &s.topics)
            .filter(|t| !labels.contains(&t.label))
            .flat_map(|t| t.message_ids.iter().map(String::as_str))
            .collect();
        let available = matches!(self.embeddings.status(), EmbedStatus::Ready { .. });
        let mut scores = vec![None; candidates.len()];
        let mut active = mode && available && !labels.is_empty();
        if active {
            match self.score(session_id, &selected, candidates).await {
                Ok(s) => scores = s,
                Err(e) => {
                    tracing::warn!(error = %e, "topic filter not applied: scoring failed");
                    active = false;
                }
            }
        }
        let sticky: HashSet<&str> = topics
            .map(|s| s.sticky_ids.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let list: Vec<Candidate> = candidates
            .iter()
            .zip(&scores)
            .map(|(m, score)| Candidate {
                mark: m.mark,
                sticky: sticky.contains(m.id.as_str()),
                score: *score,
                member: members.contains(m.id.as_str()),
                elsewhere: elsewhere.contains(m.id.as_str()),
            })
            .collect();
        let choices = select(&list, active.then_some(threshold));
        let view = FilterView {
            labels: labels.clone(),
            orphaned,
            renamed: Vec::new(),
            similarity_mode: mode,
            threshold,
            available,
            message_ids: candidates
                .iter()
                .zip(&choices)
                .filter(|(_, c)| c.is_kept())
                .map(|(m, _)| m.id.clone())
                .collect(),
            total: candidates.len() as u32,
            fallback: choices
                .iter()
                .any(|c| matches!(c, Choice::Kept(Kept::Fallback(_)))),
        };
        HistoryFilter {
            choices,
            note: active.then(|| FilterNote {
                labels,
                threshold: Score::of(threshold),
            }),
            view,
        }
    }

    /// Each candidate's best cosine over the selected topics' label vectors and their members'
    /// centroids (cached vectors read, missing computed): a message about the subject scores against
    /// what the topic's messages say, not only against its two-word label.
    async fn score(
        &self,
        session_id: &str,
        selected: &[&Topic],
        candidates: &[ChatMessage],
    ) -> Result<Vec<Option<f32>>, TopicError> {
        let hub = self.hubs.get(session_id);
        let labels: Vec<String> = selected.iter().map(|t| t.label.clone()).collect();
        let mut anchors = self
            .label_vectors(hub.as_ref().map(|h| &h.labels), &labels)
            .await?;
        let first = candidates.len().saturating_sub(MAX_SCORED);
        let recent = &candidates[first..];
        let message_vectors = self
            .message_vectors(session_id, recent, Urgency::Now)
            .await?;
        let by_id: HashMap<&str, &[f32]> = recent
            .iter()
            .zip(&message_vectors)
            .map(|(m, v)| (m.id.as_str(), &v[..]))
            .collect();
        anchors.extend(
            selected
                .iter()
                .filter_map(|t| centroid(&t.message_ids, &|id: &str| by_id.get(id).copied())),
        );
        let refs: Vec<Option<&[f32]>> = std::iter::repeat_n(None, first)
            .chain(message_vectors.iter().map(|v| Some(&v[..])))
            .collect();
        Ok(topic_scores(&refs, &anchors))
    }

    /// Each label's vector: kept ones from `kept`, the others embedded now (and kept; when another
    /// caller kept one meanwhile, that one is used).
    async fn label_vectors(
        &self,
        kept: Option<&LabelVectors>,
        labels: &[String],
    ) -> Result<Vec<Vec<f32>>, TopicError> {
        let mut out: Vec<Option<Arc<[f32]>>> =
            labels.iter().map(|l| kept.and_then(|k| k.get(l))).collect();
        let missing: Vec<usize> = (0..labels.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let texts = missing.iter().map(|&i| labels[i].clone()).collect();
            let computed = self.embeddings.embed(texts).await?;
            for (&i, e) in missing.iter().zip(computed) {
                let v: Arc<[f32]> = Arc::from(e.vector);
                out[i] = Some(match kept {
                    Some(kept) => kept.put(&labels[i], v),
                    None => v,
                });
            }
        }
        out.into_iter()
            .zip(labels)
            .map(|(v, l)| {
                v.map(|v| v.to_vec())
                    .ok_or_else(|| TopicError::Internal(format!("no vector for the label {l:?}")))
            })
            .collect()
    }

    /// The session's stored messages that reach the model, oldest first, as topics and the filter
    /// read them (text, role, status and mark: [`crate::storage::Store::message_texts`]).
    pub async fn model_history(&self, session_id: &str) -> Result<Vec<ChatMessage>, TopicError> {
        Ok(self
            .store
            .message_texts(session_id)
            .await?
            .into_iter()
            .filter(ChatMessage::reaches_model)
            .collect())
    }
}

/// Messages per read of [`model_history_in_pages`].
const HISTORY_PAGE: i64 = 64;

impl Topics {
    /// The newest `most` messages of [`model_history`] (oldest first), for work nobody waits for:
    /// read from the newest end a page at a time, each after the turns starting meanwhile
    /// ([`crate::background::after_turns_start`]), so a turn that arrives during the read shares the
    /// database and the cores with one page of it at most.
    pub async fn model_history_in_pages(
        &self,
        session_id: &str,
        most: usize,
    ) -> Result<Vec<ChatMessage>, TopicError> {
        let mut newest_first = Vec::new();
        let mut before = i64::MAX;
        while newest_first.len() < most {
            crate::background::after_turns_start().await;
            let page = self
                .store
                .message_texts_before(session_id, before, HISTORY_PAGE)
                .await?;
            let last_page = (page.len() as i64) < HISTORY_PAGE;
            if let Some((seq, _)) = page.last() {
                before = *seq;
            }
            newest_first.extend(
                page.into_iter()
                    .map(|(_, m)| m)
                    .filter(ChatMessage::reaches_model),
            );
            if last_page {
                break;
            }
        }
        newest_first.truncate(most);
        newest_first.reverse();
        Ok(newest_first)
    }

    /// Whether the session's topic settings select history (a label chosen, similarity mode on);
    /// whether the labels still exist and embeddings work is for [`history_filter`] to see.
    fn filter_may_apply(&self, t: &TopicSettings) -> bool {
        !t.filter.is_empty() && t.similarity_mode.unwrap_or(self.config.embedding_search)
    }

    /// The vectors of a session's messages, in order: from memory or the database, the missing ones
    /// computed (and cached) a step at a time. Refused once the session is deleted (its vectors would
    /// outlive it): a step is stored under the session's gate, which deleting takes too.
    ///
    /// - [`Urgency::Now`] (a turn's filter, a command): a whole step under the gate, so a request
    ///   waits for another request's step under way rather than computing it twice.
    /// - [`Urgency::Background`] (extraction computing ahead): looked up and computed outside the
    ///   gate, on the low-priority thread, which takes the gate only to store. A request never waits
    ///   for this work: it computes what it needs itself, so the vectors of a step under way may be
    ///   computed twice. The lookup and the store wait for turns that are starting
    ///   ([`crate::background::after_turns_start`]).
    pub async fn message_vectors(
        &self,
        session_id: &str,
        messages: &[ChatMessage],
        urgency: Urgency,
    ) -> Result<Vec<Arc<[f32]>>, TopicError> {
        let gate = session_gate(session_id);
        let embeddings = &self.embeddings;
        let mut out = Vec::with_capacity(messages.len());
        for step in messages.chunks(WARM_STEP) {
            let items = step.iter().map(message_embed_item).collect();
            let vectors = match urgency {
                Urgency::Now => {
                    let _one_at_a_time = gate.lock().await;
                    self.still_there(session_id).await?;
                    embeddings.embed_cached(&self.store, items).await?
                }
                Urgency::Background => {
                    crate::background::after_turns_start().await;
                    let lookup = embeddings.look_up(&self.store, items).await?;
                    let fresh = embeddings.compute(&lookup, Urgency::Background).await?;
                    crate::background::after_turns_start().await;
                    let _store_alone = gate.lock().await;
                    self.still_there(session_id).await?;
                    embeddings.complete(&self.store, lookup, fresh).await?
                }
            };
            out.extend(vectors);
        }
        Ok(out)
    }

    /// Refuses to store vectors for a deleted session (called under its gate).
    async fn still_there(&self, session_id: &str) -> Result<(), TopicError> {
        match self.store.session(session_id).await? {
            Some(_) => Ok(()),
            None => Err(TopicError::NotFound("session")),
        }
    }
}

/// One async lock per session, made when asked for; an entry goes once nobody holds its lock.
pub(crate) struct SessionLocks(
    std::sync::OnceLock<std::sync::Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>>,
);

impl SessionLocks {
    pub(crate) const fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    /// The session's lock.
    pub(crate) fn of(&self, session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .0
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(lock) = locks.get(session_id).and_then(Weak::upgrade) {
            return lock;
        }
        // Only sessions at work right now have live locks: few.
        locks.retain(|_, l| l.strong_count() > 0);
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        locks.insert(session_id.to_owned(), Arc::downgrade(&lock));
        lock
    }
}

/// The session's lock for [`message_vectors`].
pub(crate) fn session_gate(session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
    static GATES: SessionLocks = SessionLocks::new();
    GATES.of(session_id)
}

impl Topics {
    /// Computes ahead the vectors a filter scores (the newest [`MAX_SCORED`] messages of `history`)
    /// that no cache holds yet. Extraction calls it after each reply, so a session that grew faster
    /// than extractions ran (or was imported) is embedded in the background rather than by the first
    /// filter; nothing when embeddings are unavailable.
    pub async fn warm_vectors(
        &self,
        session_id: &str,
        history: &[ChatMessage],
        urgency: Urgency,
    ) -> Result<(), TopicError> {
        if !matches!(self.embeddings.status(), EmbedStatus::Ready { .. }) {
            return Ok(());
        }
        let first = history.len().saturating_sub(MAX_SCORED);
        self.message_vectors(session_id, &history[first..], urgency)
            .await?;
        Ok(())
    }

    /// Computes ahead, on the low-priority thread, the vectors of a reply and of the message it
    /// answers (the session's newest two) when the session's filter applies, so the next turn scores
    /// them without embedding (extraction would, but only once the conversation pauses).
    pub fn warm_reply(self, session_id: String) {
        tokio::spawn(async move {
            let warmed = async {
                crate::background::after_turns_start().await;
                let t = self.store.settings(&session_id).await?.topics;
                if !self.filter_may_apply(&t) {
                    return Ok(());
                }
                let newest = self.model_history_in_pages(&session_id, 2).await?;
                self.warm_vectors(&session_id, &newest, Urgency::Background)
                    .await
            };
            if let Err(e) = warmed.await {
                tracing::debug!(session = %session_id, error = %e, "reply's vectors not computed ahead");
            }
        });
    }

    /// The filter's view of the whole stored history (outside a turn: after a change).
    pub async fn current_view(&self, session_id: &str) -> Result<FilterView, TopicError> {
        let (settings, topics) = self.store.settings_and_topics(session_id).await?;
        let history = self.model_history(session_id).await?;
        Ok(self
            .history_filter(session_id, &settings, topics.as_ref(), &history)
            .await
            .view)
    }

    /// Computes the vectors a filter that applies will score, before the view lock is taken: the
    /// session's other commands and new tabs then wait for the lock only while a view is read, not
    /// while the model embeds (failures are logged; scoring under the lock tries again, and falls
    /// back to the whole history). `urgency`: who waits for the view.
    pub async fn warm_before_view(
        &self,
        session_id: &str,
        urgency: Urgency,
    ) -> Result<(), TopicError> {
        let t = self.store.settings(session_id).await?.topics;
        if !self.filter_may_apply(&t) {
            return Ok(());
        }
        let history = match urgency {
            Urgency::Now => self.model_history(session_id).await?,
            Urgency::Background => self.model_history_in_pages(session_id, MAX_SCORED).await?,
        };
        if let Err(e) = self.warm_vectors(session_id, &history, urgency).await {
            tracing::warn!(session = session_id, error = %e, "vectors not computed ahead");
        }
        Ok(())
    }

    /// Tells every tab of the session the filter's view (read under the hub's view lock, so tabs get
    /// views in the order of the state they show; vectors computed first, outside the lock, as
    /// `urgency` says: [`Urgency::Now`] for a command, [`Urgency::Background`] for extraction), with
    /// the selected topics the extraction before it `renamed`.
    pub async fn publish_view(
        &self,
        hub: &Hub,
        urgency: Urgency,
        renamed: Vec<Renamed>,
    ) -> Result<FilterView, TopicError> {
        self.warm_before_view(&hub.session_id, urgency).await?;
        if urgency == Urgency::Background {
            crate::background::after_turns_start().await;
        }
        let _order = hub.view_lock.lock().await;
        let mut view = self.current_view(&hub.session_id).await?;
        view.renamed = renamed;
        hub.publish(ServerEvent::Filter(view.clone()));
        Ok(view)
    }
}
