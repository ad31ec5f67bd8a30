//! The session drawer: the agent's rules and references, each checked when this conversation
//! carries it (unchecking removes it; checking adds it as `manual`), and the session's settings,
//! each override beside the agent's default. Changes go to the server, which stores them and
//! tells every open tab (`items`); the preview under the composer then shows what they cost.

use glassbox_core::ErrorCode;
use glassbox_core::context::agent_settings::SessionOverrides;
use glassbox_core::context::items::{AgentItem, ItemKind, SessionIncluded, SessionItem};
use leptos::prelude::*;
use serde_json::{Map, Value};

use super::badge::Badge;
use super::user_sessions::UserSessions;
use crate::chunks::lazy_panel_fn;
use crate::client::ChatClient;
use crate::words::{Word, Words, words};

/// How a setting is edited.
#[derive(Clone, Copy)]
enum Field {
    /// A whole number from `min`.
    Count { min: u32 },
    /// A decimal in `min..=max`, in steps of `step`.
    Decimal { min: f32, max: f32, step: f32 },
    /// One of these words (its wire value, and the word shown for it).
    Choice(&'static [(&'static str, Word)]),
}

/// Every setting of `SessionOverrides`: its wire key, its label, how it is edited, and what its
/// default means when the agent sets none (`None`: nothing said). (The component tests,
/// app/tests/components.rs, check the drawer shows one row per key of `SessionOverrides::keys()`.)
const SETTINGS: &[(&str, Word, Field, Option<Word>)] = &[
    (
        "temperature",
        Word::SettingTemperature,
        Field::Decimal {
            min: 0.0,
            max: 2.0,
            step: 0.1,
        },
        Some(Word::DefaultProviders),
    ),
    (
        "topP",
        Word::SettingTopP,
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        Some(Word::DefaultProviders),
    ),
    (
        "maxOutputTokens",
        Word::SettingMaxOutputTokens,
        Field::Count { min: 1 },
        Some(Word::DefaultServers),
    ),
    (
        "maxChatTurns",
        Word::SettingMaxChatTurns,
        Field::Count { min: 1 },
        None,
    ),
    (
        "toolPermission",
        Word::SettingToolPermission,
        Field::Choice(&[
            ("ask", Word::ToolPermissionAsk),
            ("allow", Word::ToolPermissionAllow),
            ("deny", Word::ToolPermissionDeny),
        ]),
        None,
    ),
    (
        "toolBudget",
        Word::SettingToolBudget,
        Field::Count { min: 0 },
        Some(Word::DefaultNone),
    ),
    (
        "contextTopK",
        Word::SettingContextTopK,
        Field::Count { min: 1 },
        None,
    ),
    (
        "contextTopN",
        Word::SettingContextTopN,
        Field::Count { min: 1 },
        None,
    ),
    (
        "contextIncludeScore",
        Word::SettingContextIncludeScore,
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        None,
    ),
    (
        "contextMinScore",
        Word::SettingContextMinScore,
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        None,
    ),
    (
        "contextExpansionDepth",
        Word::SettingContextExpansionDepth,
        Field::Count { min: 0 },
        None,
    ),
    (
        "contextExpansionThreshold",
        Word::SettingContextExpansionThreshold,
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        None,
    ),
    (
        "contextExpansionTopN",
        Word::SettingContextExpansionTopN,
        Field::Count { min: 1 },
        None,
    ),
];

lazy_panel_fn! {
    /// The drawer of the conversation's rules, references and settings.
    session_drawer / preload_session_drawer (client: ChatClient) => view! { <SessionDrawer client=client /> }
}

