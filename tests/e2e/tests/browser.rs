//! The demo page in headless Chromium: send a message, watch the reply stream in, reload and find the
//! history restored; page context reaches the model but never the message; the host JS API works.

use anyhow::Result;
use fantoccini::{Client, Locator};
use glassbox_e2e::widget_page::{CONNECTED, shadow_element};
use glassbox_e2e::{CuttableProxy, in_browser, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider};
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
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "40"),
    ])
    .await?;
    let proxy = CuttableProxy::start(server.addr).await?;
    in_browser(format!("http://{}/", proxy.addr), "reconnect", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        send_from_composer(&client, "keep streaming").await?;
        wait_for(&client, "the reply to start streaming", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=streaming] .gb-markdown p');").await?;

        proxy.cut();
        wait_for(&client, "the widget to notice the drop", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-status:not([data-state=connected])');").await?;
        wait_for(&client, "the widget to reconnect by itself", CONNECTED).await?;
        wait_for(&client, "the reply to complete", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete]');").await?;

        let live = client.execute(MESSAGES, vec![]).await?;
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
        assert_eq!(link, json!(["spec.md", "/?applet=text-editor&path=docs/spec.md", "docs/spec.md"]));
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
        wait_for(&client, "the footer to hide", &format!("{FOOTER} return f.hidden;")).await?;
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
