//! Splits a wasm module at its `wasm_split` functions (Leptos' lazy loading) before wasm-bindgen:
//! the main module keeps what the first paint needs; each lazy function's code, and code shared
//! only among lazy functions, becomes a chunk that a small loader fetches on first call.
//!
//! The chunks of one build only fit that build's main module, so each build's go in a folder named
//! for it, `<name>_lazy-<hash of the linked wasm>/`: a page opened before a deploy keeps fetching
//! its own chunks (the build keeps the previous folder) instead of the new build's. The main
//! module's glue imports the loader from `./<folder>/load.js`; the loader finds the chunks beside
//! itself (`new URL(…, import.meta.url)`, which bundlers follow) and the main module's exports
//! through `../<name>.js`. `<name>_chunks.json` in `dist/` names the current folder and what each
//! lazy function's first call fetches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};

/// The import module the lazy functions use until the splitter links them to the loader.
pub const PLACEHOLDER: &str = "__wasm_split_placeholder__";

/// The loader's file name inside the chunks' folder.
pub const LOADER: &str = "load.js";

/// What [`split`] wrote.
pub struct Split {
    /// The main module, for wasm-bindgen (with `--keep-lld-exports`).
    pub main: PathBuf,
    /// The chunks' folder name (relative to `dist/`).
    pub folder: String,
    /// The chunks, for wasm-opt.
    pub chunks: Vec<PathBuf>,
    /// The loader the main module imports.
    pub loader: PathBuf,
    /// For each lazy function, the chunk files (without `.wasm`) its first call fetches.
    pub fetches: BTreeMap<String, Vec<String>>,
}

/// What `dist/<name>_chunks.json` says: the current chunks' folder, the one of the build before
/// (kept for pages opened before this build), and what each lazy function fetches.
pub struct Manifest {
    pub folder: String,
    pub previous: Option<String>,
    pub fetches: BTreeMap<String, Vec<String>>,
}

/// `dist/<out_name>_chunks.json`.
pub fn manifest_path(dist: &Path, out_name: &str) -> PathBuf {
    dist.join(format!("{out_name}_chunks.json"))
}

/// Writes the manifest, always (the last step of a build: its time says the build is done), with
/// the folder it named before as the previous one when that differs; answers the previous folder.
pub fn write_manifest(dist: &Path, out_name: &str, split: &Split) -> Result<Option<String>> {
    let before = read_manifest(dist, out_name).ok();
    let previous = match before {
        Some(m) if m.folder != split.folder => Some(m.folder),
        Some(m) => m.previous,
        None => None,
    };
    let json = serde_json::json!({
        "folder": split.folder,
        "previous": previous,
        "fetches": split.fetches,
    });
    let path = manifest_path(dist, out_name);
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(previous)
}

/// Reads the manifest `cargo xtask build` wrote.
pub fn read_manifest(dist: &Path, out_name: &str) -> Result<Manifest> {
    let path = manifest_path(dist, out_name);
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path)
            .with_context(|| format!("{} is missing: run `cargo xtask build`", path.display()))?,
    )?;
    let folder = json["folder"]
        .as_str()
        .context("the chunks manifest names no folder")?
        .to_owned();
    let previous = json["previous"].as_str().map(str::to_owned);
    let fetches = serde_json::from_value(json["fetches"].clone())
        .context("the chunks manifest's `fetches`")?;
    if !dist.join(&folder).is_dir() {
        bail!("{} names {folder}, which is missing", path.display());
    }
    Ok(Manifest {
        folder,
        previous,
        fetches,
    })
}

/// Splits `raw` (linked with `--emit-relocs`) into `work` (emptied first).
pub fn split(raw: &Path, work: &Path, out_name: &str) -> Result<Split> {
    let input = std::fs::read(raw).with_context(|| format!("reading {}", raw.display()))?;
    if work.exists() {
        std::fs::remove_dir_all(work).with_context(|| format!("removing {}", work.display()))?;
    }
    let folder = glassbox_core::chunk_folder::name(out_name, &Sha256::digest(&input));
    let chunks_dir = work.join(&folder);
    std::fs::create_dir_all(&chunks_dir)?;
    let main = work.join(format!("{out_name}.wasm"));
    let link_name = format!("./{folder}/{LOADER}");
    let main_module = format!("../{out_name}.js");
    let mut options = wasm_split_cli_support::Options::new(&input);
    options.output_dir = work;
    options.main_out_path = &main;
    options.link_name = &link_name;
    options.main_module = &main_module;
    let written = wasm_split_cli_support::transform(options)
        .map_err(|e| anyhow!("splitting {}: {e:?}", raw.display()))?;
    // The splitter writes the chunks into `work` and the loader at `work/<link_name>`; the
    // loader looks for the chunks beside itself.
    let mut chunks = Vec::new();
    for chunk in written.split_modules {
        let name = chunk.file_name().context("a chunk's file name")?;
        let to = chunks_dir.join(name);
        std::fs::rename(&chunk, &to)
            .with_context(|| format!("moving {} into {folder}", chunk.display()))?;
        chunks.push(to);
    }
    let fetches = written
        .prefetch_map
        .into_iter()
        .map(|(split, mut files)| {
            files.sort();
            (split, files)
        })
        .collect();
    Ok(Split {
        main,
        folder,
        chunks,
        loader: chunks_dir.join(LOADER),
        fetches,
    })
}

/// Whether `name` is a chunks' folder of module `out_name` (named for a build, or the
/// unversioned `<name>_lazy` of earlier builds).
fn is_chunks_folder(name: &str, out_name: &str) -> bool {
    glassbox_core::chunk_folder::module_of(name) == Some(out_name)
        || name == format!("{out_name}_lazy")
}

/// Removes the chunks' folders of module `out_name` in `dir` but `keep` (the current build's, and
/// the previous build's, which pages opened before this build still use).
pub fn prune(dir: &Path, out_name: &str, keep: &[&str]) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_chunks_folder(&name, out_name)
            && !keep.contains(&name.as_str())
            && entry.path().is_dir()
        {
            let path = entry.path();
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_chunk_folders_are_pruned_and_the_kept_stay() -> Result<()> {
        let dir = tempfile_dir()?;
        for name in [
            "glassbox_widget_lazy",
            "glassbox_widget_lazy-0123abcd",
            "glassbox_widget_lazy-89abcdef",
            "glassbox_widget_lazy-feedbeef",
            "glassbox_widget_lazy_backup",
            "glassbox_widget_lazy-notahash",
            "glassbox_meter_lazy-0123abcd",
        ] {
            std::fs::create_dir_all(dir.join(name))?;
        }
        prune(
            &dir,
            "glassbox_widget",
            &[
                "glassbox_widget_lazy-89abcdef",
                "glassbox_widget_lazy-0123abcd",
            ],
        )?;
        let mut left: Vec<String> = std::fs::read_dir(&dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<_>>()?;
        left.sort();
        assert_eq!(
            left,
            [
                "glassbox_meter_lazy-0123abcd",
                "glassbox_widget_lazy-0123abcd",
                "glassbox_widget_lazy-89abcdef",
                "glassbox_widget_lazy-notahash",
                "glassbox_widget_lazy_backup",
            ]
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    /// A fresh folder under the system's temporary one.
    fn tempfile_dir() -> Result<PathBuf> {
        let dir = std::env::temp_dir().join(format!(
            "glassbox-prune-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}
