//! The widget embedded as hosts embed it, in headless Chromium: launcher mode on a desktop and a
//! phone-sized page; the npm package from another origin with one script tag; a hostile page at
//! 320 px with two widgets; a strict Content-Security-Policy; route changes of a single-page app;
//! a frame of another origin. Host pages come from a plain static server, not ours.

use std::path::Path;

use anyhow::{Context, Result};
use fantoccini::Client;
use glassbox_e2e::widget_page::{CONNECTED, SHADOW, shadow_element};
use glassbox_e2e::{StaticSite, in_browser, start_server, wait_for, widget_dir};
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
        // Closed, the chat's code is not loaded: the page pays for a button. Page context given
        // now is kept for later; it loads nothing either.
        client
            .execute("return document.querySelector('glassbox-chat').setPageContext({page: 'home'});", vec![])
            .await?;
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

        // The pointer nearing the button starts loading the chat (and its token worker), before
        // any click.
        client
            .execute(&format!("{SHADOW}.querySelector('.gb-launcher').dispatchEvent(new PointerEvent('pointerenter'));"), vec![])
            .await?;
        wait_for(&client, "the wasm to load on approach", "return performance.getEntriesByType('resource').some(e => e.name.includes('glassbox_widget_bg.wasm'));").await?;
        assert_eq!(launcher_state(&client).await?, json!([false, "false", null, null]), "still closed");

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
        // The launcher speaks the page's language too, with the host's words over it.
        client.execute("document.documentElement.lang = 'fr'; return true;", vec![]).await?;
        let french = wait_for(&client, "the launcher in French", &format!("const l = {SHADOW}.querySelector('.gb-launcher').getAttribute('aria-label'); return l.startsWith('Ouvrir') && [l, {SHADOW}.querySelector('.gb-panel-close').getAttribute('aria-label')];")).await?;
        assert_eq!(french, json!(["Ouvrir la discussion (1 réponse non lue)", "Fermer la discussion"]));
        client.execute("document.querySelector('glassbox-chat').strings = {launcher_unread_one: 'Chat — {count} new'}; document.documentElement.lang = 'en'; return true;", vec![]).await?;
        let own = wait_for(&client, "the host's launcher words", &format!("const l = {SHADOW}.querySelector('.gb-launcher').getAttribute('aria-label'); return l.startsWith('Chat —') && l;")).await?;
        assert_eq!(own, json!("Chat — 1 new"));
        client.execute("document.querySelector('glassbox-chat').strings = null; return true;", vec![]).await?;
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
    let host = StaticSite::start(public.path()).await?;
    let host_origin = host.origin();
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
        "glassbox_meter_bg.wasm",
        "meter-wasm.js",
        "token-worker-start.js",
        "glassbox.css",
        "glassbox-chat.d.ts",
        "token-worker.js",
        "vocab/o200k_base.gbv",
    ] {
        assert!(files.contains(&wanted), "{wanted} is not packed: {files:?}");
    }
    // The chat cannot start without its chunks' loader; the chunks go with it.
    let chunks = glassbox_e2e::widget_chunks()?;
    let loader = format!("{}/load.js", chunks.folder);
    assert!(files.contains(&loader.as_str()), "{loader} is not packed");
    let split = format!("{}/split_load_renderer.wasm", chunks.folder);
    assert!(files.contains(&split.as_str()), "{split} is not packed");
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

/// A classic script every test page loads first (no inline scripts: the pages run under strict
/// policies): counts WebSockets opened and closed, and collects Content-Security-Policy
/// violations and uncaught errors.
const PROBE_JS: &str = "window.__sockets = { opened: 0, closed: 0 };
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(...args) {
    super(...args);
    __sockets.opened++;
    this.addEventListener('close', () => __sockets.closed++);
  }
};
window.__problems = [];
const NativeWorker = window.Worker;
window.Worker = class extends NativeWorker {
  constructor(...args) {
    super(...args);
    this.addEventListener('error', (e) => __problems.push(`worker ${e.message ?? 'failed to start'}`));
    this.addEventListener('messageerror', () => __problems.push('worker messageerror'));
  }
};
document.addEventListener('securitypolicyviolation', (e) => __problems.push(`csp ${e.violatedDirective} ${e.blockedURI}`));
window.addEventListener('error', (e) => __problems.push(`error ${e.message}`));
window.addEventListener('unhandledrejection', (e) => __problems.push(`rejection ${e.reason}`));
";

