//! Long, realistic markdown replies of an exact size, the same every run: what a model writes when it
//! explains something at length (headings, paragraphs with bold, code and links, nested bullet and
//! numbered lists, block quotes, fenced code blocks of 10–40 lines, tables). The render benchmark and
//! the long-reply browser test stream these through the fake provider.
//!
//! Every document is ASCII, so its length in bytes is also its length in JavaScript string units, and
//! it ends with a paragraph whose last words are [`MarkdownDoc::end_marker`]: rendered text that ends
//! with the marker holds the whole reply.

use glassbox_core::markdown::{MdNode, parse};

/// A generated document and what it must render to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownDoc {
    /// The markdown source, exactly the requested number of bytes.
    pub text: String,
    /// How many of the counted elements a correct render contains.
    pub structure: Structure,
    /// The last words of the document (no markup).
    pub end_marker: String,
}

/// Counts of the block elements a render of the document must contain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Structure {
    pub h2: usize,
    pub pre: usize,
    pub table: usize,
    pub li: usize,
    pub blockquote: usize,
}

impl Structure {
    /// `(tag, count)` pairs, for comparing with a DOM query per tag.
    pub fn by_tag(&self) -> [(&'static str, usize); 5] {
        [
            ("h2", self.h2),
            ("pre", self.pre),
            ("table", self.table),
            ("li", self.li),
            ("blockquote", self.blockquote),
        ]
    }

    /// Counts the same elements in rendered markdown nodes.
    pub fn of_nodes(nodes: &[MdNode]) -> Self {
        let mut s = Structure::default();
        s.add(nodes);
        s
    }

    fn add(&mut self, nodes: &[MdNode]) {
        for node in nodes {
            if let MdNode::Element { tag, children, .. } = node {
                match *tag {
                    "h2" => self.h2 += 1,
                    "pre" => self.pre += 1,
                    "table" => self.table += 1,
                    "li" => self.li += 1,
                    "blockquote" => self.blockquote += 1,
                    _ => {}
                }
                self.add(children);
            }
        }
    }
}

/// The text a render of `markdown` shows (its text nodes, in order), as `textContent` reads it.
pub fn rendered_text(markdown: &str) -> String {
    fn walk(nodes: &[MdNode], out: &mut String) {
        for node in nodes {
            match node {
                MdNode::Text(t) => out.push_str(t),
                MdNode::Element { children, .. } => walk(children, out),
            }
        }
    }
    let mut out = String::new();
    walk(&parse(markdown), &mut out);
    out
}

/// Cuts `text` into pieces of `chars` characters (the last may be shorter), on char boundaries.
pub fn pieces(text: &str, chars: usize) -> Vec<String> {
    let chars = chars.max(1);
    let mut out = Vec::with_capacity(text.len() / chars + 1);
    let mut piece = String::with_capacity(chars * 4);
    for (i, c) in text.chars().enumerate() {
        piece.push(c);
        if (i + 1) % chars == 0 {
            out.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

/// A mixed markdown document of exactly `size` bytes (at least 64), the same for the same
/// `(size, seed)`.
pub fn mixed_markdown(size: usize, seed: u64) -> MarkdownDoc {
    let size = size.max(64);
    let mut g = Gen {
        rng: Rng(seed ^ 0x9e37_79b9_7f4a_7c15 ^ size as u64),
        structure: Structure::default(),
    };
    let end_marker = format!("(end of the {size}-byte reply)");
    // What the closing paragraph needs at least: a few words and the marker.
    let tail_min = end_marker.len() + 24;
    let mut blocks: Vec<String> = Vec::new();
    let mut used = 0usize;
    // Sections: a heading, a paragraph, one feature block (taking turns), sometimes another paragraph.
    let mut feature = (seed % 5) as usize;
    'sections: loop {
        let mut section: Vec<(String, Structure)> =
            vec![g.counted(|g| g.heading()), g.counted(|g| g.paragraph(2..5))];
        section.push(g.counted(|g| g.feature(feature)));
        feature = (feature + 1) % 5;
        if g.rng.below(2) == 0 {
            section.push(g.counted(|g| g.paragraph(1..4)));
        }
        for (block, counts) in section {
            let cost = block.len() + if blocks.is_empty() { 0 } else { 2 };
            // Room must remain for the separator, the closing paragraph and the final newline.
            if used + cost + 2 + tail_min + 1 > size {
                break 'sections;
            }
            used += cost;
            blocks.push(block);
            g.structure = g.structure.plus(counts);
        }
    }
    // Fill what is left with paragraphs, the last ending with the marker, to the exact size.
    let sep = if blocks.is_empty() { 0 } else { 2 };
    let mut left = size - used - sep - 1;
    let mut tail = Vec::new();
    while left > 460 {
        tail.push(g.exact_paragraph(300, "Let us go on."));
        left -= 302;
    }
    tail.push(g.exact_paragraph(left, &end_marker));
    blocks.extend(tail);
    let mut text = blocks.join("\n\n");
    text.push('\n');
    debug_assert_eq!(text.len(), size);
    MarkdownDoc {
        text,
        structure: g.structure,
        end_marker,
    }
}

impl Structure {
    fn plus(self, o: Structure) -> Structure {
        Structure {
            h2: self.h2 + o.h2,
            pre: self.pre + o.pre,
            table: self.table + o.table,
            li: self.li + o.li,
            blockquote: self.blockquote + o.blockquote,
        }
    }
}

/// splitmix64: small, fast and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> usize {
        r.start + self.below(r.end - r.start)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "request", "stream", "server", "widget", "message", "token", "context", "reply", "model",
    "browser", "session", "render", "layout", "frame", "buffer", "parser", "block", "list",
    "table", "value", "error", "retry", "socket", "history", "window", "cache", "vector", "query",
    "field", "the", "a", "of", "to", "and", "in", "with", "when", "every", "each", "only", "then",
    "after", "before", "quickly", "safely", "again", "never", "always", "usually", "exactly",
    "keeps", "sends", "reads", "writes", "checks", "builds", "returns", "stores", "splits",
    "joins", "waits", "moves", "counts", "shows", "hides", "updates", "opens", "closes", "small",
    "large", "long", "short", "new", "old", "first", "last", "next", "whole", "partial", "plain",
    "nested", "simple",
];

const TITLES: &[&str] = &[
    "Overview",
    "How it works",
    "Configuration",
    "Streaming replies",
    "Error handling",
    "Performance notes",
    "A worked example",
    "Edge cases",
    "Testing it",
    "Deployment",
    "Reconnecting",
    "Limits",
    "Security",
    "Summary of options",
    "Next steps",
];

const IDENTS: &[&str] = &[
    "send_message",
    "parse_frame",
    "session_id",
    "max_tokens",
    "retry_after",
    "on_delta",
    "flush",
    "render_block",
    "scroll_top",
    "last_sync_id",
    "config.toml",
    "Content-Type",
];

/// Words of each length from 1 to 12, to end a paragraph exactly where it must.
const BY_LENGTH: [&str; 12] = [
    "a",
    "an",
    "the",
    "tool",
    "about",
    "little",
    "between",
    "listened",
    "important",
    "particular",
    "information",
    "relationship",
];

struct Gen {
    rng: Rng,
    structure: Structure,
}

impl Gen {
    /// Runs `make`, returning its block and the elements it added (and leaving the total as it was).
    fn counted(&mut self, make: impl FnOnce(&mut Gen) -> String) -> (String, Structure) {
        let before = self.structure;
        self.structure = Structure::default();
        let block = make(self);
        let counts = self.structure;
        self.structure = before;
        (block, counts)
    }

    fn word(&mut self) -> &'static str {
        self.rng.pick(WORDS)
    }

    /// A few plain words, the first capitalised.
    fn phrase(&mut self, n: std::ops::Range<usize>) -> String {
        let n = self.rng.range(n);
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.word());
        }
        capitalise(&out)
    }

    /// A sentence with inline markup now and then: bold, emphasis, code spans and links.
    fn sentence(&mut self) -> String {
        let n = self.rng.range(6..16);
        let mut words: Vec<String> = Vec::with_capacity(n);
        for _ in 0..n {
            let w = self.word();
            words.push(match self.rng.below(14) {
                0 => format!("**{w} {}**", self.word()),
                1 => format!("*{w}*"),
                2 => format!("`{}`", self.rng.pick(IDENTS)),
                3 => format!(
                    "[{w} {}](https://example.com/docs/{})",
                    self.word(),
                    self.rng.below(500)
                ),
                _ => w.to_owned(),
            });
        }
        // Never start with markup: a line starting with `*` followed by a space would be a list.
        if words[0].starts_with(['*', '`', '[']) {
            words.insert(0, "Then".to_owned());
        }
        let mut s = capitalise(&words.join(" "));
        s.push(if self.rng.below(8) == 0 { '?' } else { '.' });
        s
    }

    fn paragraph(&mut self, sentences: std::ops::Range<usize>) -> String {
        let n = self.rng.range(sentences);
        (0..n)
            .map(|_| self.sentence())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn heading(&mut self) -> String {
        self.structure.h2 += 1;
        format!("## {}", self.rng.pick(TITLES))
    }

    fn feature(&mut self, which: usize) -> String {
        match which {
            0 => self.bullets(),
            1 => self.code_block(),
            2 => self.table(),
            3 => self.quote(),
            _ => self.numbered(),
        }
    }

    /// A bullet list, some items with a nested list.
    fn bullets(&mut self) -> String {
        let mut lines = Vec::new();
        for _ in 0..self.rng.range(3..7) {
            self.structure.li += 1;
            lines.push(format!("- {}", self.item_text()));
            if self.rng.below(3) == 0 {
                for _ in 0..self.rng.range(2..4) {
                    self.structure.li += 1;
                    lines.push(format!("  - {}", self.item_text()));
                }
            }
        }
        lines.join("\n")
    }

    /// A numbered list, some items with a nested bullet list.
    fn numbered(&mut self) -> String {
        let mut lines = Vec::new();
        for i in 0..self.rng.range(3..7) {
            self.structure.li += 1;
            lines.push(format!("{}. {}", i + 1, self.item_text()));
            if self.rng.below(3) == 0 {
                for _ in 0..self.rng.range(2..4) {
                    self.structure.li += 1;
                    lines.push(format!("   - {}", self.item_text()));
                }
            }
        }
        lines.join("\n")
    }

    fn item_text(&mut self) -> String {
        let mut s = self.phrase(3..9);
        match self.rng.below(4) {
            0 => s.push_str(&format!(" with `{}`", self.rng.pick(IDENTS))),
            1 => s.push_str(&format!(" and **{}**", self.word())),
            _ => {}
        }
        s
    }

    /// A block quote of one or two paragraphs.
    fn quote(&mut self) -> String {
        self.structure.blockquote += 1;
        let mut out = format!("> {}", self.paragraph(1..3));
        if self.rng.below(2) == 0 {
            out.push_str(&format!("\n>\n> {}", self.paragraph(1..3)));
        }
        out
    }

    /// A fenced code block of 10 to 40 lines.
    fn code_block(&mut self) -> String {
        self.structure.pre += 1;
        let lang = self.rng.pick(&["rust", "js", "python", "sh", "toml"]);
        let mut lines = vec![format!("```{lang}")];
        let n = self.rng.range(10..41);
        for i in 0..n {
            let indent = "    ".repeat(if i == 0 || i + 1 == n {
                0
            } else {
                1 + self.rng.below(2)
            });
            let line = match self.rng.below(5) {
                0 => format!(
                    "let {} = {}({});",
                    self.rng.pick(IDENTS).replace(['.', '-'], "_"),
                    self.word(),
                    self.rng.below(1000)
                ),
                1 => format!("// {} {} {}", self.word(), self.word(), self.word()),
                2 => format!(
                    "if {} > {} {{ return {}; }}",
                    self.word(),
                    self.rng.below(64),
                    self.word()
                ),
                3 => format!(
                    "{}.{}(\"{}\", {});",
                    self.word(),
                    self.rng.pick(IDENTS).replace(['.', '-'], "_"),
                    self.word(),
                    self.rng.below(100)
                ),
                _ => format!("{} = [{}, {}, {}]", self.word(), i, i * 2, i * 3),
            };
            lines.push(format!("{indent}{line}"));
        }
        lines.push("```".to_owned());
        lines.join("\n")
    }

    /// A table of 3 or 4 columns and 3 to 8 rows.
    fn table(&mut self) -> String {
        self.structure.table += 1;
        let cols = self.rng.range(3..5);
        let header: Vec<String> = (0..cols).map(|_| capitalise(self.word())).collect();
        let mut lines = vec![
            format!("| {} |", header.join(" | ")),
            format!("|{}", "---|".repeat(cols)),
        ];
        for _ in 0..self.rng.range(3..9) {
            let cells: Vec<String> = (0..cols)
                .map(|c| match (c, self.rng.below(3)) {
                    (0, _) => format!("`{}`", self.rng.pick(IDENTS)),
                    (_, 0) => self.rng.below(10_000).to_string(),
                    _ => self.phrase(1..4),
                })
                .collect();
            lines.push(format!("| {} |", cells.join(" | ")));
        }
        lines.join("\n")
    }

    /// A plain paragraph of exactly `len` bytes ending with `suffix`.
    fn exact_paragraph(&mut self, len: usize, suffix: &str) -> String {
        let target = len.saturating_sub(suffix.len() + 1);
        let mut body = String::from("Finally");
        while body.len() + 13 < target {
            body.push(' ');
            body.push_str(self.word());
        }
        let left = target.saturating_sub(body.len());
        match left {
            0 => {}
            1 => body.push('s'),
            n => {
                body.push(' ');
                body.push_str(BY_LENGTH[(n - 2).min(11)]);
            }
        }
        format!("{body} {suffix}")
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// Replies written to be expensive to render (issue 11: such replies froze the page for 4–11 s):
/// lists nested 500 deep, and a 110 kB document of known pathological markdown (emphasis and
/// bracket runs without closers, deep block quotes, a long table, a 40 kB paragraph). Each ends with
/// a plain paragraph holding its end marker. `(label, document)`.
pub fn hostile_documents() -> Vec<(String, MarkdownDoc)> {
    let finish = |label: &str, mut text: String| {
        let end_marker = format!("(end of the {label})");
        text.push_str(&format!("\n\nThat is all {end_marker}\n"));
        (
            label.to_owned(),
            MarkdownDoc {
                text,
                structure: Structure::default(),
                end_marker,
            },
        )
    };
    let mut nested = String::new();
    for line in 0..20 {
        nested.push_str(&"- ".repeat(500));
        nested.push_str(&format!("item {line} at depth 500\n"));
    }
    for depth in 0..120 {
        nested.push_str(&"  ".repeat(depth));
        nested.push_str(&format!("1. step {depth}\n"));
    }
    let mut patho = String::new();
    let sections: [&dyn Fn(usize) -> String; 8] = [
        &|i| format!("*a **b _c __d {i} "),
        &|i| format!("[link {i} ["),
        &|i| format!("`a ``b {i} "),
        &|i| format!("<a href=\"x{i}\" "),
        &|_| "> ".to_owned(),
        &|i| format!("| {i} | *x | [y |\n"),
        &|i| format!("a_b_{i}_ **x "),
        &|i| format!("![i{i}](https://x.org/{i} "),
    ];
    for (n, make) in sections.iter().enumerate() {
        if n == 5 {
            patho.push_str("| a | b | c |\n|---|---|---|\n");
        }
        let mut block = String::new();
        let mut i = 0;
        while block.len() < 9 * 1024 {
            block.push_str(&make(i));
            i += 1;
        }
        patho.push_str(&block);
        patho.push_str("end of section\n\n");
    }
    while patho.len() < 70 * 1024 {
        patho.push_str("**x ");
    }
    patho.push_str("\n\n");
    let mut one_paragraph = String::new();
    while one_paragraph.len() < 40 * 1024 {
        one_paragraph.push_str("*a [b](c ");
    }
    patho.push_str(&one_paragraph);
    vec![
        finish("500-deep nested lists", nested),
        finish("110 kB pathological document", patho),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_have_the_exact_size_and_are_the_same_every_time() {
        for size in [64, 100, 1024, 4096, 16 * 1024, 32 * 1024, 64 * 1024] {
            let doc = mixed_markdown(size, 7);
            assert_eq!(doc.text.len(), size, "size {size}");
            assert!(doc.text.is_ascii());
            assert_eq!(doc, mixed_markdown(size, 7));
            assert!(doc.text.trim_end().ends_with(&doc.end_marker));
        }
        assert_ne!(mixed_markdown(4096, 1).text, mixed_markdown(4096, 2).text);
    }

    #[test]
    fn the_counted_structure_is_what_the_markdown_parser_finds() {
        for (size, seed) in [
            (1024, 1),
            (4096, 2),
            (16 * 1024, 3),
            (32 * 1024, 4),
            (64 * 1024, 5),
        ] {
            let doc = mixed_markdown(size, seed);
            assert_eq!(
                Structure::of_nodes(&parse(&doc.text)),
                doc.structure,
                "size {size}"
            );
        }
    }

    #[test]
    fn long_documents_mix_every_kind_of_block() {
        let s = mixed_markdown(32 * 1024, 4).structure;
        assert!(
            s.h2 >= 10 && s.pre >= 2 && s.table >= 2 && s.li >= 10 && s.blockquote >= 2,
            "{s:?}"
        );
    }

    #[test]
    fn the_rendered_text_ends_with_the_marker() {
        let doc = mixed_markdown(16 * 1024, 3);
        assert!(
            rendered_text(&doc.text)
                .trim_end()
                .ends_with(&doc.end_marker)
        );
    }

    #[test]
    fn pieces_join_back_into_the_text() {
        let text = "héllo wörld, 4-char pieces";
        let p = pieces(text, 4);
        assert_eq!(p.concat(), text);
        assert!(p.iter().all(|s| s.chars().count() <= 4));
        assert_eq!(p[0], "héll");
    }
}
