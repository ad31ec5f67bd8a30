//! A long reply streamed in small pieces (issue 11), on the demo page in headless Chromium: it ends
//! rendered exactly as a fresh render of the stored reply; the list follows it to the end unless the
//! user scrolls away, and then offers "Jump to latest"; a polite live region announces the finished
//! reply instead of every piece.
//!
//! The widget's DOM contract used here, inside the shadow root of `glassbox-chat`: `.gb-messages` is
//! the scroll container; each message is `.gb-message[data-message-id][data-role][data-status]`
//! (`streaming`, `complete`, `failed`); assistant text is in `.gb-markdown`; `.gb-jump-latest` is a
//! button shown only while the user is scrolled away from the bottom (`hidden` otherwise); `.gb-live`
//! has `aria-live="polite"`.

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use fantoccini::Client;
use glassbox_e2e::markdown_fixture::{MarkdownDoc, mixed_markdown, pieces};
use glassbox_e2e::widget_page::{
    CONNECTED, SHADOW, allow_slow_scripts, shadow_element, wait_for_within,
};
use glassbox_e2e::{in_browser, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider, Gate};
use serde_json::{Value, json};

const REPLY_BYTES: usize = 32 * 1024;
const PIECE_CHARS: usize = 8;
/// How long a whole reply may take to stream and render before the test gives up.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// A list is "at the bottom" when less than this many pixels of it are below the visible part.
const AT_BOTTOM_PX: f64 = 4.0;

/// The newest assistant message (`m`) and its markdown (`md`), as JavaScript statements.
fn newest_reply_js() -> String {
    format!(
        "const root = {SHADOW}; const all = root.querySelectorAll('.gb-message[data-role=assistant]');
         const m = all[all.length - 1]; const md = m?.querySelector('.gb-markdown');"
    )
}

/// Distance in px between the bottom of `.gb-messages` and the bottom of what it shows.
fn below_js() -> String {
    format!(
        "const el = {SHADOW}.querySelector('.gb-messages'); return el.scrollHeight - el.scrollTop - el.clientHeight;"
    )
}

/// Records, on every animation frame while the newest reply streams, how far the list is from its
/// bottom: in the frame's callback and again right after the frame (a task posted from it), so a
/// widget that scrolls late in the frame counts as following. Stops when the reply ends.
const FOLLOW_SAMPLER: &str = "
    const root = document.querySelector('glassbox-chat').shadowRoot;
    const el = root.querySelector('.gb-messages');
    const f = window.__follow = { samples: [], ended: false };
    const below = () => el.scrollHeight - el.scrollTop - el.clientHeight;
    const frame = () => {
      const all = root.querySelectorAll('.gb-message[data-role=assistant]');
      const m = all[all.length - 1];
      if (m && m.dataset.status !== 'streaming') { f.ended = true; return; }
      if (m) {
        const inFrame = below();
        const ch = new MessageChannel();
        ch.port1.onmessage = () => f.samples.push([inFrame, below()]);
        ch.port2.postMessage(0);
      }
      requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);";

/// Counts changes of the live region while the newest reply streams, and after.
const LIVE_RECORDER: &str = "
    const root = document.querySelector('glassbox-chat').shadowRoot;
    const live = root.querySelector('[aria-live=polite].gb-live');
    const r = window.__live = { present: !!live, before: live ? live.textContent : null,
      during: 0, after: 0, texts: [] };
    if (live) {
      new MutationObserver((records) => {
        const all = root.querySelectorAll('.gb-message[data-role=assistant]');
        const m = all[all.length - 1];
        if (!m || m.dataset.status === 'streaming') r.during += records.length;
        else r.after += records.length;
        r.texts.push(live.textContent);
      }).observe(live, { childList: true, characterData: true, subtree: true });
    }";

async fn long_reply_setup(pause: Duration) -> Result<(FakeProvider, MarkdownDoc)> {
    let doc = mixed_markdown(REPLY_BYTES, 11);
    let fake = FakeProvider::start(Behaviour::Reply {
        chunks: pieces(&doc.text, PIECE_CHARS),
        delay: pause,
    })
    .await?;
    Ok((fake, doc))
}

