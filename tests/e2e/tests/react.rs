//! The React package: its Vitest suite (jsdom) against the real server on loopback, and the React
//! demo app (built by Vite into public/react/) in headless Chromium with a fake provider that
//! speaks OpenAI's format.

use std::process::Command;

use anyhow::{Context, Result};
use fantoccini::Locator;
use glassbox_e2e::{in_browser, root, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::{Value, json};

/// The page origin Vitest's jsdom runs at (packages/react/vitest.config.ts).
const JSDOM_ORIGIN: &str = "http://localhost:3000";

#[tokio::test]
async fn the_react_hooks_vitest_suite_passes_against_the_real_server() -> Result<()> {
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_ALLOWED_ORIGINS", JSDOM_ORIGIN),
    ])
    .await?;
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
    assert!(stdout.contains("3 passed"), "every test ran:\n{stdout}");
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
        Ok(())
    })
    .await
}
