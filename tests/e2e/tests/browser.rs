//! The demo page in headless Chromium: send a message, watch the reply stream in, reload and find the
//! history restored; page context reaches the model but never the message; the host JS API works.

use anyhow::Result;
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use glassbox_e2e::widget_page::{CONNECTED, shadow_element};
use glassbox_e2e::{CuttableProxy, IdleCuttingProxy, in_browser, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider, Gate};
use serde_json::json;

const MESSAGES: &str = "return [...document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-message-id]')]
    .map(m => ({id: m.dataset.messageId, role: m.dataset.role, status: m.dataset.status, text: m.querySelector('.gb-plain, .gb-markdown')?.textContent ?? ''}));";

async fn send_from_composer(client: &Client, text: &str) -> Result<()> {
    let input = shadow_element(client, "textarea.gb-input").await?;
    input.send_keys(text).await?;
    input.send_keys("\u{E007}").await?; // Enter sends
    Ok(())
}

#[tokio::test]
async fn demo_page_chat_streams_and_history_survives_reload() -> Result<()> {
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "15"),
    ])
    .await?;
    in_browser(
        format!("http://{}/", server.addr),
        "demo",
        |client, url| async move { demo(&client, &url).await },
    )
    .await
}

#[tokio::test]
async fn a_provider_failure_offers_retry_which_completes_the_same_reply() -> Result<()> {
    let fake = FakeProvider::start(Behaviour::Cut {
        chunks: vec!["Partial ".into(), "answer".into()],
        after: 1,
    })
    .await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &base),
    ])
    .await?;
    in_browser(format!("http://{}/", server.addr), "retry", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "hello").await?;
        wait_for(&client, "the failed reply with a Retry button", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=failed] .gb-retry');").await?;
        let failed = client.execute(MESSAGES, vec![]).await?;
        assert_eq!(failed[1]["text"], "Partial", "the partial reply stays visible");
        let alert = client
            .execute("return document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-error').dataset.code;", vec![])
            .await?;
        assert_eq!(alert, json!("ProviderError"));

        fake.set(Behaviour::reply(&["Full ", "answer."]));
        shadow_element(&client, ".gb-retry").await?.click().await?;
        wait_for(&client, "the retried reply to complete", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;
        let done = client.execute(MESSAGES, vec![]).await?;
        let done = done.as_array().cloned().unwrap_or_default();
        assert_eq!(done.len(), 2, "retry replaced the failed reply, no duplicate: {done:?}");
        assert_eq!(done[1]["id"], failed[1]["id"]);
        assert_eq!(done[1]["text"], "Full answer.");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_dropped_connection_reconnects_and_resumes_the_streaming_reply() -> Result<()> {
    // The reply is held after its first two pieces until the widget has reconnected, so the cut
    // provably falls mid-stream: what arrives after it can only reach the widget by resuming.
    let gate = Gate::new();
    let fake = FakeProvider::start(Behaviour::hold(
        &["Before ", "the cut, ", "after ", "the reconnect."],
        2,
        &gate,
    ))
    .await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &base),
    ])
    .await?;
    let proxy = CuttableProxy::start(server.addr).await?;
    in_browser(format!("http://{}/", proxy.addr), "reconnect", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "keep streaming").await?;
        gate.reached(1).await;
        wait_for(&client, "the first pieces to show", "return document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=streaming] .gb-markdown')?.textContent.includes('Before the cut,');").await?;

        proxy.cut();
        wait_for(&client, "the widget to notice the drop", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-status:not([data-state=connected])');").await?;
        wait_for(&client, "the widget to reconnect by itself", CONNECTED).await?;
        let streaming = client.execute("return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=streaming]');", vec![]).await?;
        assert_eq!(streaming, json!(true), "the reply is still held when the widget is back");
        gate.release();
        wait_for(&client, "the reply to complete", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;

        let live = client.execute(MESSAGES, vec![]).await?;
        assert!(
            live.to_string().contains("Before the cut, after the reconnect."),
            "the pieces sent after the cut reached the widget: {live}"
        );
        // The stored reply is the reference: what streamed across the drop must equal it exactly.
        client.refresh().await?;
        wait_for(&client, "the widget to reconnect", CONNECTED).await?;
        wait_for(&client, "history to be restored", "return document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-message-id]').length === 2;").await?;
        let stored = client.execute(MESSAGES, vec![]).await?;
        assert_eq!(live, stored, "nothing lost or doubled across the reconnect");
        Ok(())
    })
    .await
}

const FOOTER: &str = "const f = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-context-footer');";

#[tokio::test]
async fn a_file_named_in_a_message_appears_in_the_footer_live_and_renders_inert() -> Result<()> {
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "5"),
    ])
    .await?;
    in_browser(format!("http://{}/", server.addr), "footer", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let hidden = client.execute(&format!("{FOOTER} return f.hidden;"), vec![]).await?;
        assert_eq!(hidden, json!(true), "a new chat has no footer");

        send_from_composer(&client, "Please review docs/spec.md with me").await?;
        wait_for(&client, "the footer to show the file", &format!("{FOOTER} return !f.hidden && f.textContent.includes('spec.md');")).await?;
        let link = client
            .execute(&format!("{FOOTER} const a = f.querySelector('a[data-kind=file]'); return [a.textContent, a.getAttribute('href'), f.title];"), vec![])
            .await?;
        // The tooltip lists every item, then the page-context keys this message changed (all, the first time).
        assert_eq!(link, json!(["spec.md", "/?applet=text-editor&path=docs/spec.md", "docs/spec.md\nPage context changed: description, page, pathname"]));
        // The reply shows the tool exchange as one collapsed line.
        wait_for(&client, "the tool line", "return [...document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-tool summary')].some(s => s.textContent === 'set_relevant_context · files · merged 1');").await?;

        // The host changes a set; hostile items render as text and make no dangerous link.
        client
            .execute(
                "window.__xss = 0; return document.querySelector('glassbox-chat').setContext('endpoints', ['javascript:window.__xss=1', '<img src=x onerror=window.__xss=2>'], 'replace');",
                vec![],
            )
            .await?;
        wait_for(&client, "the endpoints in the footer", &format!("{FOOTER} return f.textContent.includes('<img src=x');")).await?;
        let inert = client
            .execute(&format!("{FOOTER} return [f.querySelectorAll('img, script').length, [...f.querySelectorAll('a')].map(a => a.getAttribute('href')).filter(h => !/^(https?:|[/])/.test(h)).length, window.__xss];"), vec![])
            .await?;
        assert_eq!(inert, json!([0, 0, 0]));
        let refused = client
            .execute_async(
                "const done = arguments[0]; document.querySelector('glassbox-chat').setContext('files', ['a\\u202Eb']).then(() => done('accepted'), e => done(e.code));",
                vec![],
            )
            .await?;
        assert_eq!(refused, json!("invalid_context_set"));

        // Clearing every set hides the footer.
        client
            .execute("document.querySelector('glassbox-chat').setContext('files', []); return document.querySelector('glassbox-chat').setContext('endpoints', []);", vec![])
            .await?;
        wait_for(&client, "the sets to leave the footer", &format!("{FOOTER} return !f.querySelector('.gb-context-item') && f.querySelector('.gb-context-icon').hidden;")).await?;
        // Only the chips of the first message's page context are left; the next message changes
        // nothing, so the footer has nothing to show and hides.
        send_from_composer(&client, "thanks").await?;
        wait_for(&client, "the footer to hide", &format!("{FOOTER} return f.hidden;")).await?;
        Ok(())
    })
    .await
}

