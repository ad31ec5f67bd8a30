//! A byte-level BPE vocabulary (tiktoken ranks) and the compact file it travels in.
//!
//! Compact form (`.gbv`, written at build time, fetched by the browser):
//! `b"GBV1"`, kind byte (0 = cl100k ranks, 1 = o200k ranks, 2 = Hugging Face `tokenizer.json`),
//! name length byte + UTF-8 name, then for ranks: u32 LE token count, one LEB128 length per token
//! in rank order, all token bytes concatenated in rank order (lengths and bytes apart so brotli
//! compresses each well); for a Hugging Face tokenizer: its JSON, minified.

use hashbrown::HashTable;
use rustc_hash::FxHasher;
use std::hash::Hasher;

use super::pretokenize::Pattern;

const MAGIC: &[u8; 4] = b"GBV1";
/// Kind byte of a Hugging Face tokenizer payload.
const KIND_HF_JSON: u8 = 2;

/// What a `.gbv` file carries.
pub enum Payload<'a> {
    /// BPE ranks for our engine (read them with [`Vocab::from_compact`]).
    Ranks,
    /// A Hugging Face `tokenizer.json`.
    HfJson { name: String, json: &'a [u8] },
}

/// Reads a `.gbv` header.
pub fn payload(data: &[u8]) -> Result<Payload<'_>, VocabError> {
    let mut r = Reader { data, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(VocabError::BadMagic);
    }
    if r.byte()? != KIND_HF_JSON {
        return Ok(Payload::Ranks);
    }
    let name_len = r.byte()? as usize;
    let name = String::from_utf8_lossy(r.take(name_len)?).into_owned();
    Ok(Payload::HfJson {
        name,
        json: &data[r.at..],
    })
}

/// Wraps a Hugging Face `tokenizer.json` (already minified) as a `.gbv` file.
pub fn wrap_hf_json(name: &str, json: &[u8]) -> Vec<u8> {
    let name = &name.as_bytes()[..name.len().min(255)];
    let mut out = Vec::with_capacity(json.len() + name.len() + 6);
    out.extend_from_slice(MAGIC);
    out.push(KIND_HF_JSON);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(json);
    out
}

/// Why a vocabulary could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VocabError {
    #[error("not a Glassbox vocabulary file (bad magic)")]
    BadMagic,
    #[error("vocabulary file is truncated")]
    Truncated,
    #[error("unknown split pattern {0}")]
    UnknownPattern(u8),
    #[error("line {line} of the tiktoken file is malformed")]
    BadTiktokenLine { line: usize },
    #[error("ranks are not contiguous from 0 (rank {found} where {expected} was expected)")]
    RankGap { expected: u32, found: u32 },
    #[error("duplicate token at rank {0}")]
    Duplicate(u32),
    #[error("the single byte 0x{0:02x} is not a token; byte-level BPE needs all 256")]
    MissingByte(u8),
    #[error("tokenizer.json could not be loaded: {0}")]
    HfTokenizer(String),
    #[error("this build cannot read Hugging Face tokenizers")]
    HfUnsupported,
}

/// Token byte strings by rank, with a hash table from bytes to rank.
pub struct Vocab {
    name: String,
    pattern: Pattern,
    bytes: Vec<u8>,
    /// `offsets[r]..offsets[r + 1]` are the bytes of rank `r`.
    offsets: Vec<u32>,
    table: HashTable<u32>,
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab")
            .field("name", &self.name)
            .field("tokens", &self.len())
            .finish()
    }
}

#[inline]
fn hash(bytes: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(bytes);
    h.finish()
}

impl Vocab {
    /// Builds a vocabulary from token byte strings in rank order.
    pub fn from_tokens<'a>(
        name: &str,
        pattern: Pattern,
        tokens: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Self, VocabError> {
        let mut bytes = Vec::new();
        let mut offsets = vec![0u32];
        for token in tokens {
            bytes.extend_from_slice(token);
            offsets.push(bytes.len() as u32);
        }
        Self::index(name.to_owned(), pattern, bytes, offsets)
    }

