//! Token counting shared by the browser (in a Web Worker) and the server, so both count alike.
//!
//! OpenAI encodings (`o200k_base`, `cl100k_base`) are counted exactly as tiktoken counts them:
//! a hand-written splitter ([`pretokenize`]) and tiktoken's merge order ([`bpe`]) over a
//! vocabulary delivered in a compact file ([`vocab`]).
//!
//! Text that looks like a special token (`<|endoftext|>`) is counted as ordinary text, because
//! chat APIs treat message content that way: it costs the tokens of its characters.

pub mod bpe;
#[cfg(feature = "hf")]
pub mod hf;
pub mod pretokenize;
pub mod vocab;

pub use pretokenize::Pattern;
pub use vocab::{Vocab, VocabError};

/// Any tokenizer we count with, loaded from a `.gbv` file.
#[derive(Debug)]
pub enum Tokenizer {
    /// tiktoken-style byte-level BPE (o200k, cl100k): our own engine.
    Bpe(BpeTokenizer),
    /// A Hugging Face `tokenizer.json`, run by the `tokenizers` crate.
    #[cfg(feature = "hf")]
    Hf(Box<hf::HfTokenizer>),
}

impl Tokenizer {
    /// Loads either kind of `.gbv` file (see [`vocab`] for the layout).
    pub fn load(data: &[u8]) -> Result<Self, VocabError> {
        match vocab::payload(data)? {
            vocab::Payload::Ranks => BpeTokenizer::from_compact(data).map(Tokenizer::Bpe),
            #[cfg(feature = "hf")]
            vocab::Payload::HfJson { name, json } => hf::HfTokenizer::from_json(&name, json)
                .map(|t| Tokenizer::Hf(Box::new(t)))
                .map_err(VocabError::HfTokenizer),
            #[cfg(not(feature = "hf"))]
            vocab::Payload::HfJson { .. } => Err(VocabError::HfUnsupported),
        }
    }

    /// Number of tokens in `text` (the estimate if the tokenizer fails on it).
    pub fn count(&self, text: &str) -> usize {
        match self {
            Tokenizer::Bpe(t) => t.count(text),
            #[cfg(feature = "hf")]
            Tokenizer::Hf(t) => t
                .encode(text)
                .map_or_else(|_| estimate(text), |ids| ids.len()),
        }
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            Tokenizer::Bpe(t) => t.encode(text),
            #[cfg(feature = "hf")]
            Tokenizer::Hf(t) => t.encode(text).unwrap_or_default(),
        }
    }

    /// The encoding's name (`o200k_base`, `llama3`, …).
    pub fn name(&self) -> &str {
        match self {
            Tokenizer::Bpe(t) => t.vocab().name(),
            #[cfg(feature = "hf")]
            Tokenizer::Hf(t) => t.name(),
        }
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Bpe(t) => t.vocab().len(),
            #[cfg(feature = "hf")]
            Tokenizer::Hf(t) => t.len(),
        }
    }
}

/// How a provider family frames a chat request: the tokens it adds beyond the texts it carries,
/// per message and once to prime the reply. Every count of a request (the plan, compression, the
/// meter, tool rounds) takes these from [`Framing::for_encoding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// Tokens each message costs beyond its content: the format's delimiters and its role.
    pub per_message: u32,
    /// Tokens added after the last message to prime the reply.
    pub reply_priming: u32,
}

impl Framing {
    /// OpenAI's chat format, as OpenAI's cookbook "How to count tokens with tiktoken" counts it for
    /// `gpt-3.5-turbo`, `gpt-4`, `gpt-4o` and `gpt-4o-mini`: 3 tokens per message besides its
    /// values, the role among those values (one token for `system`, `user`, `assistant` and `tool`
    /// in cl100k and o200k, so 3 + 1 here, where the role is not counted as text), and 3 tokens
    /// priming the reply (`<|start|>assistant<|message|>`). A test counts the cookbook's own
    /// example conversation with our tokenizer and this framing and gets its published totals.
    pub const OPENAI: Framing = Framing {
        per_message: 3 + 1,
        reply_priming: 3,
    };

    /// Every other family (Anthropic, Llama, Qwen, Gemma, DeepSeek, Mistral, …): none publishes
    /// how it counts a conversation, so OpenAI's figures stand as an estimate. Their chat
    /// templates add a similar handful of tokens per message (role markers, turn ends), and the
    /// meter already marks counts of models without their own vocabulary as approximate.
    pub const ESTIMATE: Framing = Framing {
        per_message: 4,
        reply_priming: 3,
    };

    /// The framing of the family whose requests `encoding` counts: OpenAI's for `o200k_base` and
    /// `cl100k_base` (models counted with o200k as a stand-in, such as Claude, get it as their
    /// estimate), [`Framing::ESTIMATE`] for the rest.
    pub fn for_encoding(encoding: &str) -> Framing {
        match encoding {
            "o200k_base" | "cl100k_base" => Framing::OPENAI,
            _ => Framing::ESTIMATE,
        }
    }
}

/// A byte-level BPE tokenizer over one vocabulary.
#[derive(Debug)]
pub struct BpeTokenizer {
    vocab: Vocab,
}

impl BpeTokenizer {
    /// Wraps a loaded vocabulary. Byte-level BPE needs every single byte as a token (any text
    /// falls back to them); a vocabulary without one is refused here, never discovered while
    /// counting.
    pub fn new(vocab: Vocab) -> Result<Self, VocabError> {
        if let Some(b) = (0..=255u8).find(|b| vocab.rank(&[*b]).is_none()) {
            return Err(VocabError::MissingByte(b));
        }
        Ok(BpeTokenizer { vocab })
    }

    /// Loads the compact `.gbv` form.
    pub fn from_compact(data: &[u8]) -> Result<Self, VocabError> {
        Vocab::from_compact(data).and_then(Self::new)
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Token ranks of `text`, special-token look-alikes included as plain text.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3);
        for piece in pretokenize::pieces(text, self.vocab.pattern()) {
            bpe::encode_piece(&self.vocab, piece.as_bytes(), &mut out);
        }
        out
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        pretokenize::pieces(text, self.vocab.pattern())
            .map(|piece| bpe::count_piece(&self.vocab, piece.as_bytes()))
            .sum()
    }

    /// Text of `ranks` (lossy where ranks split a UTF-8 character).
    pub fn decode(&self, ranks: &[u32]) -> String {
        let bytes: Vec<u8> = ranks
            .iter()
            .filter(|&&r| (r as usize) < self.vocab.len())
            .flat_map(|&r| self.vocab.token(r).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A rough token count for when no vocabulary is loaded yet: about four ASCII characters per
/// token, one token per other character. Always shown marked as an estimate.
pub fn estimate(text: &str) -> usize {
    let (ascii, other) = text.chars().fold((0usize, 0usize), |(a, o), c| {
        if c.is_ascii() { (a + 1, o) } else { (a, o + 1) }
    });
    ascii.div_ceil(4) + other
}

/// A stable 64-bit key for caching a text's count (FNV-1a over the UTF-8 bytes and length).
pub fn content_key(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ (text.len() as u64).rotate_left(32)
}

#[cfg(test)]
mod tests;