/// Stop: while a reply streams the composer's button says Stop; clicking it ends the reply as
/// "Stopped" with its text so far and a Retry, the provider hands over nothing more, the button is
/// Send again; Esc in the composer stops the next one; Retry regenerates a stopped reply.
#[tokio::test]
async fn stop_ends_a_streaming_reply_by_click_and_by_escape_and_retry_regenerates_it() -> Result<()>
{
    let slow = Behaviour::Reply {
        chunks: (0..2000).map(|i| format!("w{i} ")).collect(),
        delay: std::time::Duration::from_millis(10),
    };
    let fake = FakeProvider::start(slow).await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &base),
    ])
    .await?;
    in_browser(format!("http://{}/", server.addr), "stop", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "count to two thousand").await?;
        let stop_shown = "const b = document.querySelector('glassbox-chat').shadowRoot.querySelector('button.gb-send'); return b && b.classList.contains('gb-stop') && b.innerText.trim() === 'Stop' && !b.disabled;";
        wait_for(&client, "the Stop button while the reply streams", stop_shown).await?;
        wait_for(&client, "some text of the reply", "return (document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant] .gb-markdown')?.textContent ?? '').includes('w5');").await?;
        shadow_element(&client, "button.gb-send").await?.click().await?;
        let stopped = "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=stopped] .gb-error .gb-retry');";
        wait_for(&client, "the reply marked Stopped with a Retry", stopped).await?;
        let taken = fake.texts_taken();
        let shown = client.execute(MESSAGES, vec![]).await?;
        let text = shown[1]["text"].as_str().unwrap_or_default().to_owned();
        assert!(text.starts_with("w0 w1 w2"), "the text so far stays: {text}");
        assert!(!text.contains("w1999"), "stopped before the end");
        let label = client.execute("return document.querySelector('glassbox-chat').shadowRoot.querySelector('[data-status=stopped] .gb-error-text').textContent;", vec![]).await?;
        assert_eq!(label, json!("Stopped"));
        assert!(
            shown[1].get("status") == Some(&json!("stopped")),
            "{shown}"
        );
        let send_back = "const b = document.querySelector('glassbox-chat').shadowRoot.querySelector('button.gb-send'); return b.innerText.trim() === 'Send' && !b.classList.contains('gb-stop');";
        wait_for(&client, "the Send button back", send_back).await?;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(fake.texts_taken() <= taken + 1, "the provider kept streaming after the stop");

        // Esc in the composer stops the next reply.
        send_from_composer(&client, "again").await?;
        wait_for(&client, "the Stop button again", stop_shown).await?;
        wait_for(&client, "the second reply's text", "return document.querySelectorAll && (document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-role=assistant]')[1]?.textContent ?? '').includes('w3');").await?;
        shadow_element(&client, "textarea.gb-input").await?.send_keys("\u{E00C}").await?; // Escape
        wait_for(&client, "both replies stopped", "return document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-role=assistant][data-status=stopped]').length === 2;").await?;

        // Retry regenerates the first stopped reply in place.
        fake.set(Behaviour::reply(&["Whole ", "answer."]));
        shadow_element(&client, "[data-status=stopped] .gb-retry").await?.click().await?;
        wait_for(&client, "the retried reply to complete", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;
        let done = client.execute(MESSAGES, vec![]).await?;
        let done = done.as_array().cloned().unwrap_or_default();
        assert_eq!(done.len(), 4, "{done:?}");
        assert_eq!(done[1]["id"], shown[1]["id"]);
        assert_eq!(done[1]["text"], "Whole answer.");
        Ok(())
    })
    .await
}

/// Records every state the connection badge takes from now on (`window.__states`).
const WATCH_STATUS: &str = "const s = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-status'); window.__states = []; new MutationObserver(() => window.__states.push(s.dataset.state)).observe(s, {attributes: true, attributeFilter: ['data-state']}); return true;";

/// Behind a proxy that cuts connections idle for 30 s (as nginx does after 60 s), a widget left
/// alone for 90 s is still connected, never having reconnected (the server's heartbeats keep the
/// line busy), and shows a reply sent from another tab.
#[tokio::test]
async fn a_widget_left_alone_behind_an_idle_cutting_proxy_stays_connected() -> Result<()> {
    use std::time::Duration;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
    ])
    .await?;
    let proxy = IdleCuttingProxy::start(server.addr, Duration::from_secs(30)).await?;
    // The control: a quiet connection through the same kind of proxy, to a peer that never closes
    // anything, is cut by the proxy.
    let holder = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let held = holder.local_addr()?;
    tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((stream, _)) = holder.accept().await {
            kept.push(stream);
        }
    });
    let control = IdleCuttingProxy::start(held, Duration::from_secs(30)).await?;
    let mut quiet = tokio::net::TcpStream::connect(control.addr).await?;
    in_browser(format!("http://{}/", proxy.addr), "idle-proxy", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let first = client.window().await?;
        client.execute(WATCH_STATUS, vec![]).await?;
        tokio::time::sleep(Duration::from_secs(90)).await;
        let states = client.execute("return window.__states;", vec![]).await?;
        assert_eq!(states, json!([]), "the widget lost its connection while left alone");

        // Another tab of the same browser: the same conversation (the session is in localStorage).
        let other = client.new_window(true).await?;
        client.switch_to_window(other.handle).await?;
        client.goto(&url).await?;
        wait_for(&client, "the second tab to connect", CONNECTED).await?;
        send_from_composer(&client, "hello from the other tab").await?;
        client.switch_to_window(first).await?;
        wait_for(&client, "the first tab to show the reply", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;
        let shown = client.execute(MESSAGES, vec![]).await?;
        assert_eq!(shown[0]["text"], "hello from the other tab", "{shown}");
        let states = client.execute("return window.__states;", vec![]).await?;
        assert_eq!(states, json!([]), "the first tab reconnected: {states}");
        Ok(())
    })
    .await?;
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(1), quiet.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the proxy did not cut an idle connection"
    );
    assert_eq!(control.cuts(), 1);
    Ok(())
}

/// A verified user (the host sets `user-id` and `user-hash`) finds a conversation started in one
/// browser in another browser's session drawer, opens it there, renames it, and both browsers are
/// then in one conversation. A wrong hash is shown as an error, not retried in a loop.
#[tokio::test]
async fn a_user_finds_their_conversation_in_a_second_browser() -> Result<()> {
    const SECRET: &str = "e2e-identity-secret-0123456789";
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_IDENTITY_SECRET", SECRET),
    ])
    .await?;
    let url = format!("http://{}/", server.addr);
    let hash = glassbox_server::identity::user_hash(SECRET, "ann@example.com");
    let as_user = format!(
        "const c = document.querySelector('glassbox-chat'); c.setAttribute('user-id', 'ann@example.com'); c.setAttribute('user-hash', '{hash}'); return true;"
    );
    let driver = glassbox_e2e::start_driver().await?;
    let (home, work) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let laptop = glassbox_e2e::browser(&driver, home.path()).await?;
    let phone = glassbox_e2e::browser(&driver, work.path()).await?;
    let outcome = async {
        laptop.goto(&url).await?;
        wait_for(&laptop, "the laptop to connect", CONNECTED).await?;
        laptop.execute(&as_user, vec![]).await?;
        wait_for(&laptop, "the laptop to connect as the user", CONNECTED).await?;
        send_from_composer(&laptop, "Plan the garden party").await?;
        wait_for(&laptop, "the reply", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;

        // Another browser (its own storage): the user's conversation is in the drawer.
        phone.goto(&url).await?;
        wait_for(&phone, "the phone to connect", CONNECTED).await?;
        phone.execute(&as_user, vec![]).await?;
        wait_for(&phone, "the phone to connect as the user", CONNECTED).await?;
        let shown = phone.execute(MESSAGES, vec![]).await?;
        assert_eq!(shown, json!([]), "a new device starts a new conversation");
        shadow_element(&phone, ".gb-drawer-toggle").await?.click().await?;
        let listed = wait_for(&phone, "the conversation in the drawer", "const l = [...document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-conversation-name')].map(n => n.textContent); return l.length ? l : null;").await?;
        assert_eq!(listed, json!(["Plan the garden party"]), "the phone's empty conversation is not listed");
        shadow_element(&phone, ".gb-conversation-open").await?.click().await?;
        wait_for(&phone, "the conversation to open", "return document.querySelectorAll && document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-message-id]').length === 2;").await?;
        let shown = phone.execute(MESSAGES, vec![]).await?;
        assert_eq!(shown[0]["text"], "Plan the garden party", "{shown}");
        assert_eq!(shown[1]["status"], "complete", "{shown}");
        wait_for(&phone, "the open one marked current", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-conversation[aria-current=true]');").await?;

        // Renamed in place (Enter keeps it).
        shadow_element(&phone, ".gb-conversation-rename").await?.click().await?;
        // The new title goes to the focused field, as a person types it.
        wait_for(&phone, "the title field focused", "return document.querySelector('glassbox-chat').shadowRoot.activeElement?.classList.contains('gb-conversation-title');").await?;
        type_keys(&phone, "Garden party, June").await?;
        press(&phone, Key::Enter).await?;
        wait_for(&phone, "the new title", "return [...document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-conversation-name')].some(n => n.textContent === 'Garden party, June');").await?;

        // One conversation on two devices: the laptop hears the phone's message and its reply.
        send_from_composer(&phone, "And the music?").await?;
        wait_for(&laptop, "the phone's message on the laptop", "return document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 2;").await?;
        let shown = laptop.execute(MESSAGES, vec![]).await?;
        assert_eq!(shown[2]["text"], "And the music?", "{shown}");

        // A wrong hash: an error the user sees, and no storm of hellos.
        laptop.execute("const c = document.querySelector('glassbox-chat'); c.setAttribute('user-hash', '00'); return true;", vec![]).await?;
        let notice = wait_for(&laptop, "the refusal shown", "return document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-notice')?.textContent;").await?;
        assert!(notice.as_str().unwrap_or("").contains("does not match"), "{notice}");
        Ok::<(), anyhow::Error>(())
    }
    .await;
    let _ = laptop.close().await;
    let _ = phone.close().await;
    outcome
}

/// A chat greets in its own words: the agent's placeholder, welcome and starters, then the host's
/// attributes over them (right-to-left text laid out right to left); a starter's click sends it, and
/// the welcome never reaches the model.
#[tokio::test]
async fn a_chat_greets_in_its_own_words_and_a_starter_sends() -> Result<()> {
    let fake = FakeProvider::start(Behaviour::reply(&["On its way."])).await?;
    let base = fake.openai_base();
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("glassbox.toml");
    std::fs::write(
        &config,
        "[[agents]]\nname = \"shop\"\nplaceholder = \"Ask about your order…\"\n\
         welcome = \"Hi! I know your orders.\"\nstarters = [\"Where is my order?\", \"Return an item\"]\n",
    )?;
    let config = config.display().to_string();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &base),
        ("GLASSBOX_CONFIG", &config),
    ])
    .await?;
    const GREETING: &str = "const r = document.querySelector('glassbox-chat').shadowRoot; const w = r.querySelector('.gb-welcome'); return w && {welcome: w.textContent, direction: getComputedStyle(w).direction, starters: [...r.querySelectorAll('.gb-starter')].map(b => b.textContent), placeholder: r.querySelector('textarea.gb-input').placeholder};";
    in_browser(format!("http://{}/", server.addr), "greeting", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let agent = wait_for(&client, "the agent's welcome", GREETING).await?;
        assert_eq!(
            agent,
            json!({"welcome": "Hi! I know your orders.", "direction": "ltr", "starters": ["Where is my order?", "Return an item"], "placeholder": "Ask about your order…"})
        );
        // The host's words, each over the agent's.
        client.execute("const c = document.querySelector('glassbox-chat'); c.setAttribute('welcome', 'مرحبا! كيف أساعدك؟'); c.setAttribute('starters', JSON.stringify(['أين طلبي؟'])); c.setAttribute('placeholder', 'Your question'); return true;", vec![]).await?;
        let host = wait_for(&client, "the host's welcome", &GREETING.replace("return w &&", "return w && w.textContent.startsWith('مرحبا') &&")).await?;
        assert_eq!(
            host,
            json!({"welcome": "مرحبا! كيف أساعدك؟", "direction": "rtl", "starters": ["أين طلبي؟"], "placeholder": "Your question"})
        );
        shadow_element(&client, ".gb-starter").await?.click().await?;
        wait_for(&client, "the reply", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;
        let shown = client.execute(MESSAGES, vec![]).await?;
        assert_eq!(shown[0]["text"], "أين طلبي؟", "{shown}");
        let layout = client.execute("const r = document.querySelector('glassbox-chat').shadowRoot; return [!!r.querySelector('.gb-welcome'), getComputedStyle(r.querySelector('.gb-message[data-role=user] .gb-plain')).direction];", vec![]).await?;
        assert_eq!(layout, json!([false, "rtl"]), "the welcome goes with the first message; the message reads right to left");
        Ok(())
    })
    .await?;
    // The chat (and any topic extraction after it) carried the starter, never the welcome.
    let sent: Vec<String> = fake.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(
        sent.first().is_some_and(|b| b.contains("أين طلبي؟")),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .all(|b| !b.contains("مرحبا") && !b.contains("Hi! I know your orders")),
        "the welcome reached the model: {sent:?}"
    );
    Ok(())
}

