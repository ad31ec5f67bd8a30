//! `glassbox-server`: reads its settings (flags or the environment), opens the database and serves.

use std::io::IsTerminal;

use glassbox_server::config::{Config, ConfigError, LogFormat, ProviderName};
use tracing_subscriber::EnvFilter;

#[global_allocator]
static ALLOCATOR: glassbox_server::Allocator = glassbox_server::Allocator;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let huge_pages = glassbox_server::allocator::disable_transparent_huge_pages();
    if std::env::args().nth(1).as_deref() == Some("migrate") {
        return migrate(std::env::args().skip(1)).await;
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        // `--help`, `--version` or an unknown flag: printed as clap prints them.
        Err(ConfigError::Usage(e)) => e.exit(),
        Err(e) => return Err(e.into()),
    };
    // JSON lines for log collectors when stdout is not a terminal (unless a format is set);
    // colours only on a terminal.
    let terminal = std::io::stdout().is_terminal();
    let json = config
        .log_format
        .map_or(!terminal, |f| f == LogFormat::Json);
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
    if let Err(e) = huge_pages {
        tracing::warn!(error = %e, "memory: serving with transparent huge pages on");
    }
    let (addr, metrics_addr) = (config.addr, config.metrics_addr);
    let provider: &'static str = ProviderName::from(&config.provider).into();
    tracing::info!(provider, model = %config.model, data = %config.data_dir.display(), "starting");
    let state = glassbox_server::build_state(config).await?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    if json {
        tracing::info!(url = %format!("http://{local}/"), "listening");
    } else {
        println!("Glassbox is running at http://{local}/");
    }
    if let Some(at) = metrics_addr {
        let metrics = tokio::net::TcpListener::bind(at)
            .await
            .map_err(|e| anyhow::anyhow!("GLASSBOX_METRICS_ADDR {at}: {e}"))?;
        tracing::info!(url = %format!("http://{}/metrics", metrics.local_addr()?), "metrics");
        let app = glassbox_server::metrics_app(state.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(metrics, app).await {
                tracing::error!(error = %e, "the metrics listener stopped");
            }
        });
    }
    glassbox_server::serve(listener, state).await?;
    Ok(())
}

/// `glassbox-server migrate --from URL --to URL`: copies every row of one database into another
/// (SQLite into PostgreSQL, when moving to several instances). The destination gets its tables
/// first; rows it has already are kept, so an interrupted copy can be run again.
#[derive(clap::Parser)]
#[command(name = "glassbox-server migrate")]
struct Migrate {
    /// The database to copy: `sqlite://PATH` or `postgres://…`.
    #[arg(long)]
    from: String,
    /// The database to copy into: `postgres://…` or `sqlite://PATH`.
    #[arg(long)]
    to: String,
}

async fn migrate(args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    use clap::Parser;
    use glassbox_server::storage::{DatabaseUrl, Store};
    let args = Migrate::parse_from(args);
    let here = std::path::Path::new(".");
    let (from, to) = (
        DatabaseUrl::resolve(Some(&args.from), here)?,
        DatabaseUrl::resolve(Some(&args.to), here)?,
    );
    if from == to {
        anyhow::bail!("--from and --to name the same database");
    }
    if let DatabaseUrl::Sqlite(path) = &from
        && !path.exists()
    {
        anyhow::bail!("{} does not exist", path.display());
    }
    let source = Store::connect(&from).await?;
    let destination = Store::connect(&to).await?;
    println!("copying {} into {}", from.display(), to.display());
    let copied = destination
        .copy_from(&source, |table, rows| {
            if rows % 10_000 == 0 {
                println!("  {table}: {rows} rows");
            }
        })
        .await?;
    for (table, read, written) in copied.tables {
        println!("  {table}: {read} rows, {written} new");
    }
    println!("done");
    Ok(())
}
