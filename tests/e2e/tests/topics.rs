//! The topic panel in headless Chromium, against the real embedding model and the fake provider: a
//! conversation about two subjects, the bubbles appear, clicking one changes the status line and the
//! highlighted messages, the host hears `glassbox:filter-changed`, the next request holds only that
//! subject's messages plus the standing instruction, and the reply's receipt says so. Then a
//! message excluded from its menu, and the cloud at a desktop's and a phone's width.

use anyhow::Result;
use fantoccini::Client;
use glassbox_e2e::widget_page::{CONNECTED, shadow_element};
use glassbox_e2e::{Server, in_browser, start_server, wait_for};
use glassbox_fake_provider::{Behaviour, FakeProvider, topics_answer};
use serde_json::{Value, json};

const ROOT: &str = "const r = document.querySelector('glassbox-chat').shadowRoot;";

const EXCHANGES: [(&str, &str); 7] = [
    (
        "My Kubernetes pod cannot reach the ClusterIP service in another namespace.",
        "Use the service's full DNS name and check that the Kubernetes NetworkPolicy allows it.",
    ),
    (
        "The Kubernetes NetworkPolicy denies all ingress in that namespace.",
        "Add an ingress rule to the NetworkPolicy selecting the calling pod's namespace.",
    ),
    (
        "Now the Kubernetes service has no endpoints at all.",
        "The service selector matches no pod labels; compare them with kubectl get pods --show-labels.",
    ),
    ("Be concise from now on, please.", "Understood."),
    (
        "My sourdough starter smells like nail polish remover. Is the starter dead?",
        "It is hungry, not dead: feed the sourdough starter twice a day with equal flour and water.",
    ),
    (
        "How warm should the sourdough dough be while it rises?",
        "Keep the sourdough dough around 25 degrees; bulk fermentation then takes four to six hours.",
    ),
    (
        "My sourdough loaf comes out flat and dense after baking.",
        "A flat sourdough loaf is usually over-proofed dough; bake it in a preheated Dutch oven.",
    ),
];

/// A server replying through `fake`, with topics on, the real embedding model, and `extra`.
async fn topics_server(fake: &FakeProvider, extra: &[(&str, &str)]) -> Result<Server> {
    let base = fake.openai_base();
    let model_dir = std::env::var("GLASSBOX_EMBED_MODEL_DIR").unwrap_or_else(|_| {
        glassbox_server::config::default_model_dir()
            .display()
            .to_string()
    });
    let mut vars = vec![
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "e2e"),
        ("OPENAI_BASE_URL", base.as_str()),
        ("GLASSBOX_TOOLS", "off"),
        ("GLASSBOX_TOPICS", "on"),
        ("GLASSBOX_EMBED_MODEL_DIR", model_dir.as_str()),
    ];
    vars.extend_from_slice(extra);
    start_server(&vars).await
}

/// Opens the demo page, waits for the widget to connect, and records every
/// `glassbox:filter-changed` the host hears in `window.__filters`.
async fn open_widget(client: &Client, url: &str) -> Result<()> {
    client.goto(url).await?;
    wait_for(client, "the widget to connect", CONNECTED).await?;
    client
        .execute(
            "window.__filters = []; document.addEventListener('glassbox:filter-changed', e => window.__filters.push(e.detail));",
            vec![],
        )
        .await?;
    Ok(())
}