/// The widget speaks the page's language (French as a chunk of its own, the chat hidden rather
/// than English for the moment it takes), follows it when it changes, and the host's own words
/// (`strings`) win over either, applied in place.
#[tokio::test]
async fn a_french_page_gets_french_words_and_the_host_s_own_win() -> Result<()> {
    let server = start_server(&[("GLASSBOX_PROVIDER", "offline")]).await?;
    const WORDS: &str = "const r = document.querySelector('#chat').shadowRoot; const b = r.querySelector('.gb-send .gb-send-word'); return b && {send: b.textContent, placeholder: r.querySelector('textarea.gb-input').placeholder, attach: r.querySelector('.gb-attach').getAttribute('aria-label'), pending: r.querySelector('.gb-root').classList.contains('gb-words-pending')};";
    let when = |cond: &str| WORDS.replace("return b &&", &format!("return b && {cond} &&"));
    in_browser(format!("http://{}/", server.addr), "words", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        let english = wait_for(&client, "the English words", WORDS).await?;
        assert_eq!(
            english,
            json!({"send": "Send", "placeholder": "Write a message…", "attach": "Attach files", "pending": false})
        );
        // The page switches to French: the chat follows without a remount (the draft stays).
        client.execute("const r = document.querySelector('#chat').shadowRoot; const t = r.querySelector('textarea.gb-input'); t.value = 'brouillon'; t.dispatchEvent(new Event('input', {bubbles: true})); document.documentElement.lang = 'fr-CA'; return true;", vec![]).await?;
        let french = wait_for(&client, "the French words", &when("b.textContent === 'Envoyer'")).await?;
        assert_eq!(
            french,
            json!({"send": "Envoyer", "placeholder": "Écrivez un message…", "attach": "Joindre des fichiers", "pending": false})
        );
        let draft = client.execute("return document.querySelector('#chat').shadowRoot.querySelector('textarea.gb-input').value;", vec![]).await?;
        assert_eq!(draft, "brouillon", "a change of language kept the draft");
        // The host's words over the French; an unknown key is left out (warned of).
        client.execute("document.querySelector('#chat').strings = {send: 'Go', write_a_message: 'Ask away', no_such_key: 'x', attach_files: 42}; return true;", vec![]).await?;
        let host = wait_for(&client, "the host's words", &when("b.textContent === 'Go'")).await?;
        assert_eq!(
            host,
            json!({"send": "Go", "placeholder": "Ask away", "attach": "Joindre des fichiers", "pending": false})
        );
        // The element's own `lang` wins over the page's; the host's words stay.
        client.execute("document.querySelector('#chat').setAttribute('lang', 'en'); return true;", vec![]).await?;
        wait_for(&client, "English under the host's words", &when("r.querySelector('.gb-attach').getAttribute('aria-label') === 'Attach files'")).await?;
        let kept = client.execute(WORDS, vec![]).await?;
        assert_eq!(kept["send"], "Go", "{kept}");
        client.execute("document.querySelector('#chat').strings = null; return true;", vec![]).await?;
        wait_for(&client, "the table's words again", &when("b.textContent === 'Send'")).await?;
        // A chat mounted on a French page is never shown in English: hidden until French came.
        let first = client
            .execute_async(
                "const done = arguments[0]; const c = document.createElement('glassbox-chat'); c.id = 'second'; c.setAttribute('session', 'second'); c.setAttribute('lang', 'fr'); document.querySelector('#chat').after(c); \
                 const seen = []; const look = () => { const r = c.shadowRoot; const root = r && r.querySelector('.gb-root'); const b = root && root.querySelector('.gb-send-word'); \
                 if (b) seen.push(root.classList.contains('gb-words-pending') ? 'hidden' : b.textContent); \
                 if (seen.includes('Envoyer') || seen.length > 600) done(seen); else requestAnimationFrame(look); }; look();",
                vec![],
            )
            .await?;
        let seen: Vec<String> = serde_json::from_value(first)?;
        assert_eq!(seen.last().map(String::as_str), Some("Envoyer"), "{seen:?}");
        assert!(
            seen.iter().all(|s| s == "hidden" || s == "Envoyer"),
            "the French chat showed other words first: {seen:?}"
        );
        Ok(())
    })
    .await
}

/// A socket on which nothing arrives for three heartbeat intervals (a dead network path that never
/// closed it) is given up: the widget reconnects by itself.
#[tokio::test]
async fn a_socket_that_hears_nothing_for_three_heartbeats_is_reconnected() -> Result<()> {
    use std::time::Duration;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_WS_HEARTBEAT_MS", "1000"),
    ])
    .await?;
    let proxy = IdleCuttingProxy::start(server.addr, Duration::from_secs(600)).await?;
    in_browser(format!("http://{}/", proxy.addr), "silent-socket", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        client.execute(WATCH_STATUS, vec![]).await?;
        proxy.mute();
        wait_for(&client, "the widget to give the silent socket up", "return window.__states.some(s => s !== 'connected');").await?;
        wait_for(&client, "the widget to reconnect by itself", CONNECTED).await?;
        send_from_composer(&client, "back?").await?;
        wait_for(&client, "a reply on the new socket", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;
        Ok(())
    })
    .await
}

