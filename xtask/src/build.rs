//! Builds the widget: wasm32 release (size profile) → wasm-bindgen → wasm-opt → dist/.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::files::{copy_if_changed, dist_dir, is_newer, precompress};
use crate::tools::{root, run, say, target_dir, wasm_toolchain};

/// A wasm crate built into `dist/`: package, cargo profile, output name, wasm-opt level.
struct WasmModule {
    package: &'static str,
    profile: &'static str,
    out_name: &'static str,
    opt_level: &'static str,
    /// More wasm-opt flags.
    opt_args: &'static [&'static str],
    /// Minify wasm-bindgen's JS (pages wait for it before the first paint; workers do not).
    minify_js: bool,
    /// Cut the crate's `wasm_split` functions out into chunks loaded on first use, in
    /// `dist/<out_name>_lazy-<hash>/` ([`crate::wasm_split`]).
    split: bool,
}

/// wasm-opt on a split module's chunks (loaded on first use, not in the first load): debug info and
/// producers stripped, no optimization. Rust's size-optimized LTO output is nearly as small: the 59
/// chunks of the widget were 318 kB (zlib -9) at -Oz and 324 kB at -O0, and wasm-opt took 103 CPU-s
/// at -Oz against 42 (measured on one build, on this 2-core machine).
const CHUNK_OPT_LEVEL: &str = "-O0";

/// The chat widget: smallest download. wasm-opt's default of inlining every function with one
/// caller makes huge functions that compress worse: without it the module is 2% larger raw and
/// 10% smaller in brotli (465 → 419 kB, measured on this module).
const WIDGET: WasmModule = WasmModule {
    package: "glassbox-widget",
    profile: "wasm-release",
    out_name: "glassbox_widget",
    opt_level: "-Oz",
    opt_args: &["--one-caller-inline-max-function-size", "0"],
    minify_js: true,
    split: true,
};

/// `<glassbox-token-meter>` alone: the meter without the chat, smallest download. It shares the
/// widget's profile and dependencies, so only its own crate and the link are built again.
const METER: WasmModule = WasmModule {
    package: "glassbox-meter",
    profile: "wasm-release",
    out_name: "glassbox_meter",
    opt_level: "-Oz",
    opt_args: &["--one-caller-inline-max-function-size", "0"],
    minify_js: true,
    split: false,
};

/// The token-counting worker: fastest counting.
const TOKEN_WORKER: WasmModule = WasmModule {
    package: "glassbox-token-worker",
    profile: "wasm-speed",
    out_name: "glassbox_token_worker",
    opt_level: "-O3",
    opt_args: &[],
    minify_js: false,
    split: false,
};

/// The token worker with Hugging Face tokenizers, loaded only for the models that need them.
const TOKEN_WORKER_HF: WasmModule = WasmModule {
    package: "glassbox-token-worker-hf",
    profile: "wasm-speed",
    out_name: "glassbox_token_worker_hf",
    opt_level: "-O3",
    opt_args: &[],
    minify_js: false,
    split: false,
};

/// Builds the widget, the token worker and the vocabularies into `dist/` and returns that folder.
/// Steps whose output is current are skipped.
pub fn widget() -> Result<PathBuf> {
    let dist = dist_dir();
    std::fs::create_dir_all(&dist)?;
    // Node tools (the React package's, pinned): Vite for the demo, and its minifier for the glue.
    let node_modules = crate::react::node_modules()?;
    // Installs the vocabularies' npm packages too.
    wasm_toolchain()?;
    // The vocabularies (a core for about a minute on a fresh build) are made beside the wasm
    // builds, whose link steps leave a core idle.
    let vocab = std::thread::spawn(crate::vocab::prepare);
    let built = [&WIDGET, &METER, &TOKEN_WORKER, &TOKEN_WORKER_HF]
        .into_iter()
        .try_for_each(|module| wasm_module(module, &dist, &node_modules));
    // Joined before any error returns: an exit would cut a vocabulary file short.
    let vocab = vocab
        .join()
        .map_err(|_| anyhow::anyhow!("preparing the vocabularies panicked"));
    built?;
    vocab??;
    for (from, to) in [
        ("widget/js/glassbox-chat.js", "glassbox-chat.js"),
        (
            "widget/js/glassbox-token-meter.js",
            "glassbox-token-meter.js",
        ),
        ("widget/js/token-worker.js", "token-worker.js"),
        ("widget/js/shadow-shell.js", "shadow-shell.js"),
        ("widget/js/launcher.js", "launcher.js"),
        ("widget/js/glassbox-wasm.js", "glassbox-wasm.js"),
        ("widget/js/meter-wasm.js", "meter-wasm.js"),
        ("widget/js/token-worker-start.js", "token-worker-start.js"),
    ] {
        copy_if_changed(&root().join(from), &dist.join(to))?;
    }
    // The stylesheets, without comments and layout whitespace.
    for name in ["glassbox.css", "glassbox-panels.css"] {
        let from = root().join("style").join(name);
        let css = std::fs::read_to_string(&from)
            .with_context(|| format!("reading {}", from.display()))?;
        crate::files::write_if_changed(&dist.join(name), crate::css::minify(&css).as_bytes())?;
    }
    for name in [
        "glassbox_widget_bg.wasm",
        "glassbox_widget.js",
        "glassbox_meter_bg.wasm",
        "glassbox_meter.js",
        "glassbox_token_worker_bg.wasm",
        "glassbox_token_worker.js",
        "glassbox_token_worker_hf_bg.wasm",
        "glassbox_token_worker_hf.js",
        "glassbox-chat.js",
        "glassbox-token-meter.js",
        "token-worker.js",
        "shadow-shell.js",
        "launcher.js",
        "glassbox-wasm.js",
        "meter-wasm.js",
        "token-worker-start.js",
        "glassbox.css",
        "glassbox-panels.css",
    ] {
        precompress(&dist.join(name))?;
    }
    crate::npm_package::write(&dist)?;
    crate::react::build(&dist)?;
    say(format!("widget ready in {}", dist.display()));
    Ok(dist)
}

