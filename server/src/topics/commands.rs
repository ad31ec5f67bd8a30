//! The topic commands, shared by the WebSocket frames, the REST routes and the element's methods:
//! `set_filter`, `get_topics`, `set_similarity_mode`, and marking a message pinned or excluded.
//! Each change is stored in the session's settings record (or on the message) and every tab of the
//! session hears the filter's new view. Each command reads the session's history, so a session may
//! send `GLASSBOX_LIMIT_COMMANDS_PER_MINUTE` of them (with its settings and context changes).

use glassbox_core::context::topics::{check_filter, check_threshold};
use glassbox_core::context::{FilterView, MessageMark, SessionTopics, TopicSettings};
use glassbox_core::wire::{MarkMessage, ServerEvent, SetSimilarityMode};

use super::{TopicError, Topics};
use crate::embed::service::{EmbedStatus, Urgency};
use crate::hub::Hub;

impl Topics {
    /// Selects topics by label (empty clears the filter). Refused when a label is neither one of the
    /// session's topics nor selected already (a vanished topic the user has not cleared yet), and,
    /// when it selects a topic not selected yet, while embeddings are unavailable: the whole history
    /// would go anyway, so the filter could not do what it says.
    pub async fn set_filter(&self, hub: &Hub, labels: &[String]) -> Result<FilterView, TopicError> {
        self.limits.command(&hub.session_id).await?;
        let topics = self
            .store
            .topics(&hub.session_id)
            .await?
            .unwrap_or_default();
        let selected = self.store.settings(&hub.session_id).await?.topics.filter;
        let labels = check_filter(labels, &topics, &selected)?;
        // Clearing what is selected (a vanished topic's chip among them) needs no embeddings.
        let adds = labels.iter().any(|l| !selected.contains(l));
        if adds && !matches!(self.embeddings.status(), EmbedStatus::Ready { .. }) {
            return Err(TopicError::Embed(
                crate::embed::service::EmbedServiceError::Unavailable(
                    "topic filters need the embedding model; the whole history goes".into(),
                ),
            ));
        }
        self.change_topic_settings(hub, |t| {
            t.filter = labels;
            t.filter_generation = topics.generation;
        })
        .await
    }

    /// Changes the session's topic settings and tells every tab the filter's new view.
    async fn change_topic_settings(
        &self,
        hub: &Hub,
        change: impl FnOnce(&mut TopicSettings),
    ) -> Result<FilterView, TopicError> {
        self.store
            .update_settings(&hub.session_id, |s| {
                change(&mut s.topics);
                Ok::<_, TopicError>(())
            })
            .await?;
        self.publish_view(hub, Urgency::Now, Vec::new()).await
    }

    /// Switches similarity mode for the session (off: the bubbles are visual only) and, when given,
    /// sets the session's similarity threshold (refused outside 0–1) or, given `null`, returns it to
    /// the server's.
    pub async fn set_similarity_mode(
        &self,
        hub: &Hub,
        args: &SetSimilarityMode,
    ) -> Result<FilterView, TopicError> {
        self.limits.command(&hub.session_id).await?;
        let threshold = match args.threshold {
            Some(t) => Some(t.map(check_threshold).transpose()?),
            None => None,
        };
        self.change_topic_settings(hub, |t| {
            t.similarity_mode = Some(args.enabled);
            if let Some(threshold) = threshold {
                t.threshold = threshold;
            }
        })
        .await
    }

    /// Pins or excludes a message (or clears its mark).
    pub async fn mark_message(
        &self,
        hub: &Hub,
        message_id: &str,
        mark: Option<MessageMark>,
    ) -> Result<FilterView, TopicError> {
        self.limits.command(&hub.session_id).await?;
        if !self
            .store
            .set_mark(&hub.session_id, message_id, mark)
            .await?
        {
            return Err(TopicError::NotFound("message"));
        }
        hub.publish(ServerEvent::Mark(MarkMessage {
            message_id: message_id.to_owned(),
            mark,
        }));
        self.publish_view(hub, Urgency::Now, Vec::new()).await
    }

    /// The session's topics (empty before the first extraction) and the filter's view, asked for.
    pub async fn get_topics(
        &self,
        session_id: &str,
    ) -> Result<(SessionTopics, FilterView), TopicError> {
        self.limits.command(session_id).await?;
        self.topics_and_view(session_id).await
    }

    /// The session's topics and the filter's view (what a new tab gets with its history).
    pub async fn topics_and_view(
        &self,
        session_id: &str,
    ) -> Result<(SessionTopics, FilterView), TopicError> {
        let topics = self.store.topics(session_id).await?.unwrap_or_default();
        let view = self.current_view(session_id).await?;
        Ok((topics, view))
    }
}