const ROOT: &str = "const r = document.querySelector('glassbox-chat').shadowRoot;";
const DIALOG: &str = "const r = document.querySelector('glassbox-chat').shadowRoot; const d = r.querySelector('dialog.gb-context-dialog');";

/// Types `text` on the keyboard (into whatever has focus).
async fn type_keys(client: &Client, text: &str) -> Result<()> {
    let mut keys = KeyActions::new("keyboard".into());
    for c in text.chars() {
        keys = keys
            .then(KeyAction::Down { value: c })
            .then(KeyAction::Up { value: c });
    }
    client.perform_actions(keys).await?;
    Ok(())
}

/// Presses `key` on the keyboard (whatever has focus gets it; WebDriver key codes, e.g. Key::Enter).
async fn press(client: &Client, key: Key) -> Result<()> {
    let key = char::from(key);
    let keys = KeyActions::new("keyboard".into())
        .then(KeyAction::Down { value: key })
        .then(KeyAction::Up { value: key });
    client.perform_actions(keys).await?;
    Ok(())
}

/// Focuses the last reply's "View context" button and presses Enter on it.
async fn open_context_of_last_reply(client: &Client) -> Result<()> {
    client
        .execute(&format!("{ROOT} const b = [...r.querySelectorAll('.gb-view-context')].pop(); b.focus(); return !!b;"), vec![])
        .await?;
    press(client, Key::Enter).await?;
    wait_for(
        client,
        "the dialog to open",
        &format!("{DIALOG} return !!d && d.open && !!d.querySelector('.gb-receipt-row');"),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn view_context_shows_what_the_model_got_and_closes_with_escape() -> Result<()> {
    const SECRET_PROMPT: &str =
        "You are the demo assistant; SECRET-PROMPT-TEXT stays on the server.";
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "2"),
        ("GLASSBOX_SYSTEM_PROMPT", SECRET_PROMPT),
    ])
    .await?;
    // The host page's URL names an applet: when idle, the widget captures it into the footer.
    let url = format!("http://{}/?applet=git-diff&file=src%2Fmain.rs", server.addr);
    in_browser(url, "view-context", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        client.find(Locator::Css("button[data-page=pack-detail]")).await?.click().await?;
        send_from_composer(&client, "Please review docs/spec.md with me").await?;
        wait_for(&client, "the first reply", &format!("{ROOT} return r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 1;")).await?;
        // The first message's page context is all new: a chip per key.
        let chips = client
            .execute(&format!("{FOOTER} return [...f.querySelectorAll('.gb-context-chip')].map(c => c.textContent);"), vec![])
            .await?;
        assert_eq!(chips, json!(["description", "entity", "entityType", "page", "pathname"]));
        // Idle a few seconds: the URL's applet is captured, linked with the default template.
        let applet = wait_for(&client, "the applet to be captured", &format!("{FOOTER} const a = f.querySelector('[data-kind=applet]'); return a && [a.textContent, a.getAttribute('href')];")).await?;
        assert_eq!(applet, json!(["[git-diff]", "/?applet=git-diff&file=src/main.rs"]));

        send_from_composer(&client, "And what should change first?").await?;
        wait_for(&client, "the second reply", &format!("{ROOT} return r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 2;")).await?;
        let chips = client.execute(&format!("{FOOTER} return f.querySelectorAll('.gb-context-chip').length;"), vec![]).await?;
        assert_eq!(chips, json!(0), "the same page context again: nothing changed this turn");

        // Open the second reply's context by keyboard.
        open_context_of_last_reply(&client).await?;
        let rows = client
            .execute(&format!("{DIALOG} return [...d.querySelectorAll('.gb-receipt-parts > .gb-receipt-row')].map(row => ({{kind: row.dataset.kind, label: row.querySelector('.gb-receipt-label').textContent, tokens: parseInt(row.querySelector('.gb-receipt-tokens').textContent.replace(/,/g, '')), names: [...row.querySelectorAll('.gb-receipt-names li')].map(n => n.textContent)}}));"), vec![])
            .await?;
        let rows = rows.as_array().cloned().unwrap_or_default();
        let kinds: Vec<&str> = rows.iter().filter_map(|r| r["kind"].as_str()).collect();
        for kind in ["system_prompt", "tools", "page_context", "history", "user_message"] {
            assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
        }
        assert!(rows.iter().all(|r| r["tokens"].as_u64().is_some_and(|t| t > 0)), "{rows:?}");
        let page = rows.iter().find(|r| r["kind"] == "page_context").cloned().unwrap_or_default();
        assert_eq!(page["names"], json!(["description", "entity", "entityType", "page", "pathname"]));
        // The history is the first exchange (the message being answered is its own part).
        let history: u64 = rows
            .iter()
            .filter(|r| r["kind"] == "history")
            .filter_map(|r| r["label"].as_str()?.split(' ').next()?.parse::<u64>().ok())
            .sum();
        assert_eq!(history, 2, "{rows:?}");
        let text = client.execute(&format!("{DIALOG} return d.textContent;"), vec![]).await?;
        let text = text.as_str().unwrap_or_default();
        assert!(!text.contains("SECRET-PROMPT-TEXT"), "the system prompt's text never reaches the page");
        assert!(!text.contains("Illustrious-XL"), "values stay hidden until asked for");
        assert!(text.contains("Reported by the provider") && text.contains("Our count of the input"), "{text}");

        // Values behind the toggle, as text.
        client.execute(&format!("{DIALOG} d.querySelector('.gb-receipt-values-toggle').click();"), vec![]).await?;
        let values = wait_for(&client, "the values", &format!("{DIALOG} const p = d.querySelector('.gb-receipt-values'); return p && p.textContent;")).await?;
        assert!(values.as_str().unwrap_or_default().contains("\"entity\": \"Illustrious-XL\""), "{values}");

        // Esc closes; focus is back on the button that opened it.
        press(&client, Key::Escape).await?;
        wait_for(&client, "the dialog to close", &format!("{DIALOG} return !d.open;")).await?;
        let focused = client.execute(&format!("{ROOT} return r.activeElement?.classList.contains('gb-view-context') ?? false;"), vec![]).await?;
        assert_eq!(focused, json!(true), "focus returns to the opener");

        // A history entry scrolls to its message and highlights it.
        open_context_of_last_reply(&client).await?;
        client.execute(&format!("{DIALOG} d.querySelector('.gb-receipt-row[data-kind=history] details summary').click();"), vec![]).await?;
        let target = wait_for(&client, "the history entries", &format!("{DIALOG} const b = d.querySelector('.gb-receipt-message'); return b && b.textContent;")).await?;
        assert!(target.as_str().unwrap_or_default().starts_with("You: Please review docs/spec.md"), "{target}");
        client.execute(&format!("{DIALOG} d.querySelector('.gb-receipt-message').click();"), vec![]).await?;
        let highlighted = wait_for(&client, "the message to be highlighted", &format!("{DIALOG} const m = r.querySelector('.gb-message.gb-highlight'); return !d.open && m && [m.dataset.role, r.activeElement === m];")).await?;
        assert_eq!(highlighted, json!(["user", true]));
        // ...and it is in view in the message list.
        let in_view = wait_for(&client, "the message in view", &format!("{ROOT} const m = r.querySelector('.gb-message.gb-highlight').getBoundingClientRect(); const l = r.querySelector('.gb-messages').getBoundingClientRect(); return m.bottom > l.top && m.top < l.bottom;")).await?;
        assert_eq!(in_view, json!(true));

        // The host forbids values, and sets its own file links: the element remounts with them.
        client
            .execute("const c = document.querySelector('glassbox-chat'); c.setAttribute('file-link', 'https://files.example/open?p={path}'); c.setAttribute('hide-context-values', '');", vec![])
            .await?;
        wait_for(&client, "the widget to reconnect", &format!("{ROOT} return !!r.querySelector('.gb-status[data-state=connected]') && r.querySelectorAll('.gb-view-context').length === 2;")).await?;
        let link = wait_for(&client, "the host's file link", &format!("{FOOTER} const a = f.querySelector('a[data-kind=file]'); return a && a.getAttribute('href');")).await?;
        assert_eq!(link, json!("https://files.example/open?p=docs/spec.md"));
        open_context_of_last_reply(&client).await?;
        let toggles = client.execute(&format!("{DIALOG} return [d.querySelectorAll('.gb-receipt-values-toggle').length, d.querySelectorAll('.gb-receipt-row[data-kind=page_context] .gb-receipt-names li').length];"), vec![]).await?;
        assert_eq!(toggles, json!([0, 5]), "key names only");
        client.execute(&format!("{DIALOG} d.querySelector('.gb-dialog-close').click();"), vec![]).await?;
        wait_for(&client, "the dialog to close", &format!("{DIALOG} return !d.open;")).await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_rate_limited_message_is_kept_counts_down_and_goes_by_itself() -> Result<()> {
    // One streaming reply per address: a second message while the first reply streams is refused
    // with a wait; the widget keeps it, says when it goes, and sends it then. The first reply
    // waits after its first piece until the refusal was shown.
    let gate = Gate::new();
    let fake = FakeProvider::start(Behaviour::hold(&["First ", "reply."], 1, &gate)).await?;
    let base = fake.openai_base();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &base),
        ("GLASSBOX_LIMIT_STREAMS_PER_ADDRESS", "1"),
    ])
    .await?;
    in_browser(format!("http://{}/", server.addr), "rate-limited", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "first").await?;
        gate.reached(1).await;
        wait_for(&client, "the first reply to stream", &format!("{ROOT} return !!r.querySelector('.gb-message[data-role=assistant][data-status=streaming]');")).await?;
        send_from_composer(&client, "second, while it streams").await?;
        let notice = wait_for(&client, "the wait to show", &format!("{ROOT} const p = r.querySelector('.gb-pending .gb-rate-limited'); return p && [p.closest('.gb-pending').querySelector('.gb-plain').textContent, p.textContent];")).await?;
        assert_eq!(notice[0], "second, while it streams", "the message is kept as typed");
        assert!(notice[1].as_str().unwrap_or_default().contains("goes in"), "{notice}");
        gate.release();
        wait_for(&client, "both replies", &format!("{ROOT} return r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 2 && !r.querySelector('.gb-pending');")).await?;
        let users = client.execute(&format!("{ROOT} return [...r.querySelectorAll('.gb-message[data-role=user] .gb-plain')].map(p => p.textContent);"), vec![]).await?;
        assert_eq!(users, json!(["first", "second, while it streams"]));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_join_refused_by_its_limit_waits_as_asked_without_an_alert_and_then_joins() -> Result<()>
{
    // Ten joins a minute: one comes back every six seconds.
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "2"),
        ("GLASSBOX_LIMIT_JOINS_PER_MINUTE", "10"),
    ])
    .await?;
    // The page goes through a proxy that holds the reload's WebSocket back while the allowance is
    // spent, so the reload's join comes right after, however long the reload took.
    let proxy = CuttableProxy::start(server.addr).await?;
    let server_addr = server.addr;
    in_browser(format!("http://{}/", proxy.addr), "join-limit", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "remember me").await?;
        wait_for(&client, "the reply", &format!("{ROOT} return !!r.querySelector('.gb-message[data-role=assistant][data-status=complete]');")).await?;
        const STORED: &str = "const k = Object.keys(localStorage).find(k => k.startsWith('glassbox:session:')); return k && JSON.parse(localStorage.getItem(k));";
        let stored = wait_for(&client, "the stored session", STORED).await?;
        let (id, token) = (
            stored["sessionId"].as_str().unwrap_or_default().to_owned(),
            stored["token"].as_str().unwrap_or_default().to_owned(),
        );
        // The reload's join waits at the proxy, unanswered.
        proxy.hold_websockets();
        client.refresh().await?;
        proxy.websockets_held(1).await?;
        // Meanwhile eleven joins straight to the server: the first ten spend the session's
        // allowance (nothing joined it before: the page's first hello made it), the eleventh is
        // refused.
        let mut joins = Vec::new();
        for _ in 0..11 {
            joins.push(join(server_addr, &id, &token).await?);
        }
        assert_eq!(joins[..10], ["joined"; 10], "ten joins a minute: {joins:?}");
        assert_eq!(joins[10], "rate_limited", "the eleventh");
        // The reload's join is refused: the badge counts down to a reconnect, no alert is raised.
        proxy.release_websockets();
        let waiting = wait_for(&client, "the refused join to count down", &format!("{ROOT} const s = r.querySelector('.gb-status[data-state=reconnecting]'); return s && s.textContent;")).await?;
        let alert = client.execute(&format!("{ROOT} return r.querySelector('.gb-notice')?.textContent ?? null;"), vec![]).await?;
        assert!(alert.is_null(), "an alert for a refused join: {alert} (badge: {waiting})");
        // When the wait is over it joins and the history is back, still without an alert.
        wait_for(&client, "the widget to join once allowed", &format!("{ROOT} return !!r.querySelector('.gb-status[data-state=connected]') && r.querySelectorAll('.gb-message[data-role=user]').length === 1;")).await?;
        let alert = client.execute(&format!("{ROOT} return r.querySelector('.gb-notice')?.textContent ?? null;"), vec![]).await?;
        assert!(alert.is_null(), "{alert}");
        Ok(())
    })
    .await
}

