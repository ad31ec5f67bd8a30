//! The host's own words (the element's `strings` property) read by key name, in a chunk: the
//! names are needed only when a host gives words.

use std::sync::Arc;

use super::table::Word;

/// Splits the host's words into known keys and the unknown names.
fn read(words: Vec<(String, String)>) -> (Vec<(Word, Arc<str>)>, Vec<String>) {
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for (key, text) in words {
        match key.parse::<Word>() {
            Ok(word) => known.push((word, Arc::from(text))),
            Err(_) => unknown.push(key),
        }
    }
    (known, unknown)
}

crate::chunks::split_fn! {
    /// [`read`], fetched with its chunk.
    parse / preload_parse (words: Vec<(String, String)>) -> (Vec<(Word, Arc<str>)>, Vec<String>) => read(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_snake_case_names_and_the_rest_is_named() {
        let (known, unknown) = read(vec![
            ("write_a_message".into(), "Ask me".into()),
            ("Send".into(), "x".into()),
            ("nope".into(), "y".into()),
        ]);
        assert_eq!(known.len(), 1);
        assert_eq!(known[0].0, Word::WriteAMessage);
        assert_eq!(&*known[0].1, "Ask me");
        assert_eq!(unknown, vec!["Send".to_owned(), "nope".to_owned()]);
    }
}
