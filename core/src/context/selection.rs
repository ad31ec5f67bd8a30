//! Which history reaches the model before compression: the topic filter, standing instructions
//! ("sticky"), and the user's pins and excludes. The steps of docs/topics.md, scores given:
//!
//! 1. sticky messages always go;
//! 2. no filter (or similarity mode off): the whole history, sticky included once;
//! 3. a filter: the messages extraction grouped under a selected topic go (what its bubble
//!    counts); those no topic holds (new since the last extraction, or fitting none) are scored by
//!    their best cosine over the selected topics' label vectors and their members' centroids, those
//!    at or above the threshold kept (a new message about the subject joins before the next
//!    extraction); those another topic holds do not go; when none is a member or clears the
//!    threshold, the whole history goes (fallback); then sticky merged in, in chronological order.
//!
//! Beyond the filter, a pinned message always goes and an excluded one never does (an exclude wins
//! over sticky: it is the user's explicit choice). The server computes the scores from cached
//! vectors ([`topic_scores`]); the plan turns each [`Choice`] into the receipt's reasons.

use serde::{Deserialize, Serialize};

use super::topics::FilterView;
use crate::vector::{dot, normalize};

/// A user's mark on one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MessageMark {
    /// Always sent, whatever the filter and compression.
    Pinned,
    /// Never sent.
    Excluded,
}

/// What selection knows about one history message.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Candidate {
    pub mark: Option<MessageMark>,
    /// A standing instruction ("be concise"), as the topic extraction found.
    pub sticky: bool,
    /// Its best cosine over the selected topics; `None` without a filter or without a vector.
    pub score: Option<f32>,
    /// Extraction grouped it under a selected topic.
    pub member: bool,
    /// Extraction grouped it under a topic that is not selected: however similar, it does not go
    /// (a selected topic sends what its bubble shows, and messages no topic holds yet).
    pub elsewhere: bool,
}

/// Why a message goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kept {
    /// No filter: the whole history goes (compression decides the rest).
    Unfiltered,
    Pinned,
    Sticky,
    /// Extraction grouped it under a selected topic; its score when it has a vector.
    TopicMember(Option<f32>),
    /// It matches a selected topic with this score.
    TopicMatch(f32),
    /// No message matched the filter, so the whole history goes; its best score.
    Fallback(Option<f32>),
}

/// Why a message does not go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dropped {
    /// The user excluded it.
    Excluded,
    /// Below the threshold for every selected topic; its best score (`None`: no vector).
    TopicFilter(Option<f32>),
    /// Grouped under a topic that is not selected; its best score over the selected ones.
    OtherTopic(Option<f32>),
}

/// The decision for one message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    Kept(Kept),
    Dropped(Dropped),
}

impl Choice {
    /// True when the message goes.
    pub fn is_kept(self) -> bool {
        matches!(self, Choice::Kept(_))
    }

    /// True for messages that go whatever compression decides (pinned, sticky).
    pub fn is_fixed(self) -> bool {
        matches!(self, Choice::Kept(Kept::Pinned | Kept::Sticky))
    }
}

/// Decides for each history message (oldest first; the message being answered is not among them,
/// it always goes). `threshold` is `Some` when a filter applies: topics are selected, similarity
/// mode is on and the scores were computed.
pub fn select(candidates: &[Candidate], threshold: Option<f32>) -> Vec<Choice> {
    let similar = |c: &Candidate| match (threshold, c.score) {
        (Some(t), Some(s)) => !c.elsewhere && s >= t,
        _ => false,
    };
    let matches = |c: &Candidate| threshold.is_some() && (c.member || similar(c));
    // Only messages the filter decides about count as matches (not pinned, excluded or sticky).
    let fallback = threshold.is_some()
        && !candidates
            .iter()
            .any(|c| c.mark.is_none() && !c.sticky && matches(c));
    candidates
        .iter()
        .map(|c| {
            Choice::Kept(match c.mark {
                Some(MessageMark::Excluded) => return Choice::Dropped(Dropped::Excluded),
                Some(MessageMark::Pinned) => Kept::Pinned,
                None if c.sticky => Kept::Sticky,
                None if threshold.is_none() => Kept::Unfiltered,
                None if fallback => Kept::Fallback(c.score),
                None if c.member => Kept::TopicMember(c.score),
                None if similar(c) => Kept::TopicMatch(c.score.unwrap_or_default()),
                None if c.elsewhere => return Choice::Dropped(Dropped::OtherTopic(c.score)),
                None => return Choice::Dropped(Dropped::TopicFilter(c.score)),
            })
        })
        .collect()
}

