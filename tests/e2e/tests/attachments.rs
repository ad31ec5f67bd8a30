//! Files attached in the widget, in headless Chromium against a real server and a fake provider
//! that speaks the OpenAI or Anthropic format: an image dropped on the chat and a text file pasted
//! into the input reach the model as an image part and as delimited text, and "View context" lists
//! them with their tokens; an oversized, a disallowed and a mislabelled file are refused with a
//! clear reason, and nothing is sent.

use anyhow::{Context, Result};
use base64::Engine as _;
use fantoccini::Client;
use glassbox_e2e::widget_page::{CONNECTED, SHADOW, shadow_element};
use glassbox_e2e::{in_browser, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use serde_json::{Value, json};

const NOTES: &str = "# Notes\nThe pixel is red.";
const PNG: &[u8] = include_bytes!("../../../server/tests/fixtures/red-3x2.png");

/// Defines `window.gbFile(name, type, base64 | {zeros: n} | {text})`, a `File` made in the page.
const FILE_MAKER: &str = "window.gbFile = (name, type, body) => {
    let bytes;
    if (typeof body === 'string') bytes = Uint8Array.from(atob(body), c => c.charCodeAt(0));
    else if (body.zeros) { bytes = new Uint8Array(body.zeros); bytes.set(Uint8Array.from(atob(body.head), c => c.charCodeAt(0))); }
    else bytes = new TextEncoder().encode(body.text);
    return new File([bytes], name, { type });
};";

/// Drops the files `(name, type, body)` on the chat, as a drag from the desktop does.
async fn drop_files(client: &Client, files: Value) -> Result<()> {
    let script = format!(
        "{FILE_MAKER}
        const root = {SHADOW}.querySelector('.gb-root');
        const dt = new DataTransfer();
        for (const [name, type, body] of arguments[0]) dt.items.add(gbFile(name, type, body));
        for (const t of ['dragenter', 'dragover', 'drop'])
            root.querySelector('.gb-messages').dispatchEvent(new DragEvent(t, {{ bubbles: true, cancelable: true, composed: true, dataTransfer: dt }}));"
    );
    client.execute(&script, vec![files]).await?;
    Ok(())
}

/// Pastes the files into the message input, as Ctrl+V of a copied file does.
async fn paste_files(client: &Client, files: Value) -> Result<()> {
    let script = format!(
        "{FILE_MAKER}
        const dt = new DataTransfer();
        for (const [name, type, body] of arguments[0]) dt.items.add(gbFile(name, type, body));
        {SHADOW}.querySelector('.gb-input').dispatchEvent(new ClipboardEvent('paste', {{ bubbles: true, cancelable: true, clipboardData: dt }}));"
    );
    client.execute(&script, vec![files]).await?;
    Ok(())
}

/// The chips of the attached files: `[name, state]`.
async fn chips(client: &Client) -> Result<Value> {
    Ok(client
        .execute(
            &format!("return [...{SHADOW}.querySelectorAll('.gb-attached-file')].map(c => [c.querySelector('.gb-attached-name').textContent, c.dataset.state]);"),
            vec![],
        )
        .await?)
}

