//! OpenAI Chat Completions (streaming), also spoken by Ollama, vLLM, llama.cpp server and OpenRouter.

use std::collections::BTreeMap;

use async_stream::try_stream;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use glassbox_core::attachments::{FileContent, text_file_segment};
use glassbox_core::prompt::{ProviderRequest, attachments_segment};
use glassbox_core::vocab::ToolCall;
use glassbox_core::vocab::Usage;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Provider, ProviderError, ProviderEvent, ProviderStream, send_checked};

/// Client for `POST {base_url}/chat/completions` with `stream: true`.
pub struct OpenAiProvider {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
}

impl OpenAiProvider {
    /// `base_url` is the API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub fn new(http: reqwest::Client, base_url: String, api_key: Option<String>) -> Self {
        Self {
            http,
            base_url,
            api_key,
        }
    }
}

/// The JSON body of a streaming Chat Completions request.
pub fn request_body(req: &ProviderRequest) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = &req.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for m in &req.messages {
        // Tool results are `tool` messages, one per call, answering the calls just before them.
        for r in &m.tool_results {
            messages.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}));
        }
        // A tool message holds text only: images the tools returned follow in a user message,
        // each after a line naming its call.
        if m.tool_results.iter().any(|r| !r.images.is_empty()) {
            let mut parts = Vec::new();
            for r in m.tool_results.iter().filter(|r| !r.images.is_empty()) {
                parts.push(json!({"type": "text", "text": format!("The images {} ({}) returned:", r.name, r.call_id)}));
                parts.extend(r.images.iter().map(|i| {
                    json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{};base64,{}", i.media_type, i.base64), "detail": "high"},
                    })
                }));
            }
            messages.push(json!({"role": "user", "content": parts}));
        }
        if m.tool_calls.is_empty() {
            if !m.attachments.is_empty() || !m.segments.is_empty() || !m.files.is_empty() {
                // The rules and references segments, the words and the attachments as text parts
                // of one message, in that order, then each file: an image part (a data URL) or a
                // text file's segment.
                let mut parts = Vec::with_capacity(m.segments.len() + 2);
                for segment in m.segments.iter().filter(|s| !s.is_empty()) {
                    parts.push(json!({"type": "text", "text": segment}));
                }
                if !m.content.is_empty() {
                    parts.push(json!({"type": "text", "text": m.content}));
                }
                if !m.attachments.is_empty() {
                    parts
                        .push(json!({"type": "text", "text": attachments_segment(&m.attachments)}));
                }
                for f in &m.files {
                    parts.push(match &f.content {
                        FileContent::Image { media_type, base64 } => json!({
                            "type": "image_url",
                            // High detail: the detail the receipt prices it at.
                            "image_url": {
                                "url": format!("data:{media_type};base64,{base64}"),
                                "detail": "high",
                            },
                        }),
                        FileContent::Text(text) => {
                            json!({"type": "text", "text": text_file_segment(&f.name, text)})
                        }
                    });
                }
                messages.push(json!({"role": m.role.as_str(), "content": parts}));
            } else if !m.content.is_empty() || m.tool_results.is_empty() {
                messages.push(json!({"role": m.role.as_str(), "content": m.content}));
            }
            continue;
        }
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        let content = (!m.content.is_empty()).then_some(m.content.as_str());
        messages.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    // OpenAI's reasoning models take only the newer name of the cap, and refuse sampling
    // settings; other OpenAI-compatible servers (Ollama, vLLM, llama.cpp) take the older name.
    let reasoning = ["o1", "o3", "o4", "gpt-5"].iter().any(|p| {
        req.model
            .strip_prefix(p)
            .is_some_and(|r| r.is_empty() || r.starts_with(['-', '.']))
    });
    if req.max_output_tokens > 0 {
        // The reply's reserve in the window's budget is its cap.
        let key = if reasoning {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[key] = json!(req.max_output_tokens);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if let Some(s) = &req.response_schema {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": s.name, "strict": true, "schema": s.schema},
        });
    }
    if !reasoning {
        if let Some(t) = req.temperature {
            body["temperature"] = super::decimal(t);
        }
        if let Some(p) = req.top_p {
            body["top_p"] = super::decimal(p);
        }
    }
    body
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<ChunkUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: ChoiceDelta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct ChoiceDelta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallFragment>,
}

#[derive(Deserialize)]
struct ToolCallFragment {
    #[serde(default)]
    index: usize,
    id: Option<String>,
    function: Option<FunctionFragment>,
}

