//! The token meter (docs/context-planning.md, The meter): bar and percentage, "↓142%" when
//! compression applies, warning above 90 % and critical above 98 %, a tooltip with the breakdown
//! and compression, "~" on estimates.

use glassbox_core::context::MeterState;
use glassbox_core::number::fixed;
use glassbox_core::wire::SessionBudget;
use leptos::prelude::*;

use crate::meter_reading::MeterView;
use crate::token_counts::VocabState;

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

fn vocab_line(v: &VocabState) -> String {
    match v {
        VocabState::Loading { encoding } => {
            format!("Vocabulary {encoding}: loading, counts are estimates")
        }
        VocabState::Ready {
            encoding,
            transfer_bytes: Some(b),
            ..
        } if *b == 0.0 => {
            format!("Vocabulary {encoding}: from the browser cache")
        }
        VocabState::Ready {
            encoding,
            transfer_bytes: Some(b),
            ..
        } => {
            format!(
                "Vocabulary {encoding}: {} kB downloaded",
                grouped((*b / 1000.0).round() as u32)
            )
        }
        VocabState::Ready { encoding, .. } => format!("Vocabulary {encoding}: ready"),
        VocabState::Failed { encoding, message } => {
            format!("Vocabulary {encoding} failed ({message}); counts are estimates")
        }
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
    let reading = move || view.with(|v| v.as_ref().map(|v| v.reading.clone()));
    let estimated = move || view.with(|v| v.as_ref().is_some_and(|v| v.estimated));
    let tilde = move || if estimated() { "~" } else { "" };
    let percent = move || reading().map_or(0, |r| r.percent);
    let state = move || reading().map_or(MeterState::Standard, |r| r.state);
    let overflow = move || view.with(|v| v.as_ref().and_then(|v| v.overflow));
    let label = move || {
        view.with(|v| {
            let Some(v) = v else {
                return "Context window: no reading yet".to_owned();
            };
            let r = &v.reading;
            let mut s = format!(
                "{}{}% of the context window used: {}{} of {} tokens",
                tilde(),
                r.percent,
                tilde(),
                grouped(r.used),
                grouped(r.limit)
            );
            if let Some(orig) = r.original_percent {
                s.push_str(&format!(", compressed from {orig}%"));
            }
            match r.state {
                MeterState::Warning => s.push_str(". Warning: nearly full"),
                MeterState::Critical => s.push_str(". Critical: full"),
                _ => {}
            }
            if let Some(o) = v.overflow {
                s.push_str(". ");
                s.push_str(&o.describe());
            }
            s
        })
    };
    let rows = move || {
        reading()
            .map(|r| {
                let b = r.breakdown;
                vec![
                    ("System prompt", b.system_prompt),
                    ("Tools", b.tools),
                    ("Knowledge", b.knowledge),
                    ("Memories", b.memories),
                    ("Page context", b.page_context),
                    ("Conversation", b.conversation),
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
            aria-label="Context window"
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
                            <span class="gb-meter-orig" title=format!("compressed from {orig}%")>
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
                            view! {
                                <p class="gb-meter-compression">
                                    {format!(
                                        "Compression ({}): {} → {} tokens, {} saved; {} messages left out{}",
                                        c.strategy.id(),
                                        grouped(c.original_tokens),
                                        grouped(c.compressed_tokens),
                                        grouped(c.saved_tokens),
                                        c.dropped_count,
                                        if c.summarized_count > 0 {
                                            format!(", {} of them summarized", c.summarized_count)
                                        } else {
                                            String::new()
                                        },
                                    )}
                                </p>
                            }
                        })
                }}
                {move || {
                    overflow()
                        .map(|o| view! { <p class="gb-meter-overflow">{o.describe()}</p> })
                }}
                {move || {
                    budget
                        .get()
                        .map(|b| {
                            view! {
                                <p class="gb-meter-budget">
                                    {format!(
                                        "Budget: {} of {} tokens left in this conversation",
                                        grouped(b.remaining()),
                                        grouped(b.limit),
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
                                    let mut s = vocab_line(&v.vocab);
                                    if !v.exact_vocab {
                                        s.push_str(" (not this model's own tokenizer: counts are close, not exact)");
                                    }
                                    s
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