/// A server build running in the background ([`ServerBuild::start`]); dropping it unfinished
/// stops it, so a failure elsewhere leaves no cargo running.
pub struct ServerBuild {
    child: Option<std::process::Child>,
    target: PathBuf,
    started: std::time::Instant,
}

impl ServerBuild {
    /// Starts building the server and the demo MCP server with the `serve` profile (optimized, no
    /// LTO) in their own target directory (`<target>/serve-build`, so they build while the widget
    /// builds).
    pub fn start() -> Result<Self> {
        let target = target_dir().join("serve-build");
        let child = Command::new("cargo")
            .current_dir(root())
            .args([
                "build",
                "--quiet",
                "--package",
                "glassbox-server",
                "--bin",
                "glassbox-server",
                "--package",
                "glassbox-mcp-demo",
                "--bin",
                "glassbox-mcp-demo",
                "--profile",
                "serve",
                "--target-dir",
            ])
            .arg(&target)
            .spawn()
            .context("starting the server build (profile serve)")?;
        Ok(Self {
            child: Some(child),
            target,
            started: std::time::Instant::now(),
        })
    }

    /// Whether the build has ended.
    pub fn is_finished(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Waits for the build and returns the binaries: the server and the demo MCP server.
    pub fn finish(mut self) -> Result<(PathBuf, PathBuf)> {
        let status = self
            .child
            .take()
            .context("the server build was already collected")?
            .wait()
            .context("waiting for the server build")?;
        if !status.success() {
            bail!("building the server (profile serve) failed with {status}");
        }
        say(format!(
            "server built (profile serve) in {:.0} s",
            self.started.elapsed().as_secs_f64()
        ));
        let bin = |name: &str| {
            self.target
                .join(format!("serve/{name}{}", std::env::consts::EXE_SUFFIX))
        };
        Ok((bin("glassbox-server"), bin("glassbox-mcp-demo")))
    }
}

impl Drop for ServerBuild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            say("stopping the server build");
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Minifies an ES module in place with Rolldown's minifier (oxc), a dependency of the pinned Vite.
const MINIFY_JS: &str = "
import { readFileSync, writeFileSync } from 'node:fs';
import { minifySync } from 'rolldown/experimental';
const file = process.argv[1];
const result = minifySync(file, readFileSync(file, 'utf8'), { module: true, compress: true, mangle: true });
if (result.errors?.length) {
  console.error(result.errors);
  process.exit(1);
}
writeFileSync(file, result.code);
";

/// wasm-bindgen as `wasm-bindgen --target web --no-typescript --out-name NAME --out-dir DIR` runs
/// it (the library the CLI is made of, at the lock's version): the glue `NAME.js` and `NAME_bg.wasm`
/// into `out_dir`. `keep_lld_exports`: keep the function table and memory layout exports a split
/// module's chunk loader needs.
fn wasm_bindgen(
    input: &std::path::Path,
    out_dir: &std::path::Path,
    out_name: &str,
    keep_lld_exports: bool,
) -> Result<()> {
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen
        .input_path(input)
        .web(true)?
        .typescript(false)
        .out_name(out_name)
        .keep_lld_exports(keep_lld_exports)
        // As the CLI: a missing URL falls back to the wasm file beside the glue.
        .omit_default_module_path(false);
    bindgen
        .generate(out_dir)
        .with_context(|| format!("wasm-bindgen on {}", input.display()))
}

/// cargo build (wasm32) → wasm-bindgen (`--target web`) → wasm-opt, into `dist`; the JS minified
/// when the module says so, with the minifier in `node_modules`.
fn wasm_module(
    module: &WasmModule,
    dist: &std::path::Path,
    node_modules: &std::path::Path,
) -> Result<()> {
    let wasm_opt = wasm_toolchain()?;
    say(format!(
        "building {} (wasm32-unknown-unknown, profile {})",
        module.package, module.profile
    ));
    let target = target_dir();
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(root())
        .args([
            if module.split { "rustc" } else { "build" },
            "--package",
            module.package,
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            module.profile,
            "--target-dir",
        ])
        .arg(&target);
    if module.split {
        // The splitter needs the linker's relocations; given to this crate's link only, so the
        // dependencies (and the config's rustflags) are shared with the other builds.
        cargo.args(["--lib", "--", "-C", "link-arg=--emit-relocs"]);
    }
    run(&mut cargo)?;
    let raw = target.join(format!(
        "wasm32-unknown-unknown/{}/{}.wasm",
        module.profile,
        module.package.replace('-', "_")
    ));
    let out_wasm = dist.join(format!("{}_bg.wasm", module.out_name));
    // The last file a build writes: the main wasm, or for a split module the chunks' manifest
    // (which also names a folder that must be there).
    let done = if module.split {
        crate::wasm_split::manifest_path(dist, module.out_name)
    } else {
        out_wasm.clone()
    };
    let whole = out_wasm.exists()
        && dist.join(format!("{}.js", module.out_name)).exists()
        && (!module.split || crate::wasm_split::read_manifest(dist, module.out_name).is_ok());
    if is_newer(&done, &raw) && whole {
        say(format!(
            "{} is up to date; skipping wasm-bindgen and wasm-opt",
            module.out_name
        ));
        return Ok(());
    }
    // Made in a staging folder; `dist` gets the JS, then the wasm last: a step that fails leaves
    // the wasm older than the build, so the next run does every step again. A split module gets its
    // chunks' folder first, then its wasm, then its JS (which imports the chunks' loader), then the
    // manifest.
    let staging = target.join("wasm-bindgen").join(module.out_name);
    let split = if module.split {
        say(format!(
            "splitting {} at its lazy functions",
            module.out_name
        ));
        Some(crate::wasm_split::split(
            &raw,
            &target.join("wasm-split").join(module.out_name),
            module.out_name,
        )?)
    } else {
        None
    };
    say(format!("running wasm-bindgen for {}", module.out_name));
    let input = match &split {
        Some(split) => &split.main,
        None => &raw,
    };
    wasm_bindgen(input, &staging, module.out_name, split.is_some())?;
    let js = staging.join(format!("{}.js", module.out_name));
    let glue = std::fs::read_to_string(&js).with_context(|| format!("reading {}", js.display()))?;
    if glue.contains(crate::wasm_split::PLACEHOLDER) {
        bail!(
            "{} calls a lazily loaded function but is not split (set `split` in xtask/src/build.rs)",
            module.package
        );
    }
    let minify = |file: &std::path::Path| -> Result<()> {
        say(format!("minifying {}", file.display()));
        // Evaluated from the tools' folder, so `rolldown` resolves from its node_modules.
        let tools = node_modules
            .canonicalize()
            .ok()
            .and_then(|m| m.parent().map(std::path::Path::to_path_buf))
            .context("the Node tools' folder")?;
        run(Command::new("node")
            .args(["--input-type=module", "-e", MINIFY_JS])
            .arg(file)
            .current_dir(tools))
    };
    if module.minify_js {
        minify(&js)?;
    }
    let dist_js = dist.join(format!("{}.js", module.out_name));
    if split.is_none() {
        copy_if_changed(&js, &dist_js)?;
    }
    let wasm_opt_to = |level: &str, from: &std::path::Path, to: &std::path::Path| -> Result<()> {
        say(format!("running wasm-opt {level} on {}", from.display()));
        run(Command::new(&wasm_opt)
            .args([level, "--strip-debug", "--strip-producers"])
            .args(module.opt_args)
            .args([
                "--enable-bulk-memory",
                "--enable-nontrapping-float-to-int",
                "--enable-sign-ext",
                "--enable-mutable-globals",
                "--enable-reference-types",
                "--enable-multivalue",
            ])
            .arg(from)
            .arg("-o")
            .arg(to))
    };
    if let Some(split) = &split {
        // This build's chunks, in a folder of their own (named for the build).
        let lazy = dist.join(&split.folder);
        std::fs::create_dir_all(&lazy)?;
        if module.minify_js {
            minify(&split.loader)?;
        }
        copy_if_changed(&split.loader, &lazy.join(crate::wasm_split::LOADER))?;
        for chunk in &split.chunks {
            let name = chunk.file_name().context("a chunk's file name")?;
            wasm_opt_to(CHUNK_OPT_LEVEL, chunk, &lazy.join(name))?;
        }
        let files: Vec<_> = std::fs::read_dir(&lazy)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        for file in files.iter().filter(|f| !crate::files::is_precompressed(f)) {
            precompress(file)?;
        }
    }
    wasm_opt_to(
        module.opt_level,
        &staging.join(format!("{}_bg.wasm", module.out_name)),
        &out_wasm,
    )?;
    if let Some(split) = &split {
        copy_if_changed(&js, &dist_js)?;
        let previous = crate::wasm_split::write_manifest(dist, module.out_name, split)?;
        // Pages opened before this build keep the previous build's chunks.
        let mut keep = vec![split.folder.as_str()];
        keep.extend(previous.as_deref());
        crate::wasm_split::prune(dist, module.out_name, &keep)?;
    }
    Ok(())
}
