//! What `token-worker.js` calls: a tokenizer built from vocabulary bytes, counting texts.
//! Kept apart from the widget's wasm so the chat UI loads without it and counting runs off the
//! main thread; the code is `glassbox_core::tokens`, the same the server counts with.

use glassbox_core::tokens::Tokenizer;
use wasm_bindgen::prelude::*;

/// A loaded vocabulary: tiktoken ranks for our BPE engine, or a Hugging Face tokenizer.
#[wasm_bindgen]
pub struct Counter {
    tokenizer: Tokenizer,
}

#[wasm_bindgen]
impl Counter {
    /// Builds the tokenizer from a `.gbv` vocabulary file.
    #[wasm_bindgen(constructor)]
    pub fn new(vocabulary: &[u8]) -> Result<Counter, JsError> {
        let tokenizer = Tokenizer::load(vocabulary).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(Counter { tokenizer })
    }

    /// The encoding's name, e.g. `o200k_base` or `llama3`.
    pub fn encoding(&self) -> String {
        self.tokenizer.name().to_owned()
    }

    /// Number of tokens in the vocabulary.
    pub fn size(&self) -> u32 {
        self.tokenizer.vocab_size() as u32
    }

    /// Tokens in `text` (for tiktoken encodings, special-token look-alikes count as plain text).
    pub fn count(&self, text: &str) -> u32 {
        self.tokenizer.count(text) as u32
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text)
    }
}