/// Joins session `id` with a WebSocket hello straight to the server at `addr`: `joined`, or the
/// error code it answered.
async fn join(addr: std::net::SocketAddr, id: &str, token: &str) -> Result<String> {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{addr}/ws").into_client_request()?;
    request
        .headers_mut()
        .insert("origin", format!("http://{addr}").parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await?;
    let hello = json!({"type": "hello", "data": {"sessionId": id, "token": token}});
    ws.send(Message::Text(hello.to_string().into())).await?;
    while let Some(message) = ws.next().await {
        if let Message::Text(text) = message? {
            let frame: serde_json::Value = serde_json::from_str(&text)?;
            let _ = ws.close(None).await;
            return Ok(if frame["type"] == "session" {
                "joined".to_owned()
            } else {
                frame["data"]["code"]
                    .as_str()
                    .unwrap_or("no code")
                    .to_owned()
            });
        }
    }
    anyhow::bail!("the server closed the socket without an answer")
}

#[tokio::test]
async fn new_chat_deletes_the_conversation_and_starts_a_fresh_one() -> Result<()> {
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "2"),
        ("GLASSBOX_BUDGET_SESSION_TOKENS", "100000"),
    ])
    .await?;
    let base = format!("http://{}", server.addr);
    in_browser(format!("{base}/"), "new-chat", |client, url| async move {
        const STORED: &str = "const k = Object.keys(localStorage).find(k => k.startsWith('glassbox:session:')); return k && JSON.parse(localStorage.getItem(k));";
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "Please look at docs/spec.md").await?;
        wait_for(&client, "the reply and the footer", &format!("{ROOT} return r.querySelector('.gb-message[data-role=assistant][data-status=complete]') && !r.querySelector('.gb-context-footer').hidden;")).await?;
        let old = wait_for(&client, "the stored session", STORED).await?;
        // The meter's tooltip tells what is left of the session's budget.
        const BUDGET: &str = "const b = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-meter-budget'); return b && b.textContent;";
        let spent = wait_for(&client, "the budget after the reply", &format!("const t = (() => {{ {BUDGET} }})(); return t && !t.startsWith('Budget: 100,000 ') && t;")).await?;
        assert!(spent.as_str().unwrap_or_default().ends_with("of 100,000 tokens left in this conversation"), "{spent}");
        client.execute(&format!("{ROOT} r.querySelector('.gb-new-chat').click();"), vec![]).await?;
        let fresh = wait_for(&client, "a new session", &format!("{ROOT} const s = (() => {{ {STORED} }})(); return s && s.sessionId !== {old} && !!r.querySelector('.gb-status[data-state=connected]') && s;", old = serde_json::to_string(&old["sessionId"])?)).await?;
        assert_ne!(fresh["sessionId"], old["sessionId"]);
        let (messages, footer_hidden) = {
            let v = client.execute(&format!("{ROOT} return [r.querySelectorAll('.gb-message').length, r.querySelector('.gb-context-footer').hidden];"), vec![]).await?;
            (v[0].clone(), v[1].clone())
        };
        assert_eq!((messages, footer_hidden), (json!(0), json!(true)), "an empty chat without the old footer");
        let fresh_budget = wait_for(&client, "the new session's budget", BUDGET).await?;
        assert_eq!(fresh_budget, "Budget: 100,000 of 100,000 tokens left in this conversation");
        // The old conversation is gone from the server.
        let gone = reqwest::Client::new()
            .get(format!("{base}/api/sessions/{}", old["sessionId"].as_str().unwrap_or_default()))
            .bearer_auth(old["token"].as_str().unwrap_or_default())
            .send()
            .await?;
        assert_eq!(gone.status(), 401);
        Ok(())
    })
    .await
}