/// The drawer (shown while open): a verified user's conversations first, then this one's items
/// and settings. It is built once per agent: the server's `items` pushes update the checkboxes
/// and inputs in place, so focus and typing survive another tab's change.
#[component]
pub fn SessionDrawer(client: ChatClient) -> impl IntoView {
    let items = client.items;
    let agent = Memo::new(move |_| items.with(|v| v.as_ref().map(|v| v.agent.clone())));
    let w = words();
    view! {
        <section class="gb-drawer" part="drawer" aria-label=w.text(Word::DrawerLabel)>
            {client.has_user().then(|| view! { <UserSessions client=client /> })}
            {move || match agent.get() {
                None => view! { <p class="gb-drawer-empty">{w.text(Word::DrawerWaiting)}</p> }.into_any(),
                Some(None) => view! {
                    <p class="gb-drawer-empty">{w.text(Word::DrawerNoAgent)}</p>
                }
                    .into_any(),
                Some(Some(name)) => view! { <DrawerBody client=client agent=name /> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn DrawerBody(client: ChatClient, agent: String) -> impl IntoView {
    let items = client.items;
    let available = Memo::new(move |_| {
        items.with(|v| v.as_ref().map(|v| v.available.clone()).unwrap_or_default())
    });
    let session = Memo::new(move |_| {
        items.with(|v| v.as_ref().map(|v| v.session.clone()).unwrap_or_default())
    });
    let w = words();
    let heading = move || {
        let total = available.with(Vec::len).to_string();
        let carried = session.with(Vec::len).to_string();
        w.fill(
            Word::DrawerHeading,
            &[("agent", &agent), ("carried", &carried), ("total", &total)],
        )
    };
    view! {
        <h3 class="gb-drawer-heading">{heading}</h3>
        <p class="gb-drawer-hint">{w.text(Word::DrawerHint)}</p>
        <ServerCosts available=available session=session />
        <ul class="gb-drawer-items" aria-label=w.text(Word::DrawerItemsLabel)>
            <For each=move || available.get() key=|a| (a.item.clone(), a.priority, a.include, a.description.clone()) let:item>
                <DrawerItem client=client item=item session=session />
            </For>
        </ul>
        <SettingsForm client=client />
    }
}

/// What each MCP server's tools cost: all of them, and those this conversation carries, so a user
/// sees what a server costs before switching its tools on.
#[component]
fn ServerCosts(available: Memo<Vec<AgentItem>>, session: Memo<Vec<SessionItem>>) -> impl IntoView {
    let servers = move || {
        let mut servers: Vec<(String, u32, u32, u32, u32)> = Vec::new();
        available.with(|all| {
            session.with(|carried| {
                for a in all {
                    let ItemKind::Tool { server } = &a.item.kind else {
                        continue;
                    };
                    let tokens = a.tokens.unwrap_or(0);
                    let on = carried.iter().any(|s| s.item == a.item);
                    let at = match servers.iter().position(|s| &s.0 == server) {
                        Some(at) => at,
                        None => {
                            servers.push((server.clone(), 0, 0, 0, 0));
                            servers.len() - 1
                        }
                    };
                    let s = &mut servers[at];
                    s.1 += 1;
                    s.2 += tokens;
                    if on {
                        s.3 += 1;
                        s.4 += tokens;
                    }
                }
            })
        });
        servers
    };
    let w = words();
    view! {
        <Show when=move || !servers().is_empty()>
            <ul class="gb-drawer-servers" aria-label=w.text(Word::DrawerServersLabel)>
                {move || servers().into_iter().map(|(server, n, all, on_n, on)| {
                    let cost = w.fill(
                        Word::DrawerServerCost,
                        &[
                            ("server", &server),
                            ("tools", &n.to_string()),
                            ("tokens", &all.to_string()),
                            ("carried", &on_n.to_string()),
                            ("carried_tokens", &on.to_string()),
                        ],
                    );
                    view! { <li class="gb-drawer-server" data-server=server.clone()>{cost}</li> }
                }).collect_view()}
            </ul>
        </Show>
    }
}

/// One of the agent's items: a checkbox for "in this conversation", its priority, name and type,
/// its mode, how it came in when it did, and its description. The checkbox shows the server's
/// state: a click asks for the change, and the server's answer checks or unchecks it.
#[component]
fn DrawerItem(
    client: ChatClient,
    item: AgentItem,
    session: Memo<Vec<SessionItem>>,
) -> impl IntoView {
    let w = words();
    // The type as on the wire (`data-kind`), and in words.
    let (kind, kind_word) = match item.item.kind {
        ItemKind::Rule => ("rule", Word::KindRule),
        ItemKind::Reference => ("reference", Word::KindReference),
        ItemKind::Tool { .. } => ("tool", Word::KindTool),
    };
    let label = match &item.item.kind {
        ItemKind::Tool { server } => w.fill_text(
            Word::DrawerToolLabel,
            vec![
                ("server", server.clone()),
                ("name", item.item.name.clone()),
                ("tokens", item.tokens.unwrap_or(0).to_string()),
            ],
        ),
        _ => Signal::stored(format!("{:03} • {}", item.priority, item.item.name)),
    };
    // The mode's name is its wire value (`always`, `manual`, `agent`), as the hint says it.
    let mode = w.fill_text(Word::DrawerMode, vec![("mode", item.include.to_string())]);
    let target = item.item.clone();
    let included = Memo::new(move |_| {
        session.with(|s| s.iter().find(|x| x.item == target).map(|x| x.included))
    });
    let target = item.item.clone();
    let on_change = move |ev: leptos::ev::Event| {
        if event_target_checked(&ev) {
            client.add_item(target.clone());
        } else {
            client.remove_item(target.clone());
        }
        // Back to the server's state until it answers (a refusal leaves it so).
        if let Some(input) = ev
            .target()
            .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(t).ok())
        {
            input.set_checked(included.get_untracked().is_some());
        }
    };
    view! {
        <li class="gb-drawer-item" data-name=item.item.name.clone() data-kind=kind>
            <label class="gb-drawer-item-line">
                <input type="checkbox" name="item" prop:checked=move || included.get().is_some() on:change=on_change />
                <span class="gb-item-label">{label}</span>
                <span class="gb-item-type">{w.text(kind_word)}</span>
            </label>
            <div class="gb-item-meta">
                <span class="gb-drawer-mode">{mode}</span>
                {move || included.get().map(|i| {
                    let (badge, word) = match i {
                        SessionIncluded::Always => ("Always", Word::BadgeAlways),
                        SessionIncluded::Manual => ("Manual", Word::BadgeManual),
                    };
                    view! { <Badge badge=badge text=w.get(word) /> }
                })}
            </div>
            {(!item.description.is_empty())
                .then(|| view! { <div class="gb-item-description">{item.description.clone()}</div> })}
        </li>
    }
}

/// The session's settings: an input per setting holding the override (empty: the default, shown
/// beside it). An edit is checked here as the server checks it (`check_overrides`), then all the
/// overrides are sent; the inputs follow the server's answer, and go back to its values when it
/// refuses.
#[component]
fn SettingsForm(client: ChatClient) -> impl IntoView {
    let items = client.items;
    let problem = RwSignal::new(None::<String>);
    let w = words();
    let defaults = Memo::new(move |_| items.with(|v| v.as_ref().map(|v| v.defaults.clone())));
    let stored = Memo::new(move |_| {
        items.with(|v| v.as_ref().map(|v| object(&v.overrides)).unwrap_or_default())
    });
    // The overrides as edited here: the server's, with the edits it has not answered yet.
    let local = RwSignal::new(stored.get_untracked());
    Effect::new(move |_| local.set(stored.get()));
    // A refusal of a command (the server's limits, a rate limit) answers no `items`: show its values.
    let refused = Memo::new(move |_| {
        client.transcript.with(|t| {
            t.notice.as_ref().is_some_and(|n| {
                matches!(
                    n.code,
                    ErrorCode::InvalidSettings | ErrorCode::RateLimited | ErrorCode::NotFound
                )
            })
        })
    });
    Effect::new(move |_| {
        if refused.get() {
            local.set(stored.get_untracked());
        }
    });
    let apply = move |key: &'static str, raw: Option<String>| {
        let Some(raw) = raw else {
            problem.set(Some(w.fill(Word::SettingNotANumber, &[("key", key)])));
            return;
        };
        let mut next = local.get_untracked();
        let raw = raw.trim();
        if raw.is_empty() {
            next.remove(key);
        } else {
            match parse(key, raw) {
                Ok(v) => {
                    next.insert(key.to_owned(), v);
                }
                Err((word, quoted)) => {
                    return problem.set(Some(w.fill(word, &[("key", key), ("typed", &quoted)])));
                }
            }
        }
        let checked = serde_json::from_value::<SessionOverrides>(Value::Object(next.clone()))
            .map_err(|e| e.to_string())
            .and_then(|o| {
                defaults
                    .with_untracked(|d| d.as_ref().map(|d| d.check_overrides(&o)))
                    .unwrap_or(Ok(()))
                    .map(|()| o)
                    .map_err(|e| format!("{}: {}", e.key, e.why))
            });
        match checked {
            Ok(o) => {
                problem.set(None);
                local.set(next);
                client.set_overrides(o);
            }
            Err(e) => problem.set(Some(e)),
        }
    };
    let has_overrides = move || local.with(|l| !l.is_empty());
    view! {
        <fieldset class="gb-drawer-settings">
            <legend>{w.text(Word::DrawerSettingsLegend)}</legend>
            {SETTINGS
                .iter()
                .map(|&(key, label, field, unset)| {
                    let default = move || {
                        defaults
                            .with(|d| d.as_ref().and_then(|d| object(d).get(key).map(|v| said(w, field, v))))
                            .unwrap_or_else(|| unset.map(|u| w.get(u)).unwrap_or_default())
                    };
                    let value = move || local.with(|l| l.get(key).map(shown)).unwrap_or_default();
                    let input = match field {
                        Field::Choice(choices) => view! {
                            <select name=key prop:value=value on:change=move |ev| apply(key, Some(event_target_value(&ev)))>
                                <option value="">{w.text(Word::DrawerDefaultOption)}</option>
                                {choices
                                    .iter()
                                    .map(|&(value, word)| view! { <option value=value>{w.text(word)}</option> })
                                    .collect_view()}
                            </select>
                        }
                            .into_any(),
                        Field::Count { min } => view! {
                            <input type="number" name=key min=min.to_string() step="1" placeholder=default
                                prop:value=value on:change=move |ev| apply(key, typed(&ev)) />
                        }
                            .into_any(),
                        Field::Decimal { min, max, step } => view! {
                            <input type="number" name=key min=min.to_string() max=max.to_string() step=step.to_string()
                                placeholder=default prop:value=value on:change=move |ev| apply(key, typed(&ev)) />
                        }
                            .into_any(),
                    };
                    view! {
                        <label class="gb-drawer-setting" data-key=key>
                            <span class="gb-drawer-setting-label">{w.text(label)}</span>
                            {input}
                            <span class="gb-drawer-default">
                                {move || w.fill(Word::DrawerDefaultIs, &[("value", &default())])}
                            </span>
                        </label>
                    }
                })
                .collect_view()}
            <Show when=move || problem.with(Option::is_some)>
                <p class="gb-settings-error" role="alert">{move || problem.get()}</p>
            </Show>
            <Show when=has_overrides>
                <button class="gb-link-button gb-drawer-reset" type="button"
                    on:click=move |_| {
                        problem.set(None);
                        local.set(Map::new());
                        client.set_overrides(SessionOverrides::default());
                    }>
                    {w.text(Word::DrawerReset)}
                </button>
            </Show>
        </fieldset>
    }
}

/// A number input's text, or `None` when what was typed is not a number (the browser then reports
/// an empty value, which must not clear the setting).
fn typed(ev: &leptos::ev::Event) -> Option<String> {
    let input = ev
        .target()
        .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(t).ok())?;
    (!input.validity().bad_input()).then(|| input.value())
}

/// `value`'s fields as a JSON object (camelCase keys; unset ones absent).
fn object<T: serde::Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// A setting's value as typed: a word for the choice, a number otherwise. A refusal is the
/// words that say it, with what was typed (quoted) for their `{typed}` slot (`{key}`: the key).
fn parse(key: &str, raw: &str) -> Result<Value, (Word, String)> {
    match SETTINGS.iter().find(|s| s.0 == key).map(|s| s.2) {
        Some(Field::Choice(choices)) if choices.iter().any(|(value, _)| *value == raw) => {
            Ok(Value::String(raw.to_owned()))
        }
        Some(Field::Count { .. }) => raw
            .parse::<u32>()
            .map(Value::from)
            .map_err(|_| (Word::SettingWantsWholeNumber, format!("{raw:?}"))),
        // serde_json's number reading, already in the module: `str::parse::<f64>` would add its
        // own (12 kB compressed).
        Some(Field::Decimal { .. }) => serde_json::from_str::<f64>(raw.trim())
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| (Word::SettingWantsNumber, format!("{raw:?}"))),
        _ => Err((Word::SettingNotAChoice, format!("{raw:?}"))),
    }
}

/// A default as the drawer says it: a choice's word, else the value as [`shown`].
fn said(w: Words, field: Field, v: &Value) -> String {
    let word = match (field, v) {
        (Field::Choice(choices), Value::String(s)) => choices
            .iter()
            .find(|(value, _)| *value == s.as_str())
            .map(|&(_, word)| word),
        _ => None,
    };
    word.map_or_else(|| shown(v), |word| w.get(word))
}

/// A JSON value as a setting shows it (a number without a trailing `.0`, a word unquoted).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            // f32 settings come back as their nearest f64: at most 6 decimals read back.
            Some(f) if n.is_f64() => glassbox_core::number::short(f),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_parsed_by_their_kind_and_shown_as_typed() {
        assert_eq!(parse("contextTopN", "3"), Ok(Value::from(3)));
        assert!(parse("contextTopN", "2.5").is_err());
        assert!(parse("toolPermission", "sometimes").is_err());
        assert_eq!(
            shown(
                &object(&SessionOverrides {
                    temperature: Some(0.4),
                    ..Default::default()
                })["temperature"]
            ),
            "0.4"
        );
        assert_eq!(shown(&Value::from(12)), "12");
    }
}
