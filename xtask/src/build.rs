//! Builds the widget: wasm32 release (size profile) → wasm-bindgen → wasm-opt -Oz → dist/.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::tools::{root, run, say, target_dir, wasm_toolchain};

/// The folder the server serves under `/widget/`.
pub fn dist_dir() -> PathBuf {
    root().join("dist")
}

/// Builds the widget into `dist/` and returns that folder. Steps whose output is current are skipped.
pub fn widget() -> Result<PathBuf> {
    let (wasm_bindgen, wasm_opt) = wasm_toolchain()?;
    say("building the widget (wasm32-unknown-unknown, profile wasm-release)");
    run(Command::new("cargo").current_dir(root()).args([
        "build",
        "--package",
        "glassbox-widget",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        "wasm-release",
    ]))?;
    let raw = target_dir().join("wasm32-unknown-unknown/wasm-release/glassbox_widget.wasm");
    let dist = dist_dir();
    let out_wasm = dist.join("glassbox_widget_bg.wasm");
    std::fs::create_dir_all(&dist)?;
    if is_newer(&out_wasm, &raw) {
        say("widget wasm is up to date; skipping wasm-bindgen and wasm-opt");
    } else {
        say("running wasm-bindgen");
        run(Command::new(&wasm_bindgen)
            .args([
                "--target",
                "web",
                "--no-typescript",
                "--out-name",
                "glassbox_widget",
                "--out-dir",
            ])
            .arg(&dist)
            .arg(&raw))?;
        say("running wasm-opt -Oz");
        run(Command::new(&wasm_opt)
            .args(["-Oz", "--strip-debug", "--strip-producers"])
            .args([
                "--enable-bulk-memory",
                "--enable-nontrapping-float-to-int",
                "--enable-sign-ext",
                "--enable-mutable-globals",
                "--enable-reference-types",
                "--enable-multivalue",
            ])
            .arg(&out_wasm)
            .arg("-o")
            .arg(&out_wasm))?;
    }
    for (from, to) in [
        ("widget/js/glassbox-chat.js", "glassbox-chat.js"),
        ("style/glassbox.css", "glassbox.css"),
    ] {
        std::fs::copy(root().join(from), dist.join(to))
            .with_context(|| format!("copying {from}"))?;
    }
    for name in [
        "glassbox_widget_bg.wasm",
        "glassbox_widget.js",
        "glassbox-chat.js",
        "glassbox.css",
    ] {
        precompress(&dist.join(name))?;
    }
    crate::vocab::prepare()?;
    say(format!("widget ready in {}", dist.display()));
    Ok(dist)
}

/// Writes `file.br` (brotli, quality 11) and `file.gz` (gzip -9) beside `file`, which the server sends
/// to clients that accept them: smaller than compressing on the fly, and no CPU per request.
pub fn precompress(file: &std::path::Path) -> Result<()> {
    use std::io::Write;
    let br_path = file.with_extension(format!("{}.br", ext(file)));
    if is_newer(&br_path, file) {
        return Ok(());
    }
    let data = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 11,
        lgwin: 22,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &data[..], &mut br, &params)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&data)?;
    std::fs::write(
        file.with_extension(format!("{}.gz", ext(file))),
        gz.finish()?,
    )?;
    std::fs::write(&br_path, br)?;
    Ok(())
}

fn ext(file: &std::path::Path) -> String {
    file.extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// True if `a` exists and was modified after `b`.
pub fn is_newer(a: &std::path::Path, b: &std::path::Path) -> bool {
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(a), modified(b)), (Some(x), Some(y)) if x > y)
}
