//! The session drawer: the agent's rules and references, each checked when this conversation
//! carries it (unchecking removes it; checking adds it as `manual`), and the session's settings,
//! each override beside the agent's default. Changes go to the server, which stores them and
//! tells every open tab (`items`); the preview under the composer then shows what they cost.

use glassbox_core::context::agent_settings::{AgentSettings, SessionOverrides};
use glassbox_core::context::items::{AgentItem, ItemKind, SessionIncluded, SessionItem};
use glassbox_core::wire::ItemsView;
use leptos::prelude::*;
use serde_json::{Map, Value};

use super::context_view::Badge;
use crate::client::ChatClient;

/// How a setting is edited.
#[derive(Clone, Copy)]
enum Field {
    /// A whole number from `min`.
    Count { min: u32 },
    /// A decimal in `min..=max`, in steps of `step`.
    Decimal { min: f32, max: f32, step: f32 },
    /// One of these words.
    Choice(&'static [&'static str]),
}

/// Every setting of `SessionOverrides`: its wire key, its label, how it is edited, and what its
/// default means when the agent sets none.
const SETTINGS: &[(&str, &str, Field, &str)] = &[
    (
        "temperature",
        "Temperature",
        Field::Decimal {
            min: 0.0,
            max: 2.0,
            step: 0.1,
        },
        "the provider's",
    ),
    (
        "topP",
        "Top p",
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        "the provider's",
    ),
    (
        "maxOutputTokens",
        "Longest reply (tokens)",
        Field::Count { min: 1 },
        "the server's",
    ),
    (
        "maxChatTurns",
        "Tool rounds per reply",
        Field::Count { min: 1 },
        "",
    ),
    (
        "toolPermission",
        "Tools",
        Field::Choice(&["ask", "allow", "deny"]),
        "",
    ),
    (
        "contextTopK",
        "Search: chunk matches (top K)",
        Field::Count { min: 1 },
        "",
    ),
    (
        "contextTopN",
        "Search: items chosen (top N)",
        Field::Count { min: 1 },
        "",
    ),
    (
        "contextIncludeScore",
        "Search: always chosen from score",
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        "",
    ),
    (
        "contextMinScore",
        "Search: never chosen below score",
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        "",
    ),
    (
        "contextExpansionDepth",
        "Expansion passes (0: off)",
        Field::Count { min: 0 },
        "",
    ),
    (
        "contextExpansionThreshold",
        "Expansion: score to join",
        Field::Decimal {
            min: 0.0,
            max: 1.0,
            step: 0.05,
        },
        "",
    ),
    (
        "contextExpansionTopN",
        "Expansion: items per pass",
        Field::Count { min: 1 },
        "",
    ),
];

