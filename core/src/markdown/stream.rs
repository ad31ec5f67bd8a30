//! Rendering a markdown text while it arrives. Top-level blocks that are finished are parsed once and
//! handed out once; only the open end is parsed again when text arrives, so the work per piece does not
//! grow with the length of the reply.
//!
//! A block is finished once a later top-level block has started on a line that is complete: CommonMark
//! reads block structure line by line, so the line that started the later block has closed it for
//! good. What can still reach back are link reference definitions (`[x]: https://…` may come after
//! `[x]` is used): finished blocks that use a label defined later are rendered again, which is the only
//! time a finished block changes. When the stream finishes and the text had definitions, the blocks
//! are checked against a parse of the whole text (a label defined twice is the one case the blocks
//! cannot see), so the final result always equals [`parse`](super::parse).

use std::collections::HashMap;

use super::build::{Block, RefDef, RefLabel, Scan, scan};
use super::{MdNode, repair};

/// A markdown text being received, rendered block by block.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    text: String,
    /// Finished blocks, in order; ranges are in `text`.
    blocks: Vec<Block>,
    /// Where the part that may still change starts (a line start).
    tail_start: usize,
    /// Definitions in the finished part (the first definition of a label wins).
    defs: HashMap<RefLabel, RefDef>,
    /// Labels used but not defined in finished blocks, with the blocks that use them.
    unresolved: HashMap<RefLabel, Vec<usize>>,
    /// Definitions from the open part that finished blocks use.
    borrowed: HashMap<RefLabel, RefDef>,
    /// The open part as a whole parse renders it (no half-typed syntax completed).
    tail: Vec<MdNode>,
    /// The open part as the last update showed it.
    shown_tail: Vec<MdNode>,
    /// Length of `text` at the last update.
    seen: usize,
    /// A link reference definition was seen: the one thing that can reach back into finished
    /// blocks, so the final result is checked against a whole parse.
    saw_definitions: bool,
    finished: bool,
}