async fn send(client: &Client, text: &str) -> Result<()> {
    client
        .execute(
            "document.querySelector('glassbox-chat').sendMessage(arguments[0]);",
            vec![json!(text)],
        )
        .await?;
    Ok(())
}

async fn wait_until_complete(client: &Client) -> Result<()> {
    wait_for_within(
        client,
        "the long reply to complete",
        &format!(
            "{} return m?.dataset.status === 'complete';",
            newest_reply_js()
        ),
        REPLY_TIMEOUT,
    )
    .await?;
    Ok(())
}

async fn below(client: &Client) -> Result<f64> {
    Ok(client
        .execute(&below_js(), vec![])
        .await?
        .as_f64()
        .unwrap_or(f64::MAX))
}

/// The newest reply's markdown: its HTML, its text and how many of each counted element it holds.
async fn rendered_reply(client: &Client, doc: &MarkdownDoc) -> Result<Value> {
    let tags: Vec<&str> = doc.structure.by_tag().iter().map(|(t, _)| *t).collect();
    Ok(client
        .execute(
            &format!(
                "{} if (!md) return null;
                 return {{ id: m.dataset.messageId, html: md.innerHTML, text: md.textContent,
                   counts: Object.fromEntries(arguments[0].map(t => [t, md.querySelectorAll(t).length])) }};",
                newest_reply_js()
            ),
            vec![json!(tags)],
        )
        .await?)
}

/// Share of sampled frames in which the list was at its bottom (in the frame or right after it).
fn following_share(samples: &Value) -> (f64, usize) {
    let frames: Vec<bool> = samples
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let (a, b) = (
                s[0].as_f64().unwrap_or(f64::MAX),
                s[1].as_f64().unwrap_or(f64::MAX),
            );
            a.min(b) < AT_BOTTOM_PX
        })
        .collect();
    let n = frames.len();
    let at = frames.iter().filter(|x| **x).count();
    (if n == 0 { 0.0 } else { at as f64 / n as f64 }, n)
}

/// A server forwarding to `fake` in the OpenAI format.
async fn openai_server(fake: &FakeProvider) -> Result<glassbox_e2e::Server> {
    start_server(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &fake.openai_base()),
    ])
    .await
}