async fn demo(client: &Client, url: &str) -> Result<()> {
    client.goto(url).await?;
    wait_for(client, "the widget to connect", CONNECTED).await?;

    // The host page sets page context through the element's API when a "page" is picked.
    client
        .find(Locator::Css("button[data-page=pack-detail]"))
        .await?
        .click()
        .await?;

    let typed = "What does <b>this</b> model do?";
    send_from_composer(client, typed).await?;

    // The reply streams: we see it unfinished with some text before it completes.
    let streaming = "return JSON.stringify([...document.querySelector('glassbox-chat').shadowRoot
        .querySelectorAll('.gb-message[data-role=assistant][data-status=streaming]')].map(m => m.textContent.length))";
    let partial = wait_for(
        client,
        "a streaming reply with text",
        &format!("const l = JSON.parse((() => {{ {streaming} }})()); return l.some(n => n > 0);"),
    )
    .await;
    assert!(partial.is_ok(), "never saw the reply while it streamed");
    wait_for(client, "the reply to complete", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;

    let messages = client.execute(MESSAGES, vec![]).await?;
    let messages = messages.as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(
        messages[0]["text"], typed,
        "the user's text is shown exactly, as text"
    );
    let reply = messages[1]["text"].as_str().unwrap_or_default().to_owned();
    assert!(
        reply.contains("I received 1 message (1 from you)"),
        "{reply}"
    );
    for key in ["entity", "entityType", "page", "pathname"] {
        assert!(
            reply.contains(key),
            "the model got page-context key {key}: {reply}"
        );
    }
    assert!(
        !messages[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Illustrious"),
        "context stays out of the message"
    );
    let injected = client
        .execute("return document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-bubble b').length", vec![])
        .await?;
    assert_eq!(
        injected,
        json!(0),
        "markup typed by the user is never rendered as HTML"
    );
    let rendered = client
        .execute("return document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-assistant .gb-markdown strong, .gb-assistant .gb-markdown blockquote').length", vec![])
        .await?;
    assert!(
        rendered.as_u64().unwrap_or(0) >= 2,
        "the reply's markdown is rendered as elements"
    );

    // Reload: the same session comes back with the same messages.
    client.refresh().await?;
    wait_for(client, "the widget to reconnect", CONNECTED).await?;
    wait_for(client, "history to be restored", "const n = document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-message-id]').length; return n === 2;").await?;
    let restored = client.execute(MESSAGES, vec![]).await?;
    let restored = restored.as_array().cloned().unwrap_or_default();
    for (before, after) in messages.iter().zip(&restored) {
        assert_eq!(before["id"], after["id"]);
        assert_eq!(before["text"], after["text"]);
    }

    // The host page can send with its own context, and gets typed errors for bad input.
    let outcome = client
        .execute_async(
            "const [done] = arguments; const chat = document.querySelector('glassbox-chat');
             let deep = 'leaf'; for (let i = 0; i < 9; i++) deep = {n: deep};
             chat.sendMessage('too deep', null, {deep}).then(() => done('accepted'), e => done(e.code));",
            vec![],
        )
        .await?;
    assert_eq!(outcome, json!("context_invalid"));
    client
        .execute(
            "document.querySelector('glassbox-chat').sendMessage('from the host',
                [{name: 'report.pdf', mimeType: 'application/pdf', url: 'https://example.com/report.pdf'}], {page: 'cart'});",
            vec![],
        )
        .await?;
    wait_for(client, "the host's message to be answered", "return document.querySelector('glassbox-chat').shadowRoot.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 2;").await?;
    let all = client.execute(MESSAGES, vec![]).await?;
    let all = all.as_array().cloned().unwrap_or_default();
    assert_eq!(all.len(), 4);
    assert_eq!(all[2]["text"], "from the host");
    let second_reply = all[3]["text"].as_str().unwrap_or_default();
    assert!(
        second_reply.contains("I received 3 messages (2 from you)"),
        "{second_reply}"
    );
    assert!(
        second_reply.contains("keys page."),
        "per-message context overrides the page context: {second_reply}"
    );
    let chip = client
        .execute("const a = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-attachment a'); return a && [a.textContent, a.getAttribute('href')];", vec![])
        .await?;
    assert_eq!(
        chip,
        json!(["report.pdf", "https://example.com/report.pdf"])
    );

    // Leave a picture of the finished conversation for people to look at.
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("glassbox-demo.png");
    std::fs::write(&shot, client.screenshot().await?)?;
    eprintln!("screenshot: {}", shot.display());
    Ok(())
}

/// A server with the repo's demo agent and the real embedding model, once the model is loaded.
async fn demo_agent_server() -> Result<glassbox_e2e::Server> {
    let config = glassbox_e2e::root()
        .join("glassbox.toml")
        .display()
        .to_string();
    let model_dir = std::env::var("GLASSBOX_EMBED_MODEL_DIR").unwrap_or_else(|_| {
        glassbox_server::config::default_model_dir()
            .display()
            .to_string()
    });
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
        ("GLASSBOX_CONFIG", config.as_str()),
        ("GLASSBOX_EMBED_MODEL_DIR", model_dir.as_str()),
    ])
    .await?;
    for _ in 0..600 {
        if matches!(
            server.state.embeddings.status(),
            glassbox_server::embed::service::EmbedStatus::Ready { .. }
        ) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(server)
}

/// The element's item methods against the demo agent: `getItems`, `addItem`/`removeItem` (heard
/// back as the items view), `preview` (a promise of the receipt; nothing stored), `setOverrides`
/// (shown in the drawer) and the typed refusals.
#[tokio::test]
async fn the_element_lists_adds_and_removes_items_sets_overrides_and_previews() -> Result<()> {
    let server = demo_agent_server().await?;
    let url = format!("http://{}/", server.addr);
    in_browser(url, "element-items", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        const EL: &str = "const el = document.querySelector('glassbox-chat');";
        let items = wait_for(&client, "the items view", &format!("{EL} return el.getItems().then(v => v && v.available.length ? v : null);")).await?;
        assert_eq!(items["agent"], "demo", "{items}");
        assert_eq!(items["available"].as_array().map(Vec::len), Some(17), "{items}");
        let session = |v: &serde_json::Value| -> Vec<(String, String)> {
            v["session"].as_array().cloned().unwrap_or_default().iter()
                .map(|s| (s["name"].as_str().unwrap_or_default().to_owned(), s["included"].as_str().unwrap_or_default().to_owned()))
                .collect()
        };
        assert!(session(&items).contains(&("Be concise".into(), "always".into())), "{items}");

        // Added as manual, removed again; every change comes back as the items view.
        client.execute(&format!("{EL} return el.addItem({{kind: 'reference', name: 'Chess openings'}});"), vec![]).await?;
        let added = wait_for(&client, "Chess openings in the session", &format!("{EL} return el.getItems().then(v => v.session.some(s => s.name === 'Chess openings') ? v : null);")).await?;
        assert!(session(&added).contains(&("Chess openings".into(), "manual".into())), "{added}");

        // A preview carries it, as Manual, with the token total; nothing is stored or sent.
        let receipt = client.execute(&format!("{EL} return el.preview('Which opening suits a beginner?');"), vec![]).await?;
        let carried: Vec<(String, String)> = receipt["parts"].as_array().cloned().unwrap_or_default().iter()
            .filter(|p| p["kind"] == "item")
            .map(|p| (p["name"].as_str().unwrap_or_default().to_owned(), p["include"].as_str().unwrap_or_default().to_owned()))
            .collect();
        assert!(carried.contains(&("Chess openings".into(), "manual".into())), "{receipt}");
        assert!(receipt["countedInputTokens"].as_u64().is_some_and(|t| t > 0), "{receipt}");
        let messages = client.execute(&format!("{ROOT} return r.querySelectorAll('.gb-message').length;"), vec![]).await?;
        assert_eq!(messages, json!(0), "a preview stores nothing");

        client.execute(&format!("{EL} return el.removeItem({{kind: 'reference', name: 'Chess openings'}});"), vec![]).await?;
        wait_for(&client, "Chess openings out of the session", &format!("{EL} return el.getItems().then(v => !v.session.some(s => s.name === 'Chess openings'));")).await?;

        // Overrides: stored and shown; out of range and unknown keys are refused with their code.
        client.execute(&format!("{EL} return el.setOverrides({{contextTopN: 1, temperature: 0.4}});"), vec![]).await?;
        let overridden = wait_for(&client, "the overrides", &format!("{EL} return el.getItems().then(v => v.overrides.contextTopN === 1 ? v.overrides : null);")).await?;
        assert_eq!(overridden, json!({"contextTopN": 1, "temperature": 0.4}));
        let refused = client.execute(&format!("{EL} return Promise.all([el.setOverrides({{temperature: 5}}).then(() => 'ok', e => e.code), el.setOverrides({{temprature: 1}}).then(() => 'ok', e => e.code), el.addItem().then(() => 'ok', e => e.code), el.preview('x'.repeat(100000)).then(() => 'ok', e => e.code)]);"), vec![]).await?;
        assert_eq!(refused, json!(["invalid_settings", "invalid_frame", "invalid_frame", "invalid_message"]));
        shadow_element(&client, "button.gb-drawer-toggle").await?.click().await?;
        let shown = wait_for(&client, "the drawer's settings", &format!("{ROOT} const d = r.querySelector('.gb-drawer'); const i = d && d.querySelector('input[name=contextTopN]'); return i && [i.value, d.querySelector('.gb-drawer-setting[data-key=temperature] input').value];")).await?;
        assert_eq!(shown, json!(["1", "0.4"]));

        // Edits in the drawer: two in a row both stay (the second is sent with the first); one
        // the server would refuse (more tool rounds than the agent's) is refused here, named.
        let edit = |key: &str, value: &str| {
            format!("{ROOT} const i = r.querySelector('.gb-drawer input[name={key}]'); i.value = '{value}'; i.dispatchEvent(new Event('change', {{bubbles: true}})); return true;")
        };
        client.execute(&edit("contextTopK", "7"), vec![]).await?;
        client.execute(&edit("contextExpansionDepth", "1"), vec![]).await?;
        let both = wait_for(&client, "both edits stored", &format!("{EL} return el.getItems().then(v => v.overrides.contextExpansionDepth === 1 ? v.overrides : null);")).await?;
        assert_eq!(both, json!({"contextTopN": 1, "temperature": 0.4, "contextTopK": 7, "contextExpansionDepth": 1}));
        client.execute(&edit("maxChatTurns", "11"), vec![]).await?;
        let problem = wait_for(&client, "the refusal", &format!("{ROOT} const p = r.querySelector('.gb-drawer .gb-settings-error'); return p && p.textContent;")).await?;
        assert!(problem.as_str().is_some_and(|p| p.starts_with("max_chat_turns")), "{problem}");
        let stored = client.execute(&format!("{EL} return el.getItems().then(v => v.overrides.maxChatTurns ?? null);"), vec![]).await?;
        assert_eq!(stored, json!(null));
        Ok(())
    })
    .await
}

