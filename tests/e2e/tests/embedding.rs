//! The widget embedded as hosts embed it, in headless Chromium: launcher mode on a desktop and a
//! phone-sized page, and the npm package loaded from another origin with one script tag.

use std::path::Path;

use anyhow::{Context, Result};
use fantoccini::Client;
use glassbox_e2e::widget_page::{CONNECTED, SHADOW, shadow_element};
use glassbox_e2e::{in_browser, start_server, static_site, wait_for, widget_dir};
use serde_json::{Value, json};

/// A host page: `head` and `body` inside a minimal document.
fn page(head: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}</head>\
         <body><main><h1>A host page</h1><p>Its own content.</p></main>{body}</body></html>"
    )
}

fn write_page(dir: &Path, name: &str, html: &str) -> Result<()> {
    std::fs::write(dir.join(name), html).with_context(|| format!("writing {name}"))
}

/// The launcher's state: [panel shown, aria-expanded, badge text or null, focused part].
const LAUNCHER_STATE: &str = "const r = document.querySelector('glassbox-chat').shadowRoot;
    const badge = r.querySelector('.gb-launcher-badge');
    const focused = r.activeElement;
    return [!r.querySelector('.gb-panel').hidden, r.querySelector('.gb-launcher').getAttribute('aria-expanded'),
            badge.hidden ? null : badge.textContent,
            focused ? (focused.getAttribute('part') ?? focused.className) : null];";

async fn launcher_state(client: &Client) -> Result<Value> {
    Ok(client.execute(LAUNCHER_STATE, vec![]).await?)
}