#[tokio::test]
async fn a_long_streamed_reply_ends_as_a_fresh_render_followed_and_announced_once() -> Result<()> {
    let (fake, doc) = long_reply_setup(Duration::from_millis(1)).await?;
    let server = openai_server(&fake).await?;
    in_browser(
        format!("http://{}/", server.addr),
        "long-reply",
        |client, url| async move {
            allow_slow_scripts(&client, REPLY_TIMEOUT).await?;
            client.goto(&url).await?;
            wait_for(&client, "the widget to connect", CONNECTED).await?;
            let mut problems: Vec<String> = Vec::new();

            client.execute(LIVE_RECORDER, vec![]).await?;
            client.execute(FOLLOW_SAMPLER, vec![]).await?;
            send(&client, "Tell me everything, at length.").await?;
            wait_until_complete(&client).await?;
            if !rendered_to_the_end(&client, &doc).await? {
                problems.push("the reply did not show its last words within 10 s of completing".into());
            }

            // (a) Structure: every counted element of the document is there.
            let live = rendered_reply(&client, &doc).await?;
            if live.is_null() {
                bail!("no rendered reply");
            }
            for (tag, want) in doc.structure.by_tag() {
                let got = live["counts"][tag].as_u64().unwrap_or(0) as usize;
                if got != want {
                    problems.push(format!("the streamed reply has {got} <{tag}>, the markdown {want}"));
                }
            }
            let text = live["text"].as_str().unwrap_or_default();
            if !text.trim_end().ends_with(&doc.end_marker) {
                problems.push(format!(
                    "the streamed reply does not end with the reply's last words {:?}: …{:?}",
                    doc.end_marker,
                    excerpt(text, text.len().saturating_sub(40))
                ));
            }

            // (b) The list followed the reply while it streamed, and ends at the bottom.
            let follow = client.execute("return window.__follow;", vec![]).await?;
            let (share, frames) = following_share(&follow["samples"]);
            if frames < 10 || share < 0.8 {
                problems.push(format!(
                    "the list was at the bottom in {:.0} % of {frames} frames while the reply streamed (want ≥ 80 %)",
                    share * 100.0
                ));
            }
            if let Err(end) = settles_at_bottom(&client).await? {
                problems.push(format!("after the reply the list is {end:.0} px above its bottom"));
            }

            // (d) The polite live region spoke when the reply completed, not along the way.
            let announced = wait_for_within(
                &client,
                "the live region to announce the reply",
                "const r = window.__live; const live = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-live');
                 return !r.present || (live && live.textContent !== r.before && live.textContent.trim() !== '');",
                Duration::from_secs(5),
            )
            .await;
            let record = client.execute("return window.__live;", vec![]).await?;
            if record["present"] != json!(true) {
                problems.push("no [aria-live=polite].gb-live region in the widget".into());
            } else {
                if announced.is_err() {
                    problems.push(format!(
                        "the live region did not change after the reply completed (still {:?})",
                        record["before"]
                    ));
                }
                let during = record["during"].as_u64().unwrap_or(0);
                if during > 2 {
                    problems.push(format!(
                        "the live region changed {during} times while the reply streamed (want ≤ 2): {}",
                        record["texts"]
                    ));
                }
            }

            // (a) A fresh render of the stored reply (history restored on reload) is the same HTML.
            client.refresh().await?;
            wait_for(&client, "the widget to reconnect", CONNECTED).await?;
            wait_for(
                &client,
                "the history to be restored",
                &format!("{} return !!md && m.dataset.status === 'complete';", newest_reply_js()),
            )
            .await?;
            let fresh = rendered_reply(&client, &doc).await?;
            if fresh["id"] != live["id"] {
                bail!("the reloaded page shows another reply: {} vs {}", fresh["id"], live["id"]);
            }
            if fresh["html"] != live["html"] {
                let (a, b) = (
                    live["html"].as_str().unwrap_or_default(),
                    fresh["html"].as_str().unwrap_or_default(),
                );
                let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                problems.push(format!(
                    "the streamed reply's HTML differs from a fresh render of it at byte {at} (of {} / {}):\n  streamed: …{}\n  fresh:    …{}",
                    a.len(),
                    b.len(),
                    excerpt(a, at),
                    excerpt(b, at)
                ));
            }
            for (tag, want) in doc.structure.by_tag() {
                let got = fresh["counts"][tag].as_u64().unwrap_or(0) as usize;
                if got != want {
                    problems.push(format!("the fresh render has {got} <{tag}>, the markdown {want}"));
                }
            }
            if !problems.is_empty() {
                bail!("{}", problems.join("\n"));
            }
            Ok(())
        },
    )
    .await
}

/// Where the jump-to-latest test's reply waits: once the list overflows (the user scrolls up
/// there), and halfway (Jump to latest is clicked there), in 8-character pieces.
const SCROLLED_UP_AT: usize = 1024;
const JUMP_AT: usize = 2048;