/// The demo agent in a real browser: while a question about bread is typed, the preview above the
/// composer lists the demo's sourdough reference (semantic search with the real MiniLM model) with
/// its Agent badge and score; removing an always item there shows the tokens it saves; the session
/// drawer agrees; after sending, the reply's "View context" shows the reference in the References
/// column with its badge and score, the always-on rules with theirs, and the near misses.
#[tokio::test]
async fn view_context_shows_the_agents_rules_and_references_with_badges_and_scores() -> Result<()> {
    let server = demo_agent_server().await?;
    let url = format!("http://{}/", server.addr);
    in_browser(url, "view-context-items", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;

        // Typing: the preview under the composer lists what the draft would carry, before sending.
        let input = shadow_element(&client, "textarea.gb-input").await?;
        const DRAFT: &str = "How long should my sourdough loaf bake in the Dutch oven, and how hot?";
        input.send_keys(DRAFT).await?;
        // The preview of the whole draft (typing may pause long enough to preview a part of it).
        let chars = DRAFT.chars().count();
        let preview_of = |what: &str| {
            format!("{ROOT} const p = r.querySelector('.gb-preview'); if (!p || p.dataset.draftChars !== '{chars}') return null; const items = [...p.querySelectorAll('.gb-preview-item')].map(i => [i.dataset.name, i.dataset.include, i.querySelector('.gb-item-badge').textContent]); const total = p.querySelector('.gb-preview-total')?.textContent ?? ''; const delta = p.querySelector('.gb-preview-delta')?.textContent ?? null; {what}")
        };
        // The first preview waits for the server to index the agent's items (embedding them on a
        // debug build: several seconds, more on a loaded machine).
        let preview = glassbox_e2e::widget_page::wait_for_within(
            &client,
            "the draft's preview to list Sourdough bread",
            &preview_of("return items.some(i => i[0] === 'Sourdough bread') ? {items, total, delta} : null;"),
            std::time::Duration::from_secs(90),
        )
        .await?;
        let items = preview["items"].as_array().cloned().unwrap_or_default();
        let sourdough = items.iter().find(|i| i[0] == "Sourdough bread").cloned().unwrap_or_default();
        assert_eq!(sourdough[1], "agent", "{preview}");
        assert!(sourdough[2].as_str().is_some_and(|b| b.starts_with("Agent 0.")), "{preview}");
        assert!(items.iter().any(|i| i[0] == "About Glassbox" && i[1] == "always"), "{preview}");
        let tokens = |total: &serde_json::Value| -> u64 {
            total.as_str().unwrap_or_default().chars().filter(char::is_ascii_digit).collect::<String>().parse().unwrap_or(0)
        };
        let before = tokens(&preview["total"]);
        assert!(before > 0, "a token total: {preview}");
        // The meter's Knowledge row counts the same rules and references, with the server's counts.
        let knowledge = wait_for(
            &client,
            "the meter's Knowledge to be the preview's items",
            &format!("{ROOT} const n = t => parseInt(t.replace(/[^0-9]/g, ''), 10); const items = [...r.querySelectorAll('.gb-preview-item .gb-item-tokens')].map(e => n(e.textContent)).reduce((a, b) => a + b, 0); const row = [...r.querySelectorAll('.gb-meter-breakdown tr')].find(tr => tr.querySelector('th').textContent === 'Knowledge'); const k = row && n(row.querySelector('td').textContent); return k > 0 && k === items ? k : null;"),
        )
        .await?;
        assert!(knowledge.as_u64().is_some_and(|k| k > 0));

        // Removing an always item from the preview shows what it saved, before anything is sent.
        shadow_element(&client, ".gb-preview-item[data-name='About Glassbox'] .gb-preview-remove").await?.click().await?;
        let after = wait_for(
            &client,
            "the preview without About Glassbox, with its delta",
            &preview_of("return !items.some(i => i[0] === 'About Glassbox') && delta ? {items, total, delta} : null;"),
        )
        .await?;
        let saved = before.saturating_sub(tokens(&after["total"]));
        assert!(saved > 0, "{preview} → {after}");
        assert_eq!(after["delta"].as_str(), Some(format!("−{saved}").as_str()), "{after}");

        // The session drawer agrees: About Glassbox is unchecked, Be concise still checked, and
        // each setting shows the agent's default beside it.
        shadow_element(&client, "button.gb-drawer-toggle").await?.click().await?;
        let drawer = wait_for(
            &client,
            "the session drawer",
            &format!("{ROOT} const d = r.querySelector('.gb-drawer'); if (!d || !d.querySelector('.gb-drawer-item')) return null; const checked = n => d.querySelector(`.gb-drawer-item[data-name='${{n}}'] input`)?.checked; return {{about: checked('About Glassbox'), concise: checked('Be concise'), items: d.querySelectorAll('.gb-drawer-item').length, topN: d.querySelector('.gb-drawer-setting[data-key=contextTopN] .gb-drawer-default')?.textContent}};"),
        )
        .await?;
        assert_eq!(drawer["about"], false, "{drawer}");
        assert_eq!(drawer["concise"], true, "{drawer}");
        assert_eq!(drawer["items"], 17, "the demo agent's 5 rules and 12 references: {drawer}");
        assert_eq!(drawer["topN"], "default: 3", "glassbox.toml sets context_top_n = 3: {drawer}");

        input.send_keys("\u{E007}").await?; // Enter sends
        wait_for(&client, "the reply", &format!("{ROOT} return r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 1;")).await?;
        wait_for(&client, "the preview to go with the draft", &format!("{ROOT} return !r.querySelector('.gb-preview');")).await?;
        open_context_of_last_reply(&client).await?;
        let columns = wait_for(
            &client,
            "the item columns",
            &format!("{DIALOG} const s = d && d.querySelector('.gb-receipt-items'); if (!s) return null; const col = c => [...s.querySelectorAll(`.gb-item-column[data-column=${{c}}] .gb-item-list > .gb-item`)].map(i => [i.querySelector('.gb-item-label').textContent, i.querySelector('.gb-item-badge').textContent, i.dataset.include]); return {{rules: col('rules'), references: col('references'), misses: [...s.querySelectorAll('.gb-item-miss[data-cause=below_threshold]')].map(i => [i.querySelector('.gb-item-label').textContent, i.querySelector('.gb-item-why').textContent])}};"),
        )
        .await?;
        let references = columns["references"].as_array().cloned().unwrap_or_default();
        let sourdough = references
            .iter()
            .find(|r| r[0].as_str().is_some_and(|l| l.contains("Sourdough bread")))
            .unwrap_or_else(|| panic!("no Sourdough bread among the references: {columns}"));
        assert_eq!(sourdough[2], "agent", "{columns}");
        let badge = sourdough[1].as_str().unwrap_or_default();
        assert!(badge.starts_with("Agent 0."), "an Agent badge with its score: {badge}");
        assert!(
            !references.iter().any(|r| r[0].as_str().is_some_and(|l| l.contains("About Glassbox"))),
            "removed before sending: {columns}"
        );
        let rules = columns["rules"].as_array().cloned().unwrap_or_default();
        assert!(
            rules.iter().any(|r| r[0] == "001 • Be concise" && r[1] == "Always"),
            "{columns}"
        );
        assert!(
            !references.iter().any(|r| r[0].as_str().is_some_and(|l| l.contains("Black holes"))),
            "{columns}"
        );
        let misses = columns["misses"].as_array().cloned().unwrap_or_default();
        assert!(!misses.is_empty(), "near misses listed: {columns}");
        assert!(
            misses[0][1].as_str().is_some_and(|w| w.contains("below the threshold")),
            "{columns}"
        );
        Ok(())
    })
    .await
}

