//! Component tests in a browser: real components mounted into an element of the page, checked on
//! the DOM they render. They cover the components with logic of their own: the badges of how an
//! item came in (named from the wire enums), the session drawer's rows (one per override of
//! `SessionOverrides`) and the receipt's three item columns.
//!
//! `cargo xtask test` runs them in headless Chromium. By hand, from `app/` (where the runner reads
//! `webdriver.json`, Chromium's flags):
//!
//! ```text
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=~/.cache/glassbox/tools/bin/wasm-bindgen-test-runner \
//!     cargo test -p glassbox-app --target wasm32-unknown-unknown --tests
//! ```
//!
//! (Natively the file is empty: wasm-bindgen-test is a wasm32-only dev-dependency.)
#![cfg(target_arch = "wasm32")]

use glassbox_app::components::receipt_view::Items;
use glassbox_app::components::session_drawer::SessionDrawer;
use glassbox_app::receipt_rows::item_section;
use glassbox_app::words::Words;
use glassbox_app::{ChatClient, Theme, WidgetConfig};
use glassbox_core::context::agent_settings::{AgentSettings, SessionOverrides};
use glassbox_core::context::budget::TokenBreakdown;
use glassbox_core::context::footer::FooterLinks;
use glassbox_core::context::items::{
    AgentItem, IncludeMode, Included, ItemRef, SessionIncluded, SessionItem,
};
use glassbox_core::context::meter::ContextReport;
use glassbox_core::context::receipt::{ItemNote, Part, PartKind, Reason, Receipt};
use glassbox_core::context::score::Score;
use glassbox_core::wire::ItemsView;
use leptos::mount::mount_to;
use leptos::prelude::*;
use leptos::tachys::view::any_view::AnyViewState;
use strum::VariantArray;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{Element, HtmlElement};

wasm_bindgen_test_configure!(run_in_browser);

/// A view mounted into an element of its own; dropping it unmounts the view and removes the element.
struct Mounted {
    root: HtmlElement,
    _view: leptos::mount::UnmountHandle<AnyViewState>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.root.remove();
    }
}

/// Mounts what `view` returns into a fresh `<div>` of the page's body.
fn mount(view: impl FnOnce() -> AnyView + 'static) -> Mounted {
    let document = web_sys::window().unwrap().document().unwrap();
    let root: HtmlElement = document.create_element("div").unwrap().unchecked_into();
    document.body().unwrap().append_child(&root).unwrap();
    // The panels' components are mounted directly here, not through a lazy panel that would
    // fetch their English first.
    let view = mount_to(root.clone(), move || {
        provide_context(glassbox_app::words::Words::english_in_full());
        view()
    });
    Mounted { root, _view: view }
}

/// Lets the tasks queued so far run (Leptos's effects).
async fn tick() {
    let resolved = js_sys::Promise::resolve(&wasm_bindgen::JsValue::UNDEFINED);
    wasm_bindgen_futures::JsFuture::from(resolved)
        .await
        .unwrap();
}

/// Every element under `scope` that `selector` matches, in document order.
fn all(scope: &Element, selector: &str) -> Vec<Element> {
    let list = scope.query_selector_all(selector).unwrap();
    (0..list.length())
        .filter_map(|i| list.item(i))
        .map(|n| n.unchecked_into())
        .collect()
}

/// The one element under `scope` that `selector` matches.
fn one(scope: &Element, selector: &str) -> Element {
    let found = all(scope, selector);
    assert_eq!(found.len(), 1, "{selector}: {} matches", found.len());
    found.into_iter().next().unwrap()
}

fn text(e: &Element) -> String {
    e.text_content().unwrap_or_default().trim().to_owned()
}

/// A value's name on the wire (a unit enum variant serializes as its name).
fn wire_name(value: impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .unwrap()
        .as_str()
        .expect("a unit variant")
        .to_owned()
}

/// Checks `badge` is the badge of the include `wire`: its class names it, its text starts with it.
fn assert_badge(badge: &Element, wire: &str) {
    let class = format!("gb-item-badge-{wire}");
    assert!(
        badge.class_list().contains("gb-item-badge") && badge.class_list().contains(&class),
        "badge of {wire}: class {:?}",
        badge.class_name()
    );
    assert!(
        text(badge).to_lowercase().starts_with(wire),
        "badge of {wire}: text {:?}",
        text(badge)
    );
}