#[tokio::test]
async fn scrolling_up_mid_reply_stops_following_until_jump_to_latest() -> Result<()> {
    // The reply waits twice (the user acts while it is known to stream), and streams paced in
    // between, so pieces keep arriving while the list is watched.
    let doc = mixed_markdown(REPLY_BYTES, 11);
    let (scrolled_up, jumped) = (Gate::new(), Gate::new());
    let fake = FakeProvider::start(Behaviour::Hold {
        chunks: pieces(&doc.text, PIECE_CHARS),
        delay: Duration::from_millis(2),
        holds: vec![
            (SCROLLED_UP_AT, scrolled_up.clone()),
            (JUMP_AT, jumped.clone()),
        ],
    })
    .await?;
    let server = openai_server(&fake).await?;
    in_browser(
        format!("http://{}/", server.addr),
        "jump-to-latest",
        |client, url| async move {
            allow_slow_scripts(&client, REPLY_TIMEOUT).await?;
            client.goto(&url).await?;
            wait_for(&client, "the widget to connect", CONNECTED).await?;
            send(&client, "Tell me everything, at length.").await?;
            // Far enough in that the list overflows, with most of the reply still to come (it
            // waits there), the user scrolls up: a wheel turn, and the list moves to its top.
            scrolled_up.reached(1).await;
            wait_for_within(
                &client,
                "the reply to fill the list",
                &format!(
                    "{} const el = root.querySelector('.gb-messages');
                     return m?.dataset.status === 'streaming' && (md?.textContent.length ?? 0) > 3000
                       && el.scrollHeight > 2 * el.clientHeight;",
                    newest_reply_js()
                ),
                REPLY_TIMEOUT,
            )
            .await?;
            client
                .execute(
                    &format!(
                        "const el = {SHADOW}.querySelector('.gb-messages');
                         el.dispatchEvent(new WheelEvent('wheel', {{deltaY: -1200, bubbles: true, cancelable: true, composed: true}}));
                         el.scrollTop = 0;"
                    ),
                    vec![],
                )
                .await?;

            // "Jump to latest" is offered at once.
            let jump = "const b = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-jump-latest');";
            let visible = "!!b && !b.hidden && b.checkVisibility({visibilityProperty: true})";
            wait_for(
                &client,
                "a visible .gb-jump-latest button",
                &format!("{jump} return {visible};"),
            )
            .await?;

            // While the reply goes on, the list stays where the user put it: watched on every
            // frame from the moment the reply is let go until thousands of characters more have
            // come in (it waits again halfway, so it is still streaming then).
            start_frame_sampler(&client).await?;
            scrolled_up.release();
            jumped.reached(1).await;
            wait_for_within(
                &client,
                "the reply to grow while the list is up",
                &format!(
                    "{} return (md?.textContent.length ?? 0) >= window.__frames.startLength + 2000;",
                    newest_reply_js()
                ),
                REPLY_TIMEOUT,
            )
            .await?;
            let stayed = stop_frame_sampler(&client).await?;
            still_streaming(&client, "the list stayed up").await?;
            let worst_top = stayed
                .iter()
                .map(|s| s["top"].as_f64().unwrap_or(f64::MAX))
                .fold(0.0, f64::max);
            let back = stayed.iter().filter(|s| at_bottom(s)).count();
            ensure!(
                !stayed.is_empty() && back == 0 && worst_top < 100.0,
                "the list jumped back while the user was reading above: {back} of {} frames at the bottom, scrollTop up to {worst_top:.0}",
                stayed.len()
            );

            // Clicking it goes to the bottom, and it goes away.
            shadow_element(&client, ".gb-jump-latest").await?.click().await?;
            wait_for(
                &client,
                "the list at its bottom and the button gone",
                &format!(
                    "{jump} const el = document.querySelector('glassbox-chat').shadowRoot.querySelector('.gb-messages');
                     return el.scrollHeight - el.scrollTop - el.clientHeight < {AT_BOTTOM_PX} && !({visible});"
                ),
            )
            .await?;
            still_streaming(&client, "Jump to latest was clicked").await?;

            // And the list follows the rest of the reply again, to its end.
            client.execute(FOLLOW_SAMPLER, vec![]).await?;
            jumped.release();
            wait_until_complete(&client).await?;
            let follow = client.execute("return window.__follow;", vec![]).await?;
            let (share, frames) = following_share(&follow["samples"]);
            ensure!(
                frames >= 10 && share >= 0.8,
                "after Jump to latest the list was at the bottom in {:.0} % of {frames} frames while the reply streamed (want ≥ 80 %)",
                share * 100.0
            );
            ensure!(rendered_to_the_end(&client, &doc).await?, "the reply is complete");
            if let Err(end) = settles_at_bottom(&client).await? {
                bail!("after the reply the list is {end:.0} px above its bottom");
            }
            Ok(())
        },
    )
    .await
}

