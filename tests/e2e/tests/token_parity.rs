//! Our token counts equal tiktoken's (OpenAI's implementation, npm `tiktoken`) on a multilingual
//! corpus: English, code, JSON, CJK, emoji, RTL, Indic, combining marks, special-token look-alikes
//! (counted as plain text, as chat APIs do), long runs past the flat-merge limit, random mixes.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use glassbox_core::tokens::BpeTokenizer;
use glassbox_e2e::{node_modules, root, widget_dir};

fn corpus() -> BTreeMap<String, String> {
    let path = root().join("tests/e2e/fixtures/token-corpus.json");
    serde_json::from_slice(&std::fs::read(path).expect("corpus fixture")).expect("corpus is JSON")
}

fn reference_ids(encoding: &str, corpus: &BTreeMap<String, String>) -> BTreeMap<String, Vec<u32>> {
    let mut child = Command::new("node")
        .arg(root().join("tests/e2e/fixtures/tiktoken-reference.cjs"))
        .arg(node_modules())
        .arg(encoding)
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
