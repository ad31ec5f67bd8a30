//! The zero-config provider: a deterministic local reply that states what it received. When the
//! context tools are offered and the message names paths or URLs, it first calls
//! `set_relevant_context` to merge them into `files` / `endpoints` (so the demo shows the footer with
//! no API key); when the message names an offered tool (`server.tool`, or the tool's own name), it
//! calls that tool with the first JSON object in the message as its arguments (else `{}`); then it
//! answers with what the tools said.

use std::time::Duration;

use async_stream::stream;
use glassbox_core::context::sets::{GET_TOOL, MAX_ITEMS_PER_SET, SET_TOOL};
use glassbox_core::prompt::{CONTEXT_CLOSE, CONTEXT_OPEN, ProviderRequest};
use glassbox_core::vocab::Role;
use glassbox_core::vocab::ToolCall;
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

/// The paths and the URLs a text names (at most 10 of each, first mention first): a URL is an
/// `http(s)://` word; a path is a word with a file extension that has a `/` or a common extension.
pub fn mentions(text: &str) -> (Vec<String>, Vec<String>) {
    const EXTENSIONS: [&str; 24] = [
        "md", "txt", "rs", "ts", "tsx", "js", "jsx", "py", "json", "toml", "yaml", "yml", "html",
        "css", "go", "java", "c", "h", "cpp", "sql", "sh", "csv", "pdf", "log",
    ];
    let (mut files, mut urls): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for word in text.split_whitespace() {
        let word = word.trim_matches(|c: char| "`'\"()[]{}<>,;:!?".contains(c));
        let word = word.strip_suffix('.').unwrap_or(word);
        if word.is_empty() || word.chars().count() > 300 {
            continue;
        }
        let (list, keep) = if word.starts_with("http://") || word.starts_with("https://") {
            (&mut urls, word.len() > "https://".len())
        } else {
            let ext = word.rsplit_once('.');
            let looks_like_file = ext.is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && !stem.ends_with('/')
                    && !ext.is_empty()
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && (word.contains('/')
                        || EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
            }) && word
                .chars()
                .all(|c| c.is_alphanumeric() || "/._-~+@".contains(c));
            (&mut files, looks_like_file)
        };
        if keep && list.len() < MAX_ITEMS_PER_SET && !list.iter().any(|w| w == word) {
            list.push(word.to_owned());
        }
    }
    (files, urls)
}

/// The first JSON object in `text`, if any.
pub fn first_json_object(text: &str) -> Option<serde_json::Map<String, Value>> {
    text.match_indices('{').find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(Value::Object(map))) => Some(map),
            _ => None,
        }
    })
}

/// Whether `text` names `name` as a word of its own (not inside a longer name).
fn names(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(name).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(word)
            && !text[at + name.len()..].chars().next().is_some_and(word)
    })
}

/// The offered tools (other than the context-set ones) `text` names: by `server.tool` for a tool
/// offered as `server__tool`, or by the offered name itself.
fn named_tools<'a>(req: &'a ProviderRequest, text: &str) -> Vec<&'a str> {
    req.tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|name| *name != SET_TOOL && *name != GET_TOOL)
        .filter(|name| {
            names(text, name)
                || name
                    .split_once("__")
                    .is_some_and(|(server, tool)| names(text, &format!("{server}.{tool}")))
        })
        .collect()
}

/// The calls the offline model makes for `req`: only for offered tools, and only when the newest
/// message is the user's (not a round of tool results).
fn tool_calls(req: &ProviderRequest) -> Vec<ToolCall> {
    let Some(last) = req.messages.last() else {
        return vec![];
    };
    if last.role != Role::User || !last.tool_results.is_empty() {
        return vec![];
    }
    let mut calls: Vec<(String, String)> = Vec::new();
    if req.tools.iter().any(|t| t.name == SET_TOOL) {
        let (files, urls) = mentions(&last.content);
        calls.extend(
            [("files", files), ("endpoints", urls)]
                .into_iter()
                .filter(|(_, items)| !items.is_empty())
                .map(|(set, items)| {
                    let args = serde_json::json!({"setName": set, "items": items, "mode": "merge"});
                    (SET_TOOL.to_owned(), args.to_string())
                }),
        );
    }
    let args = Value::Object(first_json_object(&last.content).unwrap_or_default()).to_string();
    calls.extend(
        named_tools(req, &last.content)
            .into_iter()
            .map(|name| (name.to_owned(), args.clone())),
    );
    calls
        .into_iter()
        .enumerate()
        .map(|(i, (name, arguments))| ToolCall {
            id: format!("offline_call_{}_{i}", req.messages.len()),
            name,
            arguments,
        })
        .collect()
}

/// What a tool result says, for the reply's first line: its first line of text, inside the
/// `<tool_result>` tags when it has them.
fn result_line(content: &str) -> &str {
    content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("<tool_result") && *l != "</tool_result>")
        .unwrap_or("")
}