    fn index(
        name: String,
        pattern: Pattern,
        bytes: Vec<u8>,
        offsets: Vec<u32>,
    ) -> Result<Self, VocabError> {
        let count = offsets.len() - 1;
        let mut vocab = Vocab {
            name,
            pattern,
            bytes,
            offsets,
            table: HashTable::with_capacity(count),
        };
        for rank in 0..count as u32 {
            let token = vocab.token(rank);
            let h = hash(token);
            let (bytes, offsets) = (&vocab.bytes, &vocab.offsets);
            let same = |&r: &u32| {
                &bytes[offsets[r as usize] as usize..offsets[r as usize + 1] as usize] == token
            };
            if vocab.table.find(h, same).is_some() {
                return Err(VocabError::Duplicate(rank));
            }
            vocab.table.insert_unique(h, rank, |&r| {
                hash(&bytes[offsets[r as usize] as usize..offsets[r as usize + 1] as usize])
            });
        }
        Ok(vocab)
    }

    /// Parses tiktoken's own format: one `base64(token) rank` per line.
    pub fn from_tiktoken(name: &str, pattern: Pattern, text: &str) -> Result<Self, VocabError> {
        use base64::Engine as _;
        let mut tokens = Vec::new();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let bad = || VocabError::BadTiktokenLine { line: i + 1 };
            let (b64, rank) = line.split_once(' ').ok_or_else(bad)?;
            let rank: u32 = rank.trim().parse().map_err(|_| bad())?;
            if rank as usize != tokens.len() {
                return Err(VocabError::RankGap {
                    expected: tokens.len() as u32,
                    found: rank,
                });
            }
            tokens.push(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| bad())?,
            );
        }
        Self::from_tokens(name, pattern, tokens.iter().map(Vec::as_slice))
    }

    /// Reads the compact form written by [`Vocab::to_compact`].
    pub fn from_compact(data: &[u8]) -> Result<Self, VocabError> {
        let mut r = Reader { data, at: 0 };
        if r.take(4)? != MAGIC {
            return Err(VocabError::BadMagic);
        }
        let pattern = match r.byte()? {
            0 => Pattern::Cl100k,
            1 => Pattern::O200k,
            other => return Err(VocabError::UnknownPattern(other)),
        };
        let name_len = r.byte()? as usize;
        let name = String::from_utf8_lossy(r.take(name_len)?).into_owned();
        let count =
            u32::from_le_bytes(r.take(4)?.try_into().map_err(|_| VocabError::Truncated)?) as usize;
        let mut offsets = Vec::with_capacity(count + 1);
        offsets.push(0u32);
        let mut total = 0u32;
        for _ in 0..count {
            total = total
                .checked_add(r.leb128()?)
                .ok_or(VocabError::Truncated)?;
            offsets.push(total);
        }
        let bytes = r.take(total as usize)?.to_vec();
        Self::index(name, pattern, bytes, offsets)
    }

    /// Writes the compact form.
    pub fn to_compact(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() + self.len() * 2 + 64);
        out.extend_from_slice(MAGIC);
        out.push(match self.pattern {
            Pattern::Cl100k => 0,
            Pattern::O200k => 1,
        });
        let name = &self.name.as_bytes()[..self.name.len().min(255)];
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        for w in self.offsets.windows(2) {
            let mut len = w[1] - w[0];
            loop {
                let low = (len & 0x7f) as u8;
                len >>= 7;
                if len == 0 {
                    out.push(low);
                    break;
                }
                out.push(low | 0x80);
            }
        }
        out.extend_from_slice(&self.bytes);
        out
    }

    /// The encoding's name, e.g. `o200k_base`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The split pattern the encoding uses.
    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True for a vocabulary without tokens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the token with `rank` (panics past `len()`; ranks come from this vocabulary).
    #[inline]
    pub fn token(&self, rank: u32) -> &[u8] {
        let r = rank as usize;
        &self.bytes[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }

    /// Rank of the token whose bytes are exactly `piece`.
    #[inline]
    pub fn rank(&self, piece: &[u8]) -> Option<u32> {
        self.table
            .find(hash(piece), |&r| same_bytes(self.token(r), piece))
            .copied()
    }
}

/// Slice equality written as a loop: tokens are a few bytes long, where a `memcmp` call costs more
/// than the comparison (measured: ~15 % of counting time natively).
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], VocabError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or(VocabError::Truncated)?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, VocabError> {
        Ok(self.take(1)?[0])
    }

    fn leb128(&mut self) -> Result<u32, VocabError> {
        let mut value = 0u32;
        for shift in (0..32).step_by(7) {
            let b = self.byte()?;
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(VocabError::Truncated)
    }
}
