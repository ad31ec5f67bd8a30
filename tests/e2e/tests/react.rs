//! The React package: its Vitest suite (jsdom, React 19 and 18) against the real server on
//! loopback; the React demo app (built by Vite into public/react/) in headless Chromium with a fake
//! provider that speaks OpenAI's format; and a fresh Vite app that installs both packages from
//! their `npm pack` tarballs.

use std::process::Command;

use anyhow::{Context, Result};
use fantoccini::Locator;
use glassbox_e2e::{ask_demo_config, in_browser, mcp_ready, root, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::{Value, json};

/// `text` without terminal colour codes.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ … letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The page origin Vitest's jsdom runs at (packages/react/vitest.config.ts).
const JSDOM_ORIGIN: &str = "http://localhost:3000";

/// The server's identity secret in the hook's tests, which make users' hashes as a host would.
const IDENTITY_SECRET: &str = "react-identity-secret-0123456789";

#[tokio::test]
async fn the_react_hooks_vitest_suite_passes_against_the_real_server() -> Result<()> {
    // The repo's MCP server under `ask`: the hook's approvals and `approve`.
    let dir = tempfile::tempdir()?;
    let config = ask_demo_config(dir.path())?;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_ALLOWED_ORIGINS", JSDOM_ORIGIN),
        ("GLASSBOX_CONFIG", config.as_str()),
        ("GLASSBOX_EMBEDDINGS", "off"),
        ("GLASSBOX_IDENTITY_SECRET", IDENTITY_SECRET),
    ])
    .await?;
    mcp_ready(&server).await?;
    let project = root().join("packages/react");
    let vitest = project.join("node_modules/vitest/vitest.mjs");
    anyhow::ensure!(
        vitest.exists(),
        "{} is missing: `cargo xtask build` installs the React package's tools",
        vitest.display()
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(vitest)
            .args(["run", "--reporter=verbose"])
            .env("GLASSBOX_TEST_SERVER", format!("http://{}", server.addr))
            .env("GLASSBOX_TEST_IDENTITY_SECRET", IDENTITY_SECRET)
            .env("CI", "1")
            .current_dir(project)
            .output()
    })
    .await?
    .context("running vitest")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    assert!(out.status.success(), "vitest failed:\n{stdout}\n{stderr}");
    // Five tests, with React 19 and with React 18, all passed.
    let plain = strip_ansi(&stdout);
    assert!(
        plain.contains(" 10 passed (10)"),
        "every test ran:\n{plain}"
    );
    Ok(())
}

