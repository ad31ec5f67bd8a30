//! Half-typed inline syntax at the end of a streaming reply, completed the way it will look once the
//! rest arrives: an unclosed `**bold`, `*emphasis*`, `~~strike` or `` `code `` is closed, a link
//! whose target is still arriving shows its text, a marker with nothing after it yet is left out.
//! Used only for what is shown while streaming; the final render parses the text as it is.

/// Completes the open inline text `src` (a paragraph, heading, list item or table row reaching the
/// end of the reply); `None` when nothing needs completing.
pub(crate) fn close_open_inline(src: &str) -> Option<String> {
    let body = src.trim_end();
    let mut text = body.to_owned();
    let mut changed = false;
    // Each round drops one half-typed link or bracket; a reply cannot make this loop long.
    for _ in 0..8 {
        let scanned = Scanned::of(&text);
        if let Some(edit) = scanned.link_edit(&text) {
            text = edit;
            changed = true;
            continue;
        }
        let mut end = text.len();
        let mut closers = String::new();
        if let Some((len, pos)) = scanned.code {
            if pos + len == end {
                end = pos;
            } else {
                closers.push_str(&"`".repeat(len));
            }
        } else {
            if let Some(pos) = scanned.dangling {
                end = pos;
            }
            for open in scanned.delimiters.iter().rev() {
                if open.pos + open.len >= end {
                    end = end.min(open.pos);
                } else {
                    closers.extend(std::iter::repeat_n(char::from(open.ch), open.len));
                }
            }
        }
        if end == text.len() && closers.is_empty() {
            break;
        }
        text.truncate(end);
        let kept = text.trim_end().len();
        text.truncate(kept);
        text.push_str(&closers);
        changed = true;
        break;
    }
    changed.then(|| {
        text.push_str(&src[body.len()..]);
        text
    })
}

/// An emphasis or strikethrough delimiter run that may still be closed.
#[derive(Debug, Clone, Copy)]
struct Opener {
    ch: u8,
    len: usize,
    pos: usize,
}

/// What one left-to-right pass over the open text found.
#[derive(Debug, Default)]
struct Scanned {
    /// An unclosed code span: its backtick count and where it starts.
    code: Option<(usize, usize)>,
    /// Unmatched delimiter runs that can open, oldest first.
    delimiters: Vec<Opener>,
    /// A delimiter run at the very end that matched nothing: where it starts.
    dangling: Option<usize>,
    /// Unclosed `[` (or `![`): where they start.
    brackets: Vec<usize>,
    /// A link whose target is still arriving: where its `[` and its `]` are.
    open_target: Option<(usize, usize)>,
}