/// Starts sampling `.gb-messages` on every animation frame (see [`stop_frame_sampler`]), and
/// notes the newest reply's text length now (`window.__frames.startLength`).
async fn start_frame_sampler(client: &Client) -> Result<()> {
    client
        .execute(
            &format!(
                "{} const el = root.querySelector('.gb-messages');
                 const below = () => el.scrollHeight - el.scrollTop - el.clientHeight;
                 const f = window.__frames = {{ samples: [], stop: false, startLength: md?.textContent.length ?? 0 }};
                 const frame = () => {{
                   if (f.stop) return;
                   const s = {{ top: el.scrollTop, below: below(), after: null }};
                   f.samples.push(s);
                   const ch = new MessageChannel();
                   ch.port1.onmessage = () => {{ s.after = below(); }};
                   ch.port2.postMessage(0);
                   requestAnimationFrame(frame);
                 }};
                 requestAnimationFrame(frame);",
                newest_reply_js()
            ),
            vec![],
        )
        .await?;
    Ok(())
}

/// Stops the sampler [`start_frame_sampler`] started; returns its samples: `top` (scrollTop),
/// `below` (px under the visible part, in the frame) and `after` (the same right after the frame).
async fn stop_frame_sampler(client: &Client) -> Result<Vec<Value>> {
    let samples = client
        .execute_async(
            "const [done] = arguments; const f = window.__frames; f.stop = true;
             setTimeout(() => done(f.samples), 50);",
            vec![],
        )
        .await?;
    Ok(samples.as_array().cloned().unwrap_or_default())
}

/// Whether the newest reply is complete and shows its last words within 10 s (its last render
/// may come a frame after the status).
async fn rendered_to_the_end(client: &Client, doc: &MarkdownDoc) -> Result<bool> {
    let rendered = wait_for_within(
        client,
        "the reply's last words to render",
        &format!(
            "{} return m?.dataset.status === 'complete' && (md?.textContent ?? '').trimEnd().endsWith({});",
            newest_reply_js(),
            serde_json::to_string(&doc.end_marker)?
        ),
        Duration::from_secs(10),
    )
    .await;
    Ok(rendered.is_ok())
}

/// Waits (5 s at most) for the list to be at its bottom; `Err` with how far above it is if not.
async fn settles_at_bottom(client: &Client) -> Result<std::result::Result<(), f64>> {
    let settled = wait_for_within(
        client,
        "the list to settle at its bottom",
        &format!("return (() => {{ {} }})() < {AT_BOTTOM_PX};", below_js()),
        Duration::from_secs(5),
    )
    .await;
    Ok(match settled {
        Ok(_) => Ok(()),
        Err(_) => Err(below(client).await?),
    })
}

/// True if a frame sample saw the list at its bottom, in the frame or right after it.
fn at_bottom(sample: &Value) -> bool {
    let px = |k: &str| sample[k].as_f64().unwrap_or(f64::MAX);
    px("below").min(px("after")) < AT_BOTTOM_PX
}

/// Fails if the newest reply is no longer streaming (it is held at a gate when this is asked).
async fn still_streaming(client: &Client, check: &str) -> Result<()> {
    let status = client
        .execute(
            &format!("{} return m?.dataset.status ?? null;", newest_reply_js()),
            vec![],
        )
        .await?;
    if status != json!("streaming") {
        bail!("the reply, held by the provider, was no longer streaming ({status}) when {check}");
    }
    Ok(())
}

/// Up to 120 characters of `s` from a little before byte `at`.
fn excerpt(s: &str, at: usize) -> &str {
    let mut start = at.saturating_sub(40);
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + 120).min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[start..end]
}
