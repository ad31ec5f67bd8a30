//! The incremental renderer against whole parses: random documents cut at random points, fed piece
//! by piece, match a whole parse of the text so far after every update and at the end; the updates,
//! applied as the widget applies them, build the same nodes; finished blocks never change unless a
//! later reference definition says they must; and hostile input stays bounded.

use proptest::prelude::*;

use super::*;

/// What the widget shows: one group of nodes per finished block, then the open part.
#[derive(Default)]
struct Shown {
    finished: Vec<Vec<MdNode>>,
    tail: Vec<MdNode>,
    replaced: usize,
}

impl Shown {
    fn apply(&mut self, update: StreamUpdate) {
        if update.reset {
            self.finished.clear();
            self.replaced += 1;
        }
        for (i, nodes) in update.replaced {
            self.finished[i] = nodes;
            self.replaced += 1;
        }
        self.finished.extend(update.appended);
        self.tail = update.tail;
    }

    fn nodes(&self) -> Vec<MdNode> {
        self.finished
            .iter()
            .flatten()
            .chain(&self.tail)
            .cloned()
            .collect()
    }
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,8}",
        1 => Just("héllo".to_owned()),
        1 => Just("日本語".to_owned()),
        1 => Just("x_y".to_owned()),
    ]
}

fn inline() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => word(),
        1 => word().prop_map(|w| format!("**{w}**")),
        1 => word().prop_map(|w| format!("*{w}*")),
        1 => word().prop_map(|w| format!("_{w}_")),
        1 => word().prop_map(|w| format!("~~{w}~~")),
        1 => word().prop_map(|w| format!("`{w}`")),
        1 => word().prop_map(|w| format!("[{w}](https://x.org/{w})")),
        1 => word().prop_map(|w| format!("![{w}](https://x.org/{w}.png)")),
        1 => label().prop_map(|l| format!("[{l}]")),
        1 => Just("<span class=\"x\">".to_owned()),
        1 => Just("javascript:alert(1)".to_owned()),
        1 => prop::sample::select(vec!["*", "**", "_", "`", "[", "]", "(", "|", "\\", "&amp;", "<"])
            .prop_map(str::to_owned),
    ]
}

fn label() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "B", "ref one", "Ref  One"]).prop_map(str::to_owned)
}

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(inline(), 1..6).prop_map(|w| w.join(" "))
}

fn lines(max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(line(), 1..max)
}

fn block() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => lines(4).prop_map(|l| l.join("\n")),
        1 => (1..4usize, line()).prop_map(|(n, l)| format!("{} {l}", "#".repeat(n))),
        1 => (line(), prop::sample::select(vec!["===", "---", "-"])).prop_map(|(l, u)| format!("{l}\n{u}")),
        2 => (prop::sample::select(vec!["- ", "* ", "1. ", "2) ", "+ "]), lines(5), any::<bool>(), any::<bool>())
            .prop_map(|(marker, items, loose, nested)| {
                let sep = if loose { "\n\n" } else { "\n" };
                items
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let indent = if nested && i % 2 == 1 { "  " } else { "" };
                        format!("{indent}{marker}{t}")
                    })
                    .collect::<Vec<_>>()
                    .join(sep)
            }),
        1 => (lines(4), any::<bool>()).prop_map(|(l, lazy)| {
            l.iter()
                .enumerate()
                .map(|(i, t)| if lazy && i == 1 { t.clone() } else { format!("> {t}") })
                .collect::<Vec<_>>()
                .join("\n")
        }),
        1 => (lines(3)).prop_map(|l| format!("> > {}", l.join("\n> "))),
        2 => (prop::sample::select(vec!["```", "~~~", "````"]), lines(4), any::<bool>(), prop::sample::select(vec!["", "rust", "js x"]))
            .prop_map(|(fence, body, closed, lang)| {
                let close = if closed { format!("\n{fence}") } else { String::new() };
                format!("{fence}{lang}\n{}{close}", body.join("\n"))
            }),
        1 => lines(3).prop_map(|l| l.iter().map(|t| format!("    {t}")).collect::<Vec<_>>().join("\n")),
        2 => (prop::collection::vec((word(), word()), 1..4), any::<bool>()).prop_map(|(rows, pipes)| {
            let mut t = String::from("| a | b |\n|---|:-:|");
            for (x, y) in rows {
                t.push_str(&if pipes { format!("\n| {x} | {y} |") } else { format!("\n{x} | {y}") });
            }
            t
        }),
        1 => prop::sample::select(vec![
            "<div>\n*not emphasis*\n</div>",
            "<!-- a comment\n\nstill the comment -->",
            "<script>\nlet x = '**';\n\n</script>",
            "<custom-tag>",
        ]).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["***", "---", "___", "- - -"]).prop_map(str::to_owned),
        1 => (label(), word()).prop_map(|(l, w)| format!("[{l}]: https://x.org/{w} \"{w}\"")),
        1 => prop::sample::select(vec!["*", "**", "[", "`", "|", ">", "-", "1.", "#", "   ", "\t", "- [ ] task", "- [x] done"])
            .prop_map(str::to_owned),
    ]
}

