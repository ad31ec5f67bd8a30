//! Markdown to a small element tree the widget turns into DOM nodes one by one (never `innerHTML`).
//!
//! Raw HTML in the source is kept as plain text; links keep only http, https and mailto targets;
//! images become links (a reply cannot make the browser fetch anything by itself).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

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

/// An element being built: its tag (None: keep only the children), attributes and children so far.
type Open = (
    Option<&'static str>,
    Vec<(&'static str, String)>,
    Vec<MdNode>,
);

/// True if a link target may be followed: http, https or mailto only.
pub fn safe_href(href: &str) -> bool {
    let lower = href.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
}

/// Parses markdown (CommonMark + tables, strikethrough, task lists) into nodes.
pub fn parse(text: &str) -> Vec<MdNode> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut stack: Vec<Open> = vec![(None, vec![], vec![])];
    let mut in_table_head = false;
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => {
                let (name, attrs) = open(&tag, in_table_head);
                if matches!(tag, Tag::TableHead) {
                    in_table_head = true;
                }
                stack.push((name, attrs, vec![]));
            }
            Event::End(end) => {
                if matches!(end, TagEnd::TableHead) {
                    in_table_head = false;
                }
                let Some((name, attrs, children)) = stack.pop() else {
                    continue;
                };
                let parent = match stack.last_mut() {
                    Some(p) => &mut p.2,
                    None => continue,
                };
                match name {
                    Some(tag) => parent.push(wrap(tag, attrs, children, &end)),
                    None => parent.extend(children), // unsafe link or image: keep its text only
                }
            }
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => {
                push(&mut stack, MdNode::Text(t.into_string()))
            }
            Event::Code(t) => push(
                &mut stack,
                el("code", vec![], vec![MdNode::Text(t.into_string())]),
            ),
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                push(&mut stack, MdNode::Text(t.into_string()))
            }
            Event::SoftBreak => push(&mut stack, MdNode::Text("\n".into())),
            Event::HardBreak => push(&mut stack, el("br", vec![], vec![])),
            Event::Rule => push(&mut stack, el("hr", vec![], vec![])),
            Event::TaskListMarker(done) => push(
                &mut stack,
                MdNode::Text(if done { "☑ " } else { "☐ " }.into()),
            ),
            Event::FootnoteReference(t) => push(&mut stack, MdNode::Text(format!("[{t}]"))),
        }
    }
    stack.pop().map(|(_, _, c)| c).unwrap_or_default()
}

fn el(tag: &'static str, attrs: Vec<(&'static str, String)>, children: Vec<MdNode>) -> MdNode {
    MdNode::Element {
        tag,
        attrs,
        children,
    }
}

fn push(stack: &mut [Open], node: MdNode) {
    if let Some(top) = stack.last_mut() {
        top.2.push(node);
    }
}

/// The element a start tag opens (None: keep only the children's text).
fn open(tag: &Tag<'_>, in_table_head: bool) -> (Option<&'static str>, Vec<(&'static str, String)>) {
    let plain = |t: &'static str| (Some(t), vec![]);
    match tag {
        Tag::Paragraph => plain("p"),
        Tag::Heading { level, .. } => plain(match level {
            HeadingLevel::H1 => "h1",
            HeadingLevel::H2 => "h2",
            HeadingLevel::H3 => "h3",
            HeadingLevel::H4 => "h4",
            HeadingLevel::H5 => "h5",
            HeadingLevel::H6 => "h6",
        }),
        Tag::BlockQuote(_) => plain("blockquote"),
        Tag::CodeBlock(kind) => {
            let lang = match kind {
                CodeBlockKind::Fenced(l) => l.split_whitespace().next().unwrap_or("").to_owned(),
                CodeBlockKind::Indented => String::new(),
            };
            let attrs = if lang.is_empty() {
                vec![]
            } else {
                vec![("data-lang", lang)]
            };
            (Some("pre"), attrs)
        }
        Tag::List(Some(start)) if *start != 1 => (Some("ol"), vec![("start", start.to_string())]),
        Tag::List(Some(_)) => plain("ol"),
        Tag::List(None) => plain("ul"),
        Tag::Item => plain("li"),
        Tag::Emphasis => plain("em"),
        Tag::Strong => plain("strong"),
        Tag::Strikethrough => plain("del"),
        Tag::Link {
            dest_url, title, ..
        } if safe_href(dest_url) => {
            let mut attrs = vec![
                ("href", dest_url.to_string()),
                ("rel", "noopener noreferrer nofollow".to_owned()),
                ("target", "_blank".to_owned()),
            ];
            if !title.is_empty() {
                attrs.push(("title", title.to_string()));
            }
            (Some("a"), attrs)
        }
        Tag::Image { dest_url, .. } if safe_href(dest_url) => (
            Some("a"),
            vec![
                ("href", dest_url.to_string()),
                ("rel", "noopener noreferrer nofollow".to_owned()),
                ("target", "_blank".to_owned()),
                ("class", "gb-image-link".to_owned()),
            ],
        ),
        Tag::Table(_) => plain("table"),
        Tag::TableHead => plain("thead"),
        Tag::TableRow => plain("tr"),
        Tag::TableCell => plain(if in_table_head { "th" } else { "td" }),
        _ => (None, vec![]),
    }
}

/// Wraps children in their element; code blocks get an inner `<code>`, table heads a row.
fn wrap(
    tag: &'static str,
    attrs: Vec<(&'static str, String)>,
    children: Vec<MdNode>,
    end: &TagEnd,
) -> MdNode {
    match (tag, end) {
        ("pre", TagEnd::CodeBlock) => el("pre", attrs, vec![el("code", vec![], children)]),
        ("thead", _) => el("thead", attrs, vec![el("tr", vec![], children)]),
        _ => el(tag, attrs, children),
    }
}

#[cfg(test)]
mod tests {
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
