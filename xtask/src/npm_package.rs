//! The npm package of the elements, `dist/npm/glassbox-chat/`: the built widget, its workers,
//! vocabularies, stylesheet and types, with an ESM entry that defines both elements. Every file
//! is found relative to `import.meta.url`, so the folder works from a CDN, a Glassbox server or
//! `node_modules` alike; `npm pack` in it makes the tarball.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::files::{copy_if_changed, write_if_changed};
use crate::tools::{root, say};

/// The package's name on the registry.
pub const NAME: &str = "glassbox-chat";

/// The files of `dist/` the package carries (the vocabularies are added from `dist/vocab/`).
const FILES: &[&str] = &[
    "glassbox-chat.js",
    "glassbox-token-meter.js",
    "launcher.js",
    "glassbox-wasm.js",
    "shadow-shell.js",
    "glassbox_widget.js",
    "glassbox_widget_bg.wasm",
    "meter-wasm.js",
    "token-worker-start.js",
    "glassbox_meter.js",
    "glassbox_meter_bg.wasm",
    "glassbox.css",
    "glassbox-panels.css",
    "token-worker.js",
    "glassbox_token_worker.js",
    "glassbox_token_worker_bg.wasm",
    "glassbox_token_worker_hf.js",
    "glassbox_token_worker_hf_bg.wasm",
];

/// The entry: importing the package defines `<glassbox-chat>` and `<glassbox-token-meter>`.
const ENTRY: &str = "\
// Defines <glassbox-chat> and <glassbox-token-meter>. Types: glassbox-chat.d.ts.
import './glassbox-chat.js';
import './glassbox-token-meter.js';
";

const README: &str = "\
# glassbox-chat

The Glassbox chat widget as custom elements: `<glassbox-chat>` (the chat, inline or as a launcher)
and `<glassbox-token-meter>` (the token meter alone, counting in the browser with no server).

```js
import 'glassbox-chat';
```

```html
<glassbox-chat server=\"https://glassbox.example.com\" mode=\"launcher\"></glassbox-chat>
```

Or with no bundler, from any page (the files find each other relative to the script):

```html
<script type=\"module\" src=\"https://glassbox.example.com/widget/npm/glassbox-chat/index.js\"></script>
```

Attributes, methods, events, `::part()` names and the Content-Security-Policy it needs are in the
project's docs/embedding.md; the types are in `glassbox-chat.d.ts`.
";

