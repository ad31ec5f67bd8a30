//! `cargo xtask screenshot`: the README's picture, made in headless Chromium. The demo page with the
//! repo's demo agent and the offline provider (no key): a question that calls the demo MCP server's
//! `current_time`, approved in the widget's dialog, and the reply with its tool line, written to
//! `docs/screenshot.png`. xtask builds the widget and the demo MCP server and names them.

use std::time::Duration;

use anyhow::{Context, Result};
use glassbox_e2e::widget_page::{CONNECTED, shadow_element};
use glassbox_e2e::{in_browser, root, start_server, wait_for};

const ROOT: &str = "const r = document.querySelector('glassbox-chat').shadowRoot;";

#[tokio::main]
async fn main() -> Result<()> {
    let config = root().join("glassbox.toml").display().to_string();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "5"),
        ("GLASSBOX_CONFIG", &config),
    ])
    .await?;
    glassbox_e2e::mcp_ready(&server).await?;
    let out = root().join("docs/screenshot.png");
    let url = format!("http://{}/", server.addr);
    let written = out.clone();
    in_browser(url, "screenshot", |client, url| async move {
        client.set_window_size(1200, 960).await?;
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let input = shadow_element(&client, "textarea.gb-input").await?;
        input
            .send_keys("What time is it in Tokyo? demo.current_time {\"zone\": \"Asia/Tokyo\"}\u{E007}")
            .await?;
        wait_for(&client, "the approval dialog", &format!("{ROOT} return !!r.querySelector('button.gb-approve');")).await?;
        shadow_element(&client, "button.gb-approve").await?.click().await?;
        wait_for(
            &client,
            "the reply",
            &format!("{ROOT} return !!r.querySelector('.gb-message[data-role=assistant][data-status=complete] .gb-view-context');"),
        )
        .await?;
        // Fonts and the list's scrolling settle.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let png = client.screenshot().await?;
        std::fs::write(&written, png).with_context(|| format!("writing {}", written.display()))?;
        Ok(())
    })
    .await?;
    println!("wrote {}", out.display());
    Ok(())
}