/// A receipt whose request carried `parts` and nothing was left out.
fn receipt(parts: Vec<Part>) -> Receipt {
    Receipt {
        totals: ContextReport {
            counted_input_tokens: parts.iter().map(|p| p.tokens).sum(),
            breakdown: TokenBreakdown::default(),
            encoding: "o200k_base".into(),
            exact: true,
            compression: None,
        },
        parts,
        left_out: Vec::new(),
        context_limit: 128_000,
        output_reserve: 4_000,
        overflow: None,
        filter: None,
        item_search: None,
    }
}

/// The part of an item the request carried.
fn item(item: ItemRef, include: Included, score: Option<f32>, priority: i32, tokens: u32) -> Part {
    Part {
        kind: PartKind::Item(ItemNote {
            item,
            include,
            score: score.map(Score::of),
            priority,
            description: String::new(),
        }),
        reason: include.into(),
        tokens,
    }
}

/// Mounts the receipt's item section of `receipt`.
fn mount_items(receipt: &Receipt) -> Mounted {
    let section = item_section(Words::english_in_full(), receipt).expect("the receipt has items");
    mount(move || view! { <Items section=section /> }.into_any())
}

/// A client that never connects, showing `items` as if the server had sent them.
fn mount_drawer(items: ItemsView) -> Mounted {
    mount(move || {
        let config = WidgetConfig {
            server: "http://127.0.0.1:9".into(),
            session: "component-test".into(),
            agent: None,
            model: None,
            theme: Theme::Auto,
            assets: "/".into(),
            vocab_url: None,
            footer_links: FooterLinks::default(),
            capture: None,
            show_context_values: false,
            user: None,
            greeting: Default::default(),
        };
        let host = web_sys::window()
            .unwrap()
            .document()
            .unwrap()
            .body()
            .unwrap();
        let client = ChatClient::new(config, host.unchecked_into());
        client.transcript.update(|t| t.items = Some(items));
        view! { <SessionDrawer client=client /> }.into_any()
    })
}

/// The agent's `name`d rule, included as `include`.
fn agent_rule(name: &str, priority: i32, include: IncludeMode) -> AgentItem {
    AgentItem {
        item: ItemRef::rule(name),
        description: String::new(),
        priority,
        include,
        tokens: None,
    }
}

#[wasm_bindgen_test]
fn receipt_badges_name_how_each_item_came_in_as_on_the_wire() {
    // One rule per way in, named for it, in the order of the enum.
    let parts = Included::VARIANTS
        .iter()
        .enumerate()
        .map(|(i, &include)| {
            let score = matches!(include, Included::Agent | Included::Expansion).then_some(0.8);
            item(
                ItemRef::rule(wire_name(include)),
                include,
                score,
                i as i32,
                10,
            )
        })
        .collect();
    let mounted = mount_items(&receipt(parts));
    let rules = all(&mounted.root, "[data-column=rules] li.gb-item");
    assert_eq!(rules.len(), Included::VARIANTS.len());
    for (li, &include) in rules.iter().zip(Included::VARIANTS) {
        let wire = wire_name(include);
        assert!(text(&one(li, ".gb-item-label")).ends_with(&wire));
        assert_eq!(li.get_attribute("data-include").as_deref(), Some(&*wire));
        assert_badge(&one(li, ".gb-item-badge"), &wire);
    }
}

#[wasm_bindgen_test]
fn drawer_badges_name_how_each_session_item_came_in_as_on_the_wire() {
    // One rule per way into a session, named for it, and one the session does not carry.
    let carried: Vec<(String, SessionIncluded)> = SessionIncluded::VARIANTS
        .iter()
        .map(|&i| (wire_name(i), i))
        .collect();
    let mut available: Vec<AgentItem> = carried
        .iter()
        .enumerate()
        .map(|(n, (name, _))| agent_rule(name, n as i32, IncludeMode::Manual))
        .collect();
    available.push(agent_rule("not-carried", 99, IncludeMode::Agent));
    let session = carried
        .iter()
        .map(|(name, included)| SessionItem {
            item: ItemRef::rule(name.clone()),
            included: *included,
        })
        .collect();
    let mounted = mount_drawer(ItemsView {
        agent: Some("demo".into()),
        available,
        session,
        defaults: AgentSettings::default(),
        overrides: SessionOverrides::default(),
    });
    for (name, _) in &carried {
        let li = one(&mounted.root, &format!(".gb-drawer-item[data-name={name}]"));
        assert_badge(&one(&li, ".gb-item-badge"), name);
        assert!(
            one(&li, "input[type=checkbox]")
                .unchecked_into::<web_sys::HtmlInputElement>()
                .checked()
        );
    }
    let other = one(&mounted.root, ".gb-drawer-item[data-name=not-carried]");
    assert!(all(&other, ".gb-item-badge").is_empty());
}

