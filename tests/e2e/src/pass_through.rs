//! The least any streaming gateway does, for the gateway bench's floor: an HTTP server on loopback
//! that forwards each `POST` body to the provider with `reqwest` and streams the provider's bytes
//! back unread (no parsing, storage, planning or re-encoding). What it adds on this machine is
//! what the machine itself costs a proxy, beside which Glassbox's added latency is read.

use std::net::SocketAddr;

use anyhow::Result;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

/// A running pass-through proxy; it stops when dropped.
pub struct PassThrough {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PassThrough {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Upstream {
    http: reqwest::Client,
    url: String,
}

/// Starts a proxy on a free loopback port that sends every `POST /` to `upstream` (a URL).
pub async fn start(upstream: String) -> Result<PassThrough> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // As the server's listener: small SSE writes must not wait for Nagle's algorithm.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let state = Upstream {
        // As the server's provider client (`reqwest`'s default keeps idle connections for reuse).
        http: reqwest::Client::new(),
        url: upstream,
    };
    let app = axum::Router::new()
        .route("/", post(forward))
        .with_state(state);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("pass-through proxy stopped: {e}");
        }
    });
    Ok(PassThrough { addr, task })
}

async fn forward(State(up): State<Upstream>, body: Bytes) -> Response {
    let sent = up
        .http
        .post(&up.url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    match sent {
        Ok(resp) => (
            [(header::CONTENT_TYPE, "text/event-stream")],
            Body::from_stream(resp.bytes_stream()),
        )
            .into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}
