//! Provider clients against the fake provider: streamed text, usage and tool calls in both formats.

use futures::StreamExt;
use glassbox_core::prompt::{PromptMessage, ProviderRequest};
use glassbox_core::vocab::Role;
use glassbox_core::vocab::{ToolCall, ToolDefinition};
use glassbox_fake_provider::{Behaviour, FakeProvider};
use glassbox_server::providers::{AnthropicProvider, OpenAiProvider, Provider, ProviderEvent};
use serde_json::json;

fn request() -> ProviderRequest {
    ProviderRequest {
        model: "test-model".into(),
        system: Some("system text".into()),
        messages: vec![PromptMessage::text(Role::User, "weather in Paris?")],
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }],
        max_output_tokens: 256,
        temperature: None,
        top_p: None,
        response_schema: None,
    }
}

fn tool_behaviour() -> Behaviour {
    Behaviour::ToolCall {
        text: "Let me check.".into(),
        name: "get_weather".into(),
        argument_parts: vec![r#"{"ci"#.into(), r#"ty": "Pa"#.into(), r#"ris"}"#.into()],
    }
}

async fn collect(p: &dyn Provider) -> Vec<ProviderEvent> {
    p.stream(request())
        .map(|e| e.expect("provider event"))
        .collect()
        .await
}

fn assert_tool_stream(events: &[ProviderEvent], id: &str) {
    assert_eq!(events[0], ProviderEvent::Text("Let me check.".into()));
    let call = events.iter().find_map(|e| match e {
        ProviderEvent::ToolCall(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(
        call,
        Some(ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            arguments: r#"{"city": "Paris"}"#.into()
        })
    );
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Usage(_))));
    assert!(matches!(
        events.last(),
        Some(ProviderEvent::Finished { .. })
    ));
}

#[tokio::test]
async fn openai_streams_tool_calls_assembled_from_fragments() {
    let fake = FakeProvider::start(tool_behaviour()).await.unwrap();
    let p = OpenAiProvider::new(
        reqwest::Client::new(),
        fake.openai_base(),
        Some("sk-o".into()),
    );
    let events = collect(&p).await;
    assert_tool_stream(&events, "call_fake_1");
    assert!(
        matches!(events.last(), Some(ProviderEvent::Finished { reason: Some(r) }) if r == "tool_calls")
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.key.as_deref(), Some("Bearer sk-o"));
    assert_eq!(sent.body["tools"][0]["type"], "function");
    assert_eq!(sent.body["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn anthropic_streams_tool_use_blocks() {
    let fake = FakeProvider::start(tool_behaviour()).await.unwrap();
    let p = AnthropicProvider::new(reqwest::Client::new(), fake.anthropic_base(), "sk-a".into());
    let events = collect(&p).await;
    assert_tool_stream(&events, "toolu_fake_1");
    assert!(
        matches!(events.last(), Some(ProviderEvent::Finished { reason: Some(r) }) if r == "tool_use")
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.key.as_deref(), Some("sk-a"));
    assert_eq!(sent.body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(sent.body["system"], "system text");
}

#[tokio::test]
async fn unreachable_provider_is_a_typed_error() {
    let p = OpenAiProvider::new(reqwest::Client::new(), "http://127.0.0.1:9/v1".into(), None);
    let first = p.stream(request()).next().await.unwrap();
    let err = first.unwrap_err();
    assert_eq!(err.code(), glassbox_core::ErrorCode::ProviderUnavailable);
}