impl Scanned {
    fn of(text: &str) -> Self {
        let b = text.as_bytes();
        let mut s = Scanned::default();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if let Some((len, _)) = s.code {
                let run = run_len(b, i);
                if c == b'`' && run == len {
                    s.code = None;
                }
                i += if c == b'`' { run } else { 1 };
                continue;
            }
            if let Some((_, _)) = s.open_target {
                // Inside `(…)`: look for the `)` that ends it.
                i = match target_end(b, i) {
                    Some(after) => {
                        s.open_target = None;
                        after
                    }
                    None => b.len(),
                };
                continue;
            }
            match c {
                b'\\' => i += 2,
                b'`' => {
                    let run = run_len(b, i);
                    s.code = Some((run, i));
                    i += run;
                }
                b'[' => {
                    s.brackets
                        .push(if i > 0 && b[i - 1] == b'!' { i - 1 } else { i });
                    i += 1;
                }
                b']' => {
                    if let Some(open) = s.brackets.pop()
                        && b.get(i + 1) == Some(&b'(')
                    {
                        s.open_target = Some((open, i));
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                b'*' | b'_' | b'~' => {
                    let run = run_len(b, i);
                    let closed = s.delimiter(text, i, run);
                    if !closed && i + run == b.len() {
                        s.dangling = Some(i);
                    }
                    i += run;
                }
                _ => i += 1,
            }
        }
        s
    }

    /// Handles a delimiter run at `pos`; true if it closed an opener.
    fn delimiter(&mut self, text: &str, pos: usize, len: usize) -> bool {
        let ch = text.as_bytes()[pos];
        if ch == b'~' && len > 2 {
            return false;
        }
        let prev = text[..pos].chars().next_back().unwrap_or(' ');
        let next = text[pos + len..].chars().next().unwrap_or(' ');
        let punct = |c: char| c.is_ascii_punctuation();
        let left = !next.is_whitespace() && (!punct(next) || prev.is_whitespace() || punct(prev));
        let right = !prev.is_whitespace() && (!punct(prev) || next.is_whitespace() || punct(next));
        let (can_open, can_close) = if ch == b'_' {
            (
                left && (!right || punct(prev)),
                right && (!left || punct(next)),
            )
        } else {
            (left, right)
        };
        if can_close && let Some(at) = self.delimiters.iter().rposition(|o| o.ch == ch) {
            let opener = &mut self.delimiters[at];
            if opener.len > len {
                opener.len -= len;
                self.delimiters.truncate(at + 1);
            } else {
                self.delimiters.truncate(at);
            }
            return true;
        }
        if can_open {
            self.delimiters.push(Opener { ch, len, pos });
        }
        false
    }

    /// The text with one half-typed link or unclosed bracket reduced to its text, if any.
    fn link_edit(&self, text: &str) -> Option<String> {
        if let Some((open, close)) = self.open_target {
            let label_start = if text.as_bytes()[open] == b'!' {
                open + 2
            } else {
                open + 1
            };
            return Some(format!("{}{}", &text[..open], &text[label_start..close]));
        }
        let open = *self.brackets.last()?;
        let skip = if text.as_bytes()[open] == b'!' { 2 } else { 1 };
        Some(format!("{}{}", &text[..open], &text[open + skip..]))
    }
}

/// How many times the byte at `i` repeats from `i`.
fn run_len(b: &[u8], i: usize) -> usize {
    b[i..].iter().take_while(|&&c| c == b[i]).count()
}

/// From inside a link target, the index after the `)` that ends it, if it has arrived.
fn target_end(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'(' => depth += 1,
            b')' if depth == 0 => return Some(i + 1),
            b')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::close_open_inline as fix;

    #[test]
    fn unclosed_emphasis_is_closed() {
        assert_eq!(fix("Hello **wor").as_deref(), Some("Hello **wor**"));
        assert_eq!(fix("a *b **c").as_deref(), Some("a *b **c***"));
        assert_eq!(fix("~~gone").as_deref(), Some("~~gone~~"));
        assert_eq!(fix("__strong").as_deref(), Some("__strong__"));
        assert_eq!(fix("**bold**\n").as_deref(), None, "closed: nothing to do");
    }

    #[test]
    fn closers_go_before_trailing_whitespace() {
        assert_eq!(fix("**bold\n").as_deref(), Some("**bold**\n"));
    }

    #[test]
    fn a_marker_with_nothing_after_it_is_left_out() {
        assert_eq!(fix("Hello **").as_deref(), Some("Hello"));
        assert_eq!(fix("Hello `").as_deref(), Some("Hello"));
        assert_eq!(fix("snake_").as_deref(), Some("snake"));
        assert_eq!(
            fix("snake_case").as_deref(),
            None,
            "intraword underscore is text"
        );
    }

    #[test]
    fn code_spans_are_closed_and_protect_their_content() {
        assert_eq!(fix("run `cargo **x").as_deref(), Some("run `cargo **x`"));
        assert_eq!(fix("a ``b ` c").as_deref(), Some("a ``b ` c``"));
    }

    #[test]
    fn half_typed_links_show_their_text() {
        assert_eq!(
            fix("see [the docs](https://exa").as_deref(),
            Some("see the docs")
        );
        assert_eq!(fix("see [the do").as_deref(), Some("see the do"));
        assert_eq!(fix("![cat](https://x").as_deref(), Some("cat"));
        assert_eq!(fix("[a](https://x.org) done").as_deref(), None);
        assert_eq!(
            fix("[**bold link**](https://x").as_deref(),
            Some("**bold link**")
        );
        assert_eq!(fix("[(a)](https://x.org/(b)").as_deref(), Some("(a)"));
    }

    #[test]
    fn list_bullets_are_not_emphasis() {
        assert_eq!(fix("* item").as_deref(), None);
        assert_eq!(fix("- item **b").as_deref(), Some("- item **b**"));
    }
}
