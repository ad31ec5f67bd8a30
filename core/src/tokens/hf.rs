//! Hugging Face `tokenizer.json` models (Llama 3, Qwen, Gemma, DeepSeek …), counted by the
//! `tokenizers` crate itself with its `fancy-regex` engine, in the browser's worker and on the
//! server alike. Text that matches one of the model's added tokens counts as that token, as the
//! tokenizer does when a serving stack tokenizes message content.

/// A loaded `tokenizer.json`.
pub struct HfTokenizer {
    name: String,
    inner: tokenizers::Tokenizer,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("vocab", &self.len())
            .finish()
    }
}

impl HfTokenizer {
    /// Parses a `tokenizer.json`, known as `name` (e.g. `llama3`).
    pub fn from_json(name: &str, json: &[u8]) -> Result<Self, String> {
        tokenizers::Tokenizer::from_bytes(json)
            .map(|inner| HfTokenizer {
                name: name.to_owned(),
                inner,
            })
            .map_err(|e| e.to_string())
    }

    /// The name it was loaded under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Vocabulary size, added tokens included.
    pub fn len(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// True for an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Token ids of `text`, without the special tokens a template would add around it.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| e.to_string())
    }
}
