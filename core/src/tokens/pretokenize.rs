//! Splits text into the pieces tiktoken's split regexes produce, by hand instead of with a
//! backtracking regex engine: the same leftmost-first, greedy-with-backtracking result, several
//! times faster. Each function below names the regex branch it implements; the property tests in
//! `tokens::tests` check every branch against `fancy-regex` running tiktoken's own patterns.

use unicode_general_category::{GeneralCategory as Gc, get_general_category};

/// Which split pattern an encoding uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// `cl100k_base` (GPT-4, GPT-3.5).
    Cl100k,
    /// `o200k_base` (GPT-4o, GPT-4.1, o-series, GPT-5).
    O200k,
}

impl Pattern {
    /// tiktoken's regex for this pattern (documentation and tests; splitting never runs it).
    pub const fn regex(self) -> &'static str {
        match self {
            Pattern::Cl100k => {
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            }
            Pattern::O200k => concat!(
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
        }
    }

    /// Length in bytes of the piece that starts `s` (non-empty).
    fn piece_len(self, s: &str) -> usize {
        match self {
            Pattern::Cl100k => cl100k_piece(s),
            Pattern::O200k => o200k_piece(s),
        }
    }
}

/// The pieces of `text`, in order; concatenated they give `text` back.
pub fn pieces(text: &str, pattern: Pattern) -> Pieces<'_> {
    Pieces {
        rest: text,
        pattern,
    }
}

/// Iterator returned by [`pieces`].
pub struct Pieces<'a> {
    rest: &'a str,
    pattern: Pattern,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        let len = self.pattern.piece_len(self.rest);
        let (piece, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(piece)
    }
}

// Character classes as bit flags.
const LETTER: u8 = 1; // \p{L}
const NUMBER: u8 = 2; // \p{N}
const SPACE: u8 = 4; // \s (Unicode White_Space)
const NEWLINE: u8 = 8; // \r or \n
const UPPERISH: u8 = 16; // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
const LOWERISH: u8 = 32; // [\p{Ll}\p{Lm}\p{Lo}\p{M}]

const ASCII_FLAGS: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        t[i] = if c.is_ascii_uppercase() {
            LETTER | UPPERISH
        } else if c.is_ascii_lowercase() {
            LETTER | LOWERISH
        } else if c.is_ascii_digit() {
            NUMBER
        } else if c == b'\r' || c == b'\n' {
            SPACE | NEWLINE
        } else if c == b' ' || c == b'\t' || c == 0x0b || c == 0x0c {
            SPACE
        } else {
            0
        };
        i += 1;
    }
    t
};

#[inline]
fn flags(c: char) -> u8 {
    if c.is_ascii() {
        return ASCII_FLAGS[c as usize];
    }
    let space = if c.is_whitespace() { SPACE } else { 0 };
    space
        | match get_general_category(c) {
            Gc::UppercaseLetter | Gc::TitlecaseLetter => LETTER | UPPERISH,
            Gc::LowercaseLetter => LETTER | LOWERISH,
            Gc::ModifierLetter | Gc::OtherLetter => LETTER | UPPERISH | LOWERISH,
            Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark => UPPERISH | LOWERISH,
            Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber => NUMBER,
            _ => 0,
        }
}

/// First char of `s[at..]` with its flags and byte length.
#[inline]
fn char_at(s: &str, at: usize) -> Option<(char, u8, usize)> {
    let c = s[at..].chars().next()?;
    Some((c, flags(c), c.len_utf8()))
}

/// `[^\r\n\p{L}\p{N}]`: the optional one-char prefix of a word.
#[inline]
fn is_prefix(f: u8) -> bool {
    f & (LETTER | NUMBER | NEWLINE) == 0
}

/// `[^\s\p{L}\p{N}]`: punctuation and symbols.
#[inline]
fn is_symbol(f: u8) -> bool {
    f & (SPACE | LETTER | NUMBER) == 0
}

