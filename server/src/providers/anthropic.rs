//! Anthropic Messages API (streaming).

use std::collections::BTreeMap;

use async_stream::try_stream;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use glassbox_core::attachments::{FileContent, text_file_segment};
use glassbox_core::prompt::{PromptMessage, ProviderRequest, attachments_segment};
use glassbox_core::vocab::ToolCall;
use glassbox_core::vocab::Usage;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Provider, ProviderError, ProviderEvent, ProviderStream, send_checked};

/// The API version header we speak.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Client for `POST {base_url}/v1/messages` with `stream: true`.
pub struct AnthropicProvider {
    http: reqwest::Client,
    base_url: String,
    api_key: String,
}

impl AnthropicProvider {
    /// `base_url` is the API host, e.g. `https://api.anthropic.com`.
    pub fn new(http: reqwest::Client, base_url: String, api_key: String) -> Self {
        Self {
            http,
            base_url,
            api_key,
        }
    }
}

/// The JSON body of a streaming Messages request.
pub fn request_body(req: &ProviderRequest) -> Value {
    let messages: Vec<Value> = req.messages.iter().filter_map(message).collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &req.system {
        body["system"] = json!(system);
    }
    if let Some(t) = req.temperature {
        body["temperature"] = super::decimal(t);
    }
    if let Some(p) = req.top_p {
        body["top_p"] = super::decimal(p);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    // Structured output: one tool the model must call; its input is the answer.
    if let Some(s) = &req.response_schema {
        body["tools"] = json!([{
            "name": s.name,
            "description": "Report the answer in this exact structure.",
            "input_schema": s.schema,
        }]);
        body["tool_choice"] = json!({"type": "tool", "name": s.name});
    }
    body
}

/// One message: plain text as a string; with rules and references, attachments or in a tool
/// round, content blocks (the rules and references segments as text blocks before the words, the
/// attachments as a text block after them, then each file as an `image` block or a text file's
/// block, `tool_use` in the assistant's turn, `tool_result` in the
/// user's). Empty text blocks are left out (the API refuses them), and a message with nothing in it
/// is skipped.
fn message(m: &PromptMessage) -> Option<Value> {
    if m.tool_calls.is_empty()
        && m.tool_results.is_empty()
        && m.attachments.is_empty()
        && m.files.is_empty()
        && m.segments.is_empty()
    {
        return (!m.content.is_empty())
            .then(|| json!({"role": m.role.as_str(), "content": m.content}));
    }
    let mut blocks: Vec<Value> = Vec::new();
    for r in &m.tool_results {
        // Images a tool returned go inside its result, after the text that names them.
        let content = if r.images.is_empty() {
            json!(r.content)
        } else {
            let mut content = vec![json!({"type": "text", "text": r.content})];
            content.extend(r.images.iter().map(|i| {
                json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": i.media_type, "data": &*i.base64},
                })
            }));
            Value::Array(content)
        };
        blocks.push(json!({"type": "tool_result", "tool_use_id": r.call_id, "content": content, "is_error": r.is_error}));
    }
    for segment in m.segments.iter().filter(|s| !s.is_empty()) {
        blocks.push(json!({"type": "text", "text": segment}));
    }
    if !m.content.is_empty() {
        blocks.push(json!({"type": "text", "text": m.content}));
    }
    if !m.attachments.is_empty() {
        blocks.push(json!({"type": "text", "text": attachments_segment(&m.attachments)}));
    }
    for f in &m.files {
        blocks.push(match &f.content {
            FileContent::Image { media_type, base64 } => json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": &**base64},
            }),
            FileContent::Text(text) => {
                json!({"type": "text", "text": text_file_segment(&f.name, text)})
            }
        });
    }
    for c in &m.tool_calls {
        // Arguments that were not a JSON object were answered with an error; replay them as {}.
        let input = serde_json::from_str::<Value>(&c.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
    }
    Some(json!({"role": m.role.as_str(), "content": blocks}))
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Value,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: Value,
        #[serde(default)]
        usage: Option<Value>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<Value>,
}

