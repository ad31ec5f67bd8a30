//! Splits a wasm module at its `wasm_split` functions (Leptos' lazy loading) before wasm-bindgen:
//! the main module keeps what the first paint needs; each lazy function's code, and code shared
//! only among lazy functions, becomes a chunk that a small loader fetches on first call.
//!
//! The main module's glue imports the loader from `./<name>_lazy/load.js`; the loader finds the
//! chunks beside itself (`new URL(…, import.meta.url)`, which bundlers follow) and the main
//! module's exports through `../<name>.js`. So `dist/<name>.js` and `dist/<name>_lazy/` are one
//! set, replaced together.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

/// The import module the lazy functions use until the splitter links them to the loader.
pub const PLACEHOLDER: &str = "__wasm_split_placeholder__";

/// The loader's file name inside the chunks' folder.
pub const LOADER: &str = "load.js";

/// The chunks' folder of module `out_name`, relative to `dist/`.
pub fn lazy_dir(out_name: &str) -> String {
    format!("{out_name}_lazy")
}

/// What [`split`] wrote.
pub struct Split {
    /// The main module, for wasm-bindgen (with `--keep-lld-exports`).
    pub main: PathBuf,
    /// The chunks, for wasm-opt.
    pub chunks: Vec<PathBuf>,
    /// The loader the main module imports.
    pub loader: PathBuf,
    /// For each lazy function, the chunk files (without `.wasm`) its first call fetches.
    pub fetches: std::collections::BTreeMap<String, Vec<String>>,
}

/// The file in the chunks' folder that lists what each lazy function's first call fetches
/// ([`Split::fetches`]), for `bench size` and for operators who preload.
pub const MANIFEST: &str = "chunks.json";

/// Splits `raw` (linked with `--emit-relocs`) into `work` (emptied first).
pub fn split(raw: &Path, work: &Path, out_name: &str) -> Result<Split> {
    let input = std::fs::read(raw).with_context(|| format!("reading {}", raw.display()))?;
    if work.exists() {
        std::fs::remove_dir_all(work).with_context(|| format!("removing {}", work.display()))?;
    }
    let lazy = lazy_dir(out_name);
    let chunks_dir = work.join(&lazy);
    std::fs::create_dir_all(&chunks_dir)?;
    let main = work.join(format!("{out_name}.wasm"));
    let link_name = format!("./{lazy}/{LOADER}");
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
            .with_context(|| format!("moving {} into {}", chunk.display(), lazy))?;
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
        chunks,
        loader: chunks_dir.join(LOADER),
        fetches,
    })
}