/// End of the longest run from `at` of chars whose flags satisfy `keep`.
#[inline]
fn run_end(s: &str, at: usize, keep: impl Fn(u8) -> bool) -> usize {
    let mut end = at;
    for c in s[at..].chars() {
        if !keep(flags(c)) {
            break;
        }
        end += c.len_utf8();
    }
    end
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `at`: its length, or 0. Case folding is Unicode's simple
/// folding as tiktoken's regex applies it, so `ſ` (long s) counts as `s`.
fn contraction_len(s: &str, at: usize) -> usize {
    let rest = &s.as_bytes()[at..];
    if rest.first() != Some(&b'\'') {
        return 0;
    }
    let lower = |i: usize| rest.get(i).map(u8::to_ascii_lowercase);
    match lower(1) {
        Some(b's' | b't' | b'm' | b'd') => 2,
        Some(b'r' | b'v') if lower(2) == Some(b'e') => 3,
        Some(b'l') if lower(2) == Some(b'l') => 3,
        _ if s[at + 1..].starts_with('\u{17f}') => 1 + '\u{17f}'.len_utf8(),
        _ => 0,
    }
}

/// o200k: `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` from `at`, with the
/// backtracking the regex does when the upper run swallowed every lower-ish char; `None` if no match.
fn o200k_lower_word(s: &str, at: usize) -> Option<usize> {
    let mut end = at;
    let mut last_lowerish_end = None;
    for c in s[at..].chars() {
        let f = flags(c);
        if f & UPPERISH == 0 {
            break;
        }
        end += c.len_utf8();
        if f & LOWERISH != 0 {
            last_lowerish_end = Some(end);
        }
    }
    match char_at(s, end) {
        Some((_, f, _)) if f & LOWERISH != 0 => Some(run_end(s, end, |f| f & LOWERISH != 0)),
        _ => last_lowerish_end,
    }
}

/// o200k: `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` from `at`.
fn o200k_upper_word(s: &str, at: usize) -> Option<usize> {
    let upper_end = run_end(s, at, |f| f & UPPERISH != 0);
    (upper_end > at).then(|| run_end(s, upper_end, |f| f & LOWERISH != 0))
}

/// Tries `word` after an optional prefix char (prefix first, as the greedy `?` does), then adds
/// an optional contraction.
fn prefixed_word(
    s: &str,
    first: (u8, usize),
    word: impl Fn(&str, usize) -> Option<usize>,
) -> Option<usize> {
    let (f, len) = first;
    let end = if is_prefix(f) {
        word(s, len).or_else(|| word(s, 0))
    } else {
        word(s, 0)
    }?;
    Some(end + contraction_len(s, end))
}

/// `\s*[\r\n]+ | \s+(?!\S) | \s+` for a whitespace run starting the text.
fn whitespace_piece(s: &str) -> usize {
    let mut end = 0;
    let mut after_last_newline = None;
    let mut last_len = 0;
    for c in s.chars() {
        let f = flags(c);
        if f & SPACE == 0 {
            break;
        }
        end += c.len_utf8();
        last_len = c.len_utf8();
        if f & NEWLINE != 0 {
            after_last_newline = Some(end);
        }
    }
    if let Some(newline_end) = after_last_newline {
        return newline_end; // \s*[\r\n]+
    }
    if end == s.len() || end == last_len {
        end // \s+(?!\S) at the end of text, or a lone \s+
    } else {
        end - last_len // \s+(?!\S): leave the last space to prefix the next word
    }
}

/// ` ?[^\s\p{L}\p{N}]+` followed by a run of `tail` chars.
fn symbol_piece(s: &str, tail: impl Fn(char) -> bool) -> Option<usize> {
    let start = usize::from(s.starts_with(' '));
    let (_, f, _) = char_at(s, start)?;
    if !is_symbol(f) {
        return None;
    }
    let end = run_end(s, start, is_symbol);
    Some(
        end + s[end..]
            .chars()
            .take_while(|&c| tail(c))
            .map(char::len_utf8)
            .sum::<usize>(),
    )
}

/// `\p{N}{1,3}`.
fn number_piece(s: &str) -> usize {
    s.chars()
        .take_while(|&c| flags(c) & NUMBER != 0)
        .take(3)
        .map(char::len_utf8)
        .sum()
}

/// The common case of both patterns on ASCII text: an optional one-byte prefix, then a run of
/// letters (o200k: upper then lower, as its two word branches split them), ending at an ASCII byte
/// or the end. `None` sends the piece to the general path (non-ASCII nearby, or not a word).
#[inline]
fn ascii_word(b: &[u8], o200k: bool) -> Option<usize> {
    let first = *b.first()?;
    if !first.is_ascii() {
        return None;
    }
    let start = if first.is_ascii_alphabetic() {
        0
    } else if ASCII_FLAGS[first as usize] & (NUMBER | NEWLINE) == 0
        && b.get(1).is_some_and(u8::is_ascii_alphabetic)
    {
        1
    } else {
        return None;
    };
    let mut i = start;
    if o200k {
        while b.get(i).is_some_and(u8::is_ascii_uppercase) {
            i += 1;
        }
        while b.get(i).is_some_and(u8::is_ascii_lowercase) {
            i += 1;
        }
    } else {
        while b.get(i).is_some_and(u8::is_ascii_alphabetic) {
            i += 1;
        }
    }
    if b.get(i).is_some_and(|c| !c.is_ascii()) {
        return None; // a letter or mark may continue the word
    }
    Some(i)
}

fn o200k_piece(s: &str) -> usize {
    if let Some(end) = ascii_word(s.as_bytes(), true) {
        return end + contraction_len(s, end);
    }
    let Some((_, f, len)) = char_at(s, 0) else {
        return 0;
    };
    if let Some(end) = prefixed_word(s, (f, len), o200k_lower_word) {
        return end;
    }
    if let Some(end) = prefixed_word(s, (f, len), o200k_upper_word) {
        return end;
    }
    if f & NUMBER != 0 {
        return number_piece(s);
    }
    if let Some(end) = symbol_piece(s, |c| matches!(c, '\r' | '\n' | '/')) {
        return end;
    }
    if f & SPACE != 0 {
        return whitespace_piece(s);
    }
    len // unreachable for well-formed classes; never loop forever
}

fn cl100k_piece(s: &str) -> usize {
    let contraction = contraction_len(s, 0);
    if contraction > 0 {
        return contraction;
    }
    if let Some(end) = ascii_word(s.as_bytes(), false) {
        return end;
    }
    let Some((_, f, len)) = char_at(s, 0) else {
        return 0;
    };
    let letters = |s: &str, at: usize| {
        let end = run_end(s, at, |f| f & LETTER != 0);
        (end > at).then_some(end)
    };
    let word = if is_prefix(f) {
        letters(s, len).or_else(|| letters(s, 0))
    } else {
        letters(s, 0)
    };
    if let Some(end) = word {
        return end;
    }
    if f & NUMBER != 0 {
        return number_piece(s);
    }
    if let Some(end) = symbol_piece(s, |c| matches!(c, '\r' | '\n')) {
        return end;
    }
    if f & SPACE != 0 {
        return whitespace_piece(s);
    }
    len
}