#[tokio::test]
async fn the_react_demo_sends_route_context_to_the_model_and_not_into_the_message() -> Result<()> {
    let fake = FakeProvider::start(Behaviour::reply(&["This pack ", "is a model."])).await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &base),
    ])
    .await?;
    let demo = root().join("public/react/index.html");
    anyhow::ensure!(
        demo.exists(),
        "{} is missing: run `cargo xtask build`",
        demo.display()
    );
    in_browser(format!("http://{}/react/", server.addr), "react-demo", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the hook to connect", "return document.querySelector('[data-testid=status]')?.textContent.startsWith('connected');").await?;
        // A route of the app: its page context goes with the message.
        client.find(Locator::LinkText("Pack: Illustrious-XL")).await?.click().await?;
        let shown = client
            .execute("return [location.pathname, JSON.parse(document.querySelector('[data-testid=context]').textContent)];", vec![])
            .await?;
        assert_eq!(shown[0], json!("/react/packs/illustrious-xl"));
        assert_eq!(shown[1]["entity"], json!("Illustrious-XL"));
        let input = client.find(Locator::Css("textarea[aria-label=Message]")).await?;
        input.send_keys("What does this model do?").await?;
        input.send_keys("\u{E007}").await?;
        wait_for(&client, "the reply", "return [...document.querySelectorAll('li[data-role=assistant][data-status=complete]')].map(l => l.textContent)[0] === 'This pack is a model.';").await?;
        let visible = client
            .execute("return [...document.querySelectorAll('li[data-role=user]')].map(l => l.textContent);", vec![])
            .await?;
        assert_eq!(visible, json!(["What does this model do?"]), "the context is not in the message");
        wait_for(&client, "the usage line", "return document.querySelector('[data-testid=status]').textContent.includes('tokens in');").await?;

        // The provider got the context, as data apart from the user's words.
        let requests = fake.requests();
        let body = &requests.last().context("the provider was not called")?.body;
        let messages = body["messages"].as_array().context("no messages")?;
        let user = messages.iter().rev().find(|m| m["role"] == "user").context("no user message")?;
        assert_eq!(user["content"], json!("What does this model do?"));
        let everything = body.to_string();
        for part in ["Illustrious-XL", "pack-detail", "/react/packs/illustrious-xl", "Viewing pack detail"] {
            assert!(everything.contains(part), "{part} did not reach the model: {everything}");
        }
        let elsewhere: Vec<&Value> = messages.iter().filter(|m| m["role"] != "user").collect();
        assert!(
            elsewhere.iter().any(|m| m.to_string().contains("Illustrious-XL")),
            "the context travels outside the user's message"
        );

        // A route loaded directly is served the app, which gives that route's context.
        client.goto(&format!("{}settings", url)).await?;
        wait_for(&client, "the settings route", "return document.querySelector('[data-testid=context]')?.textContent.includes('\"settings\"');").await?;

        // <GlassboxChat mode="launcher">: the element's launcher, opened, connects.
        wait_for(&client, "the launcher", "return !!document.querySelector('glassbox-chat')?.shadowRoot?.querySelector('.gb-launcher');").await?;
        client
            .execute("document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-launcher').click();", vec![])
            .await?;
        wait_for(&client, "the launcher's chat to connect", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-status[data-state=connected]');").await?;
        // Its token meter counts exactly: the worker and vocabulary come from the server's /widget/,
        // the meter's arithmetic from a wasm chunk of the bundle (fetched under the demo's CSP).
        wait_for(&client, "an exact count in the launcher's meter", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-meter[data-estimated=false]:not([aria-valuemax=\"0\"])');").await?;
        Ok(())
    })
    .await
}

/// Runs `program args` in `dir`; fails with its output.
fn run_in(
    dir: &std::path::Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .with_context(|| format!("running {program} {args:?}"))?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(
        out.status.success(),
        "{program} {args:?} failed in {}:\n{text}",
        dir.display()
    );
    Ok(text)
}

/// A new user's app: Vite's React template, the two packages installed from their `npm pack`
/// tarballs, no configuration for Glassbox.
const FRESH_APP_MAIN: &str = "import { StrictMode, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { GlassboxChat, useGlassboxChat } from 'glassbox-react';

const server = import.meta.env.VITE_GLASSBOX_SERVER;

function App() {
  const chat = useGlassboxChat({ server, session: 'fresh' });
  const [context] = useState({ page: 'checkout', step: 2 });
  return (
    <main>
      <p id=\"status\">{chat.status}</p>
      <ol>{chat.messages.map((m) => <li key={m.id} data-role={m.role} data-status={m.status}>{m.content}</li>)}</ol>
      <button id=\"ask\" onClick={() => chat.sendMessage('Where am I?', [], context)}>Ask</button>
      <GlassboxChat server={server} session=\"fresh-element\" pageContext={context} lang=\"fr\" strings={{ send: 'Go' }} style={{ height: 480 }} />
    </main>
  );
}

createRoot(document.getElementById('root')).render(<StrictMode><App /></StrictMode>);
";

#[tokio::test]
async fn a_fresh_vite_app_uses_the_packed_packages_without_configuration() -> Result<()> {
    let work = tempfile::tempdir()?;
    let npm = root().join("dist/npm");
    for package in ["glassbox-chat", "glassbox-react"] {
        let dest = work.path().display().to_string();
        run_in(
            &npm.join(package),
            "npm",
            &["pack", "--pack-destination", &dest, "--silent"],
            &[],
        )?;
    }
    let app = work.path().join("app");
    std::fs::create_dir_all(app.join("src"))?;
    // The versions the repository's own React tools pin (installed from npm's cache when warm).
    let lock: Value = serde_json::from_slice(&std::fs::read(
        root().join("packages/react/package-lock.json"),
    )?)?;
    let pinned = |name: &str| -> Result<String> {
        lock["packages"][format!("node_modules/{name}")]["version"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("{name} is not in packages/react/package-lock.json"))
    };
    let version = json!(env!("CARGO_PKG_VERSION"));
    let manifest = json!({
        "name": "fresh-app",
        "private": true,
        "type": "module",
        "dependencies": {
            "react": pinned("react")?,
            "react-dom": pinned("react-dom")?,
            "glassbox-chat": format!("file:../glassbox-chat-{}.tgz", version.as_str().unwrap_or_default()),
            "glassbox-react": format!("file:../glassbox-react-{}.tgz", version.as_str().unwrap_or_default()),
        },
        "devDependencies": {
            "vite": pinned("vite")?,
            "@vitejs/plugin-react": pinned("@vitejs/plugin-react")?,
        }
    });
    std::fs::write(
        app.join("package.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    std::fs::write(
        app.join("vite.config.js"),
        "import { defineConfig } from 'vite';\nimport react from '@vitejs/plugin-react';\n\nexport default defineConfig({ plugins: [react()] });\n",
    )?;
    std::fs::write(
        app.join("index.html"),
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fresh app</title></head>\
         <body><div id=\"root\"></div><script type=\"module\" src=\"/src/main.jsx\"></script></body></html>",
    )?;
    std::fs::write(app.join("src/main.jsx"), FRESH_APP_MAIN)?;
    run_in(
        &app,
        "npm",
        &[
            "install",
            "--prefer-offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ],
        &[],
    )?;

    let site_dir = app.join("dist");
    std::fs::create_dir_all(&site_dir)?;
    let site = glassbox_e2e::StaticSite::start(&site_dir).await?;
    // `npm run dev` too: Vite's dev server, which pre-bundles the packages, on a port of its own.
    let dev_port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
        probe.local_addr()?.port()
    };
    let dev_origin = format!("http://127.0.0.1:{dev_port}");
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        (
            "GLASSBOX_ALLOWED_ORIGINS",
            &format!("{},{dev_origin}", site.origin()),
        ),
    ])
    .await?;
    let server_url = format!("http://{}", server.addr);
    run_in(
        &app,
        "node",
        &[
            "node_modules/vite/bin/vite.js",
            "build",
            "--logLevel",
            "warn",
        ],
        &[("VITE_GLASSBOX_SERVER", &server_url)],
    )?;
    let dev = DevServer(
        Command::new("node")
            .args([
                "node_modules/vite/bin/vite.js",
                "--host",
                "127.0.0.1",
                "--port",
                &dev_port.to_string(),
                "--strictPort",
            ])
            .env("VITE_GLASSBOX_SERVER", &server_url)
            .current_dir(&app)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting vite's dev server")?,
    );
    let dev_url = format!("{dev_origin}/");
    in_browser(
        format!("{}/", site.origin()),
        "fresh-vite-app",
        |client, url| async move {
            for (url, what) in [(url, "the built app"), (dev_url, "the dev server")] {
                fresh_app_chats(&client, &url)
                    .await
                    .with_context(|| format!("in {what}"))?;
            }
            Ok(())
        },
    )
    .await?;
    drop(dev);
    Ok(())
}

