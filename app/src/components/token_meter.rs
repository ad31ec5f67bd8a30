//! The token meter (docs/context-planning.md, The meter): bar and percentage, "↓142%" when
//! compression applies, warning above 90 % and critical above 98 %, a tooltip with the breakdown
//! and compression, "~" on estimates.

use glassbox_core::context::MeterState;
use glassbox_core::number::fixed;
use glassbox_core::wire::SessionBudget;
use leptos::prelude::*;

use crate::meter_reading::MeterView;
use crate::token_counts::VocabState;
use crate::words::{Word, Words, words};

/// `12345` → `12,345`.
pub fn grouped(n: impl Into<u64>) -> String {
    let digits = n.into().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn vocab_line(w: Words, v: &VocabState) -> String {
    match v {
        VocabState::Loading { encoding } => {
            w.fill(Word::VocabLoading, &[("encoding", encoding.as_str())])
        }
        VocabState::Ready {
            encoding,
            transfer_bytes: Some(b),
            ..
        } if *b == 0.0 => w.fill(Word::VocabCached, &[("encoding", encoding.as_str())]),
        VocabState::Ready {
            encoding,
            transfer_bytes: Some(b),
            ..
        } => w.fill(
            Word::VocabDownloaded,
            &[
                ("encoding", encoding.as_str()),
                ("size", grouped((*b / 1000.0).round() as u32).as_str()),
            ],
        ),
        VocabState::Ready { encoding, .. } => {
            w.fill(Word::VocabReady, &[("encoding", encoding.as_str())])
        }
        VocabState::Failed { encoding, message } => w.fill(
            Word::VocabFailed,
            &[
                ("encoding", encoding.as_str()),
                ("message", message.as_str()),
            ],
        ),
    }
}

/// The meter. `view` is `None` until the context window is known.
#[component]
pub fn TokenMeter(
    #[prop(into)] view: Signal<Option<MeterView>>,
    /// Only the percentage, for narrow widths (also automatic below 432 px).
    #[prop(into, default = Signal::stored(false))]
    compact: Signal<bool>,
    /// Milliseconds from the worker's answer to this meter showing it.
    #[prop(into, default = Signal::stored(0.0))]
    update_ms: Signal<f64>,
    /// The session's token budget, when the server sets one (shown in the tooltip).
    #[prop(into, default = Signal::stored(None))]
    budget: Signal<Option<SessionBudget>>,
) -> impl IntoView {
    let w = words();
    let reading = move || view.with(|v| v.as_ref().map(|v| v.reading.clone()));
    let estimated = move || view.with(|v| v.as_ref().is_some_and(|v| v.estimated));
    let tilde = move || if estimated() { "~" } else { "" };
    let percent = move || reading().map_or(0, |r| r.percent);
    let state = move || reading().map_or(MeterState::Standard, |r| r.state);
    let overflow = move || view.with(|v| v.as_ref().and_then(|v| v.overflow));
    let label = move || {
        view.with(|v| {
            let Some(v) = v else {
                return w.get(Word::MeterNoReading);
            };
            let r = &v.reading;
            let mut s = w.fill(
                Word::MeterUsed,
                &[
                    ("percent", format!("{}{}", tilde(), r.percent).as_str()),
                    ("used", format!("{}{}", tilde(), grouped(r.used)).as_str()),
                    ("limit", grouped(r.limit).as_str()),
                ],
            );
            if let Some(orig) = r.original_percent {
                s.push_str(", ");
                s.push_str(&w.fill(
                    Word::CompressedFrom,
                    &[("percent", orig.to_string().as_str())],
                ));
            }
            match r.state {
                MeterState::Warning => {
                    s.push_str(". ");
                    s.push_str(&w.get(Word::MeterWarning));
                }
                MeterState::Critical => {
                    s.push_str(". ");
                    s.push_str(&w.get(Word::MeterCritical));
                }
                _ => {}
            }
            if let Some(o) = v.overflow {
                s.push_str(". ");
                s.push_str(&crate::words::overflow(w, o));
            }
            s
        })
    };
    let rows = move || {
        reading()
            .map(|r| {
                let b = r.breakdown;
                vec![
                    (w.get(Word::MeterSystemPrompt), b.system_prompt),
                    (w.get(Word::MeterTools), b.tools),
                    (w.get(Word::MeterKnowledge), b.knowledge),
                    (w.get(Word::MeterMemories), b.memories),
                    (w.get(Word::MeterPageContext), b.page_context),
                    (w.get(Word::Conversation), b.conversation),
                ]
            })
            .unwrap_or_default()
    };
    let state_name = move || -> &'static str { state().into() };
    view! {
        <div
            class="gb-meter"
            part="meter"
            class:gb-meter-compact=move || compact.get()
            data-state=state_name
            data-percent=move || percent().to_string()
            data-estimated=move || estimated().to_string()
            data-overflow=move || overflow().is_some().to_string()
            data-update-ms=move || fixed(update_ms.get(), 3)
            role="meter"
            tabindex="0"
            aria-label=w.text(Word::ContextWindow)
            aria-valuemin="0"
            aria-valuemax=move || reading().map_or(0, |r| r.limit).to_string()
            aria-valuenow=move || reading().map_or(0, |r| r.used.min(r.limit)).to_string()
            aria-valuetext=label
            aria-describedby="gb-meter-tip"
        >
            <span class="gb-meter-bar" aria-hidden="true">
                <span class="gb-meter-fill" style:width=move || format!("{}%", percent().min(100))></span>
            </span>
            <span class="gb-meter-pct">
                {move || {
                    if reading().is_some() { format!("{}{}%", tilde(), percent()) } else { "–".to_owned() }
                }}
            </span>
            {move || {
                reading()
                    .and_then(|r| r.original_percent)
                    .map(|orig| {
                        view! {
                            <span class="gb-meter-orig" title=w.fill(Word::CompressedFrom, &[("percent", orig.to_string().as_str())])>
                                {format!("↓{orig}%")}
                            </span>
                        }
                    })
            }}
            <span
                class="gb-meter-icon"
                class:gb-meter-info=move || !matches!(state(), MeterState::Warning | MeterState::Critical)
                aria-hidden="true"
            >
                {move || match state() {
                    MeterState::Warning | MeterState::Critical => super::icons::warning(12).into_any(),
                    _ => "i".into_any(),
                }}
            </span>
            <div class="gb-meter-tip" id="gb-meter-tip" role="tooltip">
                <div class="gb-meter-total">{label}</div>
                <table class="gb-meter-breakdown">
                    <tbody>
                        {move || {
                            rows()
                                .into_iter()
                                .map(|(name, n)| {
                                    view! {
                                        <tr>
                                            <th scope="row">{name}</th>
                                            <td>{grouped(n)}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()
                        }}
                    </tbody>
                </table>
                {move || {
                    reading()
                        .and_then(|r| r.compression)
                        .map(|c| {
                            let mut text = w.fill(
                                Word::MeterCompression,
                                &[
                                    ("strategy", c.strategy.id()),
                                    ("original", grouped(c.original_tokens).as_str()),
                                    ("compressed", grouped(c.compressed_tokens).as_str()),
                                    ("saved", grouped(c.saved_tokens).as_str()),
                                    ("dropped", c.dropped_count.to_string().as_str()),
                                ],
                            );
                            if c.summarized_count > 0 {
                                text.push_str(", ");
                                text.push_str(&w.fill(
                                    Word::MeterSummarized,
                                    &[("count", c.summarized_count.to_string().as_str())],
                                ));
                            }
                            view! { <p class="gb-meter-compression">{text}</p> }
                        })
                }}
                {move || {
                    overflow()
                        .map(|o| view! { <p class="gb-meter-overflow">{crate::words::overflow(w, o)}</p> })
                }}
                {move || {
                    budget
                        .get()
                        .map(|b| {
                            view! {
                                <p class="gb-meter-budget">
                                    {w.fill(
                                        Word::MeterBudget,
                                        &[
                                            ("remaining", grouped(b.remaining()).as_str()),
                                            ("limit", grouped(b.limit).as_str()),
                                        ],
                                    )}
                                </p>
                            }
                        })
                }}
                <p class="gb-meter-vocab">
                    {move || {
                        view.with(|v| {
                            v.as_ref()
                                .map(|v| {
                                    let line = vocab_line(w, &v.vocab);
                                    if v.exact_vocab {
                                        line
                                    } else {
                                        w.fill(Word::VocabNotExact, &[("line", line.as_str())])
                                    }
                                })
                                .unwrap_or_default()
                        })
                    }}
                </p>
            </div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn grouping() {
        assert_eq!(super::grouped(0u32), "0");
        assert_eq!(super::grouped(999u32), "999");
        assert_eq!(super::grouped(1000u32), "1,000");
        assert_eq!(super::grouped(128000u32), "128,000");
        assert_eq!(super::grouped(1047576u64), "1,047,576");
    }
}