fn document() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            block(),
            prop::sample::select(vec!["\n", "\n\n", "\n\n", "\n\n\n", "\r\n\r\n"]),
        ),
        1..12,
    )
    .prop_map(|blocks| {
        blocks
            .into_iter()
            .map(|(b, sep)| format!("{b}{sep}"))
            .collect::<String>()
    })
}

/// Cuts `text` into pieces of the given byte lengths (moved to char boundaries; the rest is one piece).
fn cut(text: &str, lengths: &[usize]) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut at = 0;
    for &len in lengths {
        if at >= text.len() {
            break;
        }
        let mut end = (at + len).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(text[at..end].to_owned());
        at = end;
    }
    if at < text.len() {
        pieces.push(text[at..].to_owned());
    }
    pieces
}

/// True if two reference definitions have the same label: the first wins, and a finished part may
/// have used the other until the stream finishes.
fn defines_a_label_twice(text: &str) -> bool {
    let mut seen = std::collections::HashSet::new();
    text.lines()
        .filter_map(|l| {
            l.trim_start_matches(['>', ' '])
                .strip_prefix('[')?
                .split_once("]:")
        })
        .any(|(label, _)| {
            !seen.insert(
                label
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase(),
            )
        })
}

/// Feeds `pieces` to a stream, checking it against whole parses after every update.
fn stream_and_check(pieces: &[String]) -> Result<Shown, TestCaseError> {
    let mut stream = MarkdownStream::new();
    let mut shown = Shown::default();
    let mut text = String::new();
    for piece in pieces {
        text.push_str(piece);
        stream.push(piece);
        let before: Vec<Vec<MdNode>> = shown.finished.clone();
        shown.apply(stream.update());
        if !defines_a_label_twice(&text) {
            prop_assert_eq!(stream.nodes(), parse(&text), "after {:?}", text);
        }
        if !text.contains("]:") {
            prop_assert_eq!(
                &shown.finished[..before.len()],
                &before[..],
                "a finished block changed"
            );
        }
    }
    shown.apply(stream.finish());
    prop_assert_eq!(shown.nodes(), parse(&text), "final render of {:?}", text);
    prop_assert_eq!(stream.nodes(), parse(&text));
    Ok(shown)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300),
        ..ProptestConfig::default()
    })]

    #[test]
    fn streamed_in_random_pieces_it_always_ends_equal_to_the_whole_parse(
        doc in document(),
        lengths in prop::collection::vec(1..16usize, 0..400),
    ) {
        let shown = stream_and_check(&cut(&doc, &lengths))?;
        if !doc.contains("]:") {
            prop_assert_eq!(shown.replaced, 0, "no finished block needed rendering again: {:?}", doc);
        }
    }

    #[test]
    fn one_character_at_a_time_matches_too(doc in document()) {
        let pieces: Vec<String> = doc.chars().map(String::from).collect();
        stream_and_check(&pieces)?;
    }
}

#[test]
fn finished_blocks_are_handed_out_once() {
    let mut stream = MarkdownStream::new();
    stream.push("# Title\n\nFirst paragraph.\n\n- a\n- b\n");
    let first = stream.update();
    assert_eq!(
        first.appended.len(),
        2,
        "heading and paragraph are finished: {first:?}"
    );
    stream.push("\nmore\n");
    let second = stream.update();
    assert_eq!(
        second.appended.len(),
        1,
        "the list is finished once a later line is complete? {second:?}"
    );
    let third = stream.update();
    assert!(third.appended.is_empty());
}