/// The choices the server's last filter view stands for, for the widget's preview of the next
/// turn: `messages` are the history (id, mark; oldest first, the draft not among them). A message
/// the view counted but did not let through stays out; messages newer than the view go, as do
/// all of them when no filter applies. Marks and sticky ids apply whatever the view.
pub fn choices_from_view(
    messages: &[(&str, Option<MessageMark>)],
    sticky_ids: &[String],
    view: Option<&FilterView>,
) -> Vec<Choice> {
    let filtering = view.filter(|v| v.applies());
    let through: std::collections::HashSet<&str> = filtering
        .map(|v| v.message_ids.iter().map(String::as_str).collect())
        .unwrap_or_default();
    messages
        .iter()
        .enumerate()
        .map(|(i, (id, mark))| match mark {
            Some(MessageMark::Excluded) => Choice::Dropped(Dropped::Excluded),
            Some(MessageMark::Pinned) => Choice::Kept(Kept::Pinned),
            None if sticky_ids.iter().any(|s| s == id) => Choice::Kept(Kept::Sticky),
            None => match filtering {
                Some(v) if (i as u32) < v.total && !through.contains(id) => {
                    Choice::Dropped(Dropped::TopicFilter(None))
                }
                _ => Choice::Kept(Kept::Unfiltered),
            },
        })
        .collect()
}