async fn a_dropped_image_reaches(api: &str) -> Result<()> {
    let fake = FakeProvider::start(Behaviour::reply(&["A red ", "pixel."])).await?;
    let server = match api {
        "openai" => {
            start_server(&[
                ("GLASSBOX_PROVIDER", "openai"),
                ("OPENAI_API_KEY", "sk-e2e"),
                ("OPENAI_BASE_URL", &fake.openai_base()),
            ])
            .await?
        }
        _ => {
            start_server(&[
                ("GLASSBOX_PROVIDER", "anthropic"),
                ("ANTHROPIC_API_KEY", "sk-e2e"),
                ("ANTHROPIC_BASE_URL", &fake.anthropic_base()),
            ])
            .await?
        }
    };
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let url = format!("http://{}/", server.addr);
    in_browser(url, &format!("attachments-{api}"), |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        drop_files(&client, json!([["red.png", "image/png", b64]])).await?;
        paste_files(&client, json!([["notes.md", "", {"text": NOTES}]])).await?;
        wait_for(
            &client,
            "both files uploaded",
            &format!("return [...{SHADOW}.querySelectorAll('.gb-attached-file[data-state=ready]')].length === 2;"),
        )
        .await?;
        assert_eq!(chips(&client).await?, json!([["red.png", "ready"], ["notes.md", "ready"]]));
        let input = shadow_element(&client, ".gb-input").await?;
        input.send_keys("What colour is it?").await?;
        input.send_keys("\u{E007}").await?;
        wait_for(
            &client,
            "the reply",
            &format!("return {SHADOW}.querySelector('[data-role=assistant][data-status=complete]')?.textContent.includes('A red pixel.');"),
        )
        .await?;
        // The composer is empty of them, and the sent message lists them.
        assert_eq!(chips(&client).await?, json!([]));
        let listed = client
            .execute(&format!("return [...{SHADOW}.querySelectorAll('[data-role=user] .gb-attachment')].map(a => a.textContent);"), vec![])
            .await?;
        assert_eq!(listed, json!([format!("red.png · {} B", PNG.len()), format!("notes.md · {} B", NOTES.len())]));

        // The provider got the image as its own kind of part, and the text file as delimited data.
        let requests = fake.requests();
        let body = &requests.last().context("the provider was not called")?.body;
        let user = body["messages"]
            .as_array()
            .context("messages")?
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .context("a user message")?;
        let parts = user["content"].as_array().context("content parts")?;
        let image = match api {
            "openai" => json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}"), "detail": "high"}}),
            _ => json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}),
        };
        assert!(parts.contains(&image), "{parts:#?}");
        assert_eq!(parts[0], json!({"type": "text", "text": "What colour is it?"}));
        assert!(
            parts.iter().any(|p| p["text"].as_str().is_some_and(|t| t.contains("<attached_file name=\"notes.md\">\n# Notes\nThe pixel is red.\n</attached_file>"))),
            "{parts:#?}"
        );

        // "View context" lists each file with its tokens.
        client
            .execute(&format!("[...{SHADOW}.querySelectorAll('button')].find(b => b.textContent === 'View context').click();"), vec![])
            .await?;
        let rows = wait_for(
            &client,
            "the receipt",
            &format!("const d = {SHADOW}.querySelector('.gb-receipt'); return d && d.textContent.includes('Image red.png') ? d.textContent : null;"),
        )
        .await?;
        assert!(rows.as_str().unwrap_or("").contains("Text file notes.md"), "{rows}");

        // The page's own file, through the element's methods: uploadFile, then sendMessage.
        let sent = client
            .execute(
                &format!("{FILE_MAKER}
                const el = document.querySelector('glassbox-chat');
                const a = await el.uploadFile(gbFile('from-page.png', 'image/png', arguments[0]));
                await el.sendMessage('And this one?', [a]);
                return a;"),
                vec![json!(b64)],
            )
            .await?;
        assert_eq!((sent["name"].clone(), sent["width"].clone()), (json!("from-page.png"), json!(3)), "{sent}");
        wait_for(
            &client,
            "the second reply",
            &format!("return {SHADOW}.querySelectorAll('[data-role=assistant][data-status=complete]').length === 2;"),
        )
        .await?;
        let last = fake.requests().last().context("no request")?.body.to_string();
        assert_eq!(last.matches(&b64).count(), 2, "both images go: the first with its message in the history");
        let refused = client
            .execute(
                &format!("{FILE_MAKER}
                try {{ await document.querySelector('glassbox-chat').uploadFile(gbFile('a.zip', 'application/zip', {{ text: 'PK' }})); return null; }}
                catch (e) {{ return [e.name, e.code]; }}"),
                vec![],
            )
            .await?;
        assert_eq!(refused, json!(["GlassboxError[file_type_not_allowed]", "file_type_not_allowed"]));

        // The meter counts a text file of the history by its text, as the request carries it:
        // 3,000 words of one token each.
        let used = format!("const m = {SHADOW}.querySelector('.gb-meter'); return m.dataset.estimated === 'false' ? Number(m.getAttribute('aria-valuenow')) : null;");
        let before = wait_for(&client, "an exact meter", &used).await?.as_u64().unwrap_or(0);
        client
            .execute(
                &format!("{FILE_MAKER}
                const el = document.querySelector('glassbox-chat');
                const a = await el.uploadFile(gbFile('long.txt', 'text/plain', {{ text: ' token'.repeat(3000) }}));
                await el.sendMessage('And this text?', [a]);"),
                vec![],
            )
            .await?;
        wait_for(
            &client,
            "the third reply",
            &format!("return {SHADOW}.querySelectorAll('[data-role=assistant][data-status=complete]').length === 3;"),
        )
        .await?;
        wait_for(
            &client,
            "the meter to count the text file",
            &format!("const m = {SHADOW}.querySelector('.gb-meter'); return m.dataset.estimated === 'false' && Number(m.getAttribute('aria-valuenow')) > {before} + 3000;"),
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_dropped_image_and_a_pasted_text_file_reach_openai() -> Result<()> {
    a_dropped_image_reaches("openai").await
}

#[tokio::test]
async fn a_dropped_image_and_a_pasted_text_file_reach_anthropic() -> Result<()> {
    a_dropped_image_reaches("anthropic").await
}

#[tokio::test]
async fn oversized_disallowed_and_mislabelled_files_are_refused_and_nothing_is_sent() -> Result<()>
{
    let fake = FakeProvider::start(Behaviour::reply(&["ok"])).await?;
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &fake.openai_base()),
    ])
    .await?;
    let head = base64::engine::general_purpose::STANDARD.encode(PNG);
    let url = format!("http://{}/", server.addr);
    in_browser(url, "attachments-refused", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the widget to connect", CONNECTED).await?;
        drop_files(
            &client,
            json!([
                ["big.png", "image/png", {"zeros": 6 * 1024 * 1024, "head": head}],
                ["setup.zip", "application/zip", {"text": "PK"}],
            ]),
        )
        .await?;
        let problems = wait_for(
            &client,
            "the refusals",
            &format!("const e = {SHADOW}.querySelector('.gb-composer-error'); return e && e.querySelectorAll('p').length === 2 ? [...e.querySelectorAll('p')].map(p => p.textContent) : null;"),
        )
        .await?;
        assert_eq!(
            problems,
            json!([
                "big.png is 6 MB; an image may be at most 3.75 MB",
                "setup.zip: application/zip files cannot be attached (PNG, JPEG, GIF and WebP images and text files can)"
            ])
        );
        assert_eq!(chips(&client).await?, json!([]), "a refused file is not attached");
        // Its type is allowed, its bytes are not an image: the server refuses it, and says why.
        drop_files(&client, json!([["fake.png", "image/png", {"text": "<svg></svg>"}]])).await?;
        let refused = wait_for(
            &client,
            "the server's refusal",
            &format!("return {SHADOW}.querySelector('.gb-composer-error p')?.textContent;"),
        )
        .await?;
        assert_eq!(refused, json!("fake.png is not a PNG, JPEG, GIF or WebP image"));
        wait_for(&client, "the chip to go", &format!("return {SHADOW}.querySelectorAll('.gb-attached-file').length === 0;")).await?;
        let send_disabled = client
            .execute(&format!("return {SHADOW}.querySelector('.gb-send').disabled;"), vec![])
            .await?;
        assert_eq!(send_disabled, json!(true), "nothing to send");
        assert!(fake.requests().is_empty(), "nothing reached the provider");

        // Text copied from an office program comes with a picture of itself: the paste stays
        // text, nothing is attached.
        let prevented = client
            .execute(
                &format!("{FILE_MAKER}
                const dt = new DataTransfer();
                dt.setData('text/plain', 'a | b');
                dt.items.add(gbFile('table.png', 'image/png', arguments[0]));
                const ev = new ClipboardEvent('paste', {{ bubbles: true, cancelable: true, clipboardData: dt }});
                {SHADOW}.querySelector('.gb-input').dispatchEvent(ev);
                return ev.defaultPrevented;"),
                vec![json!(head)],
            )
            .await?;
        assert_eq!(prevented, json!(false));
        assert_eq!(chips(&client).await?, json!([]));

        // A file attached, then New chat: the new conversation starts with no files.
        drop_files(&client, json!([["red.png", "image/png", head]])).await?;
        wait_for(&client, "the upload", &format!("return {SHADOW}.querySelectorAll('.gb-attached-file[data-state=ready]').length === 1;")).await?;
        client
            .execute(&format!("{SHADOW}.querySelector('.gb-new-chat').click();"), vec![])
            .await?;
        wait_for(&client, "the chips to go with the old conversation", &format!("return {SHADOW}.querySelectorAll('.gb-attached-file').length === 0;")).await?;

        // A file attached, then the tab reloaded: it comes back with the draft, and goes.
        wait_for(&client, "the new conversation", CONNECTED).await?;
        drop_files(&client, json!([["kept.png", "image/png", head]])).await?;
        wait_for(&client, "the upload", &format!("return {SHADOW}.querySelectorAll('.gb-attached-file[data-state=ready]').length === 1;")).await?;
        client.refresh().await?;
        wait_for(&client, "the widget to connect again", CONNECTED).await?;
        wait_for(&client, "the file to come back", &format!("return {SHADOW}.querySelector('.gb-attached-file[data-state=ready] .gb-attached-name')?.textContent === 'kept.png';")).await?;
        let input = shadow_element(&client, ".gb-input").await?;
        input.send_keys("\u{E007}").await?;
        wait_for(&client, "the reply", &format!("return !!{SHADOW}.querySelector('[data-role=assistant][data-status=complete]');")).await?;
        let sent = fake.requests().last().context("no request")?.body.to_string();
        assert!(sent.contains(&head), "the kept file went with the message");
        Ok(())
    })
    .await
}
