//! The names MCP tools are offered under: `{server}__{tool}`, unique across an agent's servers
//! and valid for every provider (OpenAI and Anthropic both take `[A-Za-z0-9_-]{1,64}`). The
//! receipt and the approval keep the server's own names; only the provider sees these.

use sha2::{Digest, Sha256};

/// Longest name a provider takes.
pub const MAX_NAME: usize = 64;

/// Hex digits of the hash that makes a cut or clashing name unique.
const HASH_DIGITS: usize = 8;

fn short_hash(full: &str) -> String {
    hex::encode(Sha256::digest(full.as_bytes()))[..HASH_DIGITS].to_owned()
}

/// The name `server`'s tool `tool` is offered under, alone: characters outside `[A-Za-z0-9_-]`
/// become `_`; a name longer than [`MAX_NAME`] is cut and ends with a short hash of the full one.
pub fn offered_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    format!(
        "{}_{}",
        &clean[..MAX_NAME - HASH_DIGITS - 1],
        short_hash(&full)
    )
}

/// The offered names of `tools` (server, tool), in their order: each [`offered_name`], and where
/// two would be the same (`a.b` and `a_b`), the later ones end with a short hash of their full
/// name instead. Stable: the same tools in the same order get the same names.
pub fn offered_names<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (server, tool) in tools {
        let mut name = offered_name(server, tool);
        if taken.contains(&name) {
            let hash = short_hash(&format!("{server}__{tool}"));
            let keep = name.len().min(MAX_NAME - HASH_DIGITS - 1);
            name = format!("{}_{hash}", &name[..keep]);
        }
        taken.insert(name.clone());
        out.push(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        (1..=MAX_NAME).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_join_server_and_tool_and_replace_what_providers_refuse() {
        assert_eq!(offered_name("clock", "now"), "clock__now");
        assert_eq!(offered_name("fs", "read.file"), "fs__read_file");
        assert_eq!(offered_name("wëb", "get page/2"), "w_b__get_page_2");
        assert!(valid(&offered_name("a", "")));
    }

    #[test]
    fn long_names_are_cut_with_a_hash_of_the_whole() {
        let long = "x".repeat(100);
        let a = offered_name("srv", &format!("{long}a"));
        let b = offered_name("srv", &format!("{long}b"));
        assert!(valid(&a) && valid(&b), "{a} {b}");
        assert_eq!(a.len(), MAX_NAME);
        assert_ne!(a, b);
        assert_eq!(a, offered_name("srv", &format!("{long}a")));
    }

    #[test]
    fn clashing_names_stay_unique_and_stable() {
        let tools = [("a", "b.c"), ("a", "b_c"), ("a", "b/c"), ("z", "y")];
        let names = offered_names(tools);
        assert_eq!(names[0], "a__b_c");
        assert_eq!(names[3], "z__y");
        let unique: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 4, "{names:?}");
        assert!(names.iter().all(|n| valid(n)), "{names:?}");
        assert_eq!(names, offered_names(tools));
    }
}
