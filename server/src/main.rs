//! `glassbox-server`: reads the environment, opens the database and serves.

use std::io::IsTerminal;

use glassbox_server::config::Config;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // JSON lines for log collectors when stdout is not a terminal (or GLASSBOX_LOG_FORMAT=json);
    // colours only on a terminal.
    let terminal = std::io::stdout().is_terminal();
    let json = match std::env::var("GLASSBOX_LOG_FORMAT").ok().as_deref() {
        None | Some("") => !terminal,
        Some("json") => true,
        Some("text") => false,
        Some(other) => {
            anyhow::bail!("GLASSBOX_LOG_FORMAT={other:?} is not valid: use json or text")
        }
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        logs.json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init();
    } else {
        logs.with_ansi(terminal).init();
    }
    let config = Config::from_env()?;
    let addr = config.addr;
    tracing::info!(provider = ?provider_name(&config), model = %config.model, data = %config.data_dir.display(), "starting");
    let state = glassbox_server::build_state(config).await?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    if json {
        tracing::info!(url = %format!("http://{local}/"), "listening");
    } else {
        println!("Glassbox is running at http://{local}/");
    }
    glassbox_server::serve(listener, state).await?;
    Ok(())
}

fn provider_name(config: &Config) -> &'static str {
    match config.provider {
        glassbox_server::config::ProviderKind::Offline => "offline",
        glassbox_server::config::ProviderKind::OpenAi { .. } => "openai",
        glassbox_server::config::ProviderKind::Anthropic { .. } => "anthropic",
    }
}
