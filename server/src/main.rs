//! `glassbox-server`: reads the environment, opens the database and serves.

use glassbox_server::config::Config;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn")),
        )
        .init();
    let config = Config::from_env()?;
    let addr = config.addr;
    tracing::info!(provider = ?provider_name(&config), model = %config.model, data = %config.data_dir.display(), "starting");
    let state = glassbox_server::build_state(config).await?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    println!("Glassbox is running at http://{local}/");
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