async fn send(client: &Client, text: &str, replies_before: usize) -> Result<()> {
    let input = shadow_element(client, "textarea.gb-input").await?;
    input.send_keys(text).await?;
    input.send_keys("\u{E007}").await?;
    wait_for(
        client,
        "the reply",
        &format!(
            "{ROOT} return r.querySelectorAll('.gb-message[data-role=assistant][data-status=complete]').length === {};",
            replies_before + 1
        ),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn clicking_a_topic_filters_what_the_model_gets_and_everything_agrees() -> Result<()> {
    let fake = FakeProvider::start(Behaviour::reply(&["ok"])).await?;
    let server = topics_server(&fake, &[("GLASSBOX_TOPIC_MODEL", "offline")]).await?;
    let url = format!("http://{}/", server.addr);
    let fake = &fake;
    in_browser(url, "topics", |client, url| async move {
        open_widget(&client, &url).await?;
        for (i, (q, a)) in EXCHANGES.iter().enumerate() {
            fake.set(Behaviour::reply(&[a]));
            send(&client, q, i).await?;
        }
        // The panel: bubbles for both subjects, the standing instruction locked above them.
        client
            .execute(&format!("{ROOT} r.querySelector('.gb-topics-toggle').click();"), vec![])
            .await?;
        // Extraction runs after each reply: wait for the one that read all 14 messages (the
        // element's getTopics() answers with what the server pushed last).
        wait_for(
            &client,
            "the extraction of all 14 messages",
            "return document.querySelector('glassbox-chat').getTopics().then(t => t.topics?.messageCount === 14);",
        )
        .await?;
        let labels = wait_for(
            &client,
            "topics from all 14 messages",
            &format!("{ROOT} const b = [...r.querySelectorAll('.gb-bubble-topic .gb-bubble-label')].map(x => x.textContent); const s = r.querySelector('.gb-sticky-topic'); return b.length >= 2 && s && r.querySelector('.gb-topics-status').textContent === 'All messages in context' && b;"),
        )
        .await?;
        let sticky = client
            .execute(&format!("{ROOT} return r.querySelector('.gb-sticky-topic').textContent;"), vec![])
            .await?;
        assert!(sticky.as_str().unwrap_or_default().contains("Instructions & Preferences · 1"), "{sticky}");
        // The lock is drawn (CSS, not an emoji that needs a font).
        let lock = client
            .execute(&format!("{ROOT} const l = r.querySelector('.gb-sticky-topic .gb-lock'); if (!l) return null; const b = l.getBoundingClientRect(); return [b.width, b.height, getComputedStyle(l, '::before').borderTopWidth];"), vec![])
            .await?;
        assert!(lock[0].as_f64() > Some(0.0) && lock[1].as_f64() > Some(0.0) && lock[2] != "0px", "lock: {lock}");
        let bread = labels
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|l| ["sourdough", "starter", "dough", "loaf"].iter().any(|w| l.to_lowercase().contains(w)))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no sourdough bubble in {labels}"));

        // Click it: selected, the others dimmed, the status line and highlights change.
        client
            .execute(
                &format!("{ROOT} [...r.querySelectorAll('.gb-bubble-topic')].find(b => b.querySelector('.gb-bubble-label').textContent === arguments[0]).click();"),
                vec![json!(bread)],
            )
            .await?;
        let status = wait_for(
            &client,
            "the status line to count the filtered messages",
            &format!("{ROOT} const t = r.querySelector('.gb-topics-status').textContent; return /^\\d+ of 14 messages in context$/.test(t) && t;"),
        )
        .await?;
        let pressed = client
            .execute(&format!("{ROOT} return [...r.querySelectorAll('.gb-bubble-topic[aria-pressed=true] .gb-bubble-label')].map(x => x.textContent);"), vec![])
            .await?;
        assert_eq!(pressed, json!([bread]));
        let highlighted = client
            .execute(
                &format!("{ROOT} return [...r.querySelectorAll('.gb-message.gb-in-context')].map(m => m.querySelector('.gb-plain, .gb-markdown').textContent);"),
                vec![],
            )
            .await?;
        let highlighted: Vec<String> = serde_json::from_value(highlighted)?;
        let n: usize = status.as_str().unwrap_or_default().split(' ').next().unwrap_or("0").parse()?;
        assert_eq!(highlighted.len(), n, "{highlighted:?}");
        assert!(highlighted.iter().all(|t| !t.contains("Kubernetes")), "{highlighted:?}");
        assert!(highlighted.iter().any(|t| t.contains("Be concise")), "{highlighted:?}");
        assert!(highlighted.iter().filter(|t| t.contains("sourdough")).count() >= 3, "{highlighted:?}");
        // The host heard the same ids.
        let heard = client
            .execute(
                &format!("{ROOT} const last = window.__filters[window.__filters.length - 1]; const shown = [...r.querySelectorAll('.gb-message.gb-in-context')].map(m => m.dataset.messageId); return JSON.stringify(last.messageIds) === JSON.stringify(shown) && last.status;"),
                vec![],
            )
            .await?;
        assert_eq!(heard, status, "glassbox:filter-changed carries the highlighted ids");

        // The next request holds only those messages, the instruction and the new one.
        fake.set(Behaviour::reply(&["About four hours."]));
        send(&client, "How long should the dough proof?", EXCHANGES.len()).await?;
        let sent = fake.requests().last().map(|r| r.body.clone()).unwrap_or_default();
        let texts: Vec<String> = sent["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] != "system")
            .filter_map(|m| m["content"].as_str().map(str::to_owned))
            .collect();
        assert!(texts.iter().all(|t| !t.contains("Kubernetes")), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains("Be concise")), "{texts:?}");
        assert_eq!(texts.len(), n + 1, "{texts:?}");

        // The reply's receipt says so, in "View context".
        client
            .execute(&format!("{ROOT} [...r.querySelectorAll('.gb-view-context')].pop().click();"), vec![])
            .await?;
        let whys = wait_for(
            &client,
            "the receipt",
            &format!("{ROOT} const d = r.querySelector('dialog.gb-context-dialog'); return !!d && d.open && [...d.querySelectorAll('.gb-receipt-row')].map(x => x.textContent).join(' | ');"),
        )
        .await?;
        let whys = whys.as_str().unwrap_or_default();
        assert!(whys.contains("grouped under a selected topic (score"), "{whys}");
        assert!(whys.contains("a standing instruction"), "{whys}");
        assert!(whys.contains("about a topic you did not select (score"), "{whys}");
        client
            .execute(&format!("{ROOT} r.querySelector('dialog.gb-context-dialog').close();"), vec![])
            .await?;

        // Exclude the instruction from its menu: marked, and out of the highlighted set.
        // The menu's options are fetched when it first opens.
        client
            .execute(
                &format!("{ROOT} const m = [...r.querySelectorAll('.gb-message')].find(m => m.textContent.includes('Be concise')); m.querySelector('.gb-mark-menu summary').click(); return true;"),
                vec![],
            )
            .await?;
        wait_for(
            &client,
            "the menu's Exclude button",
            &format!("{ROOT} const m = [...r.querySelectorAll('.gb-message')].find(m => m.textContent.includes('Be concise')); const b = [...m.querySelectorAll('.gb-mark-options button')].find(b => b.textContent.startsWith('Exclude')); if (b) b.click(); return !!b;"),
        )
        .await?;
        let excluded = wait_for(
            &client,
            "the message to show it is excluded",
            &format!("{ROOT} const m = [...r.querySelectorAll('.gb-message')].find(m => m.textContent.includes('Be concise')); return m.classList.contains('gb-excluded') && !m.classList.contains('gb-in-context') && m.querySelector('.gb-mark-badge').textContent;"),
        )
        .await?;
        assert_eq!(excluded, json!("⊘ excluded: never sent"));

        // A phone's width: the bubbles reflow inside the panel, none overlaps another or sticks
        // out, and the panel does not scroll sideways.
        for width in [1024, 320] {
            client.set_window_size(width, 740).await?;
            let layout = wait_for(
                &client,
                "the bubbles to reflow",
                &format!("{ROOT} {BUBBLE_LAYOUT} return layout.width <= {width} && layout;"),
            )
            .await?;
            assert_eq!(layout["overlaps"], 0, "at {width} px: {layout}");
            assert_eq!(layout["outside"], 0, "at {width} px: {layout}");
            assert_eq!(layout["sideways"], false, "at {width} px: {layout}");
            assert!(layout["bubbles"].as_u64() >= Some(2), "at {width} px: {layout}");
        }
        Ok(())
    })
    .await
}

/// Measures the bubble cloud: how many bubbles, pairs overlapping, bubbles without size or outside
/// the cloud's box or the window, whether the panel or the page scrolls sideways, and the widget's
/// width (into `layout`).
const BUBBLE_LAYOUT: &str = "
    const cloud = r.querySelector('.gb-bubbles').getBoundingClientRect();
    const panel = r.querySelector('.gb-topics');
    const boxes = [...r.querySelectorAll('.gb-bubble-topic')].map(b => b.getBoundingClientRect());
    let overlaps = 0, outside = 0;
    boxes.forEach((a, i) => {
        if (a.width < 1 || a.height < 1 || a.left < cloud.left - 0.5 || a.right > cloud.right + 0.5
            || a.left < 0 || a.right > window.innerWidth) outside++;
        boxes.slice(i + 1).forEach(b => {
            if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) overlaps++;
        });
    });
    const width = document.querySelector('glassbox-chat').getBoundingClientRect().width;
    const layout = { bubbles: boxes.length, overlaps, outside, width,
        sideways: panel.scrollWidth > panel.clientWidth + 1 || document.documentElement.scrollWidth > window.innerWidth + 1 };
