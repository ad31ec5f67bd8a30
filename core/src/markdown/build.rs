//! One pass over a markdown text: its top-level blocks, each turned into nodes on its own, plus what
//! the incremental renderer needs (reference definitions, unresolved references, where the text that
//! is still open at the end starts).

use std::cell::RefCell;
use std::ops::Range;

use pulldown_cmark::{
    BrokenLink, CodeBlockKind, CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd,
};
use unicase::UniCase;

use super::{MAX_BLOCK_BYTES, MAX_DEPTH, MdNode, safe_href};

/// A link reference label, compared as CommonMark compares them (Unicode case folding; whitespace is
/// already collapsed by the parser).
pub(crate) type RefLabel = UniCase<String>;

/// What a link reference definition gives: destination and title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefDef {
    pub dest: String,
    pub title: String,
}

/// A top-level block: where its source is and what it renders to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    pub range: Range<usize>,
    pub nodes: Vec<MdNode>,
}

/// The result of [`scan`].
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub blocks: Vec<Block>,
    /// Reference definitions in the text: label, definition, where it starts.
    pub defs: Vec<(RefLabel, RefDef, usize)>,
    /// References `[label]` with no definition in the text (looked up in `known`): label, where.
    pub broken: Vec<(RefLabel, usize)>,
    /// Where the innermost paragraph, heading, list item or table cell that reaches the end of the
    /// text starts; `None` when the text ends in a code or HTML block or after the last block.
    pub open_inline: Option<usize>,
}

/// CommonMark plus tables, strikethrough and task lists.
const OPTIONS: Options = Options::ENABLE_TABLES
    .union(Options::ENABLE_STRIKETHROUGH)
    .union(Options::ENABLE_TASKLISTS);

/// Parses `text` once. References without a definition in `text` are looked up in `known` (the
/// definitions of text parsed before).
pub(crate) fn scan(text: &str, known: &dyn Fn(&RefLabel) -> Option<RefDef>) -> Scan {
    let broken = RefCell::new(Vec::new());
    let callback = |link: BrokenLink<'_>| {
        let label = UniCase::new(link.reference.to_string());
        let found = known(&label);
        broken.borrow_mut().push((label, link.span.start));
        found.map(|d| (CowStr::from(d.dest), CowStr::from(d.title)))
    };
    let content_end = text.trim_end().len();
    let mut iter =
        Parser::new_with_broken_link_callback(text, OPTIONS, Some(callback)).into_offset_iter();
    let mut scan = Scan::default();
    let mut depth = 0usize;
    // The block being read: its range and its builder (None when it is too long to expand).
    let mut current: Option<(Range<usize>, Option<Builder>)> = None;
    for (event, range) in &mut iter {
        if let Event::Start(tag) = &event
            && range.end >= content_end
        {
            match tag {
                Tag::CodeBlock(_) | Tag::HtmlBlock => scan.open_inline = None,
                Tag::Paragraph
                | Tag::Heading { .. }
                | Tag::Item
                | Tag::TableHead
                | Tag::TableRow
                | Tag::TableCell => scan.open_inline = Some(range.start),
                _ => {}
            }
        }
        if depth == 0 {
            let builder = (range.len() <= MAX_BLOCK_BYTES).then(Builder::default);
            current = Some((range.clone(), builder));
        }
        match &event {
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
        if let Some((_, Some(builder))) = current.as_mut() {
            builder.event(event);
        }
        if depth == 0
            && let Some((range, builder)) = current.take()
        {
            let nodes = match builder {
                Some(b) => b.finish(),
                None => vec![raw_block(&text[range.clone()])],
            };
            scan.blocks.push(Block { range, nodes });
        }
    }
    if scan
        .blocks
        .last()
        .is_some_and(|b| b.range.end < content_end)
    {
        // Only blank lines or definitions after the last block.
        scan.open_inline = scan.open_inline.filter(|&s| s >= content_end);
    }
    scan.defs = iter
        .reference_definitions()
        .iter()
        .map(|(label, def)| {
            (
                UniCase::new(label.to_owned()),
                RefDef {
                    dest: def.dest.to_string(),
                    title: def.title.as_deref().unwrap_or_default().to_owned(),
                },
                def.span.start,
            )
        })
        .collect();
    drop(iter);
    scan.broken = broken.into_inner();
    scan
}

/// A block too long to expand: its source as plain text.
fn raw_block(source: &str) -> MdNode {
    el(
        "div",
        vec![("class", "gb-raw".to_owned())],
        vec![MdNode::Text(source.to_owned())],
    )
}

/// Turns the events of one block into nodes.
struct Builder {
    stack: Vec<Open>,
    in_table_head: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            stack: vec![(None, vec![], vec![])],
            in_table_head: false,
        }
    }
}

impl Builder {
    fn event(&mut self, event: Event<'_>) {
        let stack = &mut self.stack;
        match event {
            Event::Start(tag) => {
                let (name, attrs) = if stack.len() > MAX_DEPTH {
                    (None, vec![]) // too deep: the content joins the enclosing element
                } else {
                    open(&tag, self.in_table_head)
                };
                if matches!(tag, Tag::TableHead) {
                    self.in_table_head = true;
                }
                stack.push((name, attrs, vec![]));
            }
            Event::End(end) => {
                if matches!(end, TagEnd::TableHead) {
                    self.in_table_head = false;
                }
                if stack.len() < 2 {
                    return;
                }
                let Some((name, attrs, children)) = stack.pop() else {
                    return;
                };
                let Some(parent) = stack.last_mut().map(|p| &mut p.2) else {
                    return;
                };
                match name {
                    Some(tag) => parent.push(wrap(tag, attrs, children, &end)),
                    None => parent.extend(children), // unsafe link, image or too deep: text only
                }
            }
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => {
                push(stack, MdNode::Text(t.into_string()))
            }
            Event::Code(t) => push(
                stack,
                el("code", vec![], vec![MdNode::Text(t.into_string())]),
            ),
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                push(stack, MdNode::Text(t.into_string()))
            }
            Event::SoftBreak => push(stack, MdNode::Text("\n".into())),
            Event::HardBreak => push(stack, el("br", vec![], vec![])),
            Event::Rule => push(stack, el("hr", vec![], vec![])),
            Event::TaskListMarker(done) => {
                push(stack, MdNode::Text(if done { "☑ " } else { "☐ " }.into()))
            }
            Event::FootnoteReference(t) => push(stack, MdNode::Text(format!("[{t}]"))),
        }
    }

    /// The nodes built; elements left open (never for a whole parse) are closed.
    fn finish(mut self) -> Vec<MdNode> {
        while self.stack.len() > 1 {
            if let Some((name, attrs, children)) = self.stack.pop()
                && let Some(parent) = self.stack.last_mut()
            {
                match name {
                    Some(tag) => parent.2.push(el(tag, attrs, children)),
                    None => parent.2.extend(children),
                }
            }
        }
        self.stack.pop().map(|(_, _, c)| c).unwrap_or_default()
    }
}

/// An element being built: its tag (None: keep only the children), attributes and children so far.
type Open = (
    Option<&'static str>,
    Vec<(&'static str, String)>,
    Vec<MdNode>,
);

pub(super) fn el(
    tag: &'static str,
    attrs: Vec<(&'static str, String)>,
    children: Vec<MdNode>,
) -> MdNode {
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
