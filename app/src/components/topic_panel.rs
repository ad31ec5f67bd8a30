//! The topic panel: the standing instructions as a locked line, the topics as a bubble cloud
//! (sized by how many messages are about each; click to select which history reaches the model),
//! the similarity switch and the status line ("5 of 14 messages in context").
//!
//! The cloud is a wrapping row of round toggle buttons, largest first: deterministic, never
//! overlapping, and it reflows with the panel's width. Labels are text nodes, never HTML.
//!
//! Topics are regenerated after every reply and the server carries the selection to the topic
//! that holds the selected one's messages: a renamed selection is said for a moment ("Bread comes
//! → Sourdough bread"), and a selected topic that vanished stays as a greyed chip the user clears.

use glassbox_core::context::{FilterView, SessionTopics, Topic};
use glassbox_core::number::fixed;
use leptos::prelude::*;

use crate::chunks::lazy_panel_fn;
use crate::client::ChatClient;
use crate::words::{Word, Words, words};

/// Smallest and largest bubble diameter, in rem.
const DIAMETER: (f64, f64) = (3.2, 7.0);
/// How long a renamed selection is announced.
const RENAMED_SHOWN: std::time::Duration = std::time::Duration::from_secs(8);

/// A bubble's diameter: its area in proportion to its count (the largest topic gets the largest).
pub fn diameter(count: u32, largest: u32) -> f64 {
    let share = f64::from(count.max(1)) / f64::from(largest.max(1));
    let (small, big) = DIAMETER;
    (small + (big - small) * share.sqrt()).clamp(small, big)
}

lazy_panel_fn! {
    /// The topic bubbles and their filter.
    topic_panel / preload_topic_panel (client: ChatClient) => view! { <TopicPanel client=client /> }
}