/// The drawer (shown while open).
#[component]
pub fn SessionDrawer(client: ChatClient) -> impl IntoView {
    let view = Memo::new(move |_| client.transcript.with(|t| t.items.clone()));
    view! {
        <section class="gb-drawer" aria-label="This conversation's rules, references and settings">
            {move || match view.get() {
                None => view! { <p class="gb-drawer-empty">"Waiting for the server…"</p> }.into_any(),
                Some(v) if v.agent.is_none() => view! {
                    <p class="gb-drawer-empty">"This server configures no agent: there are no rules or references to choose."</p>
                }
                    .into_any(),
                Some(v) => view! { <DrawerBody client=client view=v /> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn DrawerBody(client: ChatClient, view: ItemsView) -> impl IntoView {
    let ItemsView {
        agent,
        available,
        session,
        defaults,
        overrides,
    } = view;
    let agent = agent.unwrap_or_default();
    let in_session = |a: &AgentItem| -> Option<SessionIncluded> {
        session
            .iter()
            .find(|s: &&SessionItem| s.item == a.item)
            .map(|s| s.included)
    };
    let rows: Vec<(AgentItem, Option<SessionIncluded>)> = available
        .iter()
        .map(|a| (a.clone(), in_session(a)))
        .collect();
    let carried = rows.iter().filter(|(_, s)| s.is_some()).count();
    view! {
        <h3 class="gb-drawer-heading">{format!("Agent “{agent}”: {carried} of {} items in this conversation", rows.len())}</h3>
        <p class="gb-drawer-hint">
            "Checked items go with every message. The others are chosen per message by semantic search when their mode is agent."
        </p>
        <ul class="gb-drawer-items" aria-label="Rules and references">
            {rows.into_iter().map(|(item, included)| view! { <DrawerItem client=client item=item included=included /> }).collect_view()}
        </ul>
        <SettingsForm client=client defaults=defaults overrides=overrides />
    }
}

/// One of the agent's items: a checkbox for "in this conversation", its priority, name and type,
/// its mode, how it came in when it did, and its description.
#[component]
fn DrawerItem(
    client: ChatClient,
    item: AgentItem,
    included: Option<SessionIncluded>,
) -> impl IntoView {
    let kind = match item.item.kind {
        ItemKind::Rule => "Rule",
        ItemKind::Reference => "Reference",
        ItemKind::Tool { .. } => "Tool",
    };
    let label = format!("{:03} • {}", item.priority, item.item.name);
    let mode = format!("mode: {}", item.include);
    let target = item.item.clone();
    let on_change = move |ev| {
        if event_target_checked(&ev) {
            client.add_item(target.clone());
        } else {
            client.remove_item(target.clone());
        }
    };
    view! {
        <li class="gb-drawer-item" data-name=item.item.name.clone() data-kind=kind.to_ascii_lowercase()>
            <label class="gb-drawer-item-line">
                <input type="checkbox" name="item" prop:checked=included.is_some() on:change=on_change />
                <span class="gb-item-label">{label}</span>
                <span class="gb-item-type">{kind}</span>
            </label>
            <div class="gb-item-meta">
                <span class="gb-drawer-mode">{mode}</span>
                {included.map(|i| {
                    let badge = match i {
                        SessionIncluded::Always => "Always",
                        SessionIncluded::Manual => "Manual",
                    };
                    view! { <Badge badge=badge text=badge.to_owned() /> }
                })}
            </div>
            {(!item.description.is_empty())
                .then(|| view! { <div class="gb-item-description">{item.description.clone()}</div> })}
        </li>
    }
}

/// The session's settings: an input per setting holding the override (empty: the default, shown
/// beside it). An edit is checked here as the server would, then sent whole.
#[component]
fn SettingsForm(
    client: ChatClient,
    defaults: AgentSettings,
    overrides: SessionOverrides,
) -> impl IntoView {
    let problem = RwSignal::new(None::<String>);
    let default_values = object(&defaults);
    let defaults = StoredValue::new(defaults);
    let current = StoredValue::new(object(&overrides));
    let apply = move |key: &'static str, raw: String| {
        let mut next = current.get_value();
        let raw = raw.trim();
        if raw.is_empty() {
            next.remove(key);
        } else {
            match parse(key, raw) {
                Ok(v) => {
                    next.insert(key.to_owned(), v);
                }
                Err(e) => return problem.set(Some(e)),
            }
        }
        let checked = serde_json::from_value::<SessionOverrides>(Value::Object(next))
            .map_err(|e| e.to_string())
            .and_then(|o| {
                defaults
                    .with_value(|d| d.with(&o))
                    .validate()
                    .map(|()| o)
                    .map_err(|e| format!("{}: {}", e.key, e.why))
            });
        match checked {
            Ok(o) => {
                problem.set(None);
                client.set_overrides(o);
            }
            Err(e) => problem.set(Some(e)),
        }
    };
    let has_overrides = !overrides_empty(&overrides);
    view! {
        <fieldset class="gb-drawer-settings">
            <legend>"Settings for this conversation"</legend>
            {SETTINGS
                .iter()
                .map(|&(key, label, field, unset)| {
                    let default = default_values
                        .get(key)
                        .map(shown)
                        .unwrap_or_else(|| unset.to_owned());
                    let value = current.with_value(|c| c.get(key).map(shown)).unwrap_or_default();
                    let input = match field {
                        Field::Choice(words) => view! {
                            <select name=key on:change=move |ev| apply(key, event_target_value(&ev))>
                                <option value="" selected=value.is_empty()>"default"</option>
                                {words.iter().map(|w| view! { <option value=*w selected=value == *w>{*w}</option> }).collect_view()}
                            </select>
                        }
                            .into_any(),
                        Field::Count { min } => view! {
                            <input type="number" name=key min=min.to_string() step="1" placeholder=default.clone()
                                prop:value=value on:change=move |ev| apply(key, event_target_value(&ev)) />
                        }
                            .into_any(),
                        Field::Decimal { min, max, step } => view! {
                            <input type="number" name=key min=min.to_string() max=max.to_string() step=step.to_string()
                                placeholder=default.clone() prop:value=value on:change=move |ev| apply(key, event_target_value(&ev)) />
                        }
                            .into_any(),
                    };
                    view! {
                        <label class="gb-drawer-setting" data-key=key>
                            <span class="gb-drawer-setting-label">{label}</span>
                            {input}
                            <span class="gb-drawer-default">{format!("default: {default}")}</span>
                        </label>
                    }
                })
                .collect_view()}
            <Show when=move || problem.with(Option::is_some)>
                <p class="gb-settings-error" role="alert">{move || problem.get()}</p>
            </Show>
            {has_overrides.then(|| view! {
                <button class="gb-link-button gb-drawer-reset" type="button"
                    on:click=move |_| client.set_overrides(SessionOverrides::default())>
                    "Back to the agent's defaults"
                </button>
            })}
        </fieldset>
    }
}

/// `value`'s fields as a JSON object (camelCase keys; unset ones absent).
fn object<T: serde::Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn overrides_empty(o: &SessionOverrides) -> bool {
    object(o).is_empty()
}

/// A setting's value as typed: a word for the choice, a number otherwise.
fn parse(key: &str, raw: &str) -> Result<Value, String> {
    match SETTINGS.iter().find(|s| s.0 == key).map(|s| s.2) {
        Some(Field::Choice(words)) if words.contains(&raw) => Ok(Value::String(raw.to_owned())),
        Some(Field::Count { .. }) => raw
            .parse::<u32>()
            .map(Value::from)
            .map_err(|_| format!("{key}: a whole number, not {raw:?}")),
        Some(Field::Decimal { .. }) => raw
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("{key}: a number, not {raw:?}")),
        _ => Err(format!("{key}: not one of the choices")),
    }
}

/// A JSON value as a setting shows it (a number without a trailing `.0`, a word unquoted).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            // f32 settings come back as their nearest f64: print the shortest form that reads back.
            Some(f) if n.is_f64() => format!("{}", f as f32),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_override_has_a_row_and_every_row_an_override() {
        let all: SessionOverrides = serde_json::from_value(serde_json::json!({
            "maxChatTurns": 1, "temperature": 0.5, "topP": 0.5, "maxOutputTokens": 10,
            "contextTopK": 1, "contextTopN": 1, "contextIncludeScore": 0.5, "contextMinScore": 0.1,
            "contextExpansionDepth": 0, "contextExpansionThreshold": 0.5, "contextExpansionTopN": 1,
            "toolPermission": "allow"
        }))
        .unwrap();
        let mut keys: Vec<String> = object(&all).keys().cloned().collect();
        let mut rows: Vec<String> = SETTINGS.iter().map(|s| s.0.to_owned()).collect();
        keys.sort();
        rows.sort();
        assert_eq!(keys, rows);
    }

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