/// What changed since the previous update, for a renderer that keeps one group of nodes per finished
/// block followed by the open part.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamUpdate {
    /// Everything shown is replaced: drop it all, then show `appended` and `tail`.
    pub reset: bool,
    /// Finished blocks rendered again (a reference they use was defined later): index, nodes.
    pub replaced: Vec<(usize, Vec<MdNode>)>,
    /// Blocks finished since the last update, in order: shown once, then kept.
    pub appended: Vec<Vec<MdNode>>,
    /// The open part, shown in place of the previous one.
    pub tail: Vec<MdNode>,
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True once [`finish`](Self::finish) ran.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Appends a piece of text (cheap: parsing waits for the next update).
    pub fn push(&mut self, piece: &str) {
        self.text.push_str(piece);
    }

    /// Parses what changed since the last update. Half-typed syntax at the very end (an unclosed
    /// `**bold`, a code span, a link whose target is still arriving) is shown as it will look.
    pub fn update(&mut self) -> StreamUpdate {
        if self.finished || self.seen == self.text.len() && self.seen > 0 {
            return StreamUpdate {
                tail: self.shown_tail.clone(),
                ..Default::default()
            };
        }
        self.advance(false)
    }

    /// Marks the text complete and returns the final update: the result equals a parse of the
    /// whole text. Costs only the open end, unless the text had reference definitions.
    pub fn finish(&mut self) -> StreamUpdate {
        if self.finished {
            return StreamUpdate::default();
        }
        let mut update = self.advance(true);
        self.finished = true;
        if !self.saw_definitions {
            return update;
        }
        let whole = scan(&self.text, &|_| None).blocks;
        let same_shape = whole.len() == self.blocks.len()
            && whole
                .iter()
                .zip(&self.blocks)
                .all(|(a, b)| a.range == b.range);
        if same_shape {
            for (i, (a, b)) in whole.into_iter().zip(self.blocks.iter_mut()).enumerate() {
                if a.nodes != b.nodes {
                    update.replaced.push((i, a.nodes.clone()));
                    *b = a;
                }
            }
            // An appended block that was corrected is shown once, corrected.
            let first_new = self.blocks.len() - update.appended.len();
            update.replaced.retain(|(i, nodes)| {
                if *i >= first_new {
                    update.appended[*i - first_new] = nodes.clone();
                    false
                } else {
                    true
                }
            });
        } else {
            update = StreamUpdate {
                reset: true,
                appended: whole.iter().map(|b| b.nodes.clone()).collect(),
                ..Default::default()
            };
            self.blocks = whole;
        }
        update
    }

    /// Every node as a whole parse of the text so far renders it (finished blocks, then the open
    /// part without completions).
    pub fn nodes(&self) -> Vec<MdNode> {
        self.blocks
            .iter()
            .flat_map(|b| b.nodes.iter().cloned())
            .chain(self.tail.iter().cloned())
            .collect()
    }

    fn advance(&mut self, last: bool) -> StreamUpdate {
        self.seen = self.text.len();
        let start = self.tail_start;
        let open = &self.text[start..];
        let defs = &self.defs;
        let parsed = scan(open, &|label| defs.get(label).cloned());
        self.saw_definitions |= !parsed.defs.is_empty();
        // Finished: every block followed by a block that starts on a complete line.
        let complete_lines = open.rfind(['\n', '\r']).map_or(0, |i| i + 1);
        let finished = if last {
            parsed.blocks.len()
        } else {
            (1..parsed.blocks.len())
                .take_while(|&k| parsed.blocks[k].range.start < complete_lines)
                .last()
                .unwrap_or(0)
        };
        let (split, done, rest) = if last {
            (open.len(), Some(parsed), Scan::default())
        } else {
            match self.split(open, &parsed, finished) {
                Some((split, done, rest)) => (split, Some(done), rest),
                None => (0, None, parsed),
            }
        };

        let mut update = StreamUpdate::default();
        let mut stale: Vec<usize> = Vec::new();
        let first_index = self.blocks.len();
        if let Some(done) = done {
            for (label, pos) in &done.broken {
                if self.defs.contains_key(label) {
                    continue;
                }
                let within = done.blocks.partition_point(|b| b.range.start <= *pos);
                let index = first_index + within.saturating_sub(1);
                let users = self.unresolved.entry(label.clone()).or_default();
                if users.last() != Some(&index) {
                    users.push(index);
                }
            }
            for (label, def, _) in &done.defs {
                if !self.defs.contains_key(label) {
                    self.defs.insert(label.clone(), def.clone());
                    stale.extend(self.unresolved.remove(label).unwrap_or_default());
                }
            }
            for mut block in done.blocks {
                block.range = block.range.start + start..block.range.end + start;
                update.appended.push(block.nodes.clone());
                self.blocks.push(block);
            }
        }
        self.tail_start = start + split;
        // Definitions in the open part that finished blocks use.
        let borrowed: HashMap<RefLabel, RefDef> = rest
            .defs
            .iter()
            .filter(|(label, _, _)| self.unresolved.contains_key(label))
            .map(|(label, def, _)| (label.clone(), def.clone()))
            .collect();
        for label in self.borrowed.keys().chain(borrowed.keys()) {
            if self.borrowed.get(label) != borrowed.get(label) {
                stale.extend(self.unresolved.get(label).into_iter().flatten());
            }
        }
        self.borrowed = borrowed;
        stale.sort_unstable();
        stale.dedup();
        for index in stale {
            let nodes = self.render_again(index);
            match index.checked_sub(first_index) {
                Some(new) => update.appended[new] = nodes.clone(),
                None => update.replaced.push((index, nodes.clone())),
            }
            self.blocks[index].nodes = nodes;
        }

        self.tail = rest.blocks.into_iter().flat_map(|b| b.nodes).collect();
        update.tail = match rest.open_inline.filter(|_| !last) {
            Some(pos) => {
                let open = &self.text[self.tail_start..];
                match repair::close_open_inline(&open[pos..]) {
                    Some(fixed) => {
                        let shown = format!("{}{fixed}", &open[..pos]);
                        self.scan_with_borrowed(&shown)
                    }
                    None => self.tail.clone(),
                }
            }
            None => self.tail.clone(),
        };
        self.shown_tail = update.tail.clone();
        update
    }

    /// Where to cut `open` so that its first `finished` blocks are parsed on their own and the rest
    /// parses to the remaining blocks: the cut that reproduces `parsed` on both sides, with the two
    /// parses. Reference definitions make block ranges unreliable near them (a definition starts
    /// the paragraph after it), so candidate cuts are checked rather than trusted.
    fn split(&self, open: &str, parsed: &Scan, finished: usize) -> Option<(usize, Scan, Scan)> {
        let (prev, next) = (
            parsed.blocks.get(finished.checked_sub(1)?)?,
            parsed.blocks.get(finished)?,
        );
        let mut cuts = vec![
            next_line(open, prev.range.end),
            line_start(open, next.range.start),
        ];
        cuts.extend(
            parsed
                .defs
                .iter()
                .filter(|(_, _, pos)| (prev.range.start + 1..next.range.start).contains(pos))
                .map(|(_, _, pos)| line_start(open, *pos)),
        );
        cuts.sort_unstable();
        cuts.dedup();
        let same = |a: &[Block], b: &[Block]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.nodes == y.nodes)
        };
        cuts.into_iter().rev().find_map(|cut| {
            if cut == 0 || cut > next.range.start {
                return None;
            }
            let later: HashMap<&RefLabel, &RefDef> = parsed
                .defs
                .iter()
                .filter(|(_, _, pos)| *pos >= cut)
                .map(|(label, def, _)| (label, def))
                .collect();
            let done = scan(&open[..cut], &|label| {
                self.defs
                    .get(label)
                    .or_else(|| later.get(label).copied())
                    .cloned()
            });
            if !same(&done.blocks, &parsed.blocks[..finished]) {
                return None;
            }
            let earlier: HashMap<&RefLabel, &RefDef> = done
                .defs
                .iter()
                .map(|(label, def, _)| (label, def))
                .collect();
            let rest = scan(&open[cut..], &|label| {
                self.defs
                    .get(label)
                    .or_else(|| earlier.get(label).copied())
                    .cloned()
            });
            same(&rest.blocks, &parsed.blocks[finished..]).then_some((cut, done, rest))
        })
    }

    /// A finished block parsed again with every definition known now. Parsed from the end of the
    /// block before: what lies between makes no block (blank lines, definitions), but a definition
    /// there may be what opened this block's paragraph (an indented line after it continues the
    /// paragraph; alone it would be code).
    fn render_again(&self, index: usize) -> Vec<MdNode> {
        let range = &self.blocks[index].range;
        let from = index
            .checked_sub(1)
            .map_or(0, |before| {
                next_line(&self.text, self.blocks[before].range.end)
            })
            .min(line_start(&self.text, range.start));
        self.blocks_with_borrowed(&self.text[from..range.end])
            .pop()
            .map(|b| b.nodes)
            .unwrap_or_default()
    }

    fn scan_with_borrowed(&self, text: &str) -> Vec<MdNode> {
        self.blocks_with_borrowed(text)
            .into_iter()
            .flat_map(|b| b.nodes)
            .collect()
    }

    fn blocks_with_borrowed(&self, text: &str) -> Vec<Block> {
        scan(text, &|label| {
            self.defs
                .get(label)
                .or_else(|| self.borrowed.get(label))
                .cloned()
        })
        .blocks
    }
}

/// `pos` if a line starts there, else the start of the next line.
fn next_line(text: &str, pos: usize) -> usize {
    if pos == 0 || text[..pos].ends_with(['\n', '\r']) {
        return pos;
    }
    text[pos..]
        .find(['\n', '\r'])
        .map_or(text.len(), |i| pos + i + 1)
}

/// The start of the line that `pos` is on.
fn line_start(text: &str, pos: usize) -> usize {
    text[..pos].rfind(['\n', '\r']).map_or(0, |i| i + 1)
}