#[wasm_bindgen_test]
async fn drawer_has_one_row_per_override() {
    let mounted = mount_drawer(ItemsView {
        agent: Some("demo".into()),
        available: vec![agent_rule("style", 1, IncludeMode::Always)],
        session: Vec::new(),
        defaults: AgentSettings::default(),
        overrides: SessionOverrides {
            context_top_n: Some(2),
            ..SessionOverrides::default()
        },
    });
    let rows = all(&mounted.root, ".gb-drawer-settings .gb-drawer-setting");
    let mut shown: Vec<String> = rows
        .iter()
        .map(|r| r.get_attribute("data-key").unwrap_or_default())
        .collect();
    let mut keys: Vec<String> = SessionOverrides::keys()
        .iter()
        .map(|k| k.to_string())
        .collect();
    shown.sort();
    keys.sort();
    assert_eq!(
        shown, keys,
        "the drawer's rows against SessionOverrides' keys"
    );
    for row in &rows {
        let key = row.get_attribute("data-key").unwrap();
        // Its control sends that key, and the agent's default is beside it.
        one(row, &format!("[name={key}]"));
        assert!(text(&one(row, ".gb-drawer-default")).starts_with("default: "));
    }
    // The override shows in its row (the other rows are empty: the default).
    tick().await;
    let top_n = one(&mounted.root, "input[name=contextTopN]");
    assert_eq!(
        top_n.unchecked_into::<web_sys::HtmlInputElement>().value(),
        "2"
    );
}

#[wasm_bindgen_test]
fn receipt_lists_rules_references_and_tools_in_their_columns() {
    let system = Part {
        kind: PartKind::SystemPrompt,
        reason: Reason::Always,
        tokens: 300,
    };
    let mut auth = item(ItemRef::rule("auth"), Included::Agent, Some(0.8712), 3, 25);
    if let PartKind::Item(note) = &mut auth.kind {
        note.description = "How we sign in".into();
    }
    // Out of order: the columns sort rules and references by priority, tools by server.
    let mounted = mount_items(&receipt(vec![
        system,
        item(ItemRef::tool("fs", "read"), Included::Always, None, 0, 10),
        auth,
        item(ItemRef::reference("api"), Included::Manual, None, 2, 1234),
        item(ItemRef::rule("style"), Included::Always, None, 1, 40),
        item(
            ItemRef::tool("db", "query"),
            Included::Expansion,
            Some(0.5),
            0,
            7,
        ),
    ]));
    let columns = all(&mounted.root, ".gb-item-columns > .gb-item-column");
    let headings: Vec<(String, String)> = columns
        .iter()
        .map(|c| {
            let key = c.get_attribute("data-column").unwrap_or_default();
            (key, text(&one(c, ".gb-item-heading")))
        })
        .collect();
    assert_eq!(
        headings,
        [
            ("rules".into(), "Rules".into()),
            ("references".into(), "References".into()),
            ("tools".into(), "Tools".into()),
        ]
    );
    // Each item as label, badge, tokens, description.
    let cells = |column: &Element| -> Vec<(String, String, String, String)> {
        all(column, "li.gb-item")
            .iter()
            .map(|li| {
                let description = all(li, ".gb-item-description")
                    .first()
                    .map(text)
                    .unwrap_or_default();
                (
                    text(&one(li, ".gb-item-label")),
                    text(&one(li, ".gb-item-badge")),
                    text(&one(li, ".gb-item-tokens")),
                    description,
                )
            })
            .collect()
    };
    let row = |a: &str, b: &str, c: &str, d: &str| (a.into(), b.into(), c.into(), d.into());
    assert_eq!(
        cells(&columns[0]),
        [
            row("001 • style", "Always", "40 tokens", ""),
            row("003 • auth", "Agent 0.87", "25 tokens", "How we sign in"),
        ]
    );
    assert_eq!(
        cells(&columns[1]),
        [row("002 • api", "Manual", "1,234 tokens", "")]
    );
    assert_eq!(
        cells(&columns[2]),
        [
            row("db.query", "Expansion 0.50", "7 tokens", ""),
            row("fs.read", "Always", "10 tokens", ""),
        ]
    );
    drop(mounted);

    // A column without items says so.
    let mounted = mount_items(&receipt(vec![item(
        ItemRef::reference("api"),
        Included::Manual,
        None,
        2,
        5,
    )]));
    let none: Vec<String> = all(&mounted.root, ".gb-item-column")
        .iter()
        .map(|c| {
            all(c, ".gb-item-none")
                .first()
                .map(text)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(none, ["None", "", "None"]);
}
