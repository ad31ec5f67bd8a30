//! Files the build writes: where `dist/` is, writing only what changed, and the precompressed
//! copies the server sends. Used by every build step (widget, npm packages, React demo,
//! vocabularies), so none of them needs another.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::tools::root;

/// The folder the server serves under `/widget/`.
pub fn dist_dir() -> PathBuf {
    root().join("dist")
}

/// Whether `file` is a `.br` or `.gz` written by [`precompress`].
pub fn is_precompressed(file: &Path) -> bool {
    file.extension().is_some_and(|x| x == "br" || x == "gz")
}

/// Writes `file.br` (brotli, quality 11, 9 past 4 MiB) and `file.gz` (gzip -9) beside `file`, which the server sends
/// to clients that accept them: smaller than compressing on the fly, and no CPU per request.
pub fn precompress(file: &Path) -> Result<()> {
    use std::io::Write;
    let br_path = file.with_extension(format!("{}.br", ext(file)));
    if is_newer(&br_path, file) {
        return Ok(());
    }
    let data = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let mut br = Vec::new();
    // Quality 11 takes about a second per megabyte; large vocabularies use 9 (a few % larger).
    let params = brotli::enc::BrotliEncoderParams {
        quality: if data.len() > 4 << 20 { 9 } else { 11 },
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

fn ext(file: &Path) -> String {
    file.extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Copies `from` to `to` unless `to` holds the same bytes: what depends on `to` (its compressed
/// copies, the npm packages, the React demo) is not rebuilt for nothing.
pub fn copy_if_changed(from: &Path, to: &Path) -> Result<()> {
    let data = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    write_if_changed(to, &data)
}

/// Writes `data` to `path` unless it holds it already.
pub fn write_if_changed(path: &Path, data: &[u8]) -> Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(data) {
        return Ok(());
    }
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))
}

/// True if `a` exists and was modified after `b`.
pub fn is_newer(a: &Path, b: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(a), modified(b)), (Some(x), Some(y)) if x > y)
}