async fn wait_until_open(client: &Client, open: bool) -> Result<()> {
    let script = format!(
        "return {SHADOW}.querySelector('.gb-panel').hidden === {};",
        !open
    );
    wait_for(
        client,
        if open {
            "the panel to open"
        } else {
            "the panel to close"
        },
        &script,
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn the_launcher_opens_and_closes_by_mouse_and_keyboard_and_fills_a_phone() -> Result<()> {
    let public = tempfile::tempdir()?;
    write_page(
        public.path(),
        "index.html",
        &page(
            "<script type=\"module\" src=\"/widget/glassbox-chat.js\"></script>",
            "<glassbox-chat mode=\"launcher\" session=\"launch\"></glassbox-chat>",
        ),
    )?;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_PUBLIC_DIR", &public.path().display().to_string()),
    ])
    .await?;
    in_browser(format!("http://{}/", server.addr), "launcher", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the launcher", &format!("return !!{SHADOW}?.querySelector('.gb-launcher');")).await?;
        assert_eq!(launcher_state(&client).await?, json!([false, "false", null, null]));
        // Closed, the chat's code is not loaded: the page pays for a button.
        let loaded = client
            .execute("return performance.getEntriesByType('resource').some(e => e.name.includes('glassbox_widget_bg.wasm'));", vec![])
            .await?;
        assert_eq!(loaded, json!(false), "the wasm loads on first use, not with the page");
        // The element takes no room in the page; the button floats at the bottom right.
        let placed = client
            .execute(&format!("const b = {SHADOW}.querySelector('.gb-launcher').getBoundingClientRect();
                const e = document.querySelector('glassbox-chat').getBoundingClientRect();
                return [e.height, Math.round(innerWidth - b.right), Math.round(innerHeight - b.bottom)];"), vec![])
            .await?;
        assert_eq!(placed, json!([0, 20, 20]));

        // Mouse: the button opens the panel, focus goes to the message input.
        shadow_element(&client, ".gb-launcher").await?.click().await?;
        wait_until_open(&client, true).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        wait_for(&client, "focus in the input", &format!("return {SHADOW}.activeElement?.classList.contains('gb-input');")).await?;
        assert_eq!(launcher_state(&client).await?, json!([true, "true", null, "input"]));
        let size = client
            .execute(&format!("const p = {SHADOW}.querySelector('.gb-panel').getBoundingClientRect(); return [p.width, p.right <= innerWidth, p.bottom <= innerHeight];"), vec![])
            .await?;
        assert_eq!(size, json!([420, true, true]), "a floating panel on a desktop");

        // Keyboard: Esc closes and gives focus back to the button; Enter on it opens again.
        shadow_element(&client, ".gb-input").await?.send_keys("\u{E00C}").await?;
        wait_until_open(&client, false).await?;
        assert_eq!(launcher_state(&client).await?, json!([false, "false", null, "launcher"]));
        shadow_element(&client, ".gb-launcher").await?.send_keys("\u{E007}").await?;
        wait_until_open(&client, true).await?;
        wait_for(&client, "focus in the input", &format!("return {SHADOW}.activeElement?.classList.contains('gb-input');")).await?;
        // The close button closes it too.
        shadow_element(&client, ".gb-panel-close").await?.click().await?;
        wait_until_open(&client, false).await?;

        // A reply that arrives while closed shows as an unread badge, cleared by opening.
        client.execute("document.querySelector('glassbox-chat').sendMessage('Hello while closed');", vec![]).await?;
        wait_for(&client, "the unread badge", &format!("return {SHADOW}.querySelector('.gb-launcher-badge:not([hidden])')?.textContent;")).await?;
        let state = launcher_state(&client).await?;
        assert_eq!(state[2], json!("1"));
        let label = client
            .execute(&format!("return {SHADOW}.querySelector('.gb-launcher').getAttribute('aria-label');"), vec![])
            .await?;
        assert_eq!(label, json!("Open chat (1 unread reply)"));
        shadow_element(&client, ".gb-launcher").await?.click().await?;
        wait_until_open(&client, true).await?;
        assert_eq!(launcher_state(&client).await?[2], Value::Null, "opening reads the reply");
        let shown = client
            .execute(&format!("return {SHADOW}.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length;"), vec![])
            .await?;
        assert_eq!(shown, json!(1));

        // Open is remembered for this page: a reload opens it again, with the conversation.
        client.refresh().await?;
        wait_for(&client, "the widget to connect after the reload", CONNECTED).await?;
        assert_eq!(launcher_state(&client).await?[0], json!(true));
        wait_for(&client, "the history", &format!("return {SHADOW}.querySelectorAll('.gb-message[data-message-id]').length === 2;")).await?;

        // On a phone-sized page the panel fills the screen.
        client.set_window_size(360, 740).await?;
        wait_for(&client, "a full-screen panel", &format!("const p = {SHADOW}.querySelector('.gb-panel').getBoundingClientRect();
            return innerWidth <= 360 && p.left === 0 && p.top === 0 && p.width === innerWidth && p.height === innerHeight;")).await?;
        let input = client
            .execute(&format!("const i = {SHADOW}.querySelector('.gb-input').getBoundingClientRect(); return i.bottom <= innerHeight && i.width > 200;"), vec![])
            .await?;
        assert_eq!(input, json!(true), "the composer is on screen and usable");
        shadow_element(&client, ".gb-panel-close").await?.click().await?;
        wait_until_open(&client, false).await?;

        // Closed is remembered too; the position attribute moves the button.
        client.refresh().await?;
        wait_for(&client, "the launcher", &format!("return !!{SHADOW}?.querySelector('.gb-launcher');")).await?;
        assert_eq!(launcher_state(&client).await?[0], json!(false));
        let moved = client
            .execute(&format!("document.querySelector('glassbox-chat').setAttribute('position', 'top-left');
                const b = {SHADOW}.querySelector('.gb-launcher').getBoundingClientRect(); return [b.left, b.top];"), vec![])
            .await?;
        assert_eq!(moved, json!([20, 20]));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_npm_package_loads_from_another_origin_with_one_script_tag() -> Result<()> {
    // The host page's origin: a plain web server that serves nothing but the page.
    let public = tempfile::tempdir()?;
    let host = static_site(public.path(), &[]).await?;
    let host_origin = format!("http://{}", host.addr);
    let glassbox = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_ALLOWED_ORIGINS", &host_origin),
    ])
    .await?;
    let glassbox_origin = format!("http://{}", glassbox.addr);
    write_page(
        public.path(),
        "index.html",
        &page(
            &format!(
                "<script type=\"module\" src=\"{glassbox_origin}/widget/npm/glassbox-chat/index.js\"></script>"
            ),
            &format!(
                "<glassbox-chat server=\"{glassbox_origin}\" session=\"pkg\"></glassbox-chat>
                <textarea id=\"prompt\">Hello, tokens!</textarea>
                <glassbox-token-meter for=\"prompt\" model=\"gpt-4o\"></glassbox-token-meter>"
            ),
        ),
    )?;
    in_browser(format!("{host_origin}/"), "npm-package", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let defined = client
            .execute("return [!!customElements.get('glassbox-chat'), !!customElements.get('glassbox-token-meter')];", vec![])
            .await?;
        assert_eq!(defined, json!([true, true]), "the entry defines both elements");
        client
            .execute("window.__events = []; const el = document.querySelector('glassbox-chat');
                for (const name of ['glassbox:message', 'glassbox:reply', 'glassbox:error'])
                    document.addEventListener(name, (e) => __events.push([e.type, e.target === el, e.detail.role ?? e.detail.code, e.detail.content ?? '']));", vec![])
            .await?;
        let input = shadow_element(&client, "textarea.gb-input").await?;
        input.send_keys("Hello from another origin").await?;
        input.send_keys("\u{E007}").await?;
        wait_for(&client, "the reply", &format!("return {SHADOW}.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 1;")).await?;
        // The host hears the stored message, the reply and a refusal as typed events.
        client.execute("document.querySelector('glassbox-chat').addItem({kind: 'rule', name: 'No such rule'});", vec![]).await?;
        let events = wait_for(&client, "three events", "return __events.length >= 3 && __events;").await?;
        let reply_text = events[1][3].as_str().unwrap_or("").to_owned();
        assert!(reply_text.contains("Offline reply"), "{events}");
        assert_eq!(
            events,
            json!([
                ["glassbox:message", true, "user", "Hello from another origin"],
                ["glassbox:reply", true, "assistant", reply_text],
                ["glassbox:error", true, "not_found", ""]
            ])
        );
        // The meter found its worker and vocabulary beside the package's entry: an exact count.
        let reading = wait_for(&client, "an exact count", "const r = document.querySelector('glassbox-token-meter').reading(); return r && !r.estimated && r;").await?;
        assert!(reading["used"].as_u64().unwrap_or(0) > 0, "{reading}");
        Ok(())
    })
    .await
}

#[test]
fn npm_pack_accepts_the_package_folder() -> Result<()> {
    let dir = widget_dir().join("npm/glassbox-chat");
    let out = std::process::Command::new("npm")
        .args(["pack", "--dry-run", "--json", "--ignore-scripts"])
        .current_dir(&dir)
        .output()
        .context("running npm pack (Node.js is installed by `cargo xtask setup`)")?;
    assert!(
        out.status.success(),
        "npm pack failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packed: Value = serde_json::from_slice(&out.stdout)?;
    let files: Vec<&str> = packed[0]["files"]
        .as_array()
        .context("npm pack listed no files")?
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    for wanted in [
        "package.json",
        "index.js",
        "glassbox-chat.js",
        "glassbox-token-meter.js",
        "launcher.js",
        "glassbox_widget_bg.wasm",
        "glassbox.css",
        "glassbox-chat.d.ts",
        "token-worker.js",
        "vocab/o200k_base.gbv",
    ] {
        assert!(files.contains(&wanted), "{wanted} is not packed: {files:?}");
    }
    assert_eq!(packed[0]["name"], json!("glassbox-chat"));
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("package.json"))?)?;
    assert_eq!(manifest["exports"]["."]["default"], json!("./index.js"));
    assert_eq!(manifest["type"], json!("module"));
    // Every file the manifest lists exists (npm pack skips missing ones silently).
    for file in manifest["files"].as_array().context("no files")? {
        let file = file.as_str().context("a file that is not a string")?;
        assert!(dir.join(file).is_file(), "{file} is listed but missing");
    }
    Ok(())
}