";

const BREAD: [(&str, &str); 3] = [
    (
        "My sourdough starter smells like nail polish remover. Is the starter dead?",
        "It is hungry, not dead: feed the sourdough starter twice a day with equal flour and water.",
    ),
    (
        "How warm should the sourdough dough be while it rises?",
        "Keep the sourdough dough around 25 degrees; bulk fermentation then takes four to six hours.",
    ),
    (
        "My sourdough loaf comes out flat and dense after baking.",
        "A flat sourdough loaf is usually over-proofed dough; bake it in a preheated Dutch oven.",
    ),
];

const SPACE: [(&str, &str); 3] = [
    (
        "How do black holes form from dying stars?",
        "A star of more than about twenty solar masses collapses at the end of its life into a black hole.",
    ),
    (
        "What happens at the event horizon of a black hole?",
        "At the event horizon the escape velocity reaches the speed of light, so not even light leaves.",
    ),
    (
        "Do black holes evaporate through Hawking radiation?",
        "Yes, slowly: a stellar black hole takes far longer than the age of the universe.",
    ),
];

/// The topics the element last heard, once an extraction read `messages` messages.
async fn topics_of(client: &Client, messages: usize) -> Result<Value> {
    wait_for(
        client,
        &format!("the extraction of {messages} messages"),
        &format!("return document.querySelector('glassbox-chat').getTopics().then(t => t.topics?.messageCount === {messages} && t);"),
    )
    .await
}