/// The host page styles the widget's regions through `::part()` names (header, messages,
/// composer, input, send, footer, meter, message), and its own element rules do not reach inside.
#[tokio::test]
async fn the_host_page_styles_the_widget_through_its_parts_only() -> Result<()> {
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "1"),
    ])
    .await?;
    let url = format!("http://{}/", server.addr);
    in_browser(url, "parts", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "Hello").await?;
        wait_for(&client, "the reply", &format!("{ROOT} return r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === 1;")).await?;
        let styled = client
            .execute(
                &format!("const s = document.createElement('style'); s.textContent = `
                    glassbox-chat::part(header) {{ background-color: rgb(1, 2, 3); }}
                    glassbox-chat::part(send) {{ color: rgb(4, 5, 6); }}
                    glassbox-chat::part(input) {{ border-top-color: rgb(7, 8, 9); }}
                    glassbox-chat::part(message) {{ outline-color: rgb(10, 11, 12); }}
                    glassbox-chat::part(meter) {{ opacity: 0.5; }}
                    header, button, textarea {{ background-color: rgb(200, 0, 0) !important; }}`;
                    document.head.append(s);
                    {ROOT}
                    const css = (sel, prop) => getComputedStyle(r.querySelector(sel))[prop];
                    return [css('.gb-header', 'backgroundColor'), css('.gb-send', 'color'), css('.gb-input', 'borderTopColor'),
                            css('.gb-message', 'outlineColor'), css('.gb-meter', 'opacity'),
                            css('.gb-input', 'backgroundColor') !== 'rgb(200, 0, 0)',
                            ['root', 'messages', 'composer', 'footer'].every(p => r.querySelector(`[part~=${{p}}]`))];"),
                vec![],
            )
            .await?;
        assert_eq!(
            styled,
            json!(["rgb(1, 2, 3)", "rgb(4, 5, 6)", "rgb(7, 8, 9)", "rgb(10, 11, 12)", "0.5", true, true])
        );
        Ok(())
    })
    .await
}

/// The built widget, linked file by file into a folder of its own, with the lazily loaded chunk
/// files whose names start with `held_back` left out; answers the folder, the chunks' folder in
/// it, and the files left out (link them in to make them appear).
fn widget_without(
    held_back: &str,
) -> Result<(
    tempfile::TempDir,
    std::path::PathBuf,
    Vec<std::path::PathBuf>,
)> {
    let dist = glassbox_e2e::widget_dir();
    let chunks = glassbox_e2e::widget_chunks()?.folder;
    let served = tempfile::tempdir()?;
    for entry in std::fs::read_dir(&dist)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy() != chunks {
            std::os::unix::fs::symlink(entry.path(), served.path().join(entry.file_name()))?;
        }
    }
    let lazy = served.path().join(&chunks);
    std::fs::create_dir(&lazy)?;
    let mut left_out = Vec::new();
    for entry in std::fs::read_dir(dist.join(&chunks))? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(held_back) {
            left_out.push(entry.path());
        } else {
            std::os::unix::fs::symlink(entry.path(), lazy.join(entry.file_name()))?;
        }
    }
    assert!(!left_out.is_empty(), "{held_back} is built");
    Ok((served, lazy, left_out))
}

/// Links the files `widget_without` left out into `lazy`.
fn bring_back(lazy: &std::path::Path, left_out: &[std::path::PathBuf]) -> Result<()> {
    for path in left_out {
        if let Some(name) = path.file_name() {
            std::os::unix::fs::symlink(path, lazy.join(name))?;
        }
    }
    Ok(())
}

/// An offline-provider server whose widget lacks the chunk files starting with `held_back`;
/// answers it with what `widget_without` answers (keep the folder alive as long as the server).
async fn server_without(
    held_back: &str,
) -> Result<(
    glassbox_e2e::Server,
    (
        tempfile::TempDir,
        std::path::PathBuf,
        Vec<std::path::PathBuf>,
    ),
)> {
    let without = widget_without(held_back)?;
    let widget_dir = without.0.path().display().to_string();
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "2"),
        ("GLASSBOX_WIDGET_DIR", &widget_dir),
    ])
    .await?;
    Ok((server, without))
}

/// A panel whose code cannot be fetched (the server is mid-update, the network dropped) shows a
/// clear error with a retry; the chat itself keeps working, and the retry loads the panel.
#[tokio::test]
async fn a_panel_whose_code_cannot_be_fetched_says_so_and_retry_loads_it() -> Result<()> {
    let (server, (_served, lazy, held_back)) =
        server_without("split_compression_settings.wasm").await?;
    let url = format!("http://{}/", server.addr);
    in_browser(url, "panel-chunk-missing", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        client
            .execute(&format!("{ROOT} r.querySelector('.gb-settings-toggle').click();"), vec![])
            .await?;
        let error = wait_for(
            &client,
            "the panel's load error",
            &format!("{ROOT} const e = r.querySelector('.gb-panel-error[role=alert]'); return e && e.textContent;"),
        )
        .await?;
        let error = error.as_str().unwrap_or_default().to_owned();
        assert!(
            error.contains("The settings panel could not be loaded") && error.contains("Retry"),
            "{error}"
        );
        // The chat is not taken down with the panel.
        send_from_composer(&client, "Still there?").await?;
        wait_for(
            &client,
            "a reply while the panel is missing",
            &format!("{ROOT} return !!r.querySelector('.gb-message[data-role=assistant][data-status=complete]');"),
        )
        .await?;
        // The chunk is back (the update finished): Retry loads it.
        bring_back(&lazy, &held_back)?;
        client
            .execute(&format!("{ROOT} r.querySelector('.gb-panel-error button').click();"), vec![])
            .await?;
        wait_for(
            &client,
            "the settings panel after retrying",
            &format!("{ROOT} return !!r.querySelector('fieldset.gb-settings') && !r.querySelector('.gb-panel-error');"),
        )
        .await?;
        Ok(())
    })
    .await
}

/// Without the markdown renderer's chunk a reply shows as plain text, whole; the chunk is fetched
/// again after a pause, and once it comes the reply is shown formatted.
#[tokio::test]
async fn replies_show_plain_until_the_markdown_renderer_can_be_fetched() -> Result<()> {
    let (server, (_served, lazy, held_back)) = server_without("split_load_renderer.wasm").await?;
    let url = format!("http://{}/", server.addr);
    in_browser(url, "markdown-chunk-missing", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "Hello there").await?;
        let reply = format!("{ROOT} const m = r.querySelector('.gb-message[data-role=assistant][data-status=complete] .gb-markdown');");
        let plain = wait_for(
            &client,
            "the reply, plain",
            &format!("{reply} return m && m.hasAttribute('data-plain') && [m.textContent, m.children.length];"),
        )
        .await?;
        let text = plain[0].as_str().unwrap_or_default();
        assert!(text.starts_with("**Offline reply**"), "the markdown source, whole: {text}");
        assert_eq!(plain[1], json!(0), "no markup built from it");
        // The chunk is back: a later attempt (2, 6, 14 s after the first) renders it.
        bring_back(&lazy, &held_back)?;
        let formatted = wait_for(
            &client,
            "the reply, formatted",
            &format!("{reply} return m && !m.hasAttribute('data-plain') && m.querySelector('strong')?.textContent;"),
        )
        .await?;
        assert_eq!(formatted, json!("Offline reply"));
        Ok(())
    })
    .await
}
