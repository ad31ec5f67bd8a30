use super::*;

/// OpenAI's framing: 4 tokens per message besides its words.
const PER_MESSAGE: u32 = crate::tokens::Framing::OPENAI.per_message;

/// Builds counted messages from (text, tokens).
fn msgs<'a>(spec: &[(&'a str, u32)]) -> Vec<CountedMessage<'a>> {
    spec.iter()
        .map(|&(content, tokens)| CountedMessage { content, tokens })
        .collect()
}

fn settings(strategy: Strategy, preserve: u32) -> CompressionSettings {
    CompressionSettings {
        strategy,
        preserve_recent_messages: preserve,
        ..Default::default()
    }
}

/// A conversation of questions, long answers, and acknowledgements in between.
fn conversation() -> Vec<CountedMessage<'static>> {
    msgs(&[
        ("Explain the borrow checker", 96), // 0
        ("It tracks ownership ...", 396),   // 1
        ("ok", 1),                          // 2
        ("And lifetimes?", 36),             // 3
        ("Lifetimes name scopes ...", 396), // 4
        ("Thanks.", 2),                     // 5
        ("Sounds good", 2),                 // 6
        ("Show an example", 46),            // 7
        ("fn longest<'a>(...) ...", 296),   // 8
        ("Got it", 2),                      // 9
        ("be concise from now on", 16),     // 10
    ])
}

#[test]
fn low_value_patterns() {
    for yes in [
        "ok",
        "OK.",
        " okay ",
        "Thanks",
        "thank you.",
        "got it",
        "Understood",
        "yep",
        "nope",
        "Sounds good.",
        "COOL",
    ] {
        assert!(is_low_value(yes), "{yes:?}");
    }
    for no in [
        "ok, but why?",
        "thanks!!",
        "be concise",
        "yes please do that",
        "greatness",
        "no..",
    ] {
        assert!(!is_low_value(no), "{no:?}");
    }
}

#[test]
fn under_threshold_or_disabled_changes_nothing() {
    let m = conversation();
    let total = conversation_tokens(&m, PER_MESSAGE); // 1289 + 11·4 = 1333
    assert_eq!(total, 1333);
    let out = plan(&m, 10_000, &CompressionSettings::default(), PER_MESSAGE);
    assert!(!out.applied);
    assert_eq!(out.kept.len(), m.len());
    let off = CompressionSettings {
        enabled: false,
        ..Default::default()
    };
    let out = plan(&m, 100, &off, PER_MESSAGE);
    assert!(!out.applied);
    assert_eq!(out.compressed_tokens, total);
}

#[test]
fn drop_low_value_keeps_the_recent_ones() {
    let m = conversation();
    // threshold 80% of 1500 = 1200 < 1333: compress.
    let out = plan(&m, 1500, &settings(Strategy::DropLowValue, 5), PER_MESSAGE);
    assert!(out.applied);
    // 2 ("ok") and 5 ("Thanks.") go; 6 and 9 are among the last five and stay.
    assert_eq!(out.kept, vec![0, 1, 3, 4, 6, 7, 8, 9, 10]);
    assert_eq!(out.dropped_count, 2);
    assert_eq!(out.compressed_tokens, 1333 - (1 + 4) - (2 + 4));
    assert_eq!(out.summarized, None);
}

#[test]
fn sliding_window_drops_oldest_until_under_target() {
    let m = conversation();
    // target = 80% of 1000 = 800.
    let out = plan(&m, 1000, &settings(Strategy::SlidingWindow, 3), PER_MESSAGE);
    assert!(out.compressed_tokens <= 800, "{}", out.compressed_tokens);
    // Dropping 0..=4 removes 100+400+5+40+400 = 945 → 388 left; 0..=3 would leave 788.
    assert_eq!(out.kept, vec![4, 5, 6, 7, 8, 9, 10]);
    assert_eq!(out.compressed_tokens, 1333 - 100 - 400 - 5 - 40);
}

#[test]
fn sliding_window_never_touches_preserved_messages() {
    let m = conversation();
    let out = plan(&m, 10, &settings(Strategy::SlidingWindow, 4), PER_MESSAGE);
    assert_eq!(out.kept, vec![7, 8, 9, 10]);
    assert!(
        out.compressed_tokens > 8,
        "still over: preserved messages are never cut"
    );
}

