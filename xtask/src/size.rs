//! `cargo xtask bench size`: what each way of embedding Glassbox loads, raw, gzip -9 and brotli
//! q11, from the files `cargo xtask build` wrote.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::tools::root;

/// One entry point: its name, and the files a page loads through it before it can be used.
struct Entry {
    name: &'static str,
    files: Vec<PathBuf>,
    note: &'static str,
}

/// Sizes of one file: raw, gzip -9, brotli quality 11.
fn sizes(path: &Path) -> Result<(u64, u64, u64)> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&data)?;
    let gz = gz.finish()?.len() as u64;
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &data[..], &mut br, &params)?;
    Ok((data.len() as u64, gz, br.len() as u64))
}

/// Prints the table.
pub fn bench(dist: &Path) -> Result<()> {
    // The files of `dist` named in each list, in order.
    let files = |lists: &[&[&str]]| -> Vec<PathBuf> {
        lists
            .iter()
            .flat_map(|l| l.iter())
            .map(|f| dist.join(f))
            .collect()
    };
    let loader = format!(
        "{}/{}",
        crate::wasm_split::read_manifest(dist, "glassbox_widget")?.folder,
        crate::wasm_split::LOADER
    );
    let widget_core: &[&str] = &[
        "glassbox-wasm.js",
        "token-worker-start.js",
        "glassbox_widget.js",
        &loader,
        "glassbox_widget_bg.wasm",
    ];
    let element_shell: &[&str] = &[
        "glassbox-chat.js",
        "shadow-shell.js",
        "launcher.js",
        "glassbox.css",
    ];
    let element = files(&[element_shell, widget_core]);
    let launcher_closed = files(&[element_shell]);
    let meter = files(&[&[
        "glassbox-token-meter.js",
        "shadow-shell.js",
        "glassbox.css",
        "meter-wasm.js",
        "token-worker-start.js",
        "glassbox_meter.js",
        "glassbox_meter_bg.wasm",
    ]]);
    let worker = files(&[&[
        "token-worker.js",
        "glassbox_token_worker.js",
        "glassbox_token_worker_bg.wasm",
        "vocab/o200k_base.gbv",
    ]]);
    // The chat's chunks: those the chat fetches as it mounts (the markdown renderer and the
    // meter's arithmetic), and the panels' (fetched when first opened or neared).
    let manifest = crate::wasm_split::read_manifest(dist, "glassbox_widget")?;
    let lazy = dist.join(&manifest.folder);
    let fetches = &manifest.fetches;
    let mut at_mount = std::collections::BTreeSet::new();
    for split in ["load_renderer", "load_meter_reader"] {
        at_mount.extend(
            fetches
                .get(split)
                .with_context(|| format!("the chat has no chunk function {split}"))?,
        );
    }
    let chunk_files = |mounting: bool| -> Vec<PathBuf> {
        let names: std::collections::BTreeSet<&String> = fetches
            .values()
            .flatten()
            .filter(|stem| at_mount.contains(stem) == mounting)
            .collect();
        names
            .into_iter()
            .map(|stem| lazy.join(format!("{stem}.wasm")))
            .collect()
    };
    // The panels' stylesheet is fetched once the chat has mounted, beside the chunks.
    let mut after_paint = chunk_files(true);
    after_paint.push(dist.join("glassbox-panels.css"));
    let panels = chunk_files(false);
    let react_package: Vec<PathBuf> = std::fs::read_dir(dist.join("npm/glassbox-react"))
        .context("dist/npm/glassbox-react is missing: run `cargo xtask build`")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "js"))
        .collect();
    let react_demo: Vec<PathBuf> = std::fs::read_dir(root().join("public/react/assets"))
        .context("public/react/assets is missing: run `cargo xtask build`")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let entries = [
        Entry {
            name: "<glassbox-chat> inline: first load",
            files: element,
            note: "what the first paint of the chat waits for",
        },
        Entry {
            name: "<glassbox-chat>: fetched as it mounts",
            files: after_paint,
            note: "the markdown renderer, the meter's arithmetic and the panels' stylesheet, after the first paint (replies show plain text until then)",
        },
        Entry {
            name: "<glassbox-chat>'s lazy panels, all",
            files: panels,
            note: "View context, the session drawer, topics, settings, the draft's preview: each fetched when first opened or neared",
        },
        Entry {
            name: "<glassbox-chat mode=launcher>, closed",
            files: launcher_closed,
            note: "the wasm loads when the button is neared",
        },
        Entry {
            name: "<glassbox-token-meter> alone",
            files: meter,
            note: "its own wasm; the worker (next row) starts beside it, the vocabulary too unless a model is named",
        },
        Entry {
            name: "token worker + o200k vocabulary",
            files: worker,
            note: "started beside the wasm, not waited for by the first paint; the vocabulary is cached for a year",
        },
        Entry {
            name: "glassbox-react's own code",
            files: react_package,
            note: "on top of glassbox-chat's first load",
        },
        Entry {
            name: "the React demo's bundle (Vite)",
            files: react_demo,
            note: "React 19 + glassbox-react + the element, wasm, lazy panels and CSS",
        },
    ];
    let mut out = std::io::stdout().lock();
    writeln!(out, "## What each entry point loads ({})\n", dist.display())?;
    writeln!(
        out,
        "| entry point | files | raw (B) | gzip -9 (B) | brotli q11 (B) | note |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for entry in entries {
        let mut total = (0, 0, 0);
        for file in &entry.files {
            let (raw, gz, br) = sizes(file)?;
            total = (total.0 + raw, total.1 + gz, total.2 + br);
        }
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            entry.name,
            entry.files.len(),
            total.0,
            total.1,
            total.2,
            entry.note
        )?;
    }
    writeln!(out, "\n## The largest files\n")?;
    writeln!(out, "| file | raw (B) | gzip -9 (B) | brotli q11 (B) |")?;
    writeln!(out, "|---|---|---|---|")?;
    for name in [
        "glassbox_widget_bg.wasm",
        "glassbox_widget.js",
        "glassbox_meter_bg.wasm",
        "glassbox.css",
        "glassbox-panels.css",
    ] {
        let (raw, gz, br) = sizes(&dist.join(name))?;
        writeln!(out, "| {name} | {raw} | {gz} | {br} |")?;
    }
    writeln!(
        out,
        "\nGoal (issue 30): the inline first load at most 150,000 B brotli."
    )?;
    Ok(())
}