/// A host page on a plain static site that loads the widget from `glassbox` (an origin).
fn host_page(glassbox: &str, extra_head: &str, body: &str) -> String {
    page(
        &format!(
            "<script src=\"/probe.js\"></script>{extra_head}\
             <script type=\"module\" src=\"{glassbox}/widget/glassbox-chat.js\"></script>"
        ),
        body,
    )
}

/// A Glassbox server (offline provider) that lets `origins` use it.
async fn glassbox_for(origins: &[String]) -> Result<glassbox_e2e::Server> {
    start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_ALLOWED_ORIGINS", &origins.join(",")),
    ])
    .await
}

/// The `n`th widget of the page (0-based): its shadow root, as a JS expression.
fn nth(n: usize) -> String {
    format!("document.querySelectorAll('glassbox-chat')[{n}].shadowRoot")
}

/// Types `text` into the `n`th widget's composer and sends it; waits for the reply.
async fn chat_in(client: &Client, n: usize, text: &str, replies: usize) -> Result<()> {
    let root = nth(n);
    wait_for(
        client,
        "the widget to connect",
        &format!("return !!{root}?.querySelector('.gb-status[data-state=connected]');"),
    )
    .await?;
    let id = client
        .execute(
            &format!("return {root}.querySelector('textarea.gb-input');"),
            vec![],
        )
        .await?;
    let input = fantoccini::elements::Element::from_element_id(
        client.clone(),
        fantoccini::elements::ElementRef::from(
            id.as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
                .context("no input")?
                .to_owned(),
        ),
    );
    input.send_keys(text).await?;
    input.send_keys("\u{E007}").await?;
    wait_for(
        client,
        "the reply",
        &format!("return {root}.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === {replies};"),
    )
    .await?;
    Ok(())
}

async fn problems(client: &Client) -> Result<Value> {
    Ok(client.execute("return window.__problems;", vec![]).await?)
}

#[tokio::test]
async fn a_hostile_page_at_320_px_and_two_widgets_side_by_side() -> Result<()> {
    let public = tempfile::tempdir()?;
    let site = StaticSite::start(public.path()).await?;
    let origin = site.origin();
    let glassbox = glassbox_for(std::slice::from_ref(&origin)).await?;
    let gb = format!("http://{}", glassbox.addr);
    write_page(public.path(), "probe.js", PROBE_JS)?;
    // Global rules a careless or hostile page may have: they reset the element itself, and every
    // inherited text property crosses into the shadow root.
    write_page(
        public.path(),
        "hostile.css",
        "* { all: unset; }
         html { font-size: 40px; }
         * { box-sizing: content-box !important; }
         div, header, form, button, textarea { display: none !important; }
         body { display: block; line-height: 3; letter-spacing: 6px; word-spacing: 30px; text-transform: uppercase;
                white-space: pre; text-align: right; text-indent: 50px; font-style: italic; font-weight: 900; }
         main { display: block; font-size: 60px; }
         head, script, style, link, title { display: none; }",
    )?;
    write_page(
        public.path(),
        "index.html",
        &host_page(
            &gb,
            "<link rel=\"stylesheet\" href=\"/hostile.css\">",
            &format!(
                "<glassbox-chat server=\"{gb}\" session=\"left\"></glassbox-chat>\
                      <glassbox-chat server=\"{gb}\" session=\"right\"></glassbox-chat>"
            ),
        ),
    )?;
    in_browser(format!("{origin}/"), "hostile", |client, url| async move {
        client.set_window_size(320, 900).await?;
        client.goto(&url).await?;
        // Both widgets chat, each in its own conversation.
        chat_in(&client, 0, "Left question", 1).await?;
        chat_in(&client, 1, "Right question", 1).await?;
        let texts = client
            .execute("return [0, 1].map(n => [...document.querySelectorAll('glassbox-chat')[n].shadowRoot.querySelectorAll('.gb-message[data-role=user] .gb-plain')].map(m => m.textContent.trim()));", vec![])
            .await?;
        assert_eq!(texts, json!([["Left question"], ["Right question"]]), "two widgets, two conversations");
        let sockets = client.execute("return window.__sockets;", vec![]).await?;
        assert_eq!(sockets, json!({"opened": 2, "closed": 0}));

        // Each renders as its own: in the page's width, a usable height, the widget's text
        // properties, the composer visible, nothing wider than the screen.
        let looks = client
            .execute("return [0, 1].map(n => {
                const r = document.querySelectorAll('glassbox-chat')[n].shadowRoot;
                const root = r.querySelector('.gb-root').getBoundingClientRect();
                const input = r.querySelector('.gb-input');
                const inputBox = input.getBoundingClientRect();
                const css = getComputedStyle(r.querySelector('.gb-message[data-role=assistant] p'));
                return [root.width <= innerWidth, root.height >= 320, inputBox.height > 20 && inputBox.width > 150,
                        getComputedStyle(input).display !== 'none',
                        css.letterSpacing, css.textTransform, css.whiteSpace, css.fontSize, css.textAlign, css.fontStyle,
                        r.querySelector('.gb-root').scrollWidth <= r.querySelector('.gb-root').clientWidth];
            });", vec![])
            .await?;
        let expected = json!([true, true, true, true, "normal", "none", "normal", "14px", "start", "normal", true]);
        assert_eq!(looks, json!([expected, expected]));
        assert_eq!(problems(&client).await?, json!([]));
        Ok(())
    })
    .await
}