#[test]
fn summarize_replaces_the_fewest_oldest_messages() {
    let m = conversation();
    // target 800: need total - removed + 400 ≤ 800 → removed ≥ 933 → messages 0..=4 (945).
    let out = plan(&m, 1000, &settings(Strategy::Summarize, 5), PER_MESSAGE);
    assert_eq!(out.summarized, Some(0..5));
    assert_eq!(out.kept, vec![5, 6, 7, 8, 9, 10]);
    assert_eq!(out.compressed_tokens, 1333 - 945 + SUMMARY_RESERVE);
}

#[test]
fn summarize_skips_when_a_summary_would_not_save_anything() {
    let m = msgs(&[("a", 50), ("b", 50), ("c", 50)]);
    let out = plan(&m, 100, &settings(Strategy::Summarize, 1), PER_MESSAGE);
    assert_eq!(out.summarized, None);
    assert_eq!(out.kept, vec![0, 1, 2]);
}

#[test]
fn hybrid_drops_then_windows_then_summarizes_what_the_window_removed() {
    let m = conversation();
    let out = plan(&m, 1000, &settings(Strategy::Hybrid, 5), PER_MESSAGE);
    // Drop: 2 and 5 (1328-… = 1322 left). Window to 800 - 400 = 400:
    // remove 0 (100), 1 (400), 3 (40), 4 (400) → 382 left ≤ 400.
    assert_eq!(out.kept, vec![6, 7, 8, 9, 10]);
    assert_eq!(out.summarized, Some(0..5));
    assert_eq!(out.compressed_tokens, 382 + SUMMARY_RESERVE);
    assert!(out.compressed_tokens <= 800);
    assert_eq!(out.dropped_count, 6);
}

#[test]
fn hybrid_without_enough_to_summarize_just_drops() {
    let m = msgs(&[
        ("long question", 20),
        ("ok", 1),
        ("q", 10),
        ("a", 10),
        ("b", 10),
    ]);
    // total 51 + 20 = 71; allocation 80 → target 64; drop "ok" → 66; window to 64-400 → removes
    // as much as allowed (preserve 3) = 24, ≤ reserve: no summary.
    let out = plan(&m, 80, &settings(Strategy::Hybrid, 3), PER_MESSAGE);
    assert_eq!(out.summarized, None);
    assert_eq!(out.kept, vec![2, 3, 4]);
}

#[test]
fn settings_wire_form_and_validation() {
    let s: CompressionSettings = serde_json::from_str(
        r#"{"enabled":true,"threshold":70,"strategy":"drop-low-value","preserveRecentMessages":3,"showIndicator":false}"#,
    )
    .unwrap();
    assert_eq!(s.strategy, Strategy::DropLowValue);
    assert_eq!(s.threshold, 70);
    let d: CompressionSettings = serde_json::from_str("{}").unwrap();
    assert_eq!(d, CompressionSettings::default());
    assert!(
        CompressionSettings { threshold: 0, ..d }
            .validate()
            .is_err()
    );
    assert!(
        CompressionSettings {
            threshold: 101,
            ..d
        }
        .validate()
        .is_err()
    );
    assert!(
        CompressionSettings {
            preserve_recent_messages: 5000,
            ..d
        }
        .validate()
        .is_err()
    );
    assert!(d.validate().is_ok());
    assert_eq!(
        "sliding-window".parse::<Strategy>(),
        Ok(Strategy::SlidingWindow)
    );
    assert!("nope".parse::<Strategy>().is_err());
    for s in Strategy::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), s.id());
        assert_eq!(s.id().parse::<Strategy>(), Ok(s));
    }
}

#[test]
fn over_threshold_with_nothing_to_leave_out_is_not_compression() {
    let m = msgs(&[("a long question", 500), ("a long answer", 500)]);
    let out = plan(&m, 100, &settings(Strategy::Hybrid, 5), PER_MESSAGE);
    assert!(!out.applied);
    assert_eq!(out.kept, vec![0, 1]);
    assert_eq!(out.compressed_tokens, out.original_tokens);
}