/// Each message's best cosine over the anchors (the selected topics' label vectors and members'
/// centroids; `None` where a message has no vector). The anchors are normalized once, so each
/// message costs one norm and one dot product per anchor.
pub fn topic_scores(messages: &[Option<&[f32]>], anchors: &[Vec<f32>]) -> Vec<Option<f32>> {
    let units: Vec<Vec<f32>> = anchors
        .iter()
        .map(|l| {
            let mut u = l.clone();
            normalize(&mut u);
            u
        })
        .collect();
    messages
        .iter()
        .map(|v| {
            let v = (*v)?;
            let norm = dot(v, v).sqrt();
            units
                .iter()
                .map(|u| dot(v, u) / norm)
                .reduce(f32::max)
                .filter(|s| s.is_finite())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(score: f32) -> Candidate {
        Candidate {
            score: Some(score),
            ..Default::default()
        }
    }

    #[test]
    fn without_a_filter_everything_goes_sticky_and_pins_named() {
        let list = [
            Candidate::default(),
            Candidate {
                sticky: true,
                ..Default::default()
            },
            Candidate {
                mark: Some(MessageMark::Pinned),
                ..Default::default()
            },
        ];
        assert_eq!(
            select(&list, None),
            [
                Choice::Kept(Kept::Unfiltered),
                Choice::Kept(Kept::Sticky),
                Choice::Kept(Kept::Pinned)
            ]
        );
    }

    #[test]
    fn a_filter_keeps_matches_at_or_above_the_threshold_and_sticky() {
        let mut sticky = c(0.1);
        sticky.sticky = true;
        let list = [c(0.39), c(0.4), sticky, c(0.9)];
        assert_eq!(
            select(&list, Some(0.4)),
            [
                Choice::Dropped(Dropped::TopicFilter(Some(0.39))),
                Choice::Kept(Kept::TopicMatch(0.4)),
                Choice::Kept(Kept::Sticky),
                Choice::Kept(Kept::TopicMatch(0.9)),
            ]
        );
    }

    #[test]
    fn when_nothing_clears_the_threshold_the_whole_history_goes() {
        let mut sticky = c(0.9);
        sticky.sticky = true;
        let mut excluded_match = c(0.95);
        excluded_match.mark = Some(MessageMark::Excluded);
        // A sticky or excluded message clearing the threshold does not count as a match.
        let list = [c(0.1), sticky, excluded_match, c(0.2)];
        assert_eq!(
            select(&list, Some(0.4)),
            [
                Choice::Kept(Kept::Fallback(Some(0.1))),
                Choice::Kept(Kept::Sticky),
                Choice::Dropped(Dropped::Excluded),
                Choice::Kept(Kept::Fallback(Some(0.2))),
            ]
        );
    }

    #[test]
    fn pins_always_go_and_excludes_never_even_when_sticky() {
        let mut pinned = c(0.0);
        pinned.mark = Some(MessageMark::Pinned);
        let mut excluded = c(0.99);
        excluded.mark = Some(MessageMark::Excluded);
        excluded.sticky = true;
        let list = [pinned, excluded, c(0.8)];
        for threshold in [None, Some(0.4)] {
            let got = select(&list, threshold);
            assert_eq!(got[0], Choice::Kept(Kept::Pinned));
            assert_eq!(got[1], Choice::Dropped(Dropped::Excluded));
            assert!(got[0].is_fixed() && !got[2].is_fixed());
        }
    }

    #[test]
    fn members_of_a_selected_topic_go_whatever_their_score() {
        let member = |score| Candidate {
            member: true,
            score,
            ..Default::default()
        };
        let list = [member(Some(0.1)), member(None), c(0.2), c(0.5)];
        assert_eq!(
            select(&list, Some(0.4)),
            [
                Choice::Kept(Kept::TopicMember(Some(0.1))),
                Choice::Kept(Kept::TopicMember(None)),
                Choice::Dropped(Dropped::TopicFilter(Some(0.2))),
                Choice::Kept(Kept::TopicMatch(0.5)),
            ]
        );
        // A member is a match: no fallback though nothing else clears the threshold.
        let got = select(&[member(Some(0.1)), c(0.2)], Some(0.4));
        assert_eq!(got[1], Choice::Dropped(Dropped::TopicFilter(Some(0.2))));
        // Without a filter a member is just history.
        assert_eq!(
            select(&[member(Some(0.9))], None),
            [Choice::Kept(Kept::Unfiltered)]
        );
        // A message another topic holds does not go, however similar; one no topic holds does.
        let elsewhere = Candidate {
            elsewhere: true,
            ..c(0.9)
        };
        assert_eq!(
            select(&[member(Some(0.5)), elsewhere, c(0.9)], Some(0.4)),
            [
                Choice::Kept(Kept::TopicMember(Some(0.5))),
                Choice::Dropped(Dropped::OtherTopic(Some(0.9))),
                Choice::Kept(Kept::TopicMatch(0.9)),
            ]
        );
    }

    #[test]
    fn a_message_without_a_vector_does_not_match() {
        let list = [Candidate::default(), c(0.5)];
        assert_eq!(
            select(&list, Some(0.4))[0],
            Choice::Dropped(Dropped::TopicFilter(None))
        );
    }

    #[test]
    fn scores_are_the_best_cosine_over_the_labels() {
        let a = [1.0, 0.0];
        let b = [0.6, 0.8];
        let labels = vec![vec![0.0, 1.0], vec![1.0, 0.0]];
        let got = topic_scores(&[Some(&a), None, Some(&b)], &labels);
        assert_eq!(got[0], Some(1.0));
        assert_eq!(got[1], None);
        assert!((got[2].unwrap() - 0.8).abs() < 1e-6);
        assert_eq!(topic_scores(&[Some(&a)], &[]), [None]);
    }

    #[test]
    fn the_preview_follows_the_servers_view() {
        let view = FilterView {
            labels: vec!["Chess".into()],
            similarity_mode: true,
            available: true,
            message_ids: vec!["b".into()],
            total: 3,
            ..Default::default()
        };
        let msgs = [
            ("a", None),
            ("b", None),
            ("c", Some(MessageMark::Pinned)),
            ("d", None),
        ];
        let sticky = vec!["a".to_owned()];
        assert_eq!(
            choices_from_view(&msgs, &sticky, Some(&view)),
            [
                Choice::Kept(Kept::Sticky),
                Choice::Kept(Kept::Unfiltered),
                Choice::Kept(Kept::Pinned),
                Choice::Kept(Kept::Unfiltered),
            ]
        );
        let msgs = [("x", None), ("y", Some(MessageMark::Excluded))];
        assert_eq!(
            choices_from_view(&msgs, &[], Some(&view)),
            [
                Choice::Dropped(Dropped::TopicFilter(None)),
                Choice::Dropped(Dropped::Excluded)
            ]
        );
        assert_eq!(
            choices_from_view(&msgs, &[], None)[0],
            Choice::Kept(Kept::Unfiltered)
        );
    }
}