/// The selected bubble's label and count, the status line, and the chips of vanished selections.
const PANEL: &str = "const sel = [...r.querySelectorAll('.gb-bubble-topic[aria-pressed=true]')].map(b => [b.querySelector('.gb-bubble-label').textContent, +b.querySelector('.gb-bubble-count').textContent]); \
    const status = r.querySelector('.gb-topics-status').textContent; \
    const gone = [...r.querySelectorAll('.gb-orphan-topic .gb-bubble-label')].map(x => x.textContent); \
    const renamed = r.querySelector('.gb-topics-renamed')?.textContent ?? null;";

/// The walk of the issue on topics that hold still: the user picks a topic, the next replies
/// regenerate the topics (the second time under other labels), and the selection follows its
/// messages: the bubble stays selected under its new name, the change is said, the status line
/// counts the bubble's messages plus the standing instruction, and the next request holds the new
/// messages about the subject.
#[tokio::test]
async fn a_selected_topic_follows_its_messages_through_regenerations() -> Result<()> {
    let fake = FakeProvider::start(Behaviour::reply(&["ok"])).await?;
    let server = topics_server(&fake, &[("GLASSBOX_TOPICS_SETTLE_MS", "300")]).await?;
    let url = format!("http://{}/", server.addr);
    let fake = &fake;
    in_browser(url, "topics-follow", |client, url| async move {
        open_widget(&client, &url).await?;
        let exchanges: Vec<(&str, &str)> = BREAD
            .iter()
            .copied()
            .chain([("Be concise from now on, please.", "Understood.")])
            .chain(SPACE)
            .collect();
        let mut sticky = String::new();
        for (i, (q, a)) in exchanges.iter().enumerate() {
            fake.set(Behaviour::reply(&[a]));
            send(&client, q, i).await?;
            if i == 3 {
                let id = client
                    .execute(&format!("{ROOT} return [...r.querySelectorAll('.gb-message[data-role=user]')].pop().dataset.messageId;"), vec![])
                    .await?;
                sticky = id.as_str().unwrap_or_default().to_owned();
                // The topic model names the instruction, and splits the bread three ways at first.
                fake.set_structured(Some(topics_answer(
                    &[
                        ("Black holes", 6),
                        ("Sourdough starter smell", 2),
                        ("Dough temperature while rising", 2),
                        ("Flat dense loaf", 2),
                    ],
                    &[&sticky],
                )));
            }
        }
        let sticky = sticky.as_str();
        client
            .execute(&format!("{ROOT} r.querySelector('.gb-topics-toggle').click();"), vec![])
            .await?;
        topics_of(&client, 14).await?;
        wait_for(
            &client,
            "the dough bubble",
            &format!("{ROOT} return [...r.querySelectorAll('.gb-bubble-topic .gb-bubble-label')].some(x => x.textContent === 'Dough temperature while rising');"),
        )
        .await?;
        client
            .execute(
                &format!("{ROOT} [...r.querySelectorAll('.gb-bubble-topic')].find(b => b.querySelector('.gb-bubble-label').textContent === 'Dough temperature while rising').click();"),
                vec![],
            )
            .await?;
        // The bubble's two messages and the standing instruction: the status line counts what the
        // bubble shows.
        let panel = wait_for(
            &client,
            "the selection",
            &format!("{ROOT} {PANEL} return sel.length === 1 && /of 14 messages/.test(status) && {{sel, status}};"),
        )
        .await?;
        assert_eq!(panel["sel"], json!([["Dough temperature while rising", 2]]), "{panel}");
        agrees(&client, &panel, sticky, 14).await?;

        // The next reply regenerates the topics under other labels: the bread is one topic now.
        fake.set_structured(Some(topics_answer(&[("Black holes", 6), ("Sourdough bread", 6)], &[sticky])));
        let oven = "What oven temperature should I bake the sourdough loaf at?";
        fake.set(Behaviour::reply(&["Bake the sourdough loaf at 230 degrees with steam, then 210."]));
        send(&client, oven, exchanges.len()).await?;
        let sent = last_texts(fake);
        assert!(sent.iter().all(|t| !t.contains("black hole")), "{sent:?}");
        topics_of(&client, 16).await?;
        let panel = wait_for(
            &client,
            "the selection to follow its topic, and the rename said",
            &format!("{ROOT} {PANEL} return sel.length === 1 && sel[0][0] === 'Sourdough bread' && /of 16 messages/.test(status) && renamed && {{sel, status, gone, renamed}};"),
        )
        .await?;
        assert_eq!(panel["renamed"], "Dough temperature while rising → Sourdough bread", "{panel}");
        // The host heard the same.
        let heard = client
            .execute("return window.__filters.find(f => f.renamed?.length);", vec![])
            .await?;
        assert_eq!(heard["renamed"], json!([{"from": "Dough temperature while rising", "to": "Sourdough bread"}]), "{heard}");
        assert_eq!(heard["labels"], json!(["Sourdough bread"]), "{heard}");
        assert_eq!(panel["gone"], json!([]), "{panel}");
        let count = panel["sel"][0][1].as_u64().unwrap_or_default();
        assert!(count >= 6, "the bread messages, the oven exchange too: {panel}");
        agrees(&client, &panel, sticky, 16).await?;

        // The next request holds every bread message and the new one about the oven, and no
        // black hole; the same labels again keep the selection as it is.
        fake.set_structured(Some(topics_answer(&[("Black holes", 6), ("Sourdough bread", 8)], &[sticky])));
        fake.set(Behaviour::reply(&["Yes, with the lid on for the first twenty minutes."]));
        send(&client, "Should it bake in a Dutch oven with the lid on?", exchanges.len() + 1).await?;
        let sent = last_texts(fake);
        assert!(sent.iter().all(|t| !t.contains("black hole")), "{sent:?}");
        assert!(sent.iter().any(|t| t == oven), "the new message about the subject: {sent:?}");
        for (q, _) in BREAD {
            assert!(sent.iter().any(|t| t == q), "{q} missing from {sent:?}");
        }
        topics_of(&client, 18).await?;
        let panel = wait_for(
            &client,
            "the selection after the third regeneration",
            &format!("{ROOT} {PANEL} return sel.length === 1 && /of 18 messages/.test(status) && {{sel, status}};"),
        )
        .await?;
        assert_eq!(panel["sel"][0][0], "Sourdough bread", "{panel}");
        let count = panel["sel"][0][1].as_u64().unwrap_or_default();
        assert!(count >= 8, "{panel}");
        agrees(&client, &panel, sticky, 18).await?;

        // Black holes selected too; then the topics no longer have them: a greyed chip says the
        // selection is gone (it selects nothing) until the user clears it with a click.
        client
            .execute(
                &format!("{ROOT} [...r.querySelectorAll('.gb-bubble-topic')].find(b => b.querySelector('.gb-bubble-label').textContent === 'Black holes').click();"),
                vec![],
            )
            .await?;
        wait_for(
            &client,
            "two selected",
            &format!("{ROOT} {PANEL} return sel.length === 2;"),
        )
        .await?;
        fake.set_structured(Some(topics_answer(&[("Sourdough bread", 10), ("Kitchen timers", 1)], &[sticky])));
        fake.set(Behaviour::reply(&["About an hour, so the crumb sets."]));
        send(&client, "How long should the baked loaf cool before slicing?", exchanges.len() + 2).await?;
        topics_of(&client, 20).await?;
        let panel = wait_for(
            &client,
            "the vanished selection's chip",
            &format!("{ROOT} {PANEL} return gone.length === 1 && /of 20 messages/.test(status) && {{sel, status, gone}};"),
        )
        .await?;
        assert_eq!(panel["gone"], json!(["Black holes"]), "{panel}");
        assert_eq!(panel["sel"][0][0], "Sourdough bread", "{panel}");
        agrees(&client, &panel, sticky, 20).await?;
        client
            .execute(&format!("{ROOT} r.querySelector('.gb-orphan-topic').click();"), vec![])
            .await?;
        let panel = wait_for(
            &client,
            "the chip to be cleared",
            &format!("{ROOT} {PANEL} return gone.length === 0 && {{sel, status}};"),
        )
        .await?;
        assert_eq!(panel["sel"][0][0], "Sourdough bread", "the other selection stays: {panel}");
        Ok(())
    })
    .await
}

