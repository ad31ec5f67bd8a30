//! `glassbox-mcp-demo [--http ADDR] [--test-tools]`: serves the demo tools over stdio (the
//! default, one process per client) or streamable HTTP at `http://ADDR/mcp` (loopback only).

use anyhow::{Context, Result, bail};

#[tokio::main]
async fn main() -> Result<()> {
    let mut http = None;
    let mut test_tools = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => http = Some(args.next().context("--http needs an address")?),
            "--test-tools" => test_tools = true,
            "-h" | "--help" => {
                eprintln!("usage: glassbox-mcp-demo [--http 127.0.0.1:PORT] [--test-tools]");
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let options = glassbox_mcp_demo::Options { test_tools };
    match http {
        None => glassbox_mcp_demo::serve_stdio(options).await,
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            eprintln!(
                "glassbox-mcp-demo: serving http://{}/mcp",
                listener.local_addr()?
            );
            glassbox_mcp_demo::serve_http(listener, options).await
        }
    }
}