/// Writes the package folder under `dist` and returns it. Files that hold the same bytes are not
/// written again.
pub fn write(dist: &Path) -> Result<PathBuf> {
    let dir = dist.join("npm").join(NAME);
    std::fs::create_dir_all(dir.join("vocab"))?;
    let mut files: Vec<String> = FILES.iter().map(|f| f.to_string()).collect();
    // The chat's chunks and their loader, this build's folder (synced: unchanged files are not
    // written again, so what reads the package is not rebuilt for nothing). First: the glue copied
    // next imports the loader.
    let chunks = crate::wasm_split::read_manifest(dist, "glassbox_widget")?;
    let package_chunks = dir.join(&chunks.folder);
    std::fs::create_dir_all(&package_chunks)?;
    let mut wanted: Vec<String> = std::fs::read_dir(dist.join(&chunks.folder))
        .with_context(|| format!("reading dist/{}", chunks.folder))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".wasm") || name.ends_with(".js"))
        .collect();
    wanted.sort();
    for name in &wanted {
        copy_if_changed(
            &dist.join(&chunks.folder).join(name),
            &package_chunks.join(name),
        )?;
        files.push(format!("{}/{name}", chunks.folder));
    }
    for entry in std::fs::read_dir(&package_chunks)? {
        let entry = entry?;
        if !wanted.contains(&entry.file_name().to_string_lossy().into_owned()) {
            std::fs::remove_file(entry.path())?;
        }
    }
    // The previous build's folder stays too (not packed): pages that load the widget from this
    // folder on a server, opened before the build, still fetch their own chunks.
    let mut keep = vec![chunks.folder.as_str()];
    keep.extend(chunks.previous.as_deref());
    crate::wasm_split::prune(&dir, "glassbox_widget", &keep)?;
    for name in FILES {
        copy_if_changed(&dist.join(name), &dir.join(name))?;
    }
    let mut vocabularies: Vec<String> = std::fs::read_dir(dist.join("vocab"))
        .context("reading dist/vocab")?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".gbv"))
        .collect();
    vocabularies.sort();
    for name in &vocabularies {
        copy_if_changed(
            &dist.join("vocab").join(name),
            &dir.join("vocab").join(name),
        )?;
        files.push(format!("vocab/{name}"));
    }
    for types in ["glassbox-chat.d.ts", "glassbox-wasm.d.ts"] {
        copy_if_changed(&root().join("widget/js").join(types), &dir.join(types))?;
    }
    write_if_changed(&dir.join("index.js"), ENTRY.as_bytes())?;
    write_if_changed(&dir.join("README.md"), README.as_bytes())?;
    copy_licenses(&dir)?;
    files.extend(
        [
            "index.js",
            "glassbox-chat.d.ts",
            "glassbox-wasm.d.ts",
            "README.md",
        ]
        .map(String::from),
    );
    files.extend(LICENSE_FILES.map(String::from));
    let mut manifest = json!({
        "name": NAME,
        "version": workspace_version()?,
        "description": "The Glassbox chat widget and token meter as custom elements (Rust + WebAssembly).",
        "type": "module",
        "main": "./index.js",
        "module": "./index.js",
        "types": "./glassbox-chat.d.ts",
        "exports": {
            ".": { "types": "./glassbox-chat.d.ts", "default": "./index.js" },
            "./chat": { "types": "./glassbox-chat.d.ts", "default": "./glassbox-chat.js" },
            "./token-meter": { "types": "./glassbox-chat.d.ts", "default": "./glassbox-token-meter.js" },
            // The chat with no view (GlassboxClient), for frameworks: glassbox-react.
            "./wasm": { "types": "./glassbox-wasm.d.ts", "default": "./glassbox-wasm.js" },
            "./glassbox.css": "./glassbox.css",
            "./glassbox-panels.css": "./glassbox-panels.css",
            "./package.json": "./package.json"
        },
        // Importing defines the elements.
        "sideEffects": true,
        "files": files,
    });
    if let Some(fields) = manifest.as_object_mut() {
        fields.extend(shared_metadata()?);
    }
    write_if_changed(
        &dir.join("package.json"),
        (serde_json::to_string_pretty(&manifest)? + "\n").as_bytes(),
    )?;
    say(format!("npm package ready in {}", dir.display()));
    Ok(dir)
}

/// The workspace's version (`[workspace.package] version`), which every crate and package shares.
pub fn workspace_version() -> Result<String> {
    workspace_field("version")
}

/// A string field of `[workspace.package]` in the root Cargo.toml (`version`, `repository`, …).
pub fn workspace_field(name: &str) -> Result<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml"))?;
    let section = manifest
        .split("[workspace.package]")
        .nth(1)
        .context("Cargo.toml has no [workspace.package]")?;
    section
        .lines()
        .take_while(|line| !line.trim_start().starts_with('['))
        .find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == name).then(|| value.trim().trim_matches('"').to_owned())
        })
        .with_context(|| format!("[workspace.package] has no {name}"))
}

/// The metadata both npm packages share: license, repository, homepage.
pub fn shared_metadata() -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut fields = serde_json::Map::new();
    fields.insert("license".into(), workspace_field("license")?.into());
    fields.insert(
        "repository".into(),
        json!({"type": "git", "url": format!("git+{}.git", workspace_field("repository")?)}),
    );
    fields.insert("homepage".into(), workspace_field("homepage")?.into());
    Ok(fields)
}

/// The license files every package carries, copied from the repository's root.
pub const LICENSE_FILES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// Copies the license files into the package folder `dir`.
pub fn copy_licenses(dir: &Path) -> Result<()> {
    for name in LICENSE_FILES {
        copy_if_changed(&root().join(name), &dir.join(name))?;
    }
    Ok(())
}
