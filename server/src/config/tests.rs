use std::collections::{BTreeSet, HashMap};

use super::*;

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

/// Every variable the settings define.
fn variables() -> BTreeSet<String> {
    Settings::command()
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn no_keys_means_offline_on_localhost_8080() {
    let c = config(&[]).unwrap();
    assert_eq!(c.provider, ProviderKind::Offline);
    assert_eq!(c.addr.to_string(), "127.0.0.1:8080");
    assert_eq!(c.model, "offline");
    assert_eq!(c.topic_model, None);
    assert_eq!(c.session_ttl, Some(Duration::from_secs(30 * 24 * 3600)));
    assert_eq!(c.rate_limits, RateLimitConfig::default());
    assert_eq!(c.budgets, BudgetConfig::default());
    assert_eq!(c.vocab_dir, PathBuf::from("dist/vocab"));
    assert!(c.tools_enabled && c.topics_enabled && c.embed_model_dir.is_some());
}

#[test]
fn openai_base_url_is_configurable() {
    let c = config(&[
        ("GLASSBOX_PROVIDER", "openai"),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1/"),
    ])
    .unwrap();
    assert_eq!(
        c.provider,
        ProviderKind::OpenAi {
            api_key: None,
            base_url: "http://localhost:11434/v1".into()
        }
    );
    assert_eq!(c.model, "gpt-4o-mini");
    assert_eq!(c.topic_model.as_deref(), Some("gpt-4o-mini"));
}

#[test]
fn a_key_picks_its_provider() {
    let c = config(&[("ANTHROPIC_API_KEY", "k")]).unwrap();
    assert!(matches!(c.provider, ProviderKind::Anthropic { .. }));
    let c = config(&[("OPENAI_BASE_URL", "http://localhost:8000/v1")]).unwrap();
    assert!(matches!(c.provider, ProviderKind::OpenAi { .. }));
}

#[test]
fn anthropic_without_key_is_an_error() {
    assert!(matches!(
        config(&[("GLASSBOX_PROVIDER", "anthropic")]),
        Err(ConfigError::MissingAnthropicKey)
    ));
}

#[test]
fn bad_values_name_the_variable() {
    let err = config(&[("GLASSBOX_ADDR", "nowhere")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("GLASSBOX_ADDR (--addr)"), "{err}");
    assert!(err.contains("\"nowhere\""), "{err}");
}

#[test]
fn bad_values_say_what_is_allowed() {
    let err = config(&[("GLASSBOX_PROVIDER", "gemini")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("GLASSBOX_PROVIDER"), "{err}");
    assert!(err.contains("offline, openai, anthropic"), "{err}");
    let err = config(&[("GLASSBOX_TOPICS", "maybe")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("use on, off"), "{err}");
    let err = config(&[("GLASSBOX_MAX_CHAT_TURNS", "0")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("GLASSBOX_MAX_CHAT_TURNS") && err.contains("1..=50"),
        "{err}"
    );
    let err = config(&[("GLASSBOX_SIMILARITY_THRESHOLD", "1.5")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("GLASSBOX_SIMILARITY_THRESHOLD"), "{err}");
    let err = config(&[("GLASSBOX_MODEL_LIMITS", "gpt-4o=64000,tiny")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"tiny\"") && err.contains("model=tokens"),
        "{err}"
    );
    let err = config(&[("GLASSBOX_MODEL_LIMITS", "gpt-4o=64000,")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("GLASSBOX_MODEL_LIMITS"), "{err}");
    let err = config(&[("GLASSBOX_SESSION_TTL", "soon")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("30d, 12h or off"), "{err}");
}

#[test]
fn origins_and_proxies_keep_their_errors() {
    assert!(matches!(
        config(&[("GLASSBOX_ALLOWED_ORIGINS", "*, https://a.example")]),
        Err(ConfigError::Origins(_))
    ));
    assert!(matches!(
        config(&[("GLASSBOX_TRUSTED_PROXIES", "10.0.0.0/8, proxy")]),
        Err(ConfigError::Proxies(_))
    ));
}

#[test]
fn values_are_read() {
    let c = config(&[
        ("GLASSBOX_ALLOWED_MODELS", "a, b,"),
        ("GLASSBOX_MODEL_LIMITS", "GPT-4o=64000, my-model=4096"),
        ("GLASSBOX_TOPICS", "off"),
        ("GLASSBOX_EMBEDDING_SEARCH", "false"),
        ("GLASSBOX_EMBEDDINGS", "off"),
        ("GLASSBOX_TOOLS", "off"),
        ("GLASSBOX_CONTEXT_PROMPT", "off"),
        ("GLASSBOX_SESSION_TTL", "12h"),
        ("GLASSBOX_CONFIG", "off"),
        ("GLASSBOX_TOPICS_SETTLE_MS", "300"),
        ("GLASSBOX_LIMIT_JOINS_PER_MINUTE", "0"),
        ("GLASSBOX_BUDGET_DAILY_TOKENS", "7"),
        ("GLASSBOX_LOG_FORMAT", "json"),
        // Empty counts as unset.
        ("GLASSBOX_MODEL", ""),
    ])
    .unwrap();
    assert_eq!(c.allowed_models, ["a", "b"]);
    assert_eq!(
        c.model_limits,
        [("gpt-4o".to_owned(), 64_000), ("my-model".to_owned(), 4096)]
    );
    assert!(!c.topics_enabled && !c.embedding_search && !c.tools_enabled);
    assert_eq!(c.embed_model_dir, None);
    assert_eq!(c.context_prompt, None);
    assert_eq!(c.session_ttl, Some(Duration::from_secs(12 * 3600)));
    assert_eq!(c.agents_file, None);
    assert_eq!(c.topics_settle, Duration::from_millis(300));
    assert_eq!(c.rate_limits.joins_per_minute, 0);
    assert_eq!(c.budgets.daily_tokens, 7);
    assert_eq!(c.log_format, Some(LogFormat::Json));
    assert_eq!(c.model, "offline");
}

#[test]
fn limit_vars_are_the_limits_definitions() {
    let limits: Vec<String> = LIMIT_VARS.into_iter().collect();
    assert_eq!(limits.len(), 11, "{limits:?}");
    assert!(limits.iter().all(|v| variables().contains(v)));
    assert!(limits.contains(&"GLASSBOX_LIMIT_SESSIONS_PER_HOUR".to_owned()));
    assert!(limits.contains(&"GLASSBOX_BUDGET_DAILY_TOKENS".to_owned()));
    let zero: Vec<(String, String)> = limits.into_iter().map(|v| (v, "0".into())).collect();
    let c =
        Config::from_lookup(|k| zero.iter().find(|(v, _)| v == k).map(|(_, z)| z.clone())).unwrap();
    assert_eq!(c.rate_limits.sessions_per_hour, 0);
    assert_eq!(c.rate_limits.previews_per_minute, 0);
    assert_eq!(
        c.budgets,
        BudgetConfig {
            session_tokens: 0,
            daily_tokens: 0,
            user_daily_tokens: 0,
        }
    );
}

#[test]
fn help_lists_every_setting_with_its_variable() {
    let help = Settings::command().render_long_help().to_string();
    for variable in variables() {
        assert!(help.contains(&format!("[env: {variable}")), "{variable}");
    }
    assert!(help.contains("[default: 127.0.0.1:8080]"), "{help}");
    assert!(help.contains("[default: 30d]"), "{help}");
    let short = Settings::command().render_help().to_string();
    assert!(
        short.contains("[possible values: offline, openai, anthropic]"),
        "{short}"
    );
}

#[test]
fn the_configuration_page_lists_the_same_variables() {
    let page = include_str!("../../../docs/configuration.md");
    let listed: BTreeSet<String> = page
        .lines()
        .skip_while(|l| !l.starts_with("| variable"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| cell.split(','))
        .map(|v| v.trim().trim_matches('`').to_owned())
        .filter(|v| v != "RUST_LOG")
        .collect();
    assert_eq!(listed, variables());
}
