//! `serve`, `test` and `bench`: each builds what it needs first.

use std::process::Command;

use anyhow::Result;

use crate::build;
use crate::tools::{browser, root, run, say};

/// Builds the widget and runs the server on the demo page.
pub fn serve() -> Result<()> {
    let dist = build::widget()?;
    say("starting the server (Ctrl-C stops it)");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root()).args(["run", "--package", "glassbox-server", "--bin", "glassbox-server"]);
    set_default(&mut cmd, "GLASSBOX_WIDGET_DIR", dist.display().to_string());
    set_default(&mut cmd, "GLASSBOX_PUBLIC_DIR", root().join("public").display().to_string());
    set_default(&mut cmd, "GLASSBOX_DATA_DIR", root().join("data").display().to_string());
    run(&mut cmd)
}

/// Runs every test of the workspace, including the browser end-to-end test.
pub fn test() -> Result<()> {
    let dist = build::widget()?;
    let (chromium, driver) = browser()?;
    say("running all tests (cargo test --workspace)");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root())
        .args(["test", "--workspace"])
        .env("GLASSBOX_E2E_WIDGET_DIR", &dist)
        .env("GLASSBOX_E2E_PUBLIC_DIR", root().join("public"))
        .env("GLASSBOX_E2E_CHROMIUM", chromium)
        .env("GLASSBOX_E2E_CHROMEDRIVER", driver);
    run(&mut cmd)
}

/// Measures the gateway's added latency and the widget's payload.
pub fn bench_gateway() -> Result<()> {
    let dist = build::widget()?;
    say("building and running the gateway benchmark (release)");
    run(Command::new("cargo")
        .current_dir(root())
        .args(["run", "--release", "--package", "glassbox-e2e", "--bin", "gateway-bench", "--"])
        .arg(dist))
}

fn set_default(cmd: &mut Command, key: &str, value: String) {
    if std::env::var_os(key).is_none() {
        cmd.env(key, value);
    }
}
