//! The least any streaming gateway does, for the gateway bench's floor: an HTTP server on loopback
//! that forwards each `POST` body to the provider with `reqwest` and streams the provider's bytes
//! back unread (no parsing, planning or re-encoding). What it adds on this machine is what the
//! machine itself costs a proxy, beside which Glassbox's added latency is read.
//!
//! With [`Keeping::Sqlite`] it also does the least a gateway that loses no message must: the
//! request stored (with an empty reply beside it) before it is forwarded, and the reply stored
//! before the response ends, one statement each, on SQLite set up as Glassbox's (WAL,
//! `synchronous = NORMAL`, one writer connection, the log checkpointed beside the writer by
//! `glassbox_server::storage::wal`).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Result;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt as _;
use glassbox_server::storage::wal;
use sqlx::sqlite::SqlitePool;

/// What the proxy keeps of each exchange.
pub enum Keeping<'a> {
    /// Nothing: bytes in, bytes out.
    Nothing,
    /// The request and the reply, in a SQLite database created in this folder.
    Sqlite(&'a Path),
}

/// A running pass-through proxy; it stops when dropped.
pub struct PassThrough {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    _checkpointer: Option<wal::Checkpointer>,
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
    db: Option<SqlitePool>,
}

/// Starts a proxy on a free loopback port that sends every `POST /` to `upstream` (a URL),
/// keeping what `keeping` says.
pub async fn start(upstream: String, keeping: Keeping<'_>) -> Result<PassThrough> {
    let (db, checkpointer) = match keeping {
        Keeping::Nothing => (None, None),
        Keeping::Sqlite(dir) => {
            let (db, checkpointer) = open(dir).await?;
            (Some(db), Some(checkpointer))
        }
    };
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
        db,
    };
    let app = axum::Router::new()
        .route("/", post(forward))
        .with_state(state);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("pass-through proxy stopped: {e}");
        }
    });
    Ok(PassThrough {
        addr,
        task,
        _checkpointer: checkpointer,
    })
}

/// A database of exchanges in `dir`, opened as Glassbox opens its own, with the task that
/// checkpoints its log (it runs while the pool does).
async fn open(dir: &Path) -> Result<(SqlitePool, wal::Checkpointer)> {
    let options = glassbox_server::storage::sqlite_options(&dir.join("pass-through.db"));
    let db = wal::open_writer(&options).await?;
    let checkpointer = wal::start(&options, db.clone(), wal::Schedule::DEFAULT).await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY, exchange TEXT NOT NULL, \
         role TEXT NOT NULL, content TEXT NOT NULL); \
         CREATE INDEX IF NOT EXISTS messages_by_exchange ON messages (exchange, role);",
    )
    .execute(&db)
    .await?;
    Ok((db, checkpointer))
}

async fn forward(State(up): State<Upstream>, body: Bytes) -> Response {
    let reply_id = glassbox_server::ids::new_id();
    if let Some(db) = &up.db {
        // The request and the reply's empty row, in one statement (one commit).
        let stored = sqlx::query(
            "INSERT INTO messages (id, exchange, role, content) \
             VALUES ($1, $2, 'user', $3), ($2, $2, 'assistant', '')",
        )
        .bind(glassbox_server::ids::new_id())
        .bind(&reply_id)
        .bind(String::from_utf8_lossy(&body).into_owned())
        .execute(db)
        .await;
        if let Err(e) = stored {
            return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
        }
    }
    let sent = up
        .http
        .post(&up.url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let body = match up.db {
        None => Body::from_stream(resp.bytes_stream()),
        Some(db) => Body::from_stream(relay_then_store(resp, db, reply_id)),
    };
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

/// The provider's bytes as they come, then the end of the response once the reply is stored.
fn relay_then_store(
    resp: reqwest::Response,
    db: SqlitePool,
    reply_id: String,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        let mut upstream = resp.bytes_stream();
        let mut reply = Vec::new();
        while let Some(chunk) = upstream.next().await {
            let chunk = chunk.map_err(std::io::Error::other);
            if let Ok(bytes) = &chunk {
                reply.extend_from_slice(bytes);
            }
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
        }
        let stored = sqlx::query("UPDATE messages SET content = $1 WHERE id = $2")
            .bind(String::from_utf8_lossy(&reply).into_owned())
            .bind(&reply_id)
            .execute(&db)
            .await;
        if let Err(e) = stored {
            let _ = tx.send(Err(std::io::Error::other(e))).await;
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}