/// Kills `vite` (the dev server) when the test ends.
struct DevServer(std::process::Child);

impl Drop for DevServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The fresh app at `url`: the hook chats with page context and the element connects, styled.
async fn fresh_app_chats(client: &fantoccini::Client, url: &str) -> Result<()> {
    // The dev server may still be starting.
    let started = std::time::Instant::now();
    while client.goto(url).await.is_err()
        || client
            .execute("return !!document.getElementById('root');", vec![])
            .await?
            != json!(true)
    {
        anyhow::ensure!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{url} did not answer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    wait_for(
        client,
        "the hook to connect",
        "return document.getElementById('status')?.textContent === 'connected';",
    )
    .await?;
    client.find(Locator::Id("ask")).await?.click().await?;
    let reply = wait_for(client, "the reply", "return [...document.querySelectorAll('li[data-role=assistant][data-status=complete]')].map(l => l.textContent)[0];").await?;
    assert!(
        reply
            .as_str()
            .unwrap_or_default()
            .contains("Page context came with it, with keys `page`, `step`."),
        "{reply}"
    );
    let asked = client
        .execute(
            "return [...document.querySelectorAll('li[data-role=user]')].map(l => l.textContent);",
            vec![],
        )
        .await?;
    assert_eq!(asked, json!(["Where am I?"]));
    // The element from the package, in the same bundle: its wasm and stylesheet were found.
    wait_for(client, "the element to connect", "return !!document.querySelector('glassbox-chat')?.shadowRoot?.querySelector('.gb-status[data-state=connected]');").await?;
    // In French (a chunk of the bundle) with the app's own word for Send.
    let words = wait_for(client, "the element's words", "const r = document.querySelector('glassbox-chat').shadowRoot; const l = r.querySelector('.gb-attach')?.getAttribute('aria-label'); return l === 'Joindre des fichiers' && [r.querySelector('.gb-send-word').textContent, l];").await?;
    assert_eq!(words, json!(["Go", "Joindre des fichiers"]));
    let styled = client
            .execute("return getComputedStyle(document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-header')).display;", vec![])
            .await?;
    assert_eq!(styled, json!("flex"));
    Ok(())
}
