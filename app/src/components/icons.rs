//! The widget's icons, inline SVG drawn in the text's colour (no icon font or emoji: Debian's
//! Chromium has no emoji font, where an emoji shows as an empty box).

use leptos::prelude::*;

/// An icon of 24-unit outline `path`s, `size` pixels square, hidden from screen readers (the
/// control it sits in carries the words).
fn outline(size: u32, paths: &'static [&'static str]) -> impl IntoView {
    view! {
        <svg
            class="gb-icon"
            viewBox="0 0 24 24"
            width=size
            height=size
            aria-hidden="true"
            fill="none"
            stroke="currentColor"
            stroke-width="2"
            stroke-linecap="round"
            stroke-linejoin="round"
        >
            {paths.iter().map(|d| view! { <path d=*d></path> }).collect_view()}
        </svg>
    }
}

/// A paperclip (attachments, the session's files).
pub fn paperclip(size: u32) -> impl IntoView {
    outline(
        size,
        &[
            "M21.4 11.1l-8.5 8.5a5.5 5.5 0 0 1-7.8-7.8l8.5-8.5a3.7 3.7 0 0 1 5.2 5.2l-8.5 8.5a1.8 1.8 0 0 1-2.6-2.6l7.8-7.8",
        ],
    )
}

/// Three lines (a drawer).
pub fn menu(size: u32) -> impl IntoView {
    outline(size, &["M4 6h16", "M4 12h16", "M4 18h16"])
}

/// Sliders (settings).
pub fn sliders(size: u32) -> impl IntoView {
    outline(
        size,
        &[
            "M4 6h10", "M18 6h2", "M4 12h4", "M12 12h8", "M4 18h12", "M20 18h0", "M16 4v4",
            "M10 10v4", "M18 16v4",
        ],
    )
}

/// A warning triangle.
pub fn warning(size: u32) -> impl IntoView {
    outline(
        size,
        &[
            "M10.3 3.9L1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z",
            "M12 9v4",
            "M12 17h.01",
        ],
    )
}

/// A wrench (a tool call).
pub fn wrench(size: u32) -> impl IntoView {
    outline(
        size,
        &[
            "M14.7 6.3a1 1 0 0 0 0 1.4l1.6 1.6a1 1 0 0 0 1.4 0l3.8-3.8a6 6 0 0 1-7.9 7.9l-6.9 6.9a2.1 2.1 0 0 1-3-3l6.9-6.9a6 6 0 0 1 7.9-7.9z",
        ],
    )
}