/// The reply the offline provider gives to `req`.
pub fn reply_text(req: &ProviderRequest) -> String {
    let said: Vec<_> = req
        .messages
        .iter()
        .filter(|m| {
            m.tool_results.is_empty() && !(m.content.is_empty() && m.attachments.is_empty())
        })
        .collect();
    let total = said.len();
    let from_user = said.iter().filter(|m| m.role == Role::User).count();
    let context_keys = req.system.as_deref().and_then(context_keys);
    let context_line = match context_keys {
        Some(keys) if !keys.is_empty() => {
            let list: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            format!("Page context came with it, with keys {}.", list.join(", "))
        }
        Some(_) => "Page context came with it, but it was empty.".to_owned(),
        None => "No page context came with it.".to_owned(),
    };
    let last_message = said.iter().rev().find(|m| m.role == Role::User);
    let last = last_message.map_or("", |m| m.content.as_str());
    let attachments_line = match last_message.map_or(&[][..], |m| &m.attachments[..]) {
        [] => String::new(),
        list => {
            let names: Vec<String> = list.iter().map(|a| format!("`{}`", a.name)).collect();
            let files = last_message.map_or(0, |m| m.files.len());
            format!(
                "It came with {} attachment{}: {}{}.\n\n",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                names.join(", "),
                match files {
                    0 => String::new(),
                    n if n == list.len() => " (their contents reached me too)".to_owned(),
                    n => format!(" (the contents of {n} of them reached me too)"),
                }
            )
        }
    };
    // After a round of tool calls: what the tools answered.
    let tools_line = match req.messages.last() {
        Some(m) if !m.tool_results.is_empty() => {
            let (sets, others): (Vec<_>, Vec<_>) = m
                .tool_results
                .iter()
                .partition(|r| r.name == SET_TOOL || r.name == GET_TOOL);
            let list = |results: Vec<&glassbox_core::vocab::ToolResult>| {
                results
                    .iter()
                    .map(|r| format!("`{}` → {}", r.name, result_line(&r.content)))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let mut line = String::new();
            if !sets.is_empty() {
                line.push_str(&format!(
                    "I kept what you mentioned in this session's context ({}); it shows below \
                     the message box.\n\n",
                    list(sets)
                ));
            }
            if !others.is_empty() {
                line.push_str(&format!("The tools answered: {}.\n\n", list(others)));
            }
            line
        }
        _ => String::new(),
    };
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
        "{tools_line}**Offline reply** (no model is configured). I received {total} message{} ({from_user} from you). \
         {context_line}\n\nYour last message:\n\n{quote}\n\n{attachments_line}Set `GLASSBOX_PROVIDER` and an API key to talk to a real model.",
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
        let delay = self.delay;
        let calls = tool_calls(&request);
        if !calls.is_empty() {
            return Box::pin(stream! {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                for call in calls {
                    yield Ok(ProviderEvent::ToolCall(call));
                }
                yield Ok(ProviderEvent::Finished { reason: Some("tool_calls".into()) });
            });
        }
        let text = reply_text(&request);
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
                PromptMessage::text(Role::User, "one"),
                PromptMessage::text(Role::Assistant, "two"),
                PromptMessage::text(Role::User, "Change the theme"),
            ],
            tools: vec![],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let text = reply_text(&req);
        assert!(
            text.contains("I received 3 messages (2 from you)"),
            "{text}"
        );
        assert!(text.contains("keys `entity`, `page`"), "{text}");
        assert!(text.contains("> Change the theme"), "{text}");
    }

    #[test]
    fn reply_names_the_attachments_of_the_last_message() {
        let mut m = PromptMessage::text(Role::User, "");
        m.attachments = vec![glassbox_core::vocab::Attachment {
            name: "spec.pdf".into(),
            mime_type: None,
            size: None,
            url: None,
            ..Default::default()
        }];
        let req = ProviderRequest {
            model: "offline".into(),
            system: None,
            messages: vec![m],
            tools: vec![],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let text = reply_text(&req);
        assert!(text.contains("I received 1 message (1 from you)"), "{text}");
        assert!(
            text.contains("It came with 1 attachment: `spec.pdf`."),
            "{text}"
        );
    }

    #[test]
    fn paths_and_urls_are_found_and_nothing_else() {
        let (files, urls) = mentions(
            "Look at docs/spec.md, `src/main.rs` and notes.txt. See https://api.example.com/v1 too. \
             e.g. 3.5 times, version 1.2, ./a/ and Mr. Smith. docs/spec.md again",
        );
        assert_eq!(files, ["docs/spec.md", "src/main.rs", "notes.txt"]);
        assert_eq!(urls, ["https://api.example.com/v1"]);
    }

    #[test]
    fn tools_are_called_only_when_offered_and_only_for_a_user_message() {
        let mut req = ProviderRequest {
            model: "offline".into(),
            system: None,
            messages: vec![PromptMessage::text(Role::User, "open /docs/spec.md")],
            tools: glassbox_core::context::sets::context_tools(),
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let calls = tool_calls(&req);
        assert_eq!(calls.len(), 1);
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
            json!({"setName": "files", "items": ["/docs/spec.md"], "mode": "merge"})
        );
        req.tools.clear();
        assert!(tool_calls(&req).is_empty());
    }

    #[test]
    fn a_named_tool_is_called_with_the_first_json_object_of_the_message() {
        let tool = |name: &str| glassbox_core::vocab::ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        };
        let mut req = ProviderRequest {
            model: "offline".into(),
            system: None,
            messages: vec![PromptMessage::text(
                Role::User,
                r#"Use demo.convert_units with {"value": 3, "from": "mi", "to": "km"} please {"x": 1}"#,
            )],
            tools: vec![
                tool("demo__convert_units"),
                tool("demo__current_time"),
                tool("units"),
            ],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let calls = tool_calls(&req);
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].name, "demo__convert_units");
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
            json!({"value": 3, "from": "mi", "to": "km"})
        );
        // By the offered name too; without an object, no arguments; no tool inside a longer word.
        req.messages = vec![PromptMessage::text(
            Role::User,
            "demo__current_time, not my_units",
        )];
        let calls = tool_calls(&req);
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("demo__current_time", "{}")
        );
        assert_eq!(
            result_line("<tool_result server=\"d\" tool=\"t\">\n12:00\n</tool_result>"),
            "12:00"
        );
    }
}