/// The selected bubble, the status line and the highlighted messages agree: every message the
/// bubble counts and the standing instruction are highlighted, the status line counts the
/// highlighted ones (the bubble's, plus messages similar enough to it) of `total`.
async fn agrees(client: &Client, panel: &Value, sticky: &str, total: usize) -> Result<()> {
    let label = panel["sel"][0][0].as_str().unwrap_or_default();
    let count = panel["sel"][0][1].as_u64().unwrap_or_default() as usize;
    let got = client
        .execute(
            &format!("{ROOT} const label = arguments[0]; return document.querySelector('glassbox-chat').getTopics().then(t => ({{ \
                members: t.topics.topics.find(x => x.label === label).messageIds, \
                shown: [...r.querySelectorAll('.gb-message.gb-in-context')].map(m => m.dataset.messageId), \
                status: r.querySelector('.gb-topics-status').textContent}}));"),
            vec![json!(label)],
        )
        .await?;
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect()
    };
    let (members, shown) = (ids(&got["members"]), ids(&got["shown"]));
    assert_eq!(members.len(), count, "the bubble counts its members: {got}");
    for m in members.iter().map(String::as_str).chain([sticky]) {
        assert!(shown.iter().any(|s| s == m), "{m} not highlighted: {got}");
    }
    assert_eq!(
        got["status"],
        format!("{} of {total} messages in context", shown.len()),
        "the status line counts the highlighted messages: {got}"
    );
    Ok(())
}

