//! Context window sizes of current models and the tokenizer that counts for each.
//!
//! Lookup: exact id, then the longest table key contained in the id (so `gpt-4o-mini-2024-07-18`
//! finds `gpt-4o-mini`, not `gpt-4o` or `gpt-4`), then [`DEFAULT_CONTEXT_LIMIT`]. Server config can
//! add or override entries (`GLASSBOX_MODEL_LIMITS`).

/// Used when no key matches.
pub const DEFAULT_CONTEXT_LIMIT: u32 = 8192;

/// Context windows in tokens (input plus output), lowercase keys.
pub const MODEL_CONTEXT_LIMITS: &[(&str, u32)] = &[
    // OpenAI
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("gpt-4-32k", 32_768),
    ("gpt-4-turbo", 128_000),
    ("gpt-4o", 128_000),
    ("gpt-4o-mini", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.1-mini", 1_047_576),
    ("gpt-4.1-nano", 1_047_576),
    ("gpt-4.5", 128_000),
    ("o1", 200_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o3", 200_000),
    ("o3-mini", 200_000),
    ("o4-mini", 200_000),
    ("gpt-5", 400_000),
    ("gpt-5-mini", 400_000),
    ("gpt-5-nano", 400_000),
    ("gpt-5-chat", 128_000),
    ("gpt-oss", 131_072),
    // Anthropic
    ("claude-2", 100_000),
    ("claude-3", 200_000),
    ("claude-3-opus", 200_000),
    ("claude-3-sonnet", 200_000),
    ("claude-3-haiku", 200_000),
    ("claude-3-5", 200_000),
    ("claude-3-7", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-haiku-4", 200_000),
    // Meta
    ("llama-2", 4_096),
    ("llama-3", 8_192),
    ("llama3", 8_192),
    ("llama-3.1", 131_072),
    ("llama3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama3.3", 131_072),
    ("llama-4", 1_048_576),
    // Mistral
    ("mistral", 32_768),
    ("mistral-large", 131_072),
    ("mistral-small", 32_768),
    ("mistral-nemo", 131_072),
    ("codestral", 262_144),
    ("mixtral", 32_768),
    // Google
    ("gemma", 8_192),
    ("gemma-2", 8_192),
    ("gemma2", 8_192),
    ("gemma-3", 131_072),
    ("gemma3", 131_072),
    // Alibaba
    ("qwen", 32_768),
    ("qwen2.5", 131_072),
    ("qwen-2.5", 131_072),
    ("qwen3", 131_072),
    // DeepSeek
    ("deepseek", 65_536),
    ("deepseek-v3", 131_072),
    ("deepseek-r1", 131_072),
    ("deepseek-chat", 131_072),
    ("deepseek-reasoner", 131_072),
];

/// The context window of `model`: `overrides` first (same lookup rules), then the built-in table.
pub fn context_limit(model: &str, overrides: &[(String, u32)]) -> u32 {
    let id = model.trim().to_ascii_lowercase();
    let lookup = |table: &mut dyn Iterator<Item = (&str, u32)>| -> Option<u32> {
        let entries: Vec<(&str, u32)> = table.collect();
        if let Some(&(_, limit)) = entries.iter().find(|(k, _)| k.eq_ignore_ascii_case(&id)) {
            return Some(limit);
        }
        entries
            .iter()
            .filter(|(k, _)| !k.is_empty() && id.contains(&k.to_ascii_lowercase()))
            .max_by_key(|(k, _)| k.len())
            .map(|&(_, limit)| limit)
    };
    lookup(&mut overrides.iter().map(|(k, v)| (k.as_str(), *v)))
        .or_else(|| lookup(&mut MODEL_CONTEXT_LIMITS.iter().copied()))
        .unwrap_or(DEFAULT_CONTEXT_LIMIT)
}

/// Every encoding [`encoding_for`] can name: tiktoken ranks, then Hugging Face tokenizers.
pub const ENCODINGS: &[&str] = &[
    "o200k_base",
    "cl100k_base",
    "llama3",
    "qwen3",
    "gemma3",
    "deepseek_v3",
];

/// Which vocabulary counts tokens for `model`, and whether that count is the model's own.
///
/// OpenAI models count exactly with o200k or cl100k; Llama 3.x, Qwen 2.5/3, Gemma 3 and DeepSeek
/// V3/R1 with their own Hugging Face tokenizers. Other models are counted with o200k and the meter
/// marks the count as approximate.
pub fn encoding_for(model: &str) -> (&'static str, bool) {
    let id = model.to_ascii_lowercase();
    // The model's own name, without a provider prefix such as `meta-llama/` or `openai/`.
    let name = id.rsplit('/').next().unwrap_or(&id);
    let cl100k = [
        "gpt-3.5",
        "gpt-4-",
        "text-embedding-3",
        "text-embedding-ada",
    ];
    if name == "gpt-4" || cl100k.iter().any(|p| name.starts_with(p)) {
        return ("cl100k_base", true);
    }
    let o200k = [
        "gpt-4o",
        "chatgpt-4o",
        "gpt-4.1",
        "gpt-4.5",
        "gpt-5",
        "gpt-oss",
        "o1",
        "o3",
        "o4",
    ];
    if o200k.iter().any(|p| name.starts_with(p)) {
        return ("o200k_base", true);
    }
    let families: [(&[&str], &'static str); 4] = [
        (&["llama-3", "llama3"], "llama3"),
        (&["qwen2.5", "qwen-2.5", "qwen3", "qwen-3"], "qwen3"),
        (&["gemma-3", "gemma3"], "gemma3"),
        (
            &[
                "deepseek-v3",
                "deepseek-r1",
                "deepseek-chat",
                "deepseek-reasoner",
            ],
            "deepseek_v3",
        ),
    ];
    for (prefixes, encoding) in families {
        if prefixes.iter().any(|p| name.contains(p)) {
            return (encoding, true);
        }
    }
    ("o200k_base", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_then_longest_partial_then_default() {
        assert_eq!(context_limit("gpt-4", &[]), 8_192);
        assert_eq!(context_limit("gpt-4o", &[]), 128_000);
        assert_eq!(context_limit("gpt-4o-mini-2024-07-18", &[]), 128_000);
        assert_eq!(context_limit("gpt-4-turbo-preview", &[]), 128_000);
        assert_eq!(context_limit("gpt-4.1-2025-04-14", &[]), 1_047_576);
        assert_eq!(context_limit("GPT-5", &[]), 400_000);
        assert_eq!(context_limit("claude-3-5-sonnet-20241022", &[]), 200_000);
        assert_eq!(context_limit("claude-sonnet-4-20250514", &[]), 200_000);
        assert_eq!(
            context_limit("meta-llama/Llama-3.1-8B-Instruct", &[]),
            131_072
        );
        assert_eq!(context_limit("llama3", &[]), 8_192);
        assert_eq!(context_limit("mistral-large-latest", &[]), 131_072);
        assert_eq!(context_limit("qwen3:8b", &[]), 131_072);
        assert_eq!(context_limit("deepseek-chat", &[]), 131_072);
        assert_eq!(
            context_limit("something-unknown", &[]),
            DEFAULT_CONTEXT_LIMIT
        );
    }

    #[test]
    fn overrides_win_over_the_table() {
        let o = vec![
            ("gpt-4o".to_string(), 64_000),
            ("my-local".to_string(), 4_000),
        ];
        assert_eq!(context_limit("gpt-4o-2024-08-06", &o), 64_000);
        assert_eq!(context_limit("my-local-7b", &o), 4_000);
        assert_eq!(context_limit("gpt-5", &o), 400_000);
    }

    #[test]
    fn encodings() {
        assert_eq!(encoding_for("gpt-4o-mini"), ("o200k_base", true));
        assert_eq!(encoding_for("gpt-4-turbo"), ("cl100k_base", true));
        assert_eq!(encoding_for("gpt-4"), ("cl100k_base", true));
        assert_eq!(encoding_for("gpt-3.5-turbo"), ("cl100k_base", true));
        assert_eq!(encoding_for("o3-mini"), ("o200k_base", true));
        assert_eq!(encoding_for("claude-sonnet-4"), ("o200k_base", false));
        assert_eq!(
            encoding_for("meta-llama/Llama-3.1-8B-Instruct"),
            ("llama3", true)
        );
        assert_eq!(encoding_for("llama3.2:3b"), ("llama3", true));
        assert_eq!(encoding_for("Qwen/Qwen2.5-7B-Instruct"), ("qwen3", true));
        assert_eq!(encoding_for("gemma3:12b"), ("gemma3", true));
        assert_eq!(encoding_for("deepseek-chat"), ("deepseek_v3", true));
        assert_eq!(encoding_for("mistral-large-latest"), ("o200k_base", false));
        assert_eq!(encoding_for("openai/gpt-4o"), ("o200k_base", true));
    }
}
