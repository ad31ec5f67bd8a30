//! The zero-config provider: a deterministic local reply that states what it received.

use std::time::Duration;

use async_stream::stream;
use glassbox_core::prompt::{CONTEXT_CLOSE, CONTEXT_OPEN, ProviderRequest};
use glassbox_core::wire::Role;
use serde_json::Value;

use super::{Provider, ProviderEvent, ProviderStream};

/// Streams a reply describing the request, word by word, `delay` apart.
pub struct OfflineProvider {
    delay: Duration,
}

impl OfflineProvider {
    /// A provider pausing `delay` between words (zero for tests and benchmarks).
    pub fn new(delay: Duration) -> Self {
        Self { delay }
    }
}

/// The reply the offline provider gives to `req`.
pub fn reply_text(req: &ProviderRequest) -> String {
    let total = req.messages.len();
    let from_user = req.messages.iter().filter(|m| m.role == Role::User).count();
    let context_keys = req.system.as_deref().and_then(context_keys);
    let context_line = match context_keys {
        Some(keys) if !keys.is_empty() => {
            let list: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            format!("Page context came with it, with keys {}.", list.join(", "))
        }
        Some(_) => "Page context came with it, but it was empty.".to_owned(),
        None => "No page context came with it.".to_owned(),
    };
    let last = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .unwrap_or("");
    let mut quoted: String = last.chars().take(200).collect();
    if quoted.len() < last.len() {
        quoted.push('…');
    }
    let quote = quoted
        .lines()
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "**Offline reply** (no model is configured). I received {total} message{} ({from_user} from you). \
         {context_line}\n\nYour last message:\n\n{quote}\n\nSet `GLASSBOX_PROVIDER` and an API key to talk to a real model.",
        if total == 1 { "" } else { "s" },
    )
}

/// The top-level keys of the page-context segment in a system prompt, if there is one.
fn context_keys(system: &str) -> Option<Vec<String>> {
    let inner = system
        .split_once(CONTEXT_OPEN)?
        .1
        .split_once(CONTEXT_CLOSE)?
        .0;
    match serde_json::from_str::<Value>(inner.trim()).ok()? {
        Value::Object(map) => Some(map.keys().cloned().collect()),
        _ => None,
    }
}

impl Provider for OfflineProvider {
    fn name(&self) -> &'static str {
        "offline"
    }

    fn stream(&self, request: ProviderRequest) -> ProviderStream {
        let text = reply_text(&request);
        let delay = self.delay;
        Box::pin(stream! {
            for word in text.split_inclusive(' ') {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                yield Ok(ProviderEvent::Text(word.to_owned()));
            }
            yield Ok(ProviderEvent::Finished { reason: Some("stop".into()) });
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::prompt::{PromptMessage, page_context_segment};
    use serde_json::json;

    #[test]
    fn reply_states_message_count_and_context_keys() {
        let ctx = json!({"page": "settings", "entity": "x"});
        let req = ProviderRequest {
            model: "offline".into(),
            system: Some(page_context_segment(ctx.as_object().unwrap())),
            messages: vec![
                PromptMessage {
                    role: Role::User,
                    content: "one".into(),
                },
                PromptMessage {
                    role: Role::Assistant,
                    content: "two".into(),
                },
                PromptMessage {
                    role: Role::User,
                    content: "Change the theme".into(),
                },
            ],
            tools: vec![],
            max_output_tokens: 10,
        };
        let text = reply_text(&req);
        assert!(
            text.contains("I received 3 messages (2 from you)"),
            "{text}"
        );
        assert!(text.contains("keys `entity`, `page`"), "{text}");
        assert!(text.contains("> Change the theme"), "{text}");
    }
}
