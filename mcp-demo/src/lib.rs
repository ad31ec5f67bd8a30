//! The demo MCP server: harmless tools for the demo agent — the time in a time zone, unit
//! conversion, notes kept per Glassbox session — served over stdio or streamable HTTP. With
//! `test_tools`, tools for the MCP client's tests join (a slow call with progress, a crash, a big
//! result, a tool that appears on request); the demo never offers those.

pub mod notes;
pub mod server;
pub mod units;

use std::sync::Arc;

use anyhow::Result;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use server::{DemoServer, Options, SESSION_META_KEY};

/// Serves one client on standard input and output until it goes.
pub async fn serve_stdio(options: Options) -> Result<()> {
    let server = DemoServer::new(options, Arc::default());
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// The streamable HTTP service at `/mcp` (loopback hosts only), sharing one notes store.
pub fn http_router(options: Options) -> axum::Router {
    let notes = Arc::new(notes::Notes::default());
    let service = StreamableHttpService::new(
        move || Ok(DemoServer::new(options, notes.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

/// Serves streamable HTTP on `listener` until the process ends.
pub async fn serve_http(listener: tokio::net::TcpListener, options: Options) -> Result<()> {
    axum::serve(listener, http_router(options)).await?;
    Ok(())
}
