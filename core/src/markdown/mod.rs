//! Markdown to a small element tree the widget turns into DOM nodes one by one (never `innerHTML`).
//!
//! Raw HTML in the source is kept as plain text; links keep only http, https and mailto targets;
//! images become links (a reply cannot make the browser fetch anything by itself).
//!
//! A document is rendered as its top-level blocks, each on its own: [`parse`] renders a whole text,
//! [`MarkdownStream`] renders a text that is still arriving, re-parsing only its unfinished blocks, and
//! ends equal to [`parse`] of the whole text. What one block may expand is bounded ([`MAX_DEPTH`],
//! [`MAX_BLOCK_BYTES`]), so no reply can make rendering slow.

mod build;
mod repair;
mod stream;

pub use stream::{MarkdownStream, StreamUpdate};

use build::scan;

/// A node of rendered markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MdNode {
    Text(String),
    Element {
        tag: &'static str,
        attrs: Vec<(&'static str, String)>,
        children: Vec<MdNode>,
    },
}

/// True if a link target may be followed: http, https or mailto only.
pub fn safe_href(href: &str) -> bool {
    let lower = href.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
}

/// Elements nested deeper than this are not created: their content joins the enclosing element as
/// text (a 500-deep list costs no more to lay out than a 32-deep one).
pub const MAX_DEPTH: usize = 32;

/// A top-level block whose source is longer than this is shown as its plain source text.
pub const MAX_BLOCK_BYTES: usize = 32 * 1024;

/// Parses markdown (CommonMark + tables, strikethrough, task lists) into nodes.
pub fn parse(text: &str) -> Vec<MdNode> {
    scan(text, &|_| None)
        .blocks
        .into_iter()
        .flat_map(|b| b.nodes)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::build::el;
    use super::*;

    fn text(t: &str) -> MdNode {
        MdNode::Text(t.into())
    }

    #[test]
    fn emphasis_and_paragraphs() {
        assert_eq!(
            parse("Hello **world**"),
            vec![el(
                "p",
                vec![],
                vec![text("Hello "), el("strong", vec![], vec![text("world")])]
            )]
        );
    }

    #[test]
    fn raw_html_stays_text() {
        let nodes = parse("<img src=x onerror=alert(1)> and <b>bold</b>");
        let flat = format!("{nodes:?}");
        assert!(!flat.contains("tag: \"img\""));
        assert!(!flat.contains("tag: \"b\""));
        assert!(flat.contains("<img src=x onerror=alert(1)>"));
    }

    #[test]
    fn only_http_https_mailto_links_survive() {
        let nodes = parse(
            "[a](https://x.org) [b](javascript:alert(1)) [c](mailto:me@x.org) [d](data:text/html,hi)",
        );
        let MdNode::Element { children, .. } = &nodes[0] else {
            panic!()
        };
        let links: Vec<_> = children
            .iter()
            .filter_map(|n| match n {
                MdNode::Element {
                    tag: "a", attrs, ..
                } => Some(attrs[0].1.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(links, ["https://x.org", "mailto:me@x.org"]);
        assert!(
            format!("{children:?}").contains("Text(\"b\")"),
            "unsafe link keeps its text"
        );
    }

    #[test]
    fn images_become_links_never_fetches() {
        let nodes = parse("![cat](https://x.org/cat.png)");
        let s = format!("{nodes:?}");
        assert!(s.contains("tag: \"a\"") && !s.contains("\"img\""), "{s}");
    }

    #[test]
    fn code_blocks_keep_language_and_text() {
        let nodes = parse("```rust\nfn main() {}\n```");
        assert_eq!(
            nodes,
            vec![el(
                "pre",
                vec![("data-lang", "rust".into())],
                vec![el("code", vec![], vec![text("fn main() {}\n")])]
            )]
        );
    }

    #[test]
    fn tables_have_header_cells() {
        let s = format!("{:?}", parse("| a | b |\n|---|---|\n| 1 | 2 |"));
        assert!(
            s.contains("tag: \"th\"") && s.contains("tag: \"td\""),
            "{s}"
        );
    }
}

#[cfg(test)]
mod stream_tests;
