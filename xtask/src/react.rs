//! The React package and its demo, from `packages/react`: its pinned Node tools are installed
//! into the tools cache and linked as `packages/react/node_modules`; `tsc` type-checks the package
//! and compiles it into `dist/npm/glassbox-react/`; Vite builds the demo app into
//! `public/react/`, which the server serves at `/react/`. Steps whose output is current are
//! skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde_json::json;

use crate::files::write_if_changed;
use crate::tools::{npm_project, root, run, say};

/// The package's name on the registry.
pub const NAME: &str = "glassbox-react";

/// `packages/react`.
pub fn project() -> PathBuf {
    root().join("packages/react")
}

/// Installs the project's Node tools (once per lock change) and links them into the project,
/// and React 18 for the tests into `test/react18`; returns the project's `node_modules`.
pub fn node_modules() -> Result<PathBuf> {
    let project = project();
    let modules = npm_project(
        "react-npm",
        &project,
        "the React package's tools (React 19, TypeScript, Vite, Vitest)",
    )?;
    let react18 = project.join("test/react18");
    let modules18 = npm_project(
        "react18-npm",
        &react18,
        "React 18 for the React package's tests",
    )?;
    link_modules(&modules18, &react18)?;
    link_modules(&modules, &project)
}

/// Links `modules` as `project/node_modules`; returns the link.
fn link_modules(modules: &Path, project: &Path) -> Result<PathBuf> {
    let link = project.join("node_modules");
    match std::fs::symlink_metadata(&link) {
        // A folder of its own (`npm install` run by hand there) is left alone.
        Ok(meta) if !meta.file_type().is_symlink() => return Ok(link),
        Ok(_) if std::fs::read_link(&link).ok().as_deref() == Some(modules) => {}
        Ok(_) => {
            std::fs::remove_file(&link)?;
            symlink(modules, &link)?;
        }
        Err(_) => symlink(modules, &link)?,
    }
    Ok(link)
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("linking {} to {}", link.display(), target.display()))
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> Result<()> {
    anyhow::bail!(
        "link {} to {} by hand (symbolic links need Unix here)",
        link.display(),
        target.display()
    )
}

/// Builds `dist/npm/glassbox-react/` and the demo (`public/react/`).
pub fn build(dist: &Path) -> Result<()> {
    let modules = node_modules()?;
    let project = project();
    let sources = newest(&[
        project.join("src"),
        project.join("package-lock.json"),
        project.join("tsconfig.json"),
        project.join("tsconfig.build.json"),
        dist.join("npm/glassbox-chat/glassbox-chat.d.ts"),
        dist.join("npm/glassbox-chat/glassbox-wasm.d.ts"),
    ]);
    let out = dist.join("npm").join(NAME);
    if newest(&[out.join("index.js")]) <= sources {
        say("compiling glassbox-react (tsc)");
        run(Command::new("node")
            .arg(modules.join("typescript/bin/tsc"))
            .args(["-p", "tsconfig.build.json"])
            .current_dir(&project))?;
    }
    write_manifest(&out)?;
    let demo_out = root().join("public/react");
    let demo_sources = newest(&[
        project.join("demo"),
        project.join("vite.config.ts"),
        project.join("src"),
        project.join("package-lock.json"),
        dist.join("npm/glassbox-chat"),
    ]);
    if newest(&[demo_out.join("index.html")]) <= demo_sources {
        say("building the React demo (vite build) into public/react/");
        run(Command::new("node")
            .arg(modules.join("vite/bin/vite.js"))
            .args(["build", "--logLevel", "warn"])
            .current_dir(&project))?;
    }
    Ok(())
}

/// The package's `package.json` and README.
fn write_manifest(out: &Path) -> Result<()> {
    let version = crate::npm_package::workspace_version()?;
    let mut manifest = json!({
        "name": NAME,
        "version": version,
        "description": "The Glassbox chat in React: useGlassboxChat and <GlassboxChat>.",
        "type": "module",
        "main": "./index.js",
        "types": "./index.d.ts",
        "exports": {
            ".": { "types": "./index.d.ts", "default": "./index.js" },
            "./package.json": "./package.json"
        },
        "sideEffects": ["./GlassboxChat.js"],
        "files": ["*.js", "*.d.ts", "README.md", "LICENSE-MIT", "LICENSE-APACHE"],
        "dependencies": { crate::npm_package::NAME: version },
        "peerDependencies": { "react": ">=18 <20" },
    });
    if let Some(fields) = manifest.as_object_mut() {
        fields.extend(crate::npm_package::shared_metadata()?);
    }
    crate::npm_package::copy_licenses(out)?;
    write_if_changed(
        &out.join("package.json"),
        (serde_json::to_string_pretty(&manifest)? + "\n").as_bytes(),
    )?;
    write_if_changed(
        &out.join("README.md"),
        "# glassbox-react\n\nThe Glassbox chat in React 18 and 19: `useGlassboxChat({server, session?, agent?, model?})`\n\
         for a chat you draw yourself, `<GlassboxChat server=\"https://chat.example.com\" pageContext={…} mode=\"launcher\" />`\n\
         for the widget (`server` is the Glassbox server; left out, it is the page's own origin).\n\
         See the project's docs/embedding.md, \"React\".\n"
            .as_bytes(),
    )?;
    Ok(())
}

/// The newest modification time under `paths` (files, or folders walked whole); the epoch when
/// none exists.
fn newest(paths: &[PathBuf]) -> SystemTime {
    let mut best = SystemTime::UNIX_EPOCH;
    let mut stack: Vec<PathBuf> = paths.to_vec();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
            }
        } else if let Ok(modified) = meta.modified() {
            best = best.max(modified);
        }
    }
    best
}