/// The Content-Security-Policy a document of the repo gives: its fenced block that begins
/// `default-src 'none'`, on one line.
fn documented_policy(doc: &str) -> Result<String> {
    let text = std::fs::read_to_string(glassbox_e2e::root().join(doc))?;
    let start = text
        .find("default-src 'none'; script-src")
        .with_context(|| format!("{doc} gives no Content-Security-Policy"))?;
    let end = text[start..]
        .find("```")
        .with_context(|| format!("{doc}: the policy's block does not end"))?;
    Ok(text[start..start + end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" "))
}

#[tokio::test]
async fn a_strict_content_security_policy_page_works_with_the_documented_policy() -> Result<()> {
    let public = tempfile::tempdir()?;
    let site = StaticSite::start(public.path()).await?;
    let origin = site.origin();
    let glassbox = glassbox_for(std::slice::from_ref(&origin)).await?;
    let gb = format!("http://{}", glassbox.addr);
    let ws = format!("ws://{}", glassbox.addr);
    // The policy the README, docs/deploy.md and docs/embedding.md give, exactly, with our two
    // origins: no inline scripts or styles, no eval but WebAssembly's. The token worker starts from a
    // blob that imports its module from the server, which Chromium checks against worker-src.
    let documented = documented_policy("docs/embedding.md")?;
    for other in ["README.md", "docs/deploy.md"] {
        assert_eq!(
            documented_policy(other)?,
            documented,
            "{other} gives another policy"
        );
    }
    let policy = documented
        .replace("wss://glassbox.example.com", &ws)
        .replace("https://glassbox.example.com", &gb);
    site.set_header("content-security-policy", &policy)?;
    write_page(public.path(), "probe.js", PROBE_JS)?;
    write_page(
        public.path(),
        "index.html",
        &host_page(
            &gb,
            "",
            &format!("<glassbox-chat server=\"{gb}\" session=\"csp\"></glassbox-chat>"),
        ),
    )?;
    in_browser(format!("{origin}/"), "csp", |client, url| async move {
        client.goto(&url).await?;
        chat_in(&client, 0, "Hello under a strict policy", 1).await?;
        // The stylesheet applied (the header is a flex row), the token worker counted exactly, and
        // "View context" opened: the parts that load more than the first script all work.
        let styled = client
            .execute(
                &format!(
                    "return getComputedStyle({}.querySelector('.gb-header')).display;",
                    nth(0)
                ),
                vec![],
            )
            .await?;
        assert_eq!(styled, json!("flex"));
        wait_for(
            &client,
            "an exact count in the meter",
            &format!(
                "return {}.querySelector('.gb-meter[data-estimated=false]');",
                nth(0)
            ),
        )
        .await?;
        shadow_element(&client, ".gb-view-context")
            .await?
            .click()
            .await?;
        wait_for(
            &client,
            "View context",
            &format!(
                "return {}.querySelector('dialog.gb-context-dialog[open]');",
                nth(0)
            ),
        )
        .await?;
        assert_eq!(problems(&client).await?, json!([]), "nothing was blocked");
        Ok(())
    })
    .await
}

/// A single-page app's two ways of keeping a widget across routes: moving the element, and
/// re-creating it with the same attributes.
const SPA_JS: &str = "const first = document.querySelector('glassbox-chat');
document.getElementById('to-b').addEventListener('click', () => {
  history.pushState({}, '', '/b');
  document.getElementById('route').textContent = 'Route B';
  document.getElementById('slot-b').append(first);
});
document.getElementById('to-c').addEventListener('click', () => {
  history.pushState({}, '', '/c');
  document.getElementById('route').textContent = 'Route C';
  const fresh = document.createElement('glassbox-chat');
  for (const name of first.getAttributeNames()) fresh.setAttribute(name, first.getAttribute(name));
  document.querySelector('glassbox-chat').replaceWith(fresh);
});
";

