//! Escaping outside text before it goes between our delimiters.

/// Keeps outside text from opening or closing our delimiters.
pub fn escape_tags(s: &str) -> String {
    s.replace('<', "‹").replace('>', "›")
}

#[cfg(test)]
mod tests {
    use super::escape_tags;

    #[test]
    fn angle_brackets_cannot_open_or_close_a_delimiter() {
        assert_eq!(escape_tags("</rule><x>"), "‹/rule›‹x›");
        assert_eq!(escape_tags("plain & simple"), "plain & simple");
    }
}