#[test]
fn a_list_stays_open_while_an_incomplete_line_could_continue_it() {
    let mut stream = MarkdownStream::new();
    stream.push("1. a\n\n2");
    let update = stream.update();
    assert!(
        update.appended.is_empty(),
        "\"2\" may become \"2. b\": {update:?}"
    );
    stream.push(". b\n");
    stream.update();
    assert_eq!(stream.nodes(), parse("1. a\n\n2. b\n"));
}

#[test]
fn a_reference_defined_later_renders_the_finished_block_again() {
    let mut stream = MarkdownStream::new();
    stream.push("See [docs].\n\nNext paragraph.\n\n");
    let first = stream.update();
    assert_eq!(first.appended.len(), 1);
    stream.push("[docs]: https://x.org/docs\n\nEnd.\n");
    let update = stream.update();
    assert_eq!(update.replaced.len(), 1, "{update:?}");
    assert!(format!("{:?}", update.replaced[0].1).contains("https://x.org/docs"));
    stream.finish();
    assert_eq!(
        stream.nodes(),
        parse("See [docs].\n\nNext paragraph.\n\n[docs]: https://x.org/docs\n\nEnd.\n")
    );
}

/// A finished block rendered again is parsed with the definitions before it on its lines: an
/// indented line after a definition continues a paragraph, alone it would be code (found by the
/// property test above).
#[test]
fn a_block_rendered_again_keeps_the_definition_that_opened_its_paragraph() {
    let text =
        "[a]: https://x.org/a \"a\"\n    [ref one]\n- a\n\n[ref one]: https://x.org/a \"a\"\n";
    let mut stream = MarkdownStream::new();
    stream.push(text);
    stream.update();
    assert_eq!(stream.nodes(), parse(text));
    stream.finish();
    assert_eq!(stream.nodes(), parse(text));
}

#[test]
fn half_typed_syntax_shows_as_it_will_look_while_streaming() {
    let mut stream = MarkdownStream::new();
    stream.push("Intro.\n\nThis is **import");
    let update = stream.update();
    let shown = format!("{:?}", update.tail);
    assert!(
        shown.contains("tag: \"strong\"") && !shown.contains("**"),
        "{shown}"
    );
    stream.push("ant** and [a link](https://exa");
    let shown = format!("{:?}", stream.update().tail);
    assert!(
        shown.contains("a link") && !shown.contains("](") && !shown.contains("tag: \"a\""),
        "{shown}"
    );
    stream.push("mple.org) ok\n\n```rust\nfn main() {");
    let shown = format!("{:?}", stream.update().tail);
    assert!(
        shown.contains("tag: \"pre\"") && shown.contains("fn main() {"),
        "{shown}"
    );
    let last = stream.finish();
    let all = stream.nodes();
    assert_eq!(all, parse(stream.text()));
    assert!(last.tail.is_empty());
}

#[test]
fn deep_nesting_is_flattened_to_text_below_the_cap() {
    let mut doc = String::new();
    for depth in 0..500 {
        doc.push_str(&"  ".repeat(depth));
        doc.push_str("- item\n");
    }
    let nodes = parse(&doc);
    fn depth(n: &MdNode) -> usize {
        match n {
            MdNode::Text(_) => 0,
            MdNode::Element { children, .. } => 1 + children.iter().map(depth).max().unwrap_or(0),
        }
    }
    let deepest = nodes.iter().map(depth).max().unwrap_or(0);
    assert!(deepest <= MAX_DEPTH + 1, "{deepest}");
    let text = format!("{nodes:?}");
    assert_eq!(text.matches("item").count(), 500, "no content is lost");
}

#[test]
fn an_oversized_block_is_shown_as_its_plain_source() {
    let doc = format!("Short.\n\n{}\n", "*a **b ".repeat(MAX_BLOCK_BYTES / 4));
    let nodes = parse(&doc);
    assert_eq!(nodes.len(), 2);
    match &nodes[1] {
        MdNode::Element {
            tag: "div",
            children,
            ..
        } => {
            assert_eq!(
                children,
                &vec![MdNode::Text(
                    doc[8..].trim_end_matches('\n').to_owned() + "\n"
                )]
            );
        }
        other => panic!("{other:?}"),
    }
}