fn tokens(v: &Option<Value>, key: &str) -> u64 {
    v.as_ref()
        .and_then(|u| u.get(key))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn stream(&self, request: ProviderRequest) -> ProviderStream {
        let req = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", &self.api_key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(&request_body(&request));
        Box::pin(try_stream! {
            let resp = send_checked(req).await?;
            let mut events = resp.bytes_stream().eventsource();
            let mut tools: BTreeMap<usize, ToolCall> = BTreeMap::new();
            let mut input_tokens = 0;
            let mut stop_reason = None;
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| ProviderError::Transport(e.to_string()))?;
                let parsed: StreamEvent = serde_json::from_str(&event.data)
                    .map_err(|e| ProviderError::Protocol(format!("{e} in {:?}", event.data)))?;
                match parsed {
                    StreamEvent::MessageStart { message } => input_tokens = tokens(&message.usage, "input_tokens"),
                    StreamEvent::ContentBlockStart { index, content_block } => {
                        if content_block.get("type").and_then(Value::as_str) == Some("tool_use") {
                            let text = |k: &str| content_block.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                            tools.insert(index, ToolCall { id: text("id"), name: text("name"), arguments: String::new() });
                        }
                    }
                    StreamEvent::ContentBlockDelta { index, delta } => {
                        match delta.get("type").and_then(Value::as_str) {
                            Some("text_delta") => {
                                if let Some(t) = delta.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                                    yield ProviderEvent::Text(t.to_owned());
                                }
                            }
                            Some("input_json_delta") => {
                                if let (Some(call), Some(part)) = (tools.get_mut(&index), delta.get("partial_json").and_then(Value::as_str)) {
                                    call.arguments.push_str(part);
                                }
                            }
                            _ => {}
                        }
                    }
                    StreamEvent::ContentBlockStop { index } => {
                        if let Some(mut call) = tools.remove(&index) {
                            if call.arguments.is_empty() {
                                call.arguments = "{}".into();
                            }
                            yield ProviderEvent::ToolCall(call);
                        }
                    }
                    StreamEvent::MessageDelta { delta, usage } => {
                        stop_reason = delta.get("stop_reason").and_then(Value::as_str).map(str::to_owned).or(stop_reason);
                        if usage.is_some() {
                            yield ProviderEvent::Usage(Usage { input_tokens, output_tokens: tokens(&usage, "output_tokens"), counted: false });
                        }
                    }
                    StreamEvent::MessageStop => {
                        yield ProviderEvent::Finished { reason: stop_reason.take() };
                        return;
                    }
                    StreamEvent::Error { error } => {
                        let msg = error.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| error.to_string());
                        Err(ProviderError::Upstream(msg))?;
                    }
                    StreamEvent::Ping | StreamEvent::Other => {}
                }
            }
            Err(ProviderError::Truncated)?;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::vocab::Role;
    use glassbox_core::vocab::ToolResult;

    #[test]
    fn system_is_top_level_and_max_tokens_is_set() {
        let req = ProviderRequest {
            model: "claude".into(),
            system: Some("sys".into()),
            messages: vec![PromptMessage::text(Role::User, "hi")],
            tools: vec![],
            max_output_tokens: 1234,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let body = request_body(&req);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["max_tokens"], 1234);
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn tool_rounds_replay_as_tool_use_and_tool_result_blocks() {
        let req = ProviderRequest {
            model: "claude".into(),
            system: None,
            messages: vec![
                PromptMessage::text(Role::User, "hi"),
                PromptMessage {
                    role: Role::Assistant,
                    content: "Checking.".into(),
                    tool_calls: vec![ToolCall {
                        id: "toolu_1".into(),
                        name: "set_relevant_context".into(),
                        arguments: r#"{"setName":"files","items":["/a"]}"#.into(),
                    }],
                    tool_results: vec![],
                    attachments: vec![],
                    files: vec![],
                    segments: vec![],
                },
                PromptMessage {
                    role: Role::User,
                    content: String::new(),
                    tool_calls: vec![],
                    attachments: vec![],
                    files: vec![],
                    segments: vec![],
                    tool_results: vec![ToolResult {
                        call_id: "toolu_1".into(),
                        name: "set_relevant_context".into(),
                        content: "Set files: 1 items".into(),
                        is_error: false,
                        images: vec![],
                    }],
                },
                PromptMessage::text(Role::Assistant, ""),
            ],
            tools: vec![],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        assert_eq!(
            request_body(&req)["messages"],
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "set_relevant_context", "input": {"setName": "files", "items": ["/a"]}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Set files: 1 items", "is_error": false}
                ]}
            ])
        );
    }

    #[test]
    fn attachments_follow_the_words_as_their_own_text_block() {
        let list = vec![glassbox_core::vocab::Attachment {
            name: "spec.pdf".into(),
            mime_type: Some("application/pdf".into()),
            size: Some(2048),
            url: None,
            ..Default::default()
        }];
        let mut m = PromptMessage::text(Role::User, "see this");
        m.attachments = list.clone();
        let body = request_body(&ProviderRequest {
            model: "claude".into(),
            system: None,
            messages: vec![m],
            tools: vec![],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        });
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "see this"},
                {"type": "text", "text": attachments_segment(&list)}
            ])
        );
    }

    #[test]
    fn rules_and_references_open_the_answered_turn_as_their_own_text_blocks() {
        let mut m = PromptMessage::text(Role::User, "how do I sign in?");
        m.segments = vec!["rules".into(), "references".into()];
        let body = request_body(&ProviderRequest {
            model: "claude".into(),
            system: None,
            messages: vec![PromptMessage::text(Role::Assistant, "hello"), m],
            tools: vec![],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        });
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": [
                {"type": "text", "text": "rules"},
                {"type": "text", "text": "references"},
                {"type": "text", "text": "how do I sign in?"}
            ]})
        );
    }
}
