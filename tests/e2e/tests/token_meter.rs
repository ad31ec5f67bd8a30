//! The token meter in headless Chromium: exact counts from the worker, the percentage for a known
//! text, state changes above 90 % and 98 %, settings that reach the server, the browser's count
//! equal to the server's, the vocabulary cached for the next load, and the meter with no server.

use std::path::PathBuf;

use anyhow::Result;
use fantoccini::Client;
use glassbox_core::tokens::{BpeTokenizer, Framing, Tokenizer};
use glassbox_e2e::{in_browser, root, start_server, wait_for, widget_dir};
use serde_json::{Value, json};

/// Tokens a request of one message adds to its words under `encoding`: the message's framing and
/// the reply's priming.
fn framing(encoding: &str) -> usize {
    let f = Framing::for_encoding(encoding);
    (f.per_message + f.reply_priming) as usize
}

fn tokenizer(encoding: &str) -> BpeTokenizer {
    let data = std::fs::read(widget_dir().join(format!("vocab/{encoding}.gbv")))
        .expect("built vocabulary");
    BpeTokenizer::from_compact(&data).unwrap()
}

const METER: &str =
    "const m = document.querySelector('glassbox-chat')?.shadowRoot?.querySelector('.gb-meter');";

/// The chat meter's data attributes once counts are exact.
async fn exact_meter(client: &Client, percent: u32) -> Result<Value> {
    let script = format!(
        "{METER} if (!m || m.dataset.estimated !== 'false' || m.dataset.percent !== '{percent}') return null;
         return {{percent: +m.dataset.percent, state: m.dataset.state, now: m.getAttribute('aria-valuenow'),
                  max: m.getAttribute('aria-valuemax'), text: m.getAttribute('aria-valuetext'), role: m.getAttribute('role')}};"
    );
    wait_for(client, &format!("the meter at exactly {percent}%"), &script).await
}

async fn set_draft(client: &Client, text: &str) -> Result<()> {
    client
        .execute(
            "const t = document.querySelector('glassbox-chat').shadowRoot.querySelector('textarea.gb-input');
             t.value = arguments[0]; t.dispatchEvent(new Event('input', {bubbles: true}));",
            vec![json!(text)],
        )
        .await?;
    Ok(())
}

/// A draft that makes the whole request exactly `used` tokens: words of one token each.
fn draft_of(t: &BpeTokenizer, used: usize) -> String {
    let words = used - framing("o200k_base");
    let text = vec!["hello"; words].join(" ");
    assert_eq!(t.count(&text), words, "' hello' is one token in o200k");
    text
}