#[tokio::test]
async fn route_changes_keep_one_socket_and_the_draft_and_an_iframe_works() -> Result<()> {
    let public = tempfile::tempdir()?;
    let site = StaticSite::start(public.path()).await?;
    // The same files on another port: another origin, for the frame.
    let framed = StaticSite::start(public.path()).await?;
    let glassbox = glassbox_for(&[site.origin(), framed.origin()]).await?;
    let gb = format!("http://{}", glassbox.addr);
    write_page(public.path(), "probe.js", PROBE_JS)?;
    write_page(public.path(), "spa.js", SPA_JS)?;
    write_page(
        public.path(),
        "index.html",
        &host_page(
            &gb,
            "<script type=\"module\" src=\"/spa.js\"></script>",
            &format!(
                "<p id=\"route\">Route A</p><button id=\"to-b\">B</button><button id=\"to-c\">C</button>\
                      <section id=\"slot-a\"><glassbox-chat server=\"{gb}\" session=\"spa\"></glassbox-chat></section>\
                      <section id=\"slot-b\"></section>"
            ),
        ),
    )?;
    write_page(
        public.path(),
        "inner.html",
        &host_page(
            &gb,
            "",
            &format!("<glassbox-chat server=\"{gb}\" session=\"framed\"></glassbox-chat>"),
        ),
    )?;
    write_page(
        public.path(),
        "outer.html",
        &page(
            "",
            &format!(
                "<iframe src=\"{}/inner.html\" width=\"420\" height=\"700\" title=\"Chat\"></iframe>",
                framed.origin()
            ),
        ),
    )?;
    let outer = format!("{}/outer.html", site.origin());
    in_browser(format!("{}/", site.origin()), "spa", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let input = shadow_element(&client, "textarea.gb-input").await?;
        input.send_keys("Half a thought").await?;

        // Moved by the app: the same chat, the same socket, the same draft.
        client.find(fantoccini::Locator::Id("to-b")).await?.click().await?;
        let moved = client
            .execute(&format!("return [location.pathname, document.querySelector('glassbox-chat').parentElement.id, window.__sockets,
                {SHADOW}.querySelector('.gb-input').value];"), vec![])
            .await?;
        assert_eq!(moved, json!(["/b", "slot-b", {"opened": 1, "closed": 0}, "Half a thought"]));
        wait_for(&client, "still connected", CONNECTED).await?;

        // Re-created by the app: the old socket closes, one new one opens, the draft is back.
        client.find(fantoccini::Locator::Id("to-c")).await?.click().await?;
        wait_for(&client, "the new widget to connect", CONNECTED).await?;
        wait_for(&client, "the old socket to close", "return window.__sockets.closed === 1;").await?;
        let recreated = client
            .execute(&format!("return [window.__sockets, {SHADOW}.querySelector('.gb-input').value];"), vec![])
            .await?;
        assert_eq!(recreated, json!([{"opened": 2, "closed": 1}, "Half a thought"]));
        let input = shadow_element(&client, "textarea.gb-input").await?;
        input.send_keys("\u{E007}").await?;
        wait_for(&client, "the reply", &format!("return {SHADOW}.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 1;")).await?;
        let sent = client
            .execute(&format!("return [...{SHADOW}.querySelectorAll('.gb-message[data-role=user] .gb-plain')].map(m => m.textContent.trim());"), vec![])
            .await?;
        assert_eq!(sent, json!(["Half a thought"]), "the draft was sent once");
        assert_eq!(problems(&client).await?, json!([]));

        // Moved with another session set while it was out of the page: that other conversation.
        client
            .execute("const el = document.querySelector('glassbox-chat'); el.remove(); el.setAttribute('session', 'spa-other');
                document.getElementById('slot-a').append(el);", vec![])
            .await?;
        wait_for(&client, "the other conversation", &format!("return window.__sockets.opened === 3 && !!{SHADOW}.querySelector('.gb-status[data-state=connected]');")).await?;
        let other = client
            .execute(&format!("return {SHADOW}.querySelectorAll('.gb-message[data-message-id]').length;"), vec![])
            .await?;
        assert_eq!(other, json!(0), "a new, empty conversation");

        // In a frame of another origin.
        client.goto(&outer).await?;
        client.clone().enter_frame(Some(0)).await?;
        chat_in(&client, 0, "Hello from a frame", 1).await?;
        assert_eq!(problems(&client).await?, json!([]));
        Ok(())
    })
    .await
}