#[derive(Deserialize)]
struct FunctionFragment {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn stream(&self, request: ProviderRequest) -> ProviderStream {
        let mut req = self
            .http
            .post(format!("{}/chat/completions", self.base_url))
            .json(&request_body(&request));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        Box::pin(try_stream! {
            let resp = send_checked(req).await?;
            let mut events = resp.bytes_stream().eventsource();
            // Tool calls arrive in fragments keyed by index; they are complete at finish.
            let mut tools: BTreeMap<usize, ToolCall> = BTreeMap::new();
            let mut finish: Option<Option<String>> = None;
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| ProviderError::Transport(e.to_string()))?;
                if event.data.trim() == "[DONE]" {
                    for (_, call) in std::mem::take(&mut tools) {
                        yield ProviderEvent::ToolCall(call);
                    }
                    yield ProviderEvent::Finished { reason: finish.clone().flatten() };
                    return;
                }
                let chunk: Chunk = serde_json::from_str(&event.data)
                    .map_err(|e| ProviderError::Protocol(format!("{e} in {:?}", event.data)))?;
                if let Some(err) = chunk.error {
                    let msg = err.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| err.to_string());
                    Err(ProviderError::Upstream(msg))?;
                }
                if let Some(u) = chunk.usage {
                    yield ProviderEvent::Usage(Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens, counted: false });
                }
                for choice in chunk.choices {
                    if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                        yield ProviderEvent::Text(text);
                    }
                    for frag in choice.delta.tool_calls {
                        let call = tools.entry(frag.index).or_insert_with(|| ToolCall { id: String::new(), name: String::new(), arguments: String::new() });
                        if let Some(id) = frag.id { call.id = id; }
                        if let Some(f) = frag.function {
                            if let Some(n) = f.name { call.name.push_str(&n); }
                            if let Some(a) = f.arguments { call.arguments.push_str(&a); }
                        }
                    }
                    if choice.finish_reason.is_some() {
                        finish = Some(choice.finish_reason);
                    }
                }
            }
            // Some compatible servers end the stream without [DONE] after a finish_reason.
            match finish {
                Some(reason) => {
                    for (_, call) in tools {
                        yield ProviderEvent::ToolCall(call);
                    }
                    yield ProviderEvent::Finished { reason };
                }
                None => Err(ProviderError::Truncated)?,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_core::prompt::PromptMessage;
    use glassbox_core::vocab::Role;
    use glassbox_core::vocab::ToolDefinition;

    #[test]
    fn system_prompt_comes_first_and_tools_use_function_shape() {
        let req = ProviderRequest {
            model: "gpt-4o".into(),
            system: Some("sys".into()),
            messages: vec![PromptMessage::text(Role::User, "hi")],
            tools: vec![ToolDefinition {
                name: "t".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            max_output_tokens: 100,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let body = request_body(&req);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(body["tools"][0]["function"]["name"], "t");
        assert_eq!(body["stream"], true);
        assert_eq!(body["max_tokens"], 100);
    }

    #[test]
    fn tool_rounds_replay_as_tool_calls_and_tool_messages() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "get_relevant_context".into(),
            arguments: "{}".into(),
        };
        let req = ProviderRequest {
            model: "gpt-4o".into(),
            system: None,
            messages: vec![
                PromptMessage::text(Role::User, "hi"),
                PromptMessage {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![call],
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
                    tool_results: vec![glassbox_core::vocab::ToolResult {
                        call_id: "call_1".into(),
                        name: "get_relevant_context".into(),
                        content: "No context".into(),
                        is_error: false,
                        images: vec![],
                    }],
                },
            ],
            tools: vec![],
            max_output_tokens: 0,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        let body = request_body(&req);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_relevant_context", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "No context"}
            ])
        );
    }

    #[test]
    fn reasoning_models_get_their_output_cap_under_the_newer_name() {
        let req = |model: &str| ProviderRequest {
            model: model.into(),
            system: None,
            messages: vec![],
            tools: vec![],
            max_output_tokens: 64,
            temperature: None,
            top_p: None,
            response_schema: None,
        };
        for model in ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5.1"] {
            let body = request_body(&req(model));
            assert_eq!(body["max_completion_tokens"], 64, "{model}");
            assert!(body.get("max_tokens").is_none(), "{model}");
        }
        for model in ["gpt-4o", "llama3.1", "o1x", "gpt-5x"] {
            assert_eq!(request_body(&req(model))["max_tokens"], 64, "{model}");
        }
    }

    #[test]
    fn attachments_follow_the_words_as_their_own_content_part() {
        let list = vec![glassbox_core::vocab::Attachment {
            name: "spec.pdf".into(),
            mime_type: None,
            size: None,
            url: Some("https://files.example/spec.pdf".into()),
            ..Default::default()
        }];
        let mut m = PromptMessage::text(Role::User, "see this");
        m.attachments = list.clone();
        let mut bare = PromptMessage::text(Role::User, "");
        bare.attachments = list.clone();
        let body = request_body(&ProviderRequest {
            model: "gpt-4o".into(),
            system: None,
            messages: vec![m, bare],
            tools: vec![],
            max_output_tokens: 10,
            temperature: None,
            top_p: None,
            response_schema: None,
        });
        let part = json!({"type": "text", "text": attachments_segment(&list)});
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "text", "text": "see this"}, part])
        );
        assert_eq!(body["messages"][1]["content"], json!([part]));
    }

    #[test]
    fn rules_and_references_open_the_answered_turn_as_their_own_content_parts() {
        let mut m = PromptMessage::text(Role::User, "how do I sign in?");
        m.segments = vec!["rules".into(), "references".into()];
        let body = request_body(&ProviderRequest {
            model: "gpt-4o".into(),
            system: None,
            messages: vec![PromptMessage::text(Role::Assistant, "hello"), m],
            tools: vec![],
            max_output_tokens: 0,
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