#[tokio::test]
async fn meter_shows_the_known_percentage_and_changes_state_at_90_and_98() -> Result<()> {
    let server = start_server(&[
        ("GLASSBOX_PROVIDER", "offline"),
        ("GLASSBOX_OFFLINE_DELAY_MS", "0"),
        ("GLASSBOX_MODEL_LIMITS", "offline=1000"),
        // The expected counts are the draft's alone; tools would add their definitions.
        ("GLASSBOX_TOOLS", "off"),
    ])
    .await?;
    let t = tokenizer("o200k_base");
    in_browser(format!("http://{}/", server.addr), "meter-states", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the meter to show the session's window", &format!("{METER} return m && m.getAttribute('aria-valuemax') === '1000';")).await?;
        // No page context: the request is the draft alone.
        client.execute("return document.querySelector('glassbox-chat').setPageContext(null);", vec![]).await?;
        // Compression off, through the settings panel (stored by the server, echoed to the widget).
        client
            .execute("document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-settings-toggle').click();", vec![])
            .await?;
        wait_for(&client, "the settings panel", "return !!document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-settings input[name=enabled]:checked');").await?;
        client
            .execute("document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-settings input[name=enabled]').click();", vec![])
            .await?;
        wait_for(&client, "the server to confirm", "return document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-settings input[name=enabled]').checked === false;").await?;

        for (used, state) in [(900, "standard"), (910, "warning"), (980, "warning"), (990, "critical")] {
            set_draft(&client, &draft_of(&t, used)).await?;
            let m = exact_meter(&client, (used / 10) as u32).await?;
            assert_eq!(m["state"], state, "at {used} of 1000 tokens: {m}");
            assert_eq!(m["role"], "meter");
            assert_eq!(m["now"], used.to_string());
            assert_eq!(m["max"], "1000");
            let text = m["text"].as_str().unwrap();
            assert!(text.starts_with(&format!("{}% of the context window used: {used} of 1,000 tokens", used / 10)), "{text}");
        }

        // The browser and the server count the same request alike.
        let draft = "Count me: 日本語, emoji 😀, code `fn main() {}` and <|endoftext|>.";
        set_draft(&client, draft).await?;
        let expected = t.count(draft) + framing("o200k_base");
        let percent = ((expected as f64) / 10.0).round() as u32;
        exact_meter(&client, percent).await?;
        let used: Value = client.execute(&format!("{METER} return m.getAttribute('aria-valuenow');"), vec![]).await?;
        assert_eq!(used, json!(expected.to_string()));
        client
            .execute("document.querySelector('glassbox-chat').shadowRoot.querySelector('form.gb-composer').requestSubmit();", vec![])
            .await?;
        let line = wait_for(
            &client,
            "the reply's counted usage",
            "return document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-message[data-role=assistant][data-status=complete] .gb-usage')?.textContent;",
        )
        .await?;
        let line = line.as_str().unwrap_or_default().to_owned();
        // "~": the offline model has no tokenizer of its own, so o200k counts approximately.
        assert!(line.starts_with(&format!("~{expected} tokens in by our count (o200k_base)")), "server counted differently: {line}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_vocabulary_is_fetched_once_then_served_by_the_browser_cache() -> Result<()> {
    let server = start_server(&[("GLASSBOX_PROVIDER", "offline")]).await?;
    in_browser(format!("http://{}/", server.addr), "meter-cache", |client, url| async move {
        let vocab_line = format!("{METER} const v = m?.querySelector('.gb-meter-vocab')?.textContent || ''; return v.includes('loading') ? null : v;");
        client.goto(&url).await?;
        let first = wait_for(&client, "the vocabulary to load", &vocab_line).await?;
        assert!(first.as_str().unwrap().contains("kB downloaded"), "{first}");
        client.refresh().await?;
        let second = wait_for(&client, "the vocabulary to load again", &vocab_line).await?;
        assert!(second.as_str().unwrap().contains("from the browser cache"), "{second}");
        Ok(())
    })
    .await
}

/// A plain static file server over the repository (no Glassbox), as any host could use.
async fn static_server() -> Result<std::net::SocketAddr> {
    static_server_with(axum::Router::new()).await
}

/// [`static_server`] with `routes` answered first.
async fn static_server_with(routes: axum::Router) -> Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let dir: PathBuf = root();
    let widget = widget_dir();
    let app = routes
        .nest_service("/dist", tower_http::services::ServeDir::new(widget))
        .fallback_service(tower_http::services::ServeDir::new(dir));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

#[tokio::test]
async fn the_standalone_meter_counts_with_no_server() -> Result<()> {
    let addr = static_server().await?;
    let (o200k, cl100k) = (tokenizer("o200k_base"), tokenizer("cl100k_base"));
    in_browser(format!("http://{addr}/public/meter.html"), "meter-standalone", |client, url| async move {
        client.goto(&url).await?;
        let text = "Count this: naïve café, 東京, 🚀 and <|im_start|> as text.";
        client
            .execute(
                "const t = document.getElementById('text'); t.value = arguments[0]; t.dispatchEvent(new Event('input'));",
                vec![json!(text)],
            )
            .await?;
        let reading = "const m = document.getElementById('meter'); return m.reading && (r => r && !r.estimated ? r : null)(m.reading());";
        let r = wait_for(&client, "an exact standalone reading", reading).await?;
        assert_eq!(r["encoding"], "o200k_base");
        assert_eq!(r["limit"], 128_000);
        let expected = o200k.count(text) + framing("o200k_base");
        assert_eq!(r["used"], expected);

        // Another model: another window and vocabulary.
        client
            .execute("const s = document.getElementById('model'); s.value = 'gpt-4'; s.dispatchEvent(new Event('change'));", vec![])
            .await?;
        let r = wait_for(
            &client,
            "the cl100k reading",
            "return (r => r && !r.estimated && r.encoding === 'cl100k_base' ? r : null)(document.getElementById('meter').reading());",
        )
        .await?;
        assert_eq!(r["limit"], 8192);
        assert_eq!(r["used"], cl100k.count(text) + framing("cl100k_base"));
        let shown = wait_for(&client, "the page's own readout", "return document.getElementById('reading').textContent.includes('cl100k_base') && document.getElementById('reading').textContent;").await?;
        assert!(shown.as_str().unwrap().contains("of 8,192"), "{shown}");

        // A Llama model: its own Hugging Face tokenizer, run by `tokenizers` in the worker's wasm,
        // counts exactly as the same crate does natively.
        let llama = Tokenizer::load(&std::fs::read(widget_dir().join("vocab/llama3.gbv"))?)?;
        client
            .execute("const s = document.getElementById('model'); s.value = 'llama-3.1-8b'; s.dispatchEvent(new Event('change'));", vec![])
            .await?;
        let r = wait_for(
            &client,
            "the llama3 reading",
            "return (r => r && !r.estimated && r.encoding === 'llama3' ? r : null)(document.getElementById('meter').reading());",
        )
        .await?;
        assert_eq!(r["limit"], 131_072);
        assert_eq!(r["used"], llama.count(text) + framing("llama3"));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_missing_vocabulary_is_reported_and_the_last_of_quick_model_changes_counts() -> Result<()>
{
    let addr = static_server().await?;
    let cl100k = tokenizer("cl100k_base");
    in_browser(format!("http://{addr}/public/meter.html"), "meter-vocab-errors", |client, url| async move {
        client.goto(&url).await?;
        wait_for(&client, "the element", "return !!customElements.get('glassbox-token-meter');").await?;
        // The page downloads the vocabulary for the worker; a 404 is left to the worker, which
        // fetches again and reports it: the meter says so and estimates.
        client
            .execute(
                "const m = document.createElement('glassbox-token-meter');
                 m.id = 'broken'; m.setAttribute('model', 'gpt-4o');
                 m.setAttribute('vocab', '/dist/vocab/missing-{encoding}.gbv');
                 document.body.append(m); m.setText('some words to count');",
                vec![],
            )
            .await?;
        let shown = wait_for(
            &client,
            "the failure to show",
            "const t = document.getElementById('broken').shadowRoot.querySelector('.gb-meter-vocab')?.textContent || ''; return t.includes('failed') && t;",
        )
        .await?;
        let shown = shown.as_str().unwrap_or_default();
        assert!(shown.contains("o200k_base") && shown.contains("404") && shown.contains("estimates"), "{shown}");
        let r = wait_for(&client, "an estimated reading", "const r = document.getElementById('broken').reading(); return r && r.used > 0 && r;").await?;
        assert_eq!(r["estimated"], true, "{r}");

        // A long text is set under one model (its count is asked of the worker at once), then
        // three models follow in quick succession, each applied a task apart while the last
        // download is in flight. The worker answers the count after the switches: that answer is
        // the old vocabulary's and must not be kept; overtaken downloads are dropped; the count is
        // the last model's. Rounds end on cl100k and o200k in turn (they count these texts
        // differently, so a kept stale answer shows).
        let o200k = tokenizer("o200k_base");
        for round in 0..4 {
            let text = format!("Round {round}: count this, naïve café, 東京, 🚀, Ελληνικά, Ağustos. ").repeat(1_500);
            let (models, encoding, counter) = if round % 2 == 0 {
                (["llama-3.1-8b", "gpt-4o", "gpt-4-turbo"], "cl100k_base", &cl100k)
            } else {
                (["llama-3.1-8b", "gpt-4-turbo", "gpt-4o"], "o200k_base", &o200k)
            };
            assert_ne!(cl100k.count(&text), o200k.count(&text), "round {round}");
            client
                .execute_async(
                    "const [text, models, done] = arguments; const m = document.getElementById('meter');
                     const tick = () => new Promise((r) => setTimeout(r, 0));
                     (async () => {
                       m.setText(text);
                       await tick();
                       for (const model of models) {
                         m.setAttribute('model', model);
                         await tick();
                       }
                       done();
                     })();",
                    vec![json!(text), json!(models)],
                )
                .await?;
            let r = wait_for(
                &client,
                &format!("the {encoding} reading of round {round}"),
                &format!(
                    "return (r => r && !r.estimated && r.encoding === '{encoding}' ? r : null)(document.getElementById('meter').reading());"
                ),
            )
            .await?;
            assert_eq!(r["used"], counter.count(&text) + framing(encoding), "round {round}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_pages_early_vocabulary_arriving_late_does_not_replace_the_models() -> Result<()> {
    // The page starts downloading o200k (the default model's) before the wasm loads; the model is
    // then set to gpt-4 (cl100k), whose vocabulary arrives first. o200k, held back until cl100k
    // counts, must not become the worker's tokenizer: later counts are still cl100k's.
    // The element's vocabularies come from /slow/vocab/, where o200k waits for the test.
    // A page with this meter alone (no other meter's worker to share): no model at first, so the
    // page starts the default model's o200k; then gpt-4. Its `assets` and `vocab` are relative.
    let page = "<!doctype html><meta charset=utf-8><body><script type=module>
        await import('/dist/glassbox-token-meter.js');
        const m = document.createElement('glassbox-token-meter');
        m.id = 'late';
        m.setAttribute('vocab', '/slow/vocab/{encoding}.gbv');
        m.setAttribute('assets', '/dist/'); // relative: the blob worker needs it made absolute
        document.body.append(m);
        m.setAttribute('model', 'gpt-4');
        m.setText('first words');
        </script>";
    let (release, released) = tokio::sync::watch::channel(false);
    let slow = axum::Router::new()
        .route(
            "/late.html",
            axum::routing::get(move || async move { axum::response::Html(page) }),
        )
        .route(
            "/slow/vocab/{file}",
            axum::routing::get(
                move |axum::extract::Path(file): axum::extract::Path<String>| {
                    let mut released = released.clone();
                    async move {
                        if file == "o200k_base.gbv" {
                            let _ = released.wait_for(|open| *open).await;
                        }
                        let name = std::path::Path::new(&file)
                            .file_name()
                            .map(ToOwned::to_owned);
                        name.and_then(|n| std::fs::read(widget_dir().join("vocab").join(n)).ok())
                            .unwrap_or_default()
                    }
                },
            ),
        );
    let addr = static_server_with(slow).await?;
    let cl100k = tokenizer("cl100k_base");
    in_browser(format!("http://{addr}/late.html"), "meter-early-late", |client, url| async move {
        client.goto(&url).await?;
        let exact = "const m = document.getElementById('late'); const r = m && m.reading && m.reading(); return r && !r.estimated && r.encoding === 'cl100k_base' ? r : null;";
        wait_for(&client, "an exact cl100k reading", exact).await?;
        // Now o200k arrives; once the page has it, new texts are counted by cl100k still (the
        // second after the first's count came back, so the worker had the late load before it).
        release.send_replace(true);
        wait_for(&client, "the held-back o200k to arrive", "return performance.getEntriesByType('resource').some(e => e.name.endsWith('/slow/vocab/o200k_base.gbv') && e.responseEnd > 0);").await?;
        for text in [
            "Ünïcödé 東京 and emoji 🚀🚀 count differently in o200k and cl100k.",
            "Ünïcödé 東京 again, with more emoji 🚀🚀🚀 to tell the two apart.",
        ] {
            client
                .execute("document.getElementById('late').setText(arguments[0]);", vec![json!(text)])
                .await?;
            let want = cl100k.count(text) + framing("cl100k_base");
            let o200k_would_say = tokenizer("o200k_base").count(text) + framing("o200k_base");
            assert_ne!(want, o200k_would_say, "the text must tell the two vocabularies apart");
            let r = wait_for(
                &client,
                "the new text's cl100k count",
                &format!("const r = document.getElementById('late').reading(); return r && !r.estimated && r.used === {want} && r;"),
            )
            .await?;
            assert_eq!(r["encoding"], "cl100k_base", "{r}");
        }
        Ok(())
    })
    .await
}