/// The texts (system prompt aside) of the last request the fake provider got for a reply.
fn last_texts(fake: &FakeProvider) -> Vec<String> {
    let body = fake
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.get("response_format").is_none())
        .map(|r| r.body)
        .unwrap_or_default();
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "system")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

/// The demo's walk with offline extraction (what `cargo xtask serve` runs without a key): three
/// messages about sourdough, three about black holes, one standing instruction; the user picks
/// the bread topic and asks two more questions about the loaf. After each regeneration the bread
/// bubble is still selected, the status line counts the highlighted messages (the bubble's
/// messages among them), the next request holds the new bread messages and no black hole, and no
/// label is a verb fragment.
#[tokio::test]
async fn the_demo_walk_keeps_its_filter_with_offline_topics() -> Result<()> {
    let fake = FakeProvider::start(Behaviour::reply(&["ok"])).await?;
    let server = topics_server(
        &fake,
        &[
            ("GLASSBOX_TOPIC_MODEL", "offline"),
            ("GLASSBOX_TOPICS_SETTLE_MS", "300"),
        ],
    )
    .await?;
    let url = format!("http://{}/", server.addr);
    let fake = &fake;
    in_browser(url, "topics-demo-walk", |client, url| async move {
        open_widget(&client, &url).await?;
        let walk: Vec<(&str, &str)> = BREAD
            .iter()
            .copied()
            .chain(SPACE)
            .chain([("Be concise from now on, please.", "Understood.")])
            .collect();
        for (i, (q, a)) in walk.iter().enumerate() {
            fake.set(Behaviour::reply(&[a]));
            send(&client, q, i).await?;
        }
        client
            .execute(&format!("{ROOT} r.querySelector('.gb-topics-toggle').click();"), vec![])
            .await?;
        let found = topics_of(&client, 14).await?;
        let labels: Vec<String> = found["topics"]["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["label"].as_str().map(str::to_owned))
            .collect();
        for verb_fragment in ["Bread comes", "Starter alive", "Holes form"] {
            assert!(!labels.iter().any(|l| l == verb_fragment), "{labels:?}");
        }
        let sticky = found["topics"]["stickyIds"][0].as_str().unwrap_or_default().to_owned();
        assert!(!sticky.is_empty(), "the instruction is found: {found}");
        let bread = found["topics"]["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["messageIds"].as_array().is_some_and(|m| m.len() >= 4)
                && t["label"].as_str().is_some_and(|l| !l.to_lowercase().contains("hole")))
            .and_then(|t| t["label"].as_str())
            .unwrap_or_else(|| panic!("no bread topic in {found}"))
            .to_owned();
        wait_for(
            &client,
            "the bread bubble",
            &format!("{ROOT} return [...r.querySelectorAll('.gb-bubble-topic .gb-bubble-label')].some(x => x.textContent === {bread:?});"),
        )
        .await?;
        eprintln!("offline topics of the walk: {labels:?}");
        client
            .execute(
                &format!("{ROOT} [...r.querySelectorAll('.gb-bubble-topic')].find(b => b.querySelector('.gb-bubble-label').textContent === arguments[0]).click();"),
                vec![json!(bread)],
            )
            .await?;
        let panel = wait_for(
            &client,
            "the selection",
            &format!("{ROOT} {PANEL} return sel.length === 1 && /of 14 messages/.test(status) && {{sel, status}};"),
        )
        .await?;
        agrees(&client, &panel, &sticky, 14).await?;

        let more = [
            "What oven temperature should I bake the sourdough loaf at?",
            "Should the sourdough loaf bake in a Dutch oven with the lid on?",
        ];
        for (k, q) in more.iter().enumerate() {
            fake.set(Behaviour::reply(&["Bake the sourdough loaf hot, around 230 degrees, with steam."]));
            send(&client, q, walk.len() + k).await?;
            let sent = last_texts(fake);
            assert!(sent.iter().all(|t| !t.contains("black hole")), "{sent:?}");
            assert!(sent.iter().any(|t| t.contains("Be concise")), "{sent:?}");
            for earlier in &more[..k] {
                assert!(sent.iter().any(|t| t == earlier), "the new {earlier:?} is sent: {sent:?}");
            }
            let total = 14 + 2 * (k + 1);
            topics_of(&client, total).await?;
            let panel = wait_for(
                &client,
                "the selection after the regeneration",
                &format!("{ROOT} {PANEL} return sel.length === 1 && RegExp('of {total} messages').test(status) && {{sel, status, gone}};"),
            )
            .await?;
            assert_eq!(panel["gone"], json!([]), "{panel}");
            // The group grew: it keeps its label (no churn from one reply to the next).
            assert_eq!(panel["sel"][0][0], json!(bread), "{panel}");
            agrees(&client, &panel, &sticky, total).await?;
            eprintln!("after {total} messages: {panel}");
        }
        // For a person to look at: the panel after the walk.
        if let Ok(png) = client.screenshot().await {
            let _ = std::fs::write(std::env::temp_dir().join("topics-demo-walk.png"), png);
        }
        Ok(())
    })
    .await
}