/// The panel.
#[component]
pub fn TopicPanel(client: ChatClient) -> impl IntoView {
    let transcript = client.transcript;
    let topics = Memo::new(move |_| transcript.with(|t| t.topics.clone().unwrap_or_default()));
    let filter = Memo::new(move |_| transcript.with(|t| t.filter.clone().unwrap_or_default()));
    let mode = Memo::new(move |_| filter.with(|f| f.similarity_mode));
    let available = Memo::new(move |_| filter.with(|f| f.available));
    let selected = Memo::new(move |_| filter.with(|f| f.labels.clone()));
    let orphaned = Memo::new(move |_| filter.with(|f| f.orphaned.clone()));
    // The whole selection, vanished topics included: they stay until the user clears them.
    let toggle = move |label: String| {
        let mut labels = selected.get_untracked();
        labels.extend(orphaned.get_untracked());
        match labels.iter().position(|l| *l == label) {
            Some(i) => {
                labels.remove(i);
            }
            None => labels.push(label),
        }
        client.set_filter(labels);
    };
    let w = words();
    let status = move || filter.with(|f| status_words(w, f));
    // "Bread comes → Sourdough bread", for a moment after the regeneration that renamed it.
    let renamed = RwSignal::new(String::new());
    Effect::new(move |_| {
        let said = filter.with(|f| renamed_words(&f.renamed));
        if said.is_empty() {
            return;
        }
        renamed.set(said.clone());
        set_timeout(
            move || {
                if renamed.get_untracked() == said {
                    renamed.set(String::new());
                }
            },
            RENAMED_SHOWN,
        );
    });
    view! {
        <section class="gb-topics" part="topics" aria-label=w.text(Word::Topics)>
            {move || {
                let sticky = topics.with(|t| t.sticky_ids.len());
                (sticky > 0)
                    .then(|| {
                        view! {
                            <p
                                class="gb-sticky-topic"
                                title=w.text(Word::StickyTopicHint)
                            >
                                // Drawn in CSS: an emoji needs a font the machine may lack.
                                <span class="gb-lock" aria-hidden="true"></span>
                                // The server's label for the standing instructions, in the chat's words.
                                {w.text(Word::StickyTopic)}
                                {format!(" · {sticky}")}
                            </p>
                        }
                    })
            }}
            <div
                class="gb-bubbles"
                role="group"
                aria-label=w.text(Word::TopicsSelectLabel)
                class:gb-filtering=move || mode.get() && !selected.with(Vec::is_empty)
            >
                <Show when=move || topics.with(|t| t.topics.is_empty())>
                    <p class="gb-topics-empty">{w.text(Word::TopicsEmpty)}</p>
                </Show>
                <For
                    each=move || bubbles(&topics.get())
                    key=|(t, d)| (t.label.clone(), t.count, (d * 100.0) as u32)
                    let:item
                >
                    {
                        let (topic, size) = item;
                        let label = topic.label.clone();
                        let pressed_label = label.clone();
                        let pressed = Memo::new(move |_| {
                            selected.with(|s| s.contains(&pressed_label))
                        });
                        // Set through the CSSOM (not a style attribute), which strict CSPs allow.
                        let side = format!("{}rem", fixed(size, 2));
                        view! {
                            <button
                                type="button"
                                class="gb-bubble-topic"
                                class:gb-selected=move || pressed.get()
                                aria-pressed=move || pressed.get().to_string()
                                aria-disabled=move || (!mode.get() || !available.get()).to_string()
                                title=move || {
                                    w.get(if !available.get() {
                                        Word::TopicFilterUnavailable
                                    } else if !mode.get() {
                                        Word::TopicSimilarityOff
                                    } else {
                                        Word::TopicSendOnlySelected
                                    })
                                }
                                style:width=side.clone()
                                style:height=side
                                on:click=move |_| {
                                    if mode.get_untracked() && available.get_untracked() {
                                        toggle(label.clone());
                                    }
                                }
                            >
                                <span class="gb-bubble-label">{topic.label.clone()}</span>
                                <span class="gb-bubble-count">{topic.count}</span>
                            </button>
                        }
                    }
                </For>
                <For each=move || orphaned.get() key=|label| label.clone() let:label>
                    {
                        let clear = label.clone();
                        view! {
                            <button
                                type="button"
                                class="gb-orphan-topic"
                                title=w.text(Word::TopicGoneHint)
                                on:click=move |_| toggle(clear.clone())
                            >
                                <span class="gb-bubble-label">{label}</span>
                                <span aria-hidden="true">" ×"</span>
                                <span class="gb-visually-hidden">" "{w.text(Word::TopicGoneClear)}</span>
                            </button>
                        }
                    }
                </For>
            </div>
            <Show when=move || renamed.with(|r| !r.is_empty())>
                <p class="gb-topics-renamed" role="status">
                    {move || renamed.get()}
                </p>
            </Show>
            <div class="gb-topics-footer">
                <label class="gb-switch">
                    <input
                        type="checkbox"
                        role="switch"
                        prop:checked=move || mode.get()
                        on:change=move |ev| client.set_similarity_mode(event_target_checked(&ev), None)
                    />
                    " "
                    {w.text(Word::FilterHistoryByTopic)}
                </label>
                <span class="gb-topics-status" role="status">
                    {status}
                </span>
            </div>
        </section>
    }
}

/// The status line: "5 of 14 messages in context", or "All messages in context". (The host's
/// `glassbox:filter-changed` event keeps core's English, `FilterView::status_line`.)
fn status_words(w: Words, f: &FilterView) -> String {
    let n = f.message_ids.len() as u32;
    if n >= f.total {
        return w.get(Word::TopicsAllInContext);
    }
    let word = if f.total == 1 {
        Word::TopicsInContextOne
    } else {
        Word::TopicsInContextMany
    };
    w.fill(
        word,
        &[("count", &n.to_string()), ("total", &f.total.to_string())],
    )
}

/// What a regeneration renamed, as the panel says it: "Bread comes → Sourdough bread".
fn renamed_words(renamed: &[glassbox_core::context::topics::Renamed]) -> String {
    renamed
        .iter()
        .map(|r| format!("{} → {}", r.from, r.to))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The topics with their bubble diameters, largest first (ties by label, so the order is stable).
fn bubbles(t: &SessionTopics) -> Vec<(Topic, f64)> {
    let largest = t.topics.iter().map(|t| t.count).max().unwrap_or(1);
    let mut list: Vec<(Topic, f64)> = t
        .topics
        .iter()
        .map(|x| (x.clone(), diameter(x.count, largest)))
        .collect();
    list.sort_by(|a, b| {
        b.0.count
            .cmp(&a.0.count)
            .then_with(|| a.0.label.cmp(&b.0.label))
    });
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_follow_counts() {
        let (small, big) = DIAMETER;
        assert_eq!(diameter(8, 8), big);
        let quarter = diameter(2, 8);
        assert!((quarter - (small + (big - small) * 0.5)).abs() < 1e-9);
        assert!(diameter(0, 0) >= small);
    }
}
